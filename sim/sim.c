#include "sim.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "evq.h"
#include "net.h"
#include "sendorder.h"
#include "rng.h"

enum { EV_DONE = 1, EV_DELIVER = 2 };

typedef struct {
    int op, back;
} rev_t;

typedef struct {
    int prio, op, it;
} qent_t;

typedef struct {
    int busy;
    int n, cap;
    qent_t *e;
} rqueue_t;

/* A finished broadcast's or gather's part until its delivery: the nodes [lo, hi) it covers
 * (a rack, or all), but skip_nodes[first .. first + n) and its hub. */
typedef struct {
    int64_t first;
    int n, lo, hi;
} skip_t;

/* A flow of a transfer group waiting for the end of the instant: flows of one op and
 * iteration that converge on one node with the same bytes (every worker's PUSH to a shard)
 * enter the network as one gather. */
typedef struct {
    int t, op, src, dst;
    int64_t bytes;
} pflow_t;

/* A pending flow's sort key for flush_pending(): its (t, op, dst, bytes) and its index i in
 * the pending list. */
typedef struct {
    int t, op, dst;
    int64_t bytes, i;
} pkey_t;

typedef struct {
    const plan_t *p;
    const unit_times_t *tm;
    const sim_opts_t *o;
    int nodes, n_ops, iterations; /* the plan's nodes and ops, the iterations simulated */
    int64_t now;
    evq_t *q;
    net_t *net;
    int32_t *cnt;          /* [t][op][node]: unmet deps, then (transfers) flows outstanding */
    int64_t *t_start;      /* same shape, only when tracing */
    int32_t *barrier;      /* [t][op]: instances completed */
    int *rev_first[3], *rev_n[3];
    rev_t *rev[3];
    rqueue_t *rq[RES_COUNT]; /* per node, for RES_SERVER, RES_UPDATE and RES_INTRA */
    double *speed;
    rng_t **jitter;
    int64_t *iter_end;
    /* per-node accounting; broadcasts are counted globally (they touch every node) */
    int32_t *nflows;       /* single flows from or to the node */
    int64_t bcasts;        /* active broadcasts: while any is, every node communicates */
    int64_t bcast_recv;    /* bytes every node received from broadcasts (own ones taken off) */
    skip_t *skips;         /* finished parts of broadcasts and gathers that cover a rack or
                              had flows split off, until delivery */
    int64_t n_skips, cap_skips, live_skips; /* reused from the start once none is live */
    int rack_size;         /* nodes per rack (all nodes: one switch) */
    int *skip_nodes;
    int64_t n_skip_nodes, cap_skip_nodes;
    char *skipped;         /* [node] scratch of deliver() and flush_pending() */
    pflow_t *pend;         /* flows started at this instant, not yet in the network */
    int64_t n_pend, cap_pend;
    int64_t *pord;         /* scratch of flush_pending() */
    int64_t cap_pord;
    pkey_t *pkey;          /* [cap_pord] scratch of flush_pending(): sort keys */
    int *pex;              /* [node] scratch: a gather's excluded senders */
    char *computing;
    int64_t *last_ns, *busy_ns, *comm_ns, *both_ns;
    int64_t *sent, *recv;
    /* ring steps of ops with steps > 1 (plan.h, ALLREDUCE), [t][ar_of_op[op]][node]: steps
     * issued, own steps delivered, predecessor's steps received; ready once deps are met */
    int *ar_of_op;         /* [op]: index among the stepped ops, -1 for others */
    int n_ar;
    int32_t *ar_issued, *ar_own, *ar_got;
    char *ar_ready;
    /* Ring instances in lockstep, [t][ar_of_op[op]]: every node issued step 0 at one instant,
     * so while the network keeps each step whole (net_add_ring) every node is at the same
     * step, held once: ar_step steps delivered, step ar_step in flight. The per-node
     * counters above are filled in when the lockstep ends (the network split a step into
     * its flows) or the ring completes. */
    char *ar_lock;         /* RING_* */
    int32_t *ar_step;
    int32_t *ar_n0;        /* nodes that issued step ar_k0 at the instant ar_t0 */
    int32_t *ar_k0;
    int64_t *ar_t0;
    struct ring_pend {
        int t, op;
        int64_t bytes;
    } *ring_pend;          /* lockstep steps started at this instant, not yet in the network */
    int64_t n_ring_pend, cap_ring_pend;
    int64_t rings_live;    /* lockstep steps in flight: every node sends and receives one */
    int64_t ring_time, ring_since; /* time with rings_live > 0 up to ring_since */
    int64_t *ring_last;    /* [node] ring_time as of its last touch */
    int64_t ring_bytes;    /* bytes every node sent (and received) in lockstep steps */
    int64_t ring_steps;    /* lockstep steps delivered */
    uint64_t ring_events;  /* per-node deliveries a lockstep step's one delivery stands for,
                              counted as events as they would be one by one */
    sendorder_t *order;    /* send_order = layer: PS pushes and pulls, SFB broadcasts and
                              ring steps per connection, by priority, in slices
                              (sim/sendorder.h); NULL: arrival */
    int *kick;             /* connections (src, dst pairs) that may start a slice at the end
                              of this instant, when every message ready now is queued */
    int64_t n_kick, cap_kick;
    /* The ring connections in lockstep under the send order (see olock_flush): */
    char *ar_alike;        /* [ar_of_op[op]]: every node sends the same bytes to its successor */
    int olock_ok;          /* the lockstep may be used (exact model, not ring_flows) */
    int olock;             /* the ring connections are alike, held as sendorder's ring queue */
    int oslice;            /* the ring queue's slice is in flight, one ring step entity */
    int okick;             /* the ring queue may start a slice at the end of this instant */
    int64_t okick_at;      /* where in kick its connections asked for it (-1: not yet) */
    struct olocked {
        int op, t;
    } *olocked;            /* ring instances in lockstep under olock */
    int64_t n_olocked, cap_olocked;
} sim_t;

/* A ring instance's lockstep: not yet, in it, ended (it may start again at a later step),
 * starting at this instant, never (its nodes' steps differ in size). */
enum { RING_NEVER = 0, RING_LOCKED = 1, RING_ENDED = 2, RING_LOCKING = 3, RING_UNALIKE = 4 };

static int ctx_fn(char *buf, size_t len, void *arg)
{
    sim_t *s = arg;
    return snprintf(buf, len, "virtual time %lld ns", (long long)s->now);
}

static inline int64_t idx(const sim_t *s, int t, int op, int node)
{
    return ((int64_t)t * s->n_ops + op) * s->nodes + node;
}

/* The time so far with a lockstep ring step in flight. */
static int64_t ring_now(const sim_t *s)
{
    return s->ring_time + (s->rings_live > 0 ? s->now - s->ring_since : 0);
}

static void rings_add(sim_t *s, int k)
{
    s->ring_time = ring_now(s);
    s->ring_since = s->now;
    s->rings_live += k;
}

/* Bring node n's accounting up to now. A lockstep ring step makes every node communicate
 * without touching each: the time it was in flight is read off ring_now. */
static void touch(sim_t *s, int n)
{
    int64_t dt = s->now - s->last_ns[n], g = ring_now(s);
    if (dt > 0) {
        int c = s->computing[n], f = s->nflows[n] > 0 || s->bcasts > 0;
        int64_t comm = f ? dt : g - s->ring_last[n];
        if (c) s->busy_ns[n] += dt;
        s->comm_ns[n] += comm;
        if (c) s->both_ns[n] += comm;
    }
    s->last_ns[n] = s->now;
    s->ring_last[n] = g;
}

static void dec(sim_t *s, int op, int node, int t);
static void complete(sim_t *s, int op, int node, int t, int peer, int64_t bytes);

static inline int64_t arx(const sim_t *s, int t, int op, int node)
{
    return ((int64_t)t * s->n_ar + s->ar_of_op[op]) * s->nodes + node;
}

/* A ring instance's index in the lockstep tables. */
static inline int64_t rix(const sim_t *s, int t, int op)
{
    return (int64_t)t * s->n_ar + s->ar_of_op[op];
}

