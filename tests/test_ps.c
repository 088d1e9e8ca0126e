/* ps: layout, push/pull of 4 workers (threads) on 2 and 4 shards giving exactly the sum,
 * SSP staleness bound enforced, BSP = SSP(0), bad pushes rejected; on_push reports every
 * accepted push and no rejected one; a pull reports when the shard answered and when the
 * values arrived. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "runtime/transport/comm.h"
#include "runtime/transport/comm_mux.h"
#include "runtime/sync/ps.h"
#include "test.h"
#include "runtime/transport/clock.h"

/* The shard's rejection count once it reaches `want` or after 5 s: messages from different
 * connections are handled in no fixed order, so a test waits for them rather than sleeping. */
static uint64_t wait_rejected(ps_server_t *srv, uint64_t want)
{
    for (int i = 0; i < 500 && ps_server_n_rejected(srv) < want; i++) usleep(10000);
    return ps_server_n_rejected(srv);
}

TEST(ps_layout_blocks_and_shards)
{
    ps_range_t r[] = {{0, 10}, {10, 25}, {100, 3}};
    ps_layout_t l;
    REQUIRE(ps_layout_build(&l, r, 3, 8, 3) == 0);
    /* 10 -> 8+2, 25 -> 8+8+8+1, 3 -> 3 */
    CHECK_EQ_I64(l.n_blocks, 7);
    uint64_t per[3] = {0}, total = 0;
    for (int b = 0; b < l.n_blocks; b++) {
        CHECK(l.blocks[b].count <= 8);
        if (b) CHECK(l.blocks[b].offset >= l.blocks[b - 1].offset + l.blocks[b - 1].count);
        per[l.blocks[b].shard] += l.blocks[b].count;
        total += l.blocks[b].count;
    }
    CHECK_EQ_I64(total, 38);
    for (int s = 0; s < 3; s++) CHECK(per[s] >= 8 && per[s] <= 16, "shard %d has %llu", s, (unsigned long long)per[s]);
    CHECK_EQ_I64(ps_layout_find(&l, 10), 2);
    CHECK_EQ_I64(ps_layout_find(&l, 11), -1);
    ps_layout_fini(&l);
    ps_range_t bad[] = {{0, 10}, {5, 10}};
    CHECK(ps_layout_build(&l, bad, 2, 8, 2) == -1);
}

static void add_update(void *arg, float *p, const float *g, size_t n, uint64_t off, int64_t t)
{
    (void)arg, (void)off, (void)t;
    for (size_t i = 0; i < n; i++) p[i] += g[i];
}

enum { NW = 4, ITERS = 3 };
static const ps_range_t s_ranges[] = {{0, 1000}, {1000, 70000}, {71000, 7}};
#define TOTAL 71007

/* A shard's on_push record: every accepted push, checked as it comes (shard thread). */
typedef struct {
    int shard;
    const ps_layout_t *l;
    int64_t n, bad, last_ns;
} push_log_t;

static void on_push(void *arg, int peer, uint64_t offset, int64_t t, int64_t recv_ns)
{
    push_log_t *g = arg;
    int b = ps_layout_find(g->l, offset);
    g->bad += peer < 0 || peer >= NW || b < 0 || (b >= 0 && g->l->blocks[b].shard != g->shard) ||
              t < 0 || t >= ITERS || recv_ns < g->last_ns || recv_ns > clock_now_ns();
    g->last_ns = recv_ns;
    g->n++;
}

typedef struct {
    int rank;
    const ps_layout_t *l;
    const char *const *eps;
    float *arena, *grad;
    int rc;
} w_arg_t;

static float grad_of(int rank, int t, size_t i) { return (float)((rank + 1) * (t + 1) + (int)(i % 5)); }

/* > 0: the shards and the clients send by layer in slices of this (send_order = layer) */
static size_t s_slice_bytes;

