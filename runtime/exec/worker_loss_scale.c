/* worker_loss_scale: precision = fp16's dynamic loss scaling on one rank, as torch.amp's
 * GradScaler does it (core/plan.h, "Loss scaling"): the backward scales the loss gradient by
 * S; the syncs note an inf or NaN among the iteration's gradients as every node has them (the
 * ring's sums, the SFB factors, a node's reduced gradient) and, with PS units, every worker's
 * VOTE on the gradients it pushed; VERDICT(t) rules once they are all in: the step is skipped and S halved, or taken, S doubling after growth_interval good steps
 * in a row; the updates divide by the S their backward used. */
#include "runtime/exec/worker_state.h"

#include <math.h>
#include <stdlib.h>

#include "core/check.h"
#include "core/log.h"
#include "runtime/sync/vote.h"
#include "runtime/sync/wire.h"
#include "runtime/transport/reject_log.h"

void worker_ls_init(worker_t *w)
{
    w->ls_scale = (float)w->job->train.loss_scale_init;
    w->ls_good = 0;
    w->ls_ruled = 0;
    w->ls_bad = xcalloc((size_t)w->n_slots, sizeof *w->ls_bad);
    w->ls_skip = xcalloc((size_t)w->n_slots, sizeof *w->ls_skip);
    w->ls_used = xcalloc((size_t)w->n_slots, sizeof *w->ls_used);
    w->ls_vote = xcalloc((size_t)w->n_slots, sizeof *w->ls_vote);
    w->ls_early = xcalloc((size_t)w->world + 1, 1);
    /* the inf goes into the first sync of a gradient that the plan runs: the first
     * all-reduce or push, else the first local reduce whose node updates the unit itself */
    w->ls_inject_op = -1;
    const plan_t *p = &w->plan;
    for (int pass = 0; pass < 2 && w->ls_inject_op < 0; pass++)
        for (int op = 0; op < p->n_ops && w->ls_inject_op < 0; op++) {
            const plan_op_t *po = &p->ops[op];
            if (pass == 0 ? po->kind == OP_ALLREDUCE || po->kind == OP_PUSH
                          : po->kind == OP_LREDUCE && wk_unit_updates_locally(&p->units[po->unit]))
                w->ls_inject_op = op;
        }
}

void worker_ls_fini(worker_t *w)
{
    free(w->ls_bad);
    free(w->ls_skip);
    free(w->ls_used);
    free(w->ls_vote);
    free(w->ls_early);
    w->ls_bad = w->ls_skip = w->ls_vote = NULL;
    w->ls_used = NULL;
    w->ls_early = NULL;
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
    /* emulated compute's gradients are one shared buffer of zeros, never written */
    if (op != w->ls_inject_op || w->rank != tr->overflow_rank || t != tr->overflow_iter ||
        w->emulate)
        return;
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
    w->ls_ruled = t + 1;
    pthread_mutex_unlock(&w->mu);
    if (w->ps) ps_server_kick(w->ps); /* its applies of t wait for this ruling */
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

void worker_ls_note_own(worker_t *w, int64_t t, const float *g, int64_t n)
{
    if (!worker_ls_on(w) || !wire_overflows(w->plan.wire_precision, g, (size_t)n)) return;
    pthread_mutex_lock(&w->mu);
    w->ls_vote[t % w->n_slots] = true;
    pthread_mutex_unlock(&w->mu);
}

/* One vote m that came while VOTE(t) collects: taken into got[] (per rank, 1 + the vote),
 * kept in ls_early for t + 1, or refused with a log naming the peer (runtime/sync/vote.h;
 * and a second vote of a rank). */
static void vote_take(worker_t *w, int64_t t, const comm_msg_t *m, unsigned char *got)
{
    const char *why = NULL;
    int p = m->peer, vote = 0;
    int when = vote_judge(w->world, w->rank, t, &m->hdr, p,
                          m->has_payload ? comm_msg_data(m) : NULL,
                          m->has_payload ? comm_msg_bytes(m) : 0, &vote, &why);
    unsigned char *into = when == 0 ? got : w->ls_early;
    if (when >= 0 && into[p]) why = "second vote";
    if (why) {
        char source[96]; /* the limit's key: each reason of each peer logged on its own */
        snprintf(source, sizeof source, "loss-scale votes/rank %d/%s", p, why);
        reject_log(source, "rank %d: refused %s of iteration %lld from rank %d (waiting for "
                   "iteration %lld): %s", w->rank, msg_type_name(m->hdr.type),
                   (long long)m->hdr.iteration, p, (long long)t, why);
        return;
    }
    into[p] = (unsigned char)(1 + vote);
}

void worker_ls_vote(worker_t *w, int64_t t)
{
    int s = (int)(t % w->n_slots);
    pthread_mutex_lock(&w->mu);
    unsigned char mine = w->ls_vote[s];
    w->ls_vote[s] = false;
    pthread_mutex_unlock(&w->mu);
    msg_header_t h = {.type = MSG_LS_VOTE, .layer = -1, .iteration = t, .length = 1};
    for (int p = 0; p < w->world; p++)
        if (p != w->rank && comm_send(w->probe_comm, p, h, &mine, 1, NULL))
            coord_client_fail(w->cl, "loss-scaling vote of iteration %lld: cannot send to rank "
                              "%d", (long long)t, p);
    unsigned char *got = w->ls_early; /* the votes of t that came early */
    w->ls_early = xcalloc((size_t)w->world + 1, 1);
    int n = 0;
    for (int p = 0; p < w->world; p++) n += got[p] != 0;
    comm_match_t any = COMM_MATCH_ANY;
    any.type = MSG_LS_VOTE;
    while (n < w->world - 1) {
        comm_msg_t m;
        int rc = comm_recv(w->probe_comm, &any, &m, w->cfg->timeout_ms);
        if (rc != 1)
            coord_client_fail(w->cl, "loss-scaling votes of iteration %lld: %d of %d came "
                              "within %d ms", (long long)t, n, w->world - 1, w->cfg->timeout_ms);
        vote_take(w, t, &m, got);
        comm_msg_close(&m);
        n = 0;
        for (int p = 0; p < w->world; p++) n += got[p] != 0;
    }
    bool bad = mine;
    for (int p = 0; p < w->world; p++) bad |= got[p] == 2;
    free(got);
    if (!bad) return;
    pthread_mutex_lock(&w->mu);
    w->ls_bad[s] = true;
    pthread_mutex_unlock(&w->mu);
}

int worker_shard_ready(void *arg, int64_t t)
{
    worker_t *w = arg;
    pthread_mutex_lock(&w->mu);
    int r = w->ls_ruled <= t ? -1 : !w->ls_skip[t % w->n_slots];
    pthread_mutex_unlock(&w->mu);
    return r;
}