/* The broadcast count changes whether every node communicates: bring all up to now first. */
static void bcasts_add(sim_t *s, int k)
{
    if ((s->bcasts == 0) != (s->bcasts + k == 0))
        for (int n = 0; n < s->nodes; n++) touch(s, n);
    s->bcasts += k;
}

static void trace_instance(sim_t *s, int op, int node, int t, int peer, int64_t bytes)
{
    if (!s->o->trace) return;
    const plan_op_t *po = &s->p->ops[op];
    const plan_unit_t *u = &s->p->units[po->unit];
    int li = u->layer >= 0 ? u->layer : u->first;
    trace_lane_t lane = po->res == RES_COMPUTE  ? TRACE_LANE_COMPUTE
                        : po->res == RES_NET    ? TRACE_LANE_NET
                        : po->res == RES_SERVER ? TRACE_LANE_SERVER
                        : po->res == RES_INTRA  ? TRACE_LANE_INTRA
                                                : TRACE_LANE_UPDATE;
    trace_row_t r = {node, t, op_kind_name(po->kind), s->p->model->layers[li].name, peer, bytes,
                     s->t_start[idx(s, t, op, node)], s->now, lane};
    trace_write(s->o->trace, &r);
}

static int64_t op_duration(sim_t *s, int op, int node)
{
    const plan_op_t *po = &s->p->ops[op];
    const plan_t *p = s->p;
    double ns = 0;
    switch (po->kind) {
    case OP_FWD: ns = (double)s->tm->fwd_ns[po->unit]; break;
    case OP_BWD: ns = (double)s->tm->bwd_ns[po->unit]; break;
    case OP_UPDATE: ns = po->flops / s->tm->update_flops * 1e9; break;
    case OP_VERDICT: return 0; /* a barrier: the gradients' checks cost no modelled time */
    case OP_LREDUCE:
    case OP_LBCAST: /* the interconnect, one transfer at a time: latency + bytes / bandwidth */
        return p->cluster.intra_lat_ns + llround((double)po->bytes / p->cluster.intra_Bps * 1e9);
    case OP_APPLY: {
        if (p->cluster.server_Bps <= 0) return 0;
        int64_t b = plan_shard_bytes(p, po->unit, node);
        return llround((double)b * p->workers / p->cluster.server_Bps * 1e9);
    }
    default: ASSERT(0, "op %d has no duration", op);
    }
    ns /= s->speed[node];
    if (s->jitter) ns *= rng_lognormal(s->jitter[node], 0, p->cluster.jitter_sigma);
    return llround(ns);
}

static void rq_start_next(sim_t *s, int res, int node)
{
    rqueue_t *q = &s->rq[res][node];
    if (q->busy || q->n == 0) return;
    int best = 0;
    for (int i = 1; i < q->n; i++) {
        const qent_t *a = &q->e[i], *b = &q->e[best];
        if (a->prio < b->prio || (a->prio == b->prio && (a->op < b->op ||
                                                         (a->op == b->op && a->it < b->it))))
            best = i;
    }
    qent_t e = q->e[best];
    q->e[best] = q->e[--q->n];
    q->busy = 1;
    if (s->o->trace) s->t_start[idx(s, e.it, e.op, node)] = s->now;
    evq_push(s->q, s->now + op_duration(s, e.op, node), 0, EV_DONE, e.op, node, e.it, 0);
}

/* A single flow src -> dst != src of instance (op, src, t), into the network at the end of
 * the instant. */
static void flow_start(sim_t *s, int op, int src, int dst, int64_t bytes, int t)
{
    touch(s, src);
    touch(s, dst);
    s->nflows[src]++;
    s->nflows[dst]++;
    s->sent[src] += bytes;
    s->recv[dst] += bytes;
    if (s->n_pend == s->cap_pend) {
        s->cap_pend = s->cap_pend ? 2 * s->cap_pend : 256;
        s->pend = xrealloc(s->pend, (size_t)s->cap_pend * sizeof *s->pend);
    }
    s->pend[s->n_pend++] = (pflow_t){t, op, src, dst, bytes};
}

/* Whether op's flows go through the send order's connections: the PS pushes and pulls, the
 * SFB broadcasts and the ring's steps, which the runtime sends by layer
 * (runtime/transport/sendq.h). */
static int ordered(const sim_t *s, int op)
{
    op_kind_t k = s->p->ops[op].kind;
    return s->order && (k == OP_PUSH || k == OP_PULL || k == OP_SFB || k == OP_ALLREDUCE);
}

static void kick(sim_t *s, int src, int dst)
{
    if (s->n_kick + 2 > s->cap_kick) {
        s->cap_kick = s->cap_kick ? 2 * s->cap_kick : 64;
        s->kick = xrealloc(s->kick, (size_t)s->cap_kick * sizeof *s->kick);
    }
    s->kick[s->n_kick++] = src;
    s->kick[s->n_kick++] = dst;
}

/* The kicked connections start their next slices (as flows of this instant). */
static void kicks_start(sim_t *s)
{
    for (int64_t i = 0; i < s->n_kick; i += 2) {
        int op, t, src = s->kick[i], dst = s->kick[i + 1];
        int64_t bytes;
        if (sendorder_next(s->order, src, dst, &op, &t, &bytes))
            flow_start(s, op, src, dst, bytes, t);
    }
    s->n_kick = 0;
}

/* Starts the next step of stepped instance (op, node, t) if it may (plan.h, ALLREDUCE): the
 * instance is ready, its own previous step has been delivered, and the predecessor's
 * previous step has arrived. */
static void step_try(sim_t *s, int op, int node, int t)
{
    int64_t i = arx(s, t, op, node);
    int k = s->ar_issued[i];
    if (!s->ar_ready[i] || k >= s->p->ops[op].steps || s->ar_own[i] < k || s->ar_got[i] < k)
        return;
    int64_t bytes;
    ASSERT(plan_n_dests(s->p, op, node) == 1, "stepped op %d with several flows", op);
    int d = plan_dest(s->p, op, node, 0, &bytes);
    ASSERT(d != node && bytes > 0, "step of op %d: flow %d -> %d of %lld bytes", op, node, d,
           (long long)bytes);
    int64_t ri = rix(s, t, op);
    if (s->ar_t0[ri] != s->now || s->ar_k0[ri] != k)
        s->ar_t0[ri] = s->now, s->ar_k0[ri] = k, s->ar_n0[ri] = 0;
    s->ar_n0[ri]++;
    s->ar_issued[i]++;
    if (!ordered(s, op)) flow_start(s, op, node, d, bytes, t);
    else if (sendorder_push(s->order, node, d, op, t, s->p->ops[op].priority, bytes))
        kick(s, node, d);
}

/* Instance (op, node, t) of a stepped op completes once its own steps are delivered and the
 * predecessor's are all in. */
static void step_check_done(sim_t *s, int op, int node, int t)
{
    int64_t i = arx(s, t, op, node);
    int S = s->p->ops[op].steps;
    if (s->ar_own[i] != S || s->ar_got[i] != S) return;
    int64_t bytes;
    int d = plan_dest(s->p, op, node, 0, &bytes);
    s->ar_own[i]++; /* completed: S + 1, so that it completes once */
    complete(s, op, node, t, d, s->p->ops[op].bytes);
}

/* From step k's last byte sent until its delivery, outside the send order: the pipelined
 * ring hides the latency behind its chunk's later pieces, but after the last step
 * (cost_allreduce_step_gap_ns). */
static int64_t step_gap(const sim_t *s, int op, int k)
{
    int64_t bytes;
    plan_dest(s->p, op, 0, 0, &bytes);
    return cost_allreduce_step_gap_ns(&s->p->cost, bytes, k == s->p->ops[op].steps - 1);
}

