#include "runtime/exec/train.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/check.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

int train_check_model(const model_t *m, const dataset_t *d, char *err, size_t errlen)
{
    shape_t in = m->layers[0].out_shape;
    if (shape_count(in) != shape_count(d->shape)) {
        char a[32], b[32];
        snprintf(err, errlen, "%s: input layer is %s but the data is %s", m->path,
                 shape_str(in, a, sizeof a), shape_str(d->shape, b, sizeof b));
        return -1;
    }
    int loss = -1;
    for (int i = 0; i < m->n_layers; i++)
        if (layer_is_loss(&m->layers[i])) {
            loss = i;
            const layer_t *l = &m->layers[i];
            bool per_pos = l->type == LAYER_SEQ_LOSS;
            int want = per_pos ? l->in_shape.w : 1, have = d->labels > 1 ? d->labels : 1;
            if (want != have || (m->layers[0].type == LAYER_TOKENS) != (d->labels > 0 && per_pos)) {
                snprintf(err, errlen, "%s:%d: loss layer '%s' wants %d label%s per sample, the "
                         "data has %d%s", m->path, l->src_line, l->name, want,
                         want == 1 ? "" : "s", have,
                         m->layers[0].type == LAYER_TOKENS ? " (a tokens model trains on text: "
                                                             "data fortunes)" : "");
                return -1;
            }
            int64_t k = per_pos ? l->in_shape.c
                                : shape_count(m->layers[m->layers[i].inputs[0]].out_shape);
            if (k != d->classes) {
                snprintf(err, errlen, "%s:%d: loss layer '%s' sees %lld classes, the data has %d",
                         m->path, m->layers[i].src_line, m->layers[i].name, (long long)k,
                         d->classes);
                return -1;
            }
        }
    if (loss < 0) {
        snprintf(err, errlen, "%s: training needs a loss layer (softmax_loss or seq_loss)",
                 m->path);
        return -1;
    }
    return 0;
}

double train_step(nnet_t *n, solver_t *s, int64_t iter)
{
    double loss = nnet_forward(n);
    nnet_backward(n);
    solver_step(s, iter);
    return loss;
}

void train_epoch(nnet_t *n, solver_t *s, const dataset_t *d, int begin, int end, int epoch,
                 uint64_t seed, int64_t *iter, train_epoch_stats_t *st,
                 train_progress_fn progress, void *arg)
{
    train_epoch_steps(n, s, d, begin, end, epoch, seed, INT_MAX, iter, st, progress, arg);
}

void train_epoch_steps(nnet_t *n, solver_t *s, const dataset_t *d, int begin, int end,
                       int epoch, uint64_t seed, int max_steps, int64_t *iter,
                       train_epoch_stats_t *st, train_progress_fn progress, void *arg)
{
    int k = nnet_batch(n), steps = (end - begin) / k;
    if (steps > max_steps) steps = max_steps;
    int *order = xmalloc((size_t)(end - begin > 0 ? end - begin : 1) * sizeof *order);
    rng_t *r = rng_new(seed, 100 + (uint64_t)epoch);
    data_order(order, begin, end, r);
    rng_destroy(&r);
    nnet_set_train(n, true);
    double sum = 0, t0 = now_s();
    int64_t correct = 0;
    for (int i = 0; i < steps; i++) {
        data_gather(d, order + (int64_t)i * k, k, nnet_input(n), nnet_labels(n));
        sum += train_step(n, s, (*iter)++);
        correct += nnet_count_correct(n);
        if (progress) progress(i + 1, steps, sum / (i + 1), arg);
    }
    st->seconds = now_s() - t0;
    st->images = (int64_t)steps * k;
    st->loss = steps ? sum / steps : 0;
    st->train_acc = steps ? (double)correct / st->images : 0;
    free(order);
}

double train_evaluate(nnet_t *n, const dataset_t *d)
{
    int k = nnet_batch(n);
    int *order = xmalloc((size_t)k * sizeof *order);
    int64_t correct = 0;
    nnet_set_train(n, false);
    for (int start = 0; start < d->n; start += k) {
        int real = d->n - start < k ? d->n - start : k;
        /* a short last batch is padded with its first sample; only `real` are counted */
        for (int i = 0; i < k; i++) order[i] = start + (i < real ? i : 0);
        data_gather(d, order, k, nnet_input(n), nnet_labels(n));
        nnet_forward(n);
        if (real == k) {
            correct += nnet_count_correct(n);
        } else {
            int *lab = nnet_labels(n), L = nnet_label_count(n);
            for (int i = real * L; i < k * L; i++) lab[i] = -1; /* never predicted */
            correct += nnet_count_correct(n);
        }
    }
    nnet_set_train(n, true);
    free(order);
    return d->n ? (double)correct / d->n : 0;
}

int train_data_load(const experiment_t *job, const model_t *m, dataset_t *train, dataset_t *test,
                    char *err, size_t errlen)
{
    const experiment_train_t *t = &job->train;
    const char *dir = t->data_dir[0] ? t->data_dir : NULL;
    if (!strcmp(t->data, "fashion-mnist")) {
        if (data_load_fashion_mnist(dir, train, test, err, errlen)) return -1;
    } else if (!strcmp(t->data, "fortunes")) {
        if (data_load_text(dir, m->layers[0].out_shape.w, train, test, err, errlen)) return -1;
    } else if (!strcmp(t->data, "synthetic")) {
        int classes = 1;
        for (int i = 0; i < m->n_layers; i++)
            if (m->layers[i].type == LAYER_SOFTMAX_LOSS)
                classes = (int)shape_count(m->layers[m->layers[i].inputs[0]].out_shape);
        data_synthetic(train, m->layers[0].out_shape, classes, t->synthetic_n, job->seed);
        data_synthetic(test, m->layers[0].out_shape, classes, 256, job->seed + 1);
    } else {
        snprintf(err, errlen, "data is fashion-mnist, fortunes or synthetic, not '%s'", t->data);
        return -1;
    }
    if (t->limit > 0 && t->limit < train->n) data_truncate(train, t->limit);
    return 0;
}

solver_config_t train_solver_config(const experiment_t *job, int64_t steps_per_epoch,
                                    int64_t iterations)
{
    const experiment_train_t *t = &job->train;
    lr_policy_t p = t->lr_policy == EXP_LR_STEP ? LR_STEP
                    : t->lr_policy == EXP_LR_POLY ? LR_POLY : LR_FIXED;
    return (solver_config_t){.lr = t->lr, .momentum = t->momentum,
                             .weight_decay = t->weight_decay, .policy = p, .gamma = t->lr_gamma,
                             .step_iters = t->lr_step > 0 ? t->lr_step : 2 * steps_per_epoch,
                             .power = t->lr_power, .max_iters = iterations};
}

init_kind_t train_init_kind(const experiment_t *job)
{
    return job->train.init == EXP_INIT_XAVIER ? INIT_XAVIER
           : job->train.init == EXP_INIT_HE   ? INIT_HE
                                              : INIT_AUTO;
}