static void *worker(void *p)
{
    w_arg_t *a = p;
    comm_mux_t *mux = NULL;
    ps_client_t *c = NULL;
    if (s_slice_bytes) {
        mux = ps_client_mux_new(a->rank, NW, a->l, a->eps, 5000);
        if (mux) comm_mux_set_slices(mux, s_slice_bytes, false);
        if (mux) c = ps_client_new_on(mux, a->l, 5000);
    } else {
        c = ps_client_new(a->rank, NW, a->l, a->eps, 5000);
    }
    a->rc = c ? 0 : -1;
    pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER; /* pulls write the arena under it */
    if (c) ps_client_set_arena_lock(c, &lock);
    for (int t = 0; t < ITERS && !a->rc; t++) {
        for (size_t i = 0; i < TOTAL; i++) a->grad[i] = grad_of(a->rank, t, i);
        for (int r = 2; r >= 0 && !a->rc; r--) /* top layer first, as backward does */
            a->rc = ps_client_push(c, t, r, s_ranges[r].offset, s_ranges[r].count,
                                   a->grad + s_ranges[r].offset);
        for (int r = 0; r < 3 && !a->rc; r++)
            a->rc = ps_client_pull(c, t, r, s_ranges[r].offset, s_ranges[r].count, a->arena);
    }
    ps_client_destroy(&c);
    comm_mux_destroy(&mux);
    return NULL;
}

static void run_ps(int n_shards, size_t block_floats, int staleness)
{
    ps_layout_t l;
    REQUIRE(ps_layout_build(&l, s_ranges, 3, block_floats, n_shards) == 0);
    float *init = malloc(TOTAL * sizeof(float));
    for (size_t i = 0; i < TOTAL; i++) init[i] = (float)(i % 100);
    ps_server_t *srv[NW] = {0};
    const char *eps[NW];
    push_log_t plog[NW];
    for (int s = 0; s < n_shards; s++) {
        plog[s] = (push_log_t){.shard = s, .l = &l};
        ps_server_config_t cfg = {.shard = s, .n_workers = NW, .world = NW,
                                  .bind = "tcp://127.0.0.1:*", .layout = &l, .init = init,
                                  .staleness = staleness, .update = add_update,
                                  .on_push = on_push, .on_push_arg = &plog[s],
                                  .slice_bytes = s_slice_bytes};
        srv[s] = ps_server_new(&cfg);
        REQUIRE(srv[s]);
        eps[s] = ps_server_endpoint(srv[s]);
    }
    w_arg_t a[NW];
    pthread_t th[NW];
    for (int r = 0; r < NW; r++) {
        a[r] = (w_arg_t){.rank = r, .l = &l, .eps = eps, .arena = calloc(TOTAL, sizeof(float)),
                         .grad = malloc(TOTAL * sizeof(float))};
        pthread_create(&th[r], NULL, worker, &a[r]);
    }
    for (int r = 0; r < NW; r++) pthread_join(th[r], NULL);
    float *final = calloc(TOTAL, sizeof(float));
    for (int s = 0; s < n_shards; s++) ps_server_copy_values(srv[s], final);
    long bad = 0;
    for (size_t i = 0; i < TOTAL; i++) {
        double want = init[i];
        for (int t = 0; t < ITERS; t++)
            for (int r = 0; r < NW; r++) want += grad_of(r, t, i);
        if (final[i] != (float)want && bad++ < 3)
            test_fail(__FILE__, __LINE__, "[%zu] %g != %g", i, final[i], want);
        /* under BSP every worker's replica holds the final values */
        for (int r = 0; r < NW && !staleness; r++)
            if (a[r].arena[i] != (float)want && bad++ < 3)
                test_fail(__FILE__, __LINE__, "worker %d [%zu] %g != %g", r, i, a[r].arena[i], want);
    }
    CHECK_EQ_I64(bad, 0);
    for (int r = 0; r < NW; r++) {
        CHECK_EQ_I64(a[r].rc, 0);
        free(a[r].arena);
        free(a[r].grad);
    }
    for (int s = 0; s < n_shards; s++) {
        CHECK_EQ_I64(ps_server_n_rejected(srv[s]), 0);
        ps_server_destroy(&srv[s]);
        /* on_push saw each worker's push of each of the shard's blocks, every iteration */
        int64_t mine = 0;
        for (int b = 0; b < l.n_blocks; b++) mine += l.blocks[b].shard == s;
        CHECK_EQ_I64(plog[s].n, mine * NW * ITERS);
        CHECK_EQ_I64(plog[s].bad, 0);
    }
    free(final);
    free(init);
    ps_layout_fini(&l);
}