/* One step's flow src -> dst of stepped op delivered. */
static void step_deliver(sim_t *s, int op, int src, int dst, int t)
{
    int S = s->p->ops[op].steps;
    s->ar_own[arx(s, t, op, src)]++;
    if (++s->ar_got[arx(s, t, op, dst)] == S)
        for (int k = 0; k < s->rev_n[DEP_RECV][op]; k++) {
            rev_t r = s->rev[DEP_RECV][s->rev_first[DEP_RECV][op] + k];
            if (t + r.back < s->iterations && plan_has_instance(s->p, r.op, dst))
                dec(s, r.op, dst, t + r.back);
        }
    step_try(s, op, src, t);
    step_try(s, op, dst, t);
    step_check_done(s, op, src, t);
    step_check_done(s, op, dst, t);
}

/* Lockstep step k of ring instance (op, t) starts at every node: one network entity at the
 * end of the instant. */
static void ring_issue(sim_t *s, int op, int t, int64_t bytes)
{
    rings_add(s, 1);
    s->ring_bytes += bytes;
    if (s->n_ring_pend == s->cap_ring_pend) {
        s->cap_ring_pend = s->cap_ring_pend ? 2 * s->cap_ring_pend : 16;
        s->ring_pend = xrealloc(s->ring_pend, (size_t)s->cap_ring_pend * sizeof *s->ring_pend);
    }
    s->ring_pend[s->n_ring_pend++] = (struct ring_pend){t, op, bytes};
}

/* a[0 .. n) in reverse order. */
static void ints_reverse(int *a, int64_t n)
{
    for (int64_t i = 0, j = n - 1; i < j; i++, j--) {
        int x = a[i];
        a[i] = a[j], a[j] = x;
    }
}

/* The ring queue may start its next slice at the end of this instant: as every ring
 * connection would have asked now, slice by slice (kick). */
static void okick(sim_t *s)
{
    if (!s->okick) s->okick_at = s->n_kick;
    s->okick = 1;
}

/* Ring instance (op, t) leaves the list of those in lockstep under the send order. */
static void olocked_drop(sim_t *s, int op, int t)
{
    for (int64_t i = 0; i < s->n_olocked; i++)
        if (s->olocked[i].op == op && s->olocked[i].t == t) {
            s->olocked[i] = s->olocked[--s->n_olocked];
            s->ar_lock[rix(s, t, op)] = RING_ENDED;
            return;
        }
    ASSERT(0, "ring instance of op %d iteration %d not in lockstep", op, t);
}

/* A lockstep step of ring instance (op, t) delivered at every node: the next step, or the
 * instance completes everywhere, in the order the per-node deliveries 0 -> 1, 1 -> 2, ..
 * would give (node v completes once v -> v+1 and v-1 -> v are in, node 0 last). Under the
 * send order the next step joins the ring queue (olock_flush), and where the lockstep
 * ended while the step was on the way, each node's delivery is taken in ring order. */
static void ring_delivered(sim_t *s, int op, int t)
{
    int64_t ri = rix(s, t, op), bytes;
    int S = s->p->ops[op].steps, N = s->nodes;
    if (s->order && s->ar_lock[ri] != RING_LOCKED) {
        for (int v = 0; v < N; v++) step_deliver(s, op, v, (v + 1) % N, t);
        return;
    }
    plan_dest(s->p, op, 0, 0, &bytes);
    s->ring_steps++;
    if (++s->ar_step[ri] < S) {
        if (!s->order) ring_issue(s, op, t, bytes);
        else if (sendorder_ring_push(s->order, op, t, s->p->ops[op].priority, bytes)) okick(s);
        return;
    }
    if (s->order) olocked_drop(s, op, t);
    for (int v = 0; v < N; v++) {
        int64_t i = arx(s, t, op, v);
        s->ar_issued[i] = s->ar_got[i] = S;
        s->ar_own[i] = S + 1; /* completed */
    }
    for (int v = 0; v <= N; v++) {
        int dst = (v + 1) % N;
        for (int k = 0; v < N && k < s->rev_n[DEP_RECV][op]; k++) {
            rev_t r = s->rev[DEP_RECV][s->rev_first[DEP_RECV][op] + k];
            if (t + r.back < s->iterations && plan_has_instance(s->p, r.op, dst))
                dec(s, r.op, dst, t + r.back);
        }
        if (v >= 1) complete(s, op, v % N, t, (v + 1) % N, s->p->ops[op].bytes);
    }
}

/* Lockstep ring instance (op, t) ends: every node's counters from the one the lockstep held
 * (step ar_step issued, not delivered). */
static void ring_counters_out(sim_t *s, int op, int t)
{
    int64_t ri = rix(s, t, op);
    int k = s->ar_step[ri];
    for (int v = 0; v < s->nodes; v++) {
        int64_t i = arx(s, t, op, v);
        s->ar_issued[i] = k + 1;
        s->ar_own[i] = s->ar_got[i] = k;
    }
    s->ar_lock[ri] = RING_ENDED;
}

/* The network split lockstep ring instance (op, t)'s step in flight into its flows: from
 * now on its nodes go step by step on their own, from the counters the lockstep held. */
static void ring_unlock(sim_t *s, int op, int t)
{
    ring_counters_out(s, op, t);
    for (int v = 0; v < s->nodes; v++) {
        touch(s, v);
        s->nflows[v] += 2;
    }
    rings_add(s, -1);
}

/* Ring instances whose every node issued the same step at this instant go into lockstep
 * (again, after the network split one): every node then holds the same counters (step k
 * issued, k of its own and of its predecessor's delivered), and their pending flows leave
 * the list for one ring step each. */
static void rings_lock(sim_t *s)
{
    int N = s->nodes, any = 0;
    /* a step that the network would take as flows is not worth a lockstep; under the send
     * order a step goes in slices, one connection's at a time */
    if (s->o->ring_flows || !net_ring_whole(s->net) || s->order) return;
    for (int64_t i = 0; i < s->n_pend; i++) {
        const pflow_t *f = &s->pend[i];
        if (s->ar_of_op[f->op] < 0) continue;
        int64_t ri = rix(s, f->t, f->op), b0;
        char st = s->ar_lock[ri];
        if (st == RING_LOCKED || st == RING_UNALIKE || s->ar_t0[ri] != s->now ||
            s->ar_n0[ri] != N)
            continue;
        plan_dest(s->p, f->op, 0, 0, &b0);
        s->ar_lock[ri] = f->bytes != b0 ? RING_UNALIKE : RING_LOCKING;
        any |= f->bytes == b0;
    }
    if (!any) return;
    int64_t w = 0;
    for (int64_t i = 0; i < s->n_pend; i++) {
        const pflow_t *f = &s->pend[i];
        int64_t ri = s->ar_of_op[f->op] < 0 ? -1 : rix(s, f->t, f->op);
        if (ri < 0 || s->ar_lock[ri] != RING_LOCKING || s->ar_t0[ri] != s->now) {
            s->pend[w++] = *f;
            continue;
        }
        if (s->ar_n0[ri] == N) {
            s->ar_n0[ri] = N + 1; /* its ring step is on the way */
            s->ar_step[ri] = s->ar_k0[ri];
            s->ring_bytes -= f->bytes; /* its nodes' sent and recv hold this step already */
            ring_issue(s, f->op, f->t, f->bytes);
        }
        s->nflows[f->src]--;
        s->nflows[f->dst]--;
    }
    s->n_pend = w;
    for (int64_t a = 0; a < s->n_ring_pend; a++) {
        int64_t ri = rix(s, s->ring_pend[a].t, s->ring_pend[a].op);
        if (s->ar_lock[ri] == RING_LOCKING) s->ar_lock[ri] = RING_LOCKED;
    }
}

/* ---- Send order: the ring connections in lockstep ----
 * Under send_order = layer each connection sends one slice at a time, its queue's first
 * message's (sim/sendorder.h), so a ring step is N slices at a time, never one entity. But
 * when every ring connection v -> v + 1 holds the same queue (the same ring instances, each
 * with every node at one step, the same bytes left, in the same order), no other connection
 * holds anything and the network is empty, every connection picks the same message at each
 * slice boundary and its N slices share the network alike, as a lockstep ring step's flows
 * do: the queue is held once (sendorder's ring queue), its slice is one ring step entity
 * (net_add_ring), and its ring instances are in lockstep (ar_step). Pushes of one instant
 * join it where every node pushed the same step of a ring (olock_join); anything else (a
 * node ahead of the others, a transfer of another kind, the network splitting the slice)
 * ends it (olock_end): the queue goes back to every connection, the slice in flight is N
 * flows and the rings go on node by node, from the same state as slice by slice. */

