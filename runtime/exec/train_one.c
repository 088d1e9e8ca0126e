#include "runtime/exec/train_one.h"

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/check.h"
#include "core/job.h"
#include "core/log.h"
#include "core/model.h"
#include "core/outfile.h"
#include "runtime/compute/nnet.h"
#include "runtime/compute/solver.h"
#include "runtime/exec/checkpoint.h"
#include "runtime/exec/data.h"
#include "runtime/exec/textgen.h"
#include "runtime/exec/job_checkpoint.h"
#include "runtime/exec/train.h"

/* Everything a run holds; one_fini frees any stage of it. */
typedef struct {
    const train_one_config_t *c;
    const experiment_t *job;
    model_t model;
    bool have_model;
    dataset_t train, test;
    bool have_data;
    compute_t *compute;
    nnet_t *net;
    solver_t *solver;
    FILE *csv;
    unsigned char *rng_state;
    size_t rng_bytes;
    int steps;          /* per epoch */
    int64_t iterations; /* in all */
    checkpoint_meta_t meta;
    char *keys;         /* the job's keys, recorded in each checkpoint */
} one_t;

typedef struct {
    bool tty;
    int epoch;
} progress_t;

static void show_progress(int step, int steps, double loss, void *arg)
{
    progress_t *p = arg;
    if (!p->tty || (step % 10 && step != steps)) return;
    fprintf(stderr, "\r  epoch %d  step %d/%d  loss %.4f ", p->epoch, step, steps, loss);
    if (step == steps) fputs("\r\033[K", stderr);
}

/* The model and the data, checked against each other. 0, or -1 (printed). */
static int one_load(one_t *o)
{
    const experiment_t *j = o->job;
    char err[1024];
    if (model_load(&o->model, j->model_path, err, sizeof err)) {
        fprintf(stderr, "%s\n", err);
        return -1;
    }
    o->have_model = true;
    if (train_data_load(j, &o->model, &o->train, &o->test, err, sizeof err)) {
        fprintf(stderr, "poseidon train: %s\n", err);
        return -1;
    }
    o->have_data = true;
    if (!strcmp(j->train.data, "fortunes"))
        log_info("%s: %d training windows of %d characters; unigram entropy of the text %.4f "
                 "nats per character", j->train.data_dir[0] ? j->train.data_dir
                                                            : DATA_FORTUNES_DIR,
                 o->train.n, o->train.labels, data_unigram_entropy(&o->train));
    if (train_check_model(&o->model, &o->train, err, sizeof err)) {
        fprintf(stderr, "poseidon train: %s\n", err);
        return -1;
    }
    if (o->train.n < j->batch) {
        fprintf(stderr, "poseidon train: %d training samples, fewer than one batch of %d\n",
                o->train.n, j->batch);
        return -1;
    }
    o->steps = o->train.n / j->batch;
    o->iterations = j->train.epochs > 0 ? (int64_t)j->train.epochs * o->steps : j->iterations;
    return 0;
}

/* The device, the net, the solver and the initial parameters, or a checkpoint's. 0, or -1
 * (printed). */
static int one_build(one_t *o)
{
    const experiment_t *j = o->job;
    char err[1024];
    o->compute = compute_new(o->c->device, o->c->threads, err, sizeof err);
    if (!o->compute) {
        fprintf(stderr, "poseidon train: --device %s: %s\n", compute_kind_name(o->c->device),
                err);
        return -1;
    }
    compute_set_gemm_precision(o->compute, j->precision); /* half products on a GPU */
    o->net = nnet_new(&o->model, j->batch, o->compute, j->seed, err, sizeof err);
    if (!o->net) {
        fprintf(stderr, "poseidon train: %s\n", err);
        return -1;
    }
    solver_config_t sc = train_solver_config(j, o->steps, o->iterations);
    o->solver = solver_new(&sc, nnet_arena(o->net));
    solver_init_params(&o->model, nnet_arena(o->net), train_init_kind(j), j->seed);
    o->meta = (checkpoint_meta_t){.epoch = 0, .iter = 0, .seed = j->seed};
    if (o->c->checkpoint) ckpt_remove_stale(o->c->checkpoint);
    o->rng_bytes = nnet_rng_state_bytes(o->net);
    o->rng_state = xcalloc(1, o->rng_bytes + 1);
    o->keys = job_ckpt_job_keys(j);
    if (!o->c->resume) return 0;
    if (checkpoint_load(o->c->resume, &o->model, nnet_arena(o->net), solver_history(o->solver),
                        o->rng_state, o->rng_bytes, &o->meta, err, sizeof err) ||
        job_ckpt_keys_check(o->c->resume, o->meta.keys, o->keys, o->c->resume_changed, err,
                            sizeof err)) {
        fprintf(stderr, "poseidon train: --resume: %s\n", err);
        return -1;
    }
    nnet_rng_state_restore(o->net, o->rng_state);
    log_info("resumed from %s after epoch %lld (iteration %lld)", o->c->resume,
             (long long)o->meta.epoch, (long long)o->meta.iter);
    return 0;
}

/* The CSV file: a resumed run continues the table of the run it resumes; a new file gets a
 * header. 0, or -1 (printed). */