TEST(ps_four_workers_exact_sum_bsp)
{
    run_ps(4, 16384, 0); /* 64 KB blocks: the 70000-float layer spans shards */
    run_ps(2, PS_BLOCK_BYTES_DEFAULT / 4, 0);
}

/* Send order layer: pushes and answers larger than the slice go in slices, put back
 * together exactly (the 70000-float layer's blocks are 4 and 1 slices of 64 KiB). */
TEST(ps_four_workers_exact_sum_sliced_by_layer)
{
    s_slice_bytes = 64 * 1024;
    run_ps(2, PS_BLOCK_BYTES_DEFAULT / 4, 0);
    run_ps(4, 16384, 0);
    run_ps(3, 4096 * 16, 1);
    s_slice_bytes = 0;
}

TEST(ps_four_workers_exact_sum_ssp)
{
    run_ps(3, 4096, 2);
}

/* One shard, two workers driven by hand: the fast worker may run s iterations ahead of the
 * slowest and no more. */
TEST(ps_ssp_staleness_bound)
{
    const int s = 2;
    ps_range_t r = {0, 4};
    ps_layout_t l;
    REQUIRE(ps_layout_build(&l, &r, 1, 4, 1) == 0);
    float init[4] = {0}, g[4] = {1, 1, 1, 1}, arena[4];
    ps_server_config_t cfg = {.shard = 0, .n_workers = 2, .world = 2, .bind = "tcp://127.0.0.1:*",
                              .layout = &l, .init = init, .staleness = s, .update = add_update};
    ps_server_t *srv = ps_server_new(&cfg);
    REQUIRE(srv);
    const char *eps[1] = {ps_server_endpoint(srv)};
    ps_client_t *fast = ps_client_new(0, 2, &l, eps, 400);
    ps_client_t *slow = ps_client_new(1, 2, &l, eps, 2000);
    /* fast worker: iterations 0..s-1 go through without the slow one */
    for (int t = 0; t < s; t++) {
        REQUIRE(ps_client_push(fast, t, 0, 0, 4, g) == 0);
        CHECK(ps_client_pull(fast, t, 0, 0, 4, arena) == 0, "iteration %d blocked", t);
    }
    /* iteration s needs iteration 0 applied: blocks (times out) */
    REQUIRE(ps_client_push(fast, s, 0, 0, 4, g) == 0);
    CHECK(ps_client_pull(fast, s, 0, 0, 4, arena) == -1, "staleness bound not enforced");
    /* a push beyond the bound is rejected by the server */
    uint64_t rej0 = ps_server_n_rejected(srv);
    REQUIRE(ps_client_push(fast, s + 1, 0, 0, 4, g) == 0);
    CHECK_EQ_I64(wait_rejected(srv, rej0 + 1) - rej0, 1);
    /* the slow worker catches up with iteration 0: the fast one may go on */
    REQUIRE(ps_client_push(slow, 0, 0, 0, 4, g) == 0);
    CHECK(ps_client_pull(slow, 0, 0, 0, 4, arena) == 0);
    CHECK(ps_client_pull(fast, s, 0, 0, 4, arena) == 0);
    /* a duplicate push of iteration 1 from the fast worker is rejected */
    REQUIRE(ps_client_push(fast, 1, 0, 0, 4, g) == 0);
    CHECK_EQ_I64(wait_rejected(srv, rej0 + 2) - rej0, 2);
    ps_client_destroy(&fast);
    ps_client_destroy(&slow);
    ps_server_destroy(&srv);
    ps_layout_fini(&l);
}