/* Ring instance (op, t) at one step on every node (its step k issued everywhere), each node
 * sending its successor the same bytes. */
static int ring_at_one_step(const sim_t *s, int op, int t)
{
    if (s->ar_of_op[op] < 0 || !s->ar_alike[s->ar_of_op[op]]) return 0;
    int32_t k = s->ar_issued[arx(s, t, op, 0)];
    for (int v = 1; v < s->nodes; v++)
        if (s->ar_issued[arx(s, t, op, v)] != k) return 0;
    return 1;
}

/* The ring connections join the ring queue when alike and every ring instance on them is at
 * one step; returns whether they did (the lockstep is on then). */
static int olock_join(sim_t *s)
{
    int n = sendorder_ring_alike(s->order), op, t;
    if (n == 0) return 0;
    for (int i = 0; i < n; i++) {
        sendorder_ring_msg(s->order, i, &op, &t);
        if (!ring_at_one_step(s, op, t)) return 0;
    }
    for (int i = 0; i < n; i++) {
        sendorder_ring_msg(s->order, i, &op, &t);
        int64_t ri = rix(s, t, op);
        s->ar_lock[ri] = RING_LOCKED;
        s->ar_step[ri] = s->ar_issued[arx(s, t, op, 0)] - 1;
        if (s->n_olocked == s->cap_olocked) {
            s->cap_olocked = s->cap_olocked ? 2 * s->cap_olocked : 16;
            s->olocked = xrealloc(s->olocked, (size_t)s->cap_olocked * sizeof *s->olocked);
        }
        s->olocked[s->n_olocked++] = (struct olocked){op, t};
    }
    sendorder_ring_join(s->order);
    s->n_kick = 0; /* every connection is empty */
    s->olock = s->okick = 1;
    s->okick_at = 0;
    return 1;
}

/* The lockstep ends: the ring queue goes back to every ring connection, its slice in flight
 * (if any) is N flows, which end as the network's ring step (oslice_done) or as the flows it
 * split it into, and its ring instances go on node by node. */
static void olock_end(sim_t *s)
{
    int N = s->nodes;
    for (int64_t i = 0; i < s->n_olocked; i++)
        ring_counters_out(s, s->olocked[i].op, s->olocked[i].t);
    s->n_olocked = 0;
    sendorder_ring_split(s->order);
    if (s->oslice) {
        rings_add(s, -1);
        for (int v = 0; v < N; v++) {
            touch(s, v);
            s->nflows[v] += 2;
        }
    } else if (s->okick) {
        /* where the ring queue was asked to start a slice, before later events' kicks */
        int64_t at = s->okick_at, later = s->n_kick - at;
        for (int v = 0; v < N; v++) kick(s, v, (v + 1) % N);
        ints_reverse(s->kick + at, later);
        ints_reverse(s->kick + at + later, 2 * (int64_t)N);
        ints_reverse(s->kick + at, later + 2 * (int64_t)N);
    }
    s->olock = s->oslice = s->okick = 0;
}

/* The ring queue's next slice into the network, one ring step entity. */
static void oslice_start(sim_t *s)
{
    int op, t;
    int64_t bytes;
    if (!sendorder_ring_next(s->order, &op, &t, &bytes)) return;
    int64_t tag = ((int64_t)t * s->n_ops + op) * s->nodes * s->nodes;
    int whole = net_add_ring(s->net, s->now, bytes, tag);
    ASSERT(whole, "the ring queue's slice of op %d split as it started", op);
    rings_add(s, 1);
    s->ring_bytes += bytes;
    s->oslice = 1;
}

/* A slice src -> dst ended (its flow's accounting done): the message is in with its last
 * one, and the connection may start its next. */
static void slice_end(sim_t *s, int src, int dst)
{
    int op, t;
    if (sendorder_slice_done(s->order, src, dst, &op, &t))
        evq_push(s->q, s->now + s->p->cluster.lat_ns, 0, EV_DELIVER, op, src, dst, t);
    kick(s, src, dst);
}

/* A ring step entity of the send order ended: the ring queue's slice, or where the lockstep
 * ended while it was in flight, its N flows, in ring order. */
static void oslice_done(sim_t *s)
{
    int N = s->nodes, op, t;
    if (!s->olock) {
        for (int v = 0; v < N; v++) {
            int d = (v + 1) % N;
            touch(s, v);
            touch(s, d);
            s->nflows[v]--;
            s->nflows[d]--;
            slice_end(s, v, d);
        }
        return;
    }
    rings_add(s, -1);
    s->oslice = 0;
    okick(s);
    if (sendorder_ring_slice_done(s->order, &op, &t)) {
        s->ring_events += (uint64_t)N - 1; /* a delivery per node, as slice by slice */
        evq_push(s->q, s->now + s->p->cluster.lat_ns, 0, EV_DELIVER, op, NET_RING, NET_RING, t);
    }
}

/* End of an instant under the send order, before the connections start their slices: the
 * lockstep takes this instant's pushes, ends, or begins, and its ring queue starts its next
 * slice. It holds only while the network carries nothing but its slice. */
static void olock_flush(sim_t *s)
{
    if (!s->olock_ok) return;
    if (s->olock && (net_active(s->net) != s->oslice || s->n_pend > 0)) olock_end(s);
    else if (s->olock && s->n_kick > 0 && !olock_join(s)) olock_end(s);
    else if (!s->olock && s->n_kick > 0 && s->n_pend == 0 && net_active(s->net) == 0 &&
             net_ring_whole(s->net))
        olock_join(s);
    if (s->olock && s->okick && !s->oslice) oslice_start(s);
    s->okick = 0;
}

static void ready(sim_t *s, int op, int node, int t)
{
    const plan_op_t *po = &s->p->ops[op];
    if (s->o->trace) s->t_start[idx(s, t, op, node)] = s->now;
    switch (po->res) {
    case RES_COMPUTE:
        ASSERT(!s->computing[node], "compute of node %d busy when op %d got ready", node, op);
        touch(s, node);
        s->computing[node] = 1;
        evq_push(s->q, s->now + op_duration(s, op, node), 0, EV_DONE, op, node, t, 0);
        break;
    case RES_SERVER:
    case RES_UPDATE:
    case RES_INTRA: {
        rqueue_t *q = &s->rq[po->res][node];
        if (q->n == q->cap) {
            q->cap = q->cap ? 2 * q->cap : 8;
            q->e = xrealloc(q->e, (size_t)q->cap * sizeof *q->e);
        }
        q->e[q->n++] = (qent_t){po->priority, op, t};
        rq_start_next(s, po->res, node);
        break;
    }
    case RES_NET: {
        if (po->steps > 1) {
            s->ar_ready[arx(s, t, op, node)] = 1;
            step_try(s, op, node, t);
            break;
        }
        int64_t tag = ((((int64_t)t * s->n_ops) + op) * s->nodes + node) * s->nodes + node;
        int64_t bb;
        int self;
        /* under the send order, each flow joins the queue of its connection */
        if (!ordered(s, op) && plan_dest_broadcast(s->p, op, node, &bb, &self)) {
            /* one network entity for the nodes-1 flows, delivered to all at once (flows the
             * network split off arrive one by one), plus a local copy when the node is among
             * its own destinations; the count is of flows, as for any group */
            ASSERT(bb > 0, "empty broadcast of op %d", op);
            s->cnt[idx(s, t, op, node)] = s->nodes - 1 + self;
            if (self) evq_push(s->q, s->now, 0, EV_DELIVER, op, node, node, t);
            s->sent[node] += bb * (s->nodes - 1);
            s->recv[node] -= bb;
            s->bcast_recv += bb;
            /* with racks, one part per rack, each finishing on its own */
            bcasts_add(s, net_add_bcast(s->net, s->now, node, bb, tag));
            break;
        }
        int nd = plan_n_dests(s->p, op, node);
        ASSERT(nd > 0, "transfer op %d on node %d has no destination", op, node);
        s->cnt[idx(s, t, op, node)] = nd;
        for (int i = 0; i < nd; i++) {
            int64_t bytes;
            int d = plan_dest(s->p, op, node, i, &bytes);
            ASSERT(bytes > 0, "empty flow of op %d", op);
            if (d == node) {
                evq_push(s->q, s->now, 0, EV_DELIVER, op, node, d, t);
                continue;
            }
            if (!ordered(s, op)) flow_start(s, op, node, d, bytes, t);
            else if (sendorder_push(s->order, node, d, op, t, po->priority, bytes)) kick(s, node, d);
        }
        break;
    }
    default: ASSERT(0, "bad resource %d", po->res);
    }
}

