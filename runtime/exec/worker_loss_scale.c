/* worker_loss_scale: precision = fp16's dynamic loss scaling on one rank, as torch.amp's
 * GradScaler does it (core/plan.h, "Loss scaling"): the backward scales the loss gradient by
 * S; the syncs note an inf or NaN among the iteration's gradients as every node has them (the
 * ring's sums, the SFB factors, a node's reduced gradient); VERDICT(t) rules once they are all
 * in: the step is skipped and S halved, or taken, S doubling after growth_interval good steps
 * in a row; the updates divide by the S their backward used. */
#include "runtime/exec/worker_state.h"

#include <math.h>
#include <stdlib.h>

#include "core/check.h"
#include "core/log.h"

void worker_ls_init(worker_t *w)
{
    w->ls_scale = (float)w->job->train.loss_scale_init;
    w->ls_good = 0;
    w->ls_bad = xcalloc((size_t)w->n_slots, sizeof *w->ls_bad);
    w->ls_skip = xcalloc((size_t)w->n_slots, sizeof *w->ls_skip);
    w->ls_used = xcalloc((size_t)w->n_slots, sizeof *w->ls_used);
    /* the inf goes into the first sync of a gradient that the plan runs: the first
     * all-reduce, else the first local reduce whose node updates the unit itself */
    w->ls_inject_op = -1;
    const plan_t *p = &w->plan;
    for (int pass = 0; pass < 2 && w->ls_inject_op < 0; pass++)
        for (int op = 0; op < p->n_ops && w->ls_inject_op < 0; op++) {
            const plan_op_t *po = &p->ops[op];
            if (pass == 0 ? po->kind == OP_ALLREDUCE
                          : po->kind == OP_LREDUCE && wk_unit_updates_locally(&p->units[po->unit]))
                w->ls_inject_op = op;
        }
}

void worker_ls_fini(worker_t *w)
{
    free(w->ls_bad);
    free(w->ls_skip);
    free(w->ls_used);
    w->ls_bad = w->ls_skip = NULL;
    w->ls_used = NULL;
}

bool worker_ls_on(const worker_t *w)
{
    return w->plan.n_units > 0 && w->plan.units[0].op_verdict >= 0;
}

float worker_ls_scale(worker_t *w)
{
    if (!worker_ls_on(w)) return 1.0f;
    pthread_mutex_lock(&w->mu);
    float s = w->ls_scale;
    pthread_mutex_unlock(&w->mu);
    return s;
}

void worker_ls_inject(worker_t *w, int op, int64_t t, float *g)
{
    const experiment_train_t *tr = &w->job->train;
    if (op != w->ls_inject_op || w->rank != tr->overflow_rank || t != tr->overflow_iter) return;
    g[0] = INFINITY;
    log_info("rank %d: iteration %lld: an inf put into the gradient of layer %s (overflow_at)",
             w->rank, (long long)t, worker_unit_name(w, w->plan.ops[op].unit));
}

void worker_ls_note(worker_t *w, int64_t t, const float *g, int64_t n)
{
    if (!worker_ls_on(w)) return;
    /* x * 0 is 0 for every finite x and NaN for an inf or a NaN, which the sum keeps */
    float acc = 0.0f;
    for (int64_t i = 0; i < n; i++) acc += g[i] * 0.0f;
    if (acc == 0.0f) return;
    pthread_mutex_lock(&w->mu);
    w->ls_bad[t % w->n_slots] = true;
    pthread_mutex_unlock(&w->mu);
}

void worker_ls_verdict(worker_t *w, int64_t t)
{
    int s = (int)(t % w->n_slots);
    pthread_mutex_lock(&w->mu);
    bool bad = w->ls_bad[s];
    float before = w->ls_scale;
    w->ls_bad[s] = false; /* for iteration t + n_slots, whose syncs wait for this ruling */
    w->ls_skip[s] = bad;
    w->ls_used[s] = before;
    if (bad) {
        w->ls_scale = before * 0.5f;
        w->ls_good = 0;
    } else if (++w->ls_good >= w->job->train.loss_scale_growth_interval) {
        if (isfinite(before * 2.0f)) w->ls_scale = before * 2.0f;
        w->ls_good = 0;
    }
    float after = w->ls_scale;
    pthread_mutex_unlock(&w->mu);
    if (bad)
        log_info("rank %d: iteration %lld: inf or NaN in the gradients: step skipped, loss "
                 "scale %g -> %g", w->rank, (long long)t, before, after);
    else if (after != before)
        log_info("rank %d: iteration %lld: %lld good steps: loss scale %g -> %g", w->rank,
                 (long long)t, (long long)w->job->train.loss_scale_growth_interval, before,
                 after);
}

bool worker_ls_step(worker_t *w, int64_t t, float *unscale)
{
    *unscale = 1.0f;
    if (!worker_ls_on(w)) return true;
    int s = (int)(t % w->n_slots);
    pthread_mutex_lock(&w->mu);
    bool take = !w->ls_skip[s];
    *unscale = 1.0f / w->ls_used[s]; /* exact: a power of two */
    pthread_mutex_unlock(&w->mu);
    return take;
}