static int one_open_csv(one_t *o)
{
    const char *path = o->c->csv_path;
    if (!path) return 0;
    o->csv = outfile_open(path, o->meta.epoch > 0 ? "a" : "w");
    if (!o->csv) {
        fprintf(stderr, "poseidon train: %s: cannot open: %s\n", path, strerror(errno));
        return -1;
    }
    if (o->meta.epoch == 0 || ftell(o->csv) == 0)
        fprintf(o->csv, "epoch,loss,train_acc,test_acc,images_per_s\n");
    return 0;
}

/* The epochs from the checkpoint's (or the first) to the job's last iteration, a row and a
 * checkpoint after each. Returns the iterations run in all, or -1 (printed). */
static int64_t one_loop(one_t *o)
{
    const experiment_t *j = o->job;
    char err[1024];
    printf("epoch,loss,train_acc,test_acc,images_per_s\n");
    progress_t prog = {.tty = log_is_tty()};
    int64_t iter = o->meta.iter;
    for (int e = (int)o->meta.epoch; iter < o->iterations; e++) {
        train_epoch_stats_t st;
        prog.epoch = e + 1;
        int64_t left = o->iterations - iter;
        train_epoch_steps(o->net, o->solver, &o->train, 0, o->train.n, e, j->seed,
                          left < o->steps ? (int)left : o->steps, &iter, &st, show_progress,
                          &prog);
        double test_acc = train_evaluate(o->net, &o->test);
        double ips = st.seconds > 0 ? st.images / st.seconds : 0;
        printf("%d,%.6f,%.4f,%.4f,%.1f\n", e + 1, st.loss, st.train_acc, test_acc, ips);
        fflush(stdout);
        if (o->csv) {
            fprintf(o->csv, "%d,%.6f,%.4f,%.4f,%.1f\n", e + 1, st.loss, st.train_acc, test_acc,
                    ips);
            fflush(o->csv);
        }
        if (!o->c->checkpoint) continue;
        checkpoint_meta_t now = {.epoch = e + 1, .iter = iter, .seed = j->seed, .keys = o->keys};
        nnet_rng_state_save(o->net, o->rng_state);
        if (checkpoint_save(o->c->checkpoint, &o->model, nnet_arena(o->net),
                            solver_history(o->solver), o->rng_state, o->rng_bytes, &now, err,
                            sizeof err)) {
            fprintf(stderr, "poseidon train: %s\n", err);
            return -1;
        }
    }
    return iter;
}

/* The job's sample of text, after training. 0, or -1 (printed). */
static int one_sample(one_t *o)
{
    int n = o->job->train.sample;
    if (n <= 0) return 0;
    char err[1024];
    size_t cap = (size_t)n + 2;
    char *text = xmalloc(cap);
    int rc = textgen_sample(o->net, "", n, 0.8, o->job->seed, text, cap, err, sizeof err);
    if (rc) fprintf(stderr, "poseidon train: sample: %s\n", err);
    else printf("# %d characters it writes (temperature 0.8):\n%s\n", n, text + 1);
    free(text);
    return rc ? -1 : 0;
}

/* The job as it ran, counted in iterations, for poseidon sim and poseidon train. 0, or -1
 * (printed). */
static int one_write_job(const one_t *o, int64_t iter)
{
    const char *path = o->c->job_out;
    if (!path) return 0;
    experiment_t *e = xmalloc(sizeof *e);
    *e = *o->job;
    e->iterations = iter > 0 && iter <= INT32_MAX ? (int)iter : 1;
    e->train.epochs = 0;
    e->train.probe = PROBE_NO;
    if (e->warmup >= e->iterations) e->warmup = e->iterations > 1 ? e->iterations - 1 : 1;
    cluster_t cl;
    plan_opts_t po;
    job_config(e, 0, NULL, &cl, &po);
    FILE *f = outfile_open(path, "w");
    int rc = !f || experiment_write(e, 0, &cl,
                                    "The job a single-worker run of poseidon train executed:\n"
                                    "poseidon sim on this file simulates it on the cluster's "
                                    "device; poseidon train on it runs it again.", f);
    if (f && fclose(f)) rc = 1;
    if (rc) fprintf(stderr, "poseidon train: cannot write the job to %s: %s\n", path,
                    strerror(errno));
    free(e);
    return rc ? -1 : 0;
}

static int one_fini(one_t *o, int rc)
{
    if (o->csv && fclose(o->csv)) rc = 1;
    free(o->rng_state);
    free(o->keys);
    free(o->meta.keys);
    solver_destroy(&o->solver);
    nnet_destroy(&o->net);
    compute_destroy(&o->compute);
    if (o->have_data) {
        data_fini(&o->train);
        data_fini(&o->test);
    }
    if (o->have_model) model_fini(&o->model);
    return rc;
}

int train_one_run(const train_one_config_t *c)
{
    one_t o = {.c = c, .job = c->job};
    if (one_load(&o) || one_build(&o) || one_open_csv(&o)) return one_fini(&o, 1);
    log_info("%s: %lld parameters, %d training / %d test samples, batch %d, %s, lr %g",
             o.model.name, (long long)nnet_arena(o.net)->count, o.train.n, o.test.n,
             o.job->batch, compute_kind_name(c->device), o.job->train.lr);
    int64_t iter = one_loop(&o);
    if (iter < 0 || one_sample(&o) || one_write_job(&o, iter)) return one_fini(&o, 1);
    return one_fini(&o, 0);
}