static void dec(sim_t *s, int op, int node, int t)
{
    int32_t *c = &s->cnt[idx(s, t, op, node)];
    ASSERT(*c > 0, "op %s unit %d node %d iteration %d: dependency count underflow",
           op_kind_name(s->p->ops[op].kind), s->p->ops[op].unit, node, t);
    if (--*c == 0) ready(s, op, node, t);
}

static void complete(sim_t *s, int op, int node, int t, int peer, int64_t bytes)
{
    const plan_op_t *po = &s->p->ops[op];
    trace_instance(s, op, node, t, peer, bytes);
    if (s->now > s->iter_end[t]) s->iter_end[t] = s->now;
    if (po->res == RES_COMPUTE) {
        touch(s, node);
        s->computing[node] = 0;
    } else if (po->res == RES_SERVER || po->res == RES_UPDATE || po->res == RES_INTRA) {
        s->rq[po->res][node].busy = 0;
        rq_start_next(s, po->res, node);
    }
    for (int k = 0; k < s->rev_n[DEP_LOCAL][op]; k++) {
        rev_t r = s->rev[DEP_LOCAL][s->rev_first[DEP_LOCAL][op] + k];
        /* a shard's op waits on its own worker's (fp16's APPLY on VERDICT): not every
         * node holds a shard of the unit */
        if (t + r.back < s->iterations && plan_has_instance(s->p, r.op, node))
            dec(s, r.op, node, t + r.back);
    }
    if (s->rev_n[DEP_ALL][op] > 0 &&
        ++s->barrier[(int64_t)t * s->n_ops + op] == plan_n_instances(s->p, op)) {
        for (int k = 0; k < s->rev_n[DEP_ALL][op]; k++) {
            rev_t r = s->rev[DEP_ALL][s->rev_first[DEP_ALL][op] + k];
            if (t + r.back >= s->iterations) continue;
            for (int n = 0; n < s->nodes; n++)
                if (plan_has_instance(s->p, r.op, n)) dec(s, r.op, n, t + r.back);
        }
    }
}

/* nflow flows of instance (op, src, t) have been delivered. */
static void sent_done(sim_t *s, int op, int src, int t, int nflow)
{
    int32_t *c = &s->cnt[idx(s, t, op, src)];
    ASSERT(*c >= nflow, "flow of op %d delivered twice", op);
    *c -= nflow;
    if (*c == 0) {
        /* the trace row's bytes and peer; O(1) for a broadcast */
        int64_t bytes = 0, b;
        int peer = -1, self;
        if (s->o->trace && plan_dest_broadcast(s->p, op, src, &b, &self)) {
            bytes = b * (s->nodes - 1 + self);
        } else if (s->o->trace) {
            int nd = plan_n_dests(s->p, op, src);
            for (int i = 0; i < nd; i++) {
                int d = plan_dest(s->p, op, src, i, &b);
                bytes += b;
                if (nd == 1) peer = d;
            }
        }
        complete(s, op, src, t, peer, bytes);
    }
}

/* A stored part delivered: once none is left, the store starts over. */
static void skip_release(sim_t *s)
{
    ASSERT(s->live_skips > 0, "a broadcast's part delivered twice");
    if (--s->live_skips == 0) s->n_skips = s->n_skip_nodes = 0;
}

/* A gather's flows into dst: from every node but dst and but the senders of skip list
 * -2 - src (every node, none skipped, when src == NET_SRC_ALL). */
static void deliver_gather(sim_t *s, int op, int src, int dst, int t)
{
    int lo = 0, hi = s->nodes;
    if (src != NET_SRC_ALL) {
        const skip_t *sk = &s->skips[-2 - src];
        for (int k = 0; k < sk->n; k++) s->skipped[s->skip_nodes[sk->first + k]] = 1;
        lo = sk->lo, hi = sk->hi;
    }
    s->skipped[dst] = 1;
    int nflow = 0;
    for (int n = lo; n < hi; n++) nflow += !s->skipped[n];
    for (int k = 0; k < s->rev_n[DEP_RECV][op]; k++) {
        rev_t r = s->rev[DEP_RECV][s->rev_first[DEP_RECV][op] + k];
        if (t + r.back >= s->iterations || !plan_has_instance(s->p, r.op, dst)) continue;
        /* nflow deliveries at once: the last one readies the instance */
        int32_t *c = &s->cnt[idx(s, t + r.back, r.op, dst)];
        ASSERT(*c >= nflow, "op %s unit %d node %d iteration %d: dependency count underflow",
               op_kind_name(s->p->ops[r.op].kind), s->p->ops[r.op].unit, dst, t + r.back);
        *c -= nflow - 1;
        dec(s, r.op, dst, t + r.back);
    }
    for (int n = lo; n < hi; n++)
        if (!s->skipped[n]) sent_done(s, op, n, t, 1);
    s->skipped[dst] = 0;
    if (src != NET_SRC_ALL) {
        const skip_t *sk = &s->skips[-2 - src];
        for (int k = 0; k < sk->n; k++) s->skipped[s->skip_nodes[sk->first + k]] = 0;
        skip_release(s);
    }
}

/* dst >= 0: one flow. dst < 0: a broadcast's flows to every node (of the stored part's rack)
 * but src and but the receivers of skip list -2 - dst (every node, none skipped, when
 * dst == NET_DST_ALL). src < 0: a gather's. */
static void deliver(sim_t *s, int op, int src, int dst, int t)
{
    if (s->p->ops[op].steps > 1) {
        if (src == NET_RING) ring_delivered(s, op, t);
        else step_deliver(s, op, src, dst, t);
        return;
    }
    if (src < 0) {
        deliver_gather(s, op, src, dst, t);
        return;
    }
    int nflow = 1, lo = 0, hi = s->nodes;
    if (dst < 0) {
        nflow = s->nodes - 1;
        if (dst != NET_DST_ALL) {
            const skip_t *sk = &s->skips[-2 - dst];
            for (int k = 0; k < sk->n; k++) s->skipped[s->skip_nodes[sk->first + k]] = 1;
            lo = sk->lo, hi = sk->hi;
            nflow = hi - lo - (src >= lo && src < hi) - sk->n;
        }
        s->skipped[src] = 1;
    }
    for (int k = 0; k < s->rev_n[DEP_RECV][op]; k++) {
        rev_t r = s->rev[DEP_RECV][s->rev_first[DEP_RECV][op] + k];
        if (t + r.back >= s->iterations) continue;
        if (dst >= 0) {
            if (plan_has_instance(s->p, r.op, dst)) dec(s, r.op, dst, t + r.back);
            continue;
        }
        for (int d = lo; d < hi; d++)
            if (!s->skipped[d] && plan_has_instance(s->p, r.op, d)) dec(s, r.op, d, t + r.back);
    }
    if (dst < 0) {
        s->skipped[src] = 0;
        if (dst != NET_DST_ALL) {
            const skip_t *sk = &s->skips[-2 - dst];
            for (int k = 0; k < sk->n; k++) s->skipped[s->skip_nodes[sk->first + k]] = 0;
            skip_release(s);
        }
    }
    sent_done(s, op, src, t, nflow);
}

/* Keep a finished part's nodes [lo, hi) and skip list until its delivery; returns its code
 * -2 - index. */