/* A forged push (not a block start, wrong length) is rejected; the shard keeps serving. */
TEST(ps_server_rejects_bad_pushes)
{
    ps_range_t r = {0, 8};
    ps_layout_t l;
    REQUIRE(ps_layout_build(&l, &r, 1, 8, 1) == 0);
    float init[8] = {0}, g[8] = {0}, arena[8];
    push_log_t plog = {.shard = 0, .l = &l};
    ps_server_config_t cfg = {.shard = 0, .n_workers = 1, .world = 2, .bind = "tcp://127.0.0.1:*",
                              .layout = &l, .init = init, .update = add_update,
                              .on_push = on_push, .on_push_arg = &plog};
    ps_server_t *srv = ps_server_new(&cfg);
    comm_t *c = comm_new("ps", 1, 2, NULL, 1000);
    comm_connect(c, 0, ps_server_endpoint(srv));
    comm_send(c, 0, (msg_header_t){.type = MSG_PS_PUSH, .offset = 3}, g, 4 * sizeof(float), NULL);
    comm_send(c, 0, (msg_header_t){.type = MSG_PS_PUSH, .offset = 0}, g, 4 * sizeof(float), NULL);
    comm_send(c, 0, (msg_header_t){.type = MSG_AR_REDUCE, .offset = 0}, g, 8 * sizeof(float), NULL);
    /* a push for an iteration before the current one */
    comm_send(c, 0, (msg_header_t){.type = MSG_PS_PUSH, .offset = 0, .iteration = -1}, g,
              8 * sizeof(float), NULL);
    const char *eps[1] = {ps_server_endpoint(srv)};
    ps_client_t *w = ps_client_new(0, 2, &l, eps, 2000);
    for (int i = 0; i < 8; i++) g[i] = (float)i;
    REQUIRE(ps_client_push(w, 0, 0, 0, 8, g) == 0);
    REQUIRE(ps_client_pull(w, 0, 0, 0, 8, arena) == 0);
    for (int i = 0; i < 8; i++) CHECK(arena[i] == (float)i);
    CHECK_EQ_I64(wait_rejected(srv, 4), 4);
    ps_client_destroy(&w);
    comm_destroy(&c);
    ps_server_destroy(&srv);
    CHECK_EQ_I64(plog.n, 1); /* the rejected pushes were never reported as arrivals */
    CHECK_EQ_I64(plog.bad, 0);
    ps_layout_fini(&l);
}

/* Two clients of one rank (two syncer threads): each gets its own answers. */
TEST(ps_two_clients_of_one_rank)
{
    ps_range_t r[2] = {{0, 4}, {4, 4}};
    ps_layout_t l;
    REQUIRE(ps_layout_build(&l, r, 2, 4, 1) == 0);
    float init[8] = {0}, g[8] = {1, 2, 3, 4, 5, 6, 7, 8}, a1[8] = {0}, a2[8] = {0};
    ps_server_config_t cfg = {.shard = 0, .n_workers = 1, .world = 1, .bind = "tcp://127.0.0.1:*",
                              .layout = &l, .init = init, .update = add_update};
    ps_server_t *srv = ps_server_new(&cfg);
    REQUIRE(srv);
    const char *eps[1] = {ps_server_endpoint(srv)};
    ps_client_t *c1 = ps_client_new(0, 1, &l, eps, 2000), *c2 = ps_client_new(0, 1, &l, eps, 2000);
    REQUIRE(ps_client_push(c1, 0, 1, 4, 4, g + 4) == 0);
    REQUIRE(ps_client_push(c2, 0, 0, 0, 4, g) == 0);
    REQUIRE(ps_client_pull(c1, 0, 1, 4, 4, a1) == 0);
    REQUIRE(ps_client_pull(c2, 0, 0, 0, 4, a2) == 0);
    for (int i = 0; i < 4; i++) {
        CHECK(a2[i] == g[i]);
        CHECK(a1[4 + i] == g[4 + i]);
    }
    CHECK_EQ_I64(ps_server_n_rejected(srv), 0);
    ps_client_destroy(&c1);
    ps_client_destroy(&c2);
    ps_server_destroy(&srv);
    ps_layout_fini(&l);
}

typedef struct {
    ps_client_t *c;
    int64_t t;
    float arena[4];
    ps_pull_times_t times[1];
    int rc;
} timed_pull_t;

static void *timed_pull(void *p)
{
    timed_pull_t *a = p;
    a->rc = ps_client_pull_from(a->c, a->t, 0, 0, 4, a->arena, a->times);
    return NULL;
}

/* A pull's times (the trace's PULL rows): once the shard has a trace zero its answers carry
 * when it sent them, so a pull asked long before the apply it waits for starts at that
 * apply, not at the request; it ends when the values arrived. Without a zero: no stamp. */
TEST(ps_pull_times_are_the_answer_and_the_arrival)
{
    ps_range_t r = {0, 4};
    ps_layout_t l;
    REQUIRE(ps_layout_build(&l, &r, 1, 4, 1) == 0);
    float init[4] = {0}, g[4] = {1, 1, 1, 1}, arena[4];
    ps_server_config_t cfg = {.shard = 0, .n_workers = 2, .world = 2, .bind = "tcp://127.0.0.1:*",
                              .layout = &l, .init = init, .update = add_update};
    ps_server_t *srv = ps_server_new(&cfg);
    REQUIRE(srv);
    const char *eps[1] = {ps_server_endpoint(srv)};
    ps_client_t *fast = ps_client_new(0, 2, &l, eps, 5000), *slow = ps_client_new(1, 2, &l, eps, 5000);
    ps_pull_times_t times[1];
    REQUIRE(ps_client_push(fast, 0, 0, 0, 4, g) == 0 && ps_client_push(slow, 0, 0, 0, 4, g) == 0);
    REQUIRE(ps_client_pull_from(fast, 0, 0, 0, 4, arena, times) == 0);
    CHECK_EQ_I64(times[0].bytes, 16);
    CHECK_EQ_I64(times[0].first_stamp_ns, 0);
    CHECK(times[0].last_recv_ns > 0);
    REQUIRE(ps_client_pull(slow, 0, 0, 0, 4, arena) == 0);

    int64_t zero = clock_now_ns();
    ps_server_set_trace_zero(srv, zero);
    timed_pull_t a = {.c = fast, .t = 1};
    REQUIRE(ps_client_push(fast, 1, 0, 0, 4, g) == 0);
    pthread_t th;
    REQUIRE(pthread_create(&th, NULL, timed_pull, &a) == 0);
    usleep(50000); /* the fast worker's pull waits at the shard */
    int64_t last_push_ns = clock_now_ns();
    REQUIRE(ps_client_push(slow, 1, 0, 0, 4, g) == 0);
    pthread_join(th, NULL);
    REQUIRE(a.rc == 0);
    int64_t answered_ns = zero + a.times[0].first_stamp_ns;
    CHECK(a.times[0].first_stamp_ns > 0, "no stamp");
    CHECK(answered_ns >= last_push_ns, "answered %.3f ms before the push it waited for",
          (last_push_ns - answered_ns) * 1e-6);
    CHECK(answered_ns <= a.times[0].last_recv_ns, "answered %.3f ms after the values arrived",
          (answered_ns - a.times[0].last_recv_ns) * 1e-6);
    CHECK(a.arena[0] == 4.0f, "values %g after two iterations of two pushes of 1", a.arena[0]);
    ps_client_destroy(&fast);
    ps_client_destroy(&slow);
    ps_server_destroy(&srv);
    ps_layout_fini(&l);
}