static int skip_store(sim_t *s, const int *skip, int nskip, int lo, int hi)
{
    if (s->n_skips == s->cap_skips) {
        s->cap_skips = s->cap_skips ? 2 * s->cap_skips : 64;
        s->skips = xrealloc(s->skips, (size_t)s->cap_skips * sizeof *s->skips);
    }
    if (s->n_skip_nodes + nskip > s->cap_skip_nodes) {
        s->cap_skip_nodes = 2 * (s->n_skip_nodes + nskip);
        s->skip_nodes = xrealloc(s->skip_nodes, (size_t)s->cap_skip_nodes * sizeof *s->skip_nodes);
    }
    s->skips[s->n_skips] = (skip_t){s->n_skip_nodes, nskip, lo, hi};
    s->live_skips++;
    if (nskip > 0) memcpy(s->skip_nodes + s->n_skip_nodes, skip, (size_t)nskip * sizeof *skip);
    s->n_skip_nodes += nskip;
    ASSERT(s->n_skips < INT32_MAX / 2, "too many split broadcasts and gathers");
    return -2 - (int)s->n_skips++;
}

/* Flush order key: (t, op, dst, bytes), then arrival. The key carries its flow's arrival
 * index, so the comparator needs no context and the order is total. */
static int pkey_cmp(const void *a, const void *b)
{
    const pkey_t *x = a, *y = b;
    if (x->t != y->t) return x->t < y->t ? -1 : 1;
    if (x->op != y->op) return x->op < y->op ? -1 : 1;
    if (x->dst != y->dst) return x->dst < y->dst ? -1 : 1;
    if (x->bytes != y->bytes) return x->bytes < y->bytes ? -1 : 1;
    return x->i < y->i ? -1 : x->i > y->i;
}

/* Put the flows started at this instant into the network, in the order they started: those
 * of one (iteration, op, destination, bytes) from more than half of the other nodes as one
 * gather (at the place of its first flow), the rest as single flows. */
static void flush_pending(sim_t *s)
{
    rings_lock(s);
    for (int64_t a = 0; a < s->n_ring_pend; a++) {
        const struct ring_pend *g = &s->ring_pend[a];
        int64_t tag = ((int64_t)g->t * s->n_ops + g->op) * s->nodes * s->nodes;
        net_add_ring(s->net, s->now, g->bytes, tag);
    }
    s->n_ring_pend = 0;
    olock_flush(s);
    kicks_start(s);
    int64_t np = s->n_pend;
    if (np == 0) return;
    if (np > s->cap_pord) {
        s->cap_pord = 2 * np;
        s->pord = xrealloc(s->pord, (size_t)s->cap_pord * 3 * sizeof *s->pord);
        s->pkey = xrealloc(s->pkey, (size_t)s->cap_pord * sizeof *s->pkey);
    }
    int64_t *ord = s->pord, *grp = s->pord + s->cap_pord, *end = grp + s->cap_pord;
    for (int64_t i = 0; i < np; i++) {
        const pflow_t *f = &s->pend[i];
        s->pkey[i] = (pkey_t){f->t, f->op, f->dst, f->bytes, i};
        grp[i] = -1;
    }
    qsort(s->pkey, (size_t)np, sizeof *s->pkey, pkey_cmp);
    for (int64_t i = 0; i < np; i++) ord[i] = s->pkey[i].i;
    /* grp[i]: the position in ord where flow i's gather starts (-1: a single flow); the
     * group's first flow (its earliest) also knows where it ends */
    for (int64_t a = 0; a < np;) {
        const pflow_t *x = &s->pend[ord[a]];
        int64_t b = a + 1;
        while (b < np) {
            const pflow_t *y = &s->pend[ord[b]];
            if (y->t != x->t || y->op != x->op || y->dst != x->dst || y->bytes != x->bytes) break;
            b++;
        }
        /* a connection's slices go one by one (send order): never in a gather */
        if (b - a >= 2 && 2 * (b - a) > s->nodes - 1 && !ordered(s, x->op)) {
            for (int64_t k = a; k < b; k++) grp[ord[k]] = a;
            end[ord[a]] = b;
        }
        a = b;
    }
    for (int64_t i = 0; i < np; i++) {
        const pflow_t *f = &s->pend[i];
        if (grp[i] < 0) {
            int64_t tag = ((((int64_t)f->t * s->n_ops) + f->op) * s->nodes + f->src) * s->nodes + f->dst;
            net_add(s->net, s->now, f->src, f->dst, f->bytes, tag);
            continue;
        }
        if (ord[grp[i]] != i) continue; /* in the gather led by an earlier flow */
        for (int n = 0; n < s->nodes; n++) s->skipped[n] = 1;
        for (int64_t k = grp[i]; k < end[i]; k++) {
            int src = s->pend[ord[k]].src;
            ASSERT(s->skipped[src], "two flows %d -> %d in one group", src, f->dst);
            s->skipped[src] = 0;
        }
        int nex = 0;
        for (int n = 0; n < s->nodes; n++) {
            if (s->skipped[n] && n != f->dst) s->pex[nex++] = n;
            s->skipped[n] = 0;
        }
        int64_t tag = ((((int64_t)f->t * s->n_ops) + f->op) * s->nodes + f->dst) * s->nodes + f->dst;
        net_add_gather(s->net, s->now, f->dst, f->bytes, tag, s->pex, nex);
    }
    s->n_pend = 0;
}

static void on_finish(void *arg, int64_t tag, int src, int dst, int64_t bytes, const int *skip,
                      int nskip)
{
    sim_t *s = arg;
    (void)bytes;
    int64_t rest = tag / ((int64_t)s->nodes * s->nodes);
    int op = (int)(rest % s->n_ops), t = (int)(rest / s->n_ops);
    int stepped = s->ar_of_op[op] >= 0;
    if (src == NET_RING && s->order) {
        oslice_done(s);
        return;
    }
    if (src == NET_RING) {
        /* a lockstep ring step: every node's flow ended */
        rings_add(s, -1);
        s->ring_events += (uint64_t)s->nodes - 1;
        evq_push(s->q, s->now + step_gap(s, op, s->ar_step[rix(s, t, op)]), 0, EV_DELIVER, op,
                 NET_RING, NET_RING, t);
        return;
    }
    if (s->olock) olock_end(s); /* the network split the ring queue's slice into flows */
    if (stepped && s->ar_lock[rix(s, t, op)] == RING_LOCKED) ring_unlock(s, op, t);
    if (src < 0) {
        /* a gather (or its part of a rack): its senders (all of its nodes but dst and those
         * skipped; flows split off finish on their own) stop sending */
        int lo = 0, hi = s->nodes;
        if (src != NET_SRC_ALL) lo = NET_RACK_OF(src) * s->rack_size, hi = lo + s->rack_size;
        for (int k = 0; k < nskip; k++) s->skipped[skip[k]] = 1;
        s->skipped[dst] = 1;
        int covered = 0;
        for (int n = lo; n < hi; n++)
            if (!s->skipped[n]) {
                touch(s, n);
                s->nflows[n]--;
                covered++;
            }
        for (int k = 0; k < nskip; k++) s->skipped[skip[k]] = 0;
        s->skipped[dst] = 0;
        touch(s, dst);
        s->nflows[dst] -= covered;
        if (nskip > 0 || src != NET_SRC_ALL) src = skip_store(s, skip, nskip, lo, hi);
        evq_push(s->q, s->now + s->p->cluster.lat_ns, 0, EV_DELIVER, op, src, dst, t);
        return;
    }
    if (dst < 0) {
        /* the broadcast's lifetime (of its parts, with racks) stands for its group in the
         * communication time, the flows split off from it included */
        bcasts_add(s, -1);
        int lo = 0, hi = s->nodes;
        if (dst != NET_DST_ALL) lo = NET_RACK_OF(dst) * s->rack_size, hi = lo + s->rack_size;
        if (nskip > 0 || dst != NET_DST_ALL) dst = skip_store(s, skip, nskip, lo, hi);
        evq_push(s->q, s->now + s->p->cluster.lat_ns, 0, EV_DELIVER, op, src, dst, t);
        return;
    }
    if (!stepped && tag % s->nodes == src) {
        /* a flow split off a broadcast: its group's accounting is the broadcast's */
        evq_push(s->q, s->now + s->p->cluster.lat_ns, 0, EV_DELIVER, op, src, dst, t);
        return;
    }
    touch(s, src);
    touch(s, dst);
    s->nflows[src]--;
    s->nflows[dst]--;
    if (ordered(s, op)) {
        slice_end(s, src, dst);
        return;
    }
    /* a stepped op's flow is its node's step in flight: as many delivered before it */
    int64_t gap = stepped ? step_gap(s, op, s->ar_own[arx(s, t, op, src)]) : s->p->cluster.lat_ns;
    evq_push(s->q, s->now + gap, 0, EV_DELIVER, op, src, dst, t);
}

static void build_reverse(sim_t *s)
{
    const plan_t *p = s->p;
    for (int sc = 0; sc < 3; sc++) {
        s->rev_n[sc] = xcalloc((size_t)s->n_ops, sizeof(int));
        s->rev_first[sc] = xcalloc((size_t)s->n_ops + 1, sizeof(int));
    }
    for (int i = 0; i < p->n_deps; i++) s->rev_n[p->deps[i].scope][p->deps[i].op]++;
    for (int sc = 0; sc < 3; sc++) {
        for (int o = 0; o < s->n_ops; o++) s->rev_first[sc][o + 1] = s->rev_first[sc][o] + s->rev_n[sc][o];
        s->rev[sc] = xcalloc((size_t)s->rev_first[sc][s->n_ops] + 1, sizeof(rev_t));
        memset(s->rev_n[sc], 0, (size_t)s->n_ops * sizeof(int));
    }
    for (int o = 0; o < s->n_ops; o++)
        for (int k = 0; k < p->ops[o].n_deps; k++) {
            const plan_dep_t *d = &p->deps[p->ops[o].dep_first + k];
            int sc = d->scope;
            s->rev[sc][s->rev_first[sc][d->op] + s->rev_n[sc][d->op]++] = (rev_t){o, d->iter_back};
        }
}

/* Instances of all ops: the size of cnt and t_start. */
static int64_t sim_instances(const sim_t *s)
{
    return (int64_t)s->iterations * s->n_ops * s->nodes;
}

/* The event queue, the network (racks, NICs) and the per-instance tables. */
static void sim_setup_net_tables(sim_t *s, const plan_t *p, const unit_times_t *tm,
                                 const sim_opts_t *o)
{
    s->p = p;
    s->tm = tm;
    s->o = o;
    s->nodes = p->workers;
    s->n_ops = p->n_ops;
    s->iterations = o->iterations;
    ASSERT((double)s->iterations * s->n_ops * s->nodes * s->nodes < 9e18, "flow tags overflow");
    s->q = evq_new();
    const cluster_t *cl = &p->cluster;
    s->net = net_new_racks(s->nodes, cluster_nic_Bps(cl), cl->core_Bps,
                           cluster_racks(cl) > 1 ? cl->nodes_per_rack : 0, cluster_rack_Bps(cl));
    for (int n = 0; cl->n_nic > 0 && n < s->nodes; n++)
        net_set_node_nic(s->net, n, cluster_node_nic_Bps(cl, n));
    s->rack_size = cluster_racks(cl) > 1 ? cl->nodes_per_rack : s->nodes;
    net_set_whole(s->net, o->whole_network);
    int64_t total = sim_instances(s);
    s->cnt = xcalloc((size_t)total, sizeof *s->cnt);
    s->t_start = o->trace ? xcalloc((size_t)total, sizeof *s->t_start) : xcalloc(1, 8);
    s->barrier = xcalloc((size_t)s->iterations * s->n_ops, sizeof *s->barrier);
    s->iter_end = xcalloc((size_t)s->iterations, sizeof *s->iter_end);
    build_reverse(s);
    for (int res = 0; res < RES_COUNT; res++) s->rq[res] = xcalloc((size_t)s->nodes, sizeof(rqueue_t));
}

/* Per-node state (speeds drawn from the straggler stream, jitter streams, accounting) and
 * the ring-step tables of stepped ops. */
static void sim_setup_nodes(sim_t *s, const plan_t *p, const sim_opts_t *o)
{
    s->speed = xcalloc((size_t)s->nodes, sizeof *s->speed);
    rng_t *strag = p->cluster.straggler_sigma > 0 ? rng_new(o->seed, 0) : NULL;
    for (int n = 0; n < s->nodes; n++) {
        s->speed[n] = cluster_node_speed(&p->cluster, n);
        /* Drawn in node order from one stream: node i's speed does not depend on N. */
        if (strag) s->speed[n] /= rng_lognormal(strag, 0, p->cluster.straggler_sigma);
    }
    rng_destroy(&strag);
    if (p->cluster.jitter_sigma > 0) {
        s->jitter = xcalloc((size_t)s->nodes, sizeof *s->jitter);
        for (int n = 0; n < s->nodes; n++) s->jitter[n] = rng_new(o->seed, 1 + (uint64_t)n);
    }
    s->nflows = xcalloc((size_t)s->nodes, sizeof *s->nflows);
    s->computing = xcalloc((size_t)s->nodes, 1);
    s->skipped = xcalloc((size_t)s->nodes, 1);
    s->pex = xcalloc((size_t)s->nodes, sizeof *s->pex);
    s->last_ns = xcalloc((size_t)s->nodes, sizeof(int64_t));
    s->busy_ns = xcalloc((size_t)s->nodes, sizeof(int64_t));
    s->comm_ns = xcalloc((size_t)s->nodes, sizeof(int64_t));
    s->both_ns = xcalloc((size_t)s->nodes, sizeof(int64_t));
    s->sent = xcalloc((size_t)s->nodes, sizeof(int64_t));
    s->recv = xcalloc((size_t)s->nodes, sizeof(int64_t));
    s->ar_of_op = xcalloc((size_t)s->n_ops, sizeof *s->ar_of_op);
    for (int op = 0; op < s->n_ops; op++) {
        ASSERT(p->ops[op].steps >= 1, "op %d has %d steps", op, p->ops[op].steps);
        s->ar_of_op[op] = p->ops[op].steps > 1 ? s->n_ar++ : -1;
        ASSERT(p->ops[op].steps == 1 || (p->ops[op].res == RES_NET &&
                                         p->ops[op].place == PLACE_WORKERS),
               "op %d: steps on a non-transfer", op);
    }
    int64_t n_arx = (int64_t)s->iterations * s->n_ar * s->nodes;
    s->ar_issued = xcalloc((size_t)n_arx + 1, sizeof *s->ar_issued);
    s->ar_own = xcalloc((size_t)n_arx + 1, sizeof *s->ar_own);
    s->ar_got = xcalloc((size_t)n_arx + 1, sizeof *s->ar_got);
    s->ar_ready = xcalloc((size_t)n_arx + 1, 1);
    int64_t n_rix = (int64_t)s->iterations * s->n_ar;
    s->ar_lock = xcalloc((size_t)n_rix + 1, 1);
    s->ar_step = xcalloc((size_t)n_rix + 1, sizeof *s->ar_step);
    s->ar_n0 = xcalloc((size_t)n_rix + 1, sizeof *s->ar_n0);
    s->ar_k0 = xcalloc((size_t)n_rix + 1, sizeof *s->ar_k0);
    s->ar_t0 = xcalloc((size_t)n_rix + 1, sizeof *s->ar_t0);
    for (int64_t i = 0; i < n_rix; i++) s->ar_t0[i] = -1;
    s->ring_last = xcalloc((size_t)s->nodes, sizeof *s->ring_last);
    s->ar_alike = xcalloc((size_t)s->n_ar + 1, 1);
    for (int op = 0; op < s->n_ops; op++) {
        if (s->ar_of_op[op] < 0) continue;
        int64_t b0, b;
        int alike = 1;
        plan_dest(p, op, 0, 0, &b0);
        for (int v = 0; v < s->nodes && alike; v++)
            alike = plan_n_dests(p, op, v) == 1 && plan_dest(p, op, v, 0, &b) == (v + 1) % s->nodes &&
                    b == b0;
        s->ar_alike[s->ar_of_op[op]] = (char)alike;
    }
}

/* Dependency counts of every instance; those with none start at time 0. */
static void sim_start(sim_t *s, const plan_t *p)
{
    for (int t = 0; t < s->iterations; t++)
        for (int op = 0; op < s->n_ops; op++) {
            const plan_op_t *po = &p->ops[op];
            for (int n = 0; n < s->nodes; n++) {
                if (po->place == PLACE_SHARDS && !plan_has_instance(p, op, n)) continue;
                int32_t c = 0;
                for (int k = 0; k < po->n_deps; k++) {
                    const plan_dep_t *d = &p->deps[po->dep_first + k];
                    if (t - d->iter_back < 0) continue;
                    c += d->scope == DEP_RECV ? plan_n_sources(p, d->op, n) : 1;
                }
                s->cnt[idx(s, t, op, n)] = c;
            }
        }
    for (int t = 0; t < s->iterations; t++)
        for (int op = 0; op < s->n_ops; op++)
            for (int n = 0; n < s->nodes; n++)
                if (s->cnt[idx(s, t, op, n)] == 0 && plan_has_instance(p, op, n))
                    ready(s, op, n, t);
}

/* Run events and network finishes until both are exhausted; the network's rates are
 * recomputed (and the flows started at this instant flushed) only when time moves on. */
static void sim_loop(sim_t *s)
{
    event_t e;
    for (;;) {
        int64_t te = evq_peek_time(s->q);
        if (te > s->now) flush_pending(s);
        if (net_dirty(s->net) && te > s->now) net_recompute(s->net, s->now);
        int64_t tn = net_dirty(s->net) ? INT64_MAX : net_next_ns(s->net);
        if (tn == INT64_MAX && te == INT64_MAX) break;
        if (tn <= te) {
            s->now = tn;
            net_finish(s->net, s->now, on_finish, s);
            continue;
        }
        evq_pop(s->q, &e);
        s->now = e.t_ns;
        if (e.type == EV_DONE) /* a local transfer's row carries its bytes */
            complete(s, e.a, e.b, e.c, -1,
                     s->p->ops[e.a].res == RES_INTRA ? s->p->ops[e.a].bytes : 0);
        else deliver(s, e.a, e.b, e.c, e.d);
    }
}

/* Everything must have run: a leftover count is a plan/executor bug. */
static void sim_check_all_ran(const sim_t *s, const plan_t *p)
{
    int64_t total = sim_instances(s);
    for (int64_t i = 0; i < total; i++)
        if (s->cnt[i] != 0) {
            int n = (int)(i % s->nodes), op = (int)((i / s->nodes) % s->n_ops), t = (int)(i / s->nodes / s->n_ops);
            if (p->ops[op].place == PLACE_SHARDS && !plan_has_instance(p, op, n)) continue;
            ASSERT(0, "op %s unit %d node %d iteration %d never ran (%d deps left)",
                   op_kind_name(p->ops[op].kind), p->ops[op].unit, n, t, s->cnt[i]);
        }
    for (int t = 0; t < s->iterations; t++)
        for (int op = 0; op < s->n_ops; op++)
            for (int n = 0; s->ar_of_op[op] >= 0 && n < s->nodes; n++)
                ASSERT(s->ar_own[arx(s, t, op, n)] == p->ops[op].steps + 1,
                       "op %s unit %d node %d iteration %d: ring stopped after %d of %d steps",
                       op_kind_name(p->ops[op].kind), p->ops[op].unit, n, t,
                       s->ar_own[arx(s, t, op, n)], p->ops[op].steps);
}

/* The run's totals, per-node averages and hidden-communication share into r. */
static void sim_fill_result(sim_t *s, const plan_t *p, const sim_opts_t *o, sim_result_t *r)
{
    memset(r, 0, sizeof *r);
    r->nodes = s->nodes;
    r->iterations = s->iterations;
    r->makespan_ns = s->now;
    int W = o->warmup > 0 ? o->warmup : 1;
    r->iter_ns = s->iterations > 1 ? (s->iter_end[s->iterations - 1] - s->iter_end[W - 1]) / (s->iterations - W)
                          : s->iter_end[0];
    double imgs = (double)s->nodes * p->cluster.devices_per_node * p->batch;
    r->images_per_s = r->iter_ns > 0 ? imgs / (r->iter_ns * 1e-9) : 0;
    double busy = 0, comm = 0, both = 0, sent = 0, recv = 0, maxs = 0;
    for (int n = 0; n < s->nodes; n++) {
        touch(s, n);
        busy += (double)s->busy_ns[n];
        comm += (double)s->comm_ns[n];
        both += (double)s->both_ns[n];
        int64_t sn = s->sent[n] + s->ring_bytes;
        sent += (double)sn;
        recv += (double)(s->recv[n] + s->ring_bytes + s->bcast_recv);
        if (sn > maxs) maxs = (double)sn;
    }
    r->sent_bytes_per_node = sent / s->nodes / s->iterations;
    r->recv_bytes_per_node = recv / s->nodes / s->iterations;
    r->max_sent_bytes_node = maxs / s->iterations;
    r->compute_idle_frac = s->now > 0 ? 1 - busy / ((double)s->nodes * (double)s->now) : 0;
    r->comm_hidden_frac = comm > 0 ? both / comm : 1;
    r->events = evq_pushed(s->q) + s->ring_events;
    r->ring_steps_whole = s->ring_steps;
    r->net_recomputes = net_recomputes(s->net);
}

static void sim_free(sim_t *s)
{
    evq_destroy(&s->q);
    net_destroy(&s->net);
    free(s->cnt);
    free(s->t_start);
    free(s->barrier);
    free(s->iter_end);
    for (int sc = 0; sc < 3; sc++) {
        free(s->rev[sc]);
        free(s->rev_n[sc]);
        free(s->rev_first[sc]);
    }
    for (int res = 0; res < RES_COUNT; res++) {
        for (int n = 0; n < s->nodes; n++) free(s->rq[res][n].e);
        free(s->rq[res]);
    }
    if (s->jitter) {
        for (int n = 0; n < s->nodes; n++) rng_destroy(&s->jitter[n]);
        free(s->jitter);
    }
    free(s->speed);
    free(s->nflows);
    free(s->computing);
    free(s->skipped);
    free(s->pex);
    free(s->pend);
    free(s->pord);
    free(s->pkey);
    free(s->skips);
    free(s->skip_nodes);
    free(s->last_ns);
    free(s->busy_ns);
    free(s->comm_ns);
    free(s->both_ns);
    free(s->sent);
    free(s->recv);
    free(s->ar_of_op);
    free(s->ar_issued);
    free(s->ar_own);
    free(s->ar_got);
    free(s->ar_ready);
    free(s->ar_lock);
    free(s->ar_step);
    free(s->ar_n0);
    free(s->ar_k0);
    free(s->ar_t0);
    free(s->ring_pend);
    free(s->ring_last);
    sendorder_destroy(&s->order);
    free(s->kick);
    free(s->ar_alike);
    free(s->olocked);
}

int sim_run(const plan_t *p, const unit_times_t *tm, const sim_opts_t *o, sim_result_t *r)
{
    ASSERT(o->iterations >= 1, "iterations %d", o->iterations);
    ASSERT(o->warmup >= 0 && (o->warmup < o->iterations || o->iterations == 1),
           "warmup %d of %d iterations", o->warmup, o->iterations);
    ASSERT(tm->n_units == p->n_units, "times for %d units, plan has %d", tm->n_units, p->n_units);
    sim_t S = {0}, *s = &S;
    sim_setup_net_tables(s, p, tm, o);
    sim_setup_nodes(s, p, o);
    if (p->send_order == SEND_ORDER_LAYER) s->order = sendorder_new(s->nodes, p->slice_bytes);
    s->olock_ok = s->order && !o->ring_flows && !o->whole_network;
    check_set_context(ctx_fn, s);
    sim_start(s, p);
    sim_loop(s);
    sim_check_all_ran(s, p);
    sim_fill_result(s, p, o, r);
    check_set_context(NULL, NULL);
    sim_free(s);
    return 0;
}
