/* Send order across comms (comm_set_order, a shared sendq; send_order = layer): SFB's and
 * the ring's units each have a comm of their own, so a rank's messages to one peer travel on
 * several connections; the shared queue orders them by layer all the same. A message of a
 * lower layer queued later overtakes a long one of a higher layer queued earlier (and with
 * equal priorities it does not: the check can fail), the receiving comm puts the slices back
 * together and refuses a bad one, and SFB and the ring give bit for bit the sums they give
 * in arrival order. The PS mux's pushes share that order too (comm_mux_set_order). */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/sync/allreduce.h"
#include "runtime/sync/sfb.h"
#include "runtime/transport/clock.h"
#include "runtime/transport/comm_mux.h"
#include "runtime/transport/sendq.h"
#include "runtime/transport/slice.h"
#include "test.h"

/* An endpoint nobody has bound yet, for a comm to bind later: a local socket of its own
 * (a TCP port found free by binding it would still be served for a moment by the socket
 * that found it, which ZeroMQ closes in the background). */
static void free_endpoint(char *ep, size_t cap, int i)
{
    static int n;
    snprintf(ep, cap, "ipc://%s/so-%d-%d", test_tmpdir(), n++, i);
}

/* A thread of rank 1 that queues its message, says so, and waits for it to leave. */
typedef struct {
    sendq_t *q;
    comm_t *c;
    sendq_msg_t m;
    atomic_int queued;
    int rc;
} sender_t;

static void *send_thread(void *p)
{
    sender_t *s = p;
    sendq_ticket_t t = {0, 0};
    sendq_post(s->q, s->c, &s->m, 1, &t);
    atomic_store(&s->queued, 1);
    s->rc = sendq_wait(s->q, s->c, &t);
    return NULL;
}

typedef struct {
    comm_t *c;
    comm_msg_t g;
    int rc;
} receiver_t;

static void *recv_thread(void *p)
{
    receiver_t *r = p;
    r->rc = comm_recv(r->c, NULL, &r->g, 10000);
    return NULL;
}

/* Rank 0's two comms, named names[i] and bound on ep[i], each received on by a thread of
 * its own; they put slices back together through rq. */
static void receivers_start(receiver_t r[2], pthread_t tr[2], const char *const names[2],
                            char ep[2][256], sendq_t *rq)
{
    for (int i = 0; i < 2; i++) {
        r[i] = (receiver_t){.c = comm_new(names[i], 0, 2, ep[i], 5000), .rc = -1};
        REQUIRE(r[i].c, "could not bind %s again", ep[i]);
        comm_set_order(r[i].c, rq);
        pthread_create(&tr[i], NULL, recv_thread, &r[i]);
    }
}

/* A thread of rank 1 queues a 1 MB message of type with priority prio_low on one comm, and
 * then the main thread a 4 MB one with priority prio_high on another, both to rank 0, whose
 * two comms bind only once both are queued (so the first one's window cannot move before
 * the second is in). Returns whether the later message completed first; both arrive
 * whole. */
static bool later_first(int type, int prio_low, int prio_high)
{
    char ep[2][256];
    free_endpoint(ep[0], sizeof ep[0], 0);
    free_endpoint(ep[1], sizeof ep[1], 1);
    sendq_t *q = sendq_new_shared(64 * 1024, 5000);
    comm_t *tx[2];
    for (int i = 0; i < 2; i++) {
        tx[i] = comm_new(i ? "u1" : "u0", 1, 2, NULL, 5000);
        REQUIRE(tx[i] && comm_connect(tx[i], 0, ep[i]) == 0);
        comm_set_order(tx[i], q);
    }
    size_t n_low = (1u << 20) / sizeof(float), n_high = (4u << 20) / sizeof(float);
    float *low = malloc(n_low * sizeof *low), *high = malloc(n_high * sizeof *high);
    for (size_t i = 0; i < n_low; i++) low[i] = (float)i;
    for (size_t i = 0; i < n_high; i++) high[i] = -(float)i;
    sender_t s = {q, tx[0], {.peer = 0, .hdr = {.type = (uint16_t)type, .layer = prio_low,
                                                 .offset = 7},
                             .data = low, .bytes = n_low * sizeof *low, .priority = prio_low},
                  0, -1};
    pthread_t ts, tr[2];
    pthread_create(&ts, NULL, send_thread, &s);
    while (!atomic_load(&s.queued)) clock_sleep_until_ns(clock_now_ns() + 1000000);
    sendq_ticket_t t_high = {0, 0};
    sendq_post(q, tx[1],
               &(sendq_msg_t){.peer = 0, .hdr = {.type = (uint16_t)type, .layer = prio_high,
                                                 .offset = 9},
                              .data = high, .bytes = n_high * sizeof *high,
                              .priority = prio_high},
               1, &t_high);
    receiver_t r[2];
    sendq_t *rq = sendq_new_shared(64 * 1024, 5000); /* rank 0's: its comms take slices */
    receivers_start(r, tr, (const char *const[]){"u0", "u1"}, ep, rq);
    CHECK_EQ_I64(sendq_wait(q, tx[1], &t_high), 0);
    pthread_join(ts, NULL);
    CHECK_EQ_I64(s.rc, 0);
    for (int i = 0; i < 2; i++) {
        pthread_join(tr[i], NULL);
        REQUIRE(r[i].rc == 1, "rank 0 got nothing on comm %d", i);
        CHECK(r[i].g.hdr.type == type && r[i].g.peer == 1 && r[i].g.hdr.offset == (i ? 9u : 7u),
              "comm %d: type %d from %d offset %llu", i, r[i].g.hdr.type, r[i].g.peer,
              (unsigned long long)r[i].g.hdr.offset);
    }
    CHECK(comm_msg_bytes(&r[0].g) == n_low * sizeof *low &&
          !memcmp(comm_msg_data(&r[0].g), low, n_low * sizeof *low), "low payload");
    CHECK(comm_msg_bytes(&r[1].g) == n_high * sizeof *high &&
          !memcmp(comm_msg_data(&r[1].g), high, n_high * sizeof *high), "high payload");
    bool first = r[1].g.recv_ns < r[0].g.recv_ns;
    for (int i = 0; i < 2; i++) {
        comm_msg_close(&r[i].g);
        comm_destroy(&r[i].c);
        comm_destroy(&tx[i]);
    }
    sendq_destroy(&q);
    sendq_destroy(&rq);
    free(low);
    free(high);
    return first;
}

TEST(comm_order_sfb_lower_layer_overtakes_on_another_comm)
{
    CHECK(later_first(MSG_SFB_U, 5, 1), "layer 1's factor waited for layer 5's");
    /* the order off (equal priorities: queue order): the earlier message goes first */
    CHECK(!later_first(MSG_SFB_U, 3, 3), "queue order did not hold");
}

TEST(comm_order_ring_lower_layer_overtakes_on_another_comm)
{
    CHECK(later_first(MSG_AR_REDUCE, 5, 1), "layer 1's chunk waited for layer 5's");
    CHECK(!later_first(MSG_AR_REDUCE, 3, 3), "queue order did not hold");
}

/* Rank 1's PS mux queues a 4 MB push of layer push_layer to rank 0's shard, then rank 1's
 * main thread a 1 MB SFB factor of layer sfb_layer on a comm of its own, both through one
 * shared queue; rank 0's two comms bind only once both are queued (so the push's window
 * cannot move before the factor is in). Returns whether the factor completed first; both
 * arrive whole. */
static bool factor_before_push(int push_layer, int sfb_layer)
{
    char ep[2][256];
    free_endpoint(ep[0], sizeof ep[0], 0);
    free_endpoint(ep[1], sizeof ep[1], 1);
    sendq_t *q = sendq_new_shared(64 * 1024, 5000);
    const char *eps[2] = {ep[0], NULL};
    comm_mux_t *mux = comm_mux_new("mx", 1, 2, eps, 5000);
    REQUIRE(mux);
    comm_mux_set_order(mux, q);
    comm_mux_port_t *port = comm_mux_port_new(mux);
    size_t n_push = (4u << 20) / sizeof(float), n_sfb = (1u << 20) / sizeof(float);
    float *push = malloc(n_push * sizeof *push), *sfb = malloc(n_sfb * sizeof *sfb);
    for (size_t i = 0; i < n_push; i++) push[i] = -(float)i;
    for (size_t i = 0; i < n_sfb; i++) sfb[i] = (float)i;
    REQUIRE(comm_mux_send(port, 0, (msg_header_t){.type = MSG_PS_PUSH, .layer = push_layer,
                                                  .offset = 7},
                          push, n_push * sizeof *push, NULL) == 0);
    while (sendq_n_queued(q) < 1) clock_sleep_until_ns(clock_now_ns() + 1000000);
    comm_t *tx = comm_new("u0", 1, 2, NULL, 5000);
    REQUIRE(tx && comm_connect(tx, 0, ep[1]) == 0);
    comm_set_order(tx, q);
    sendq_ticket_t t = {0, 0};
    sendq_post(q, tx,
               &(sendq_msg_t){.peer = 0, .hdr = {.type = MSG_SFB_U, .layer = sfb_layer,
                                                 .offset = 9},
                              .data = sfb, .bytes = n_sfb * sizeof *sfb, .priority = sfb_layer},
               1, &t);
    receiver_t r[2];
    pthread_t tr[2];
    sendq_t *rq = sendq_new_shared(64 * 1024, 5000); /* rank 0's: its comms take slices */
    receivers_start(r, tr, (const char *const[]){"mx", "u0"}, ep, rq);
    CHECK_EQ_I64(sendq_wait(q, tx, &t), 0);
    for (int i = 0; i < 2; i++) {
        pthread_join(tr[i], NULL);
        REQUIRE(r[i].rc == 1, "rank 0 got nothing on comm %d", i);
    }
    CHECK(r[0].g.hdr.type == MSG_PS_PUSH && r[0].g.peer == 1 && r[0].g.hdr.offset == 7 &&
              comm_msg_bytes(&r[0].g) == n_push * sizeof *push &&
              !memcmp(comm_msg_data(&r[0].g), push, n_push * sizeof *push),
          "push: type %d from %d offset %llu", r[0].g.hdr.type, r[0].g.peer,
          (unsigned long long)r[0].g.hdr.offset);
    CHECK(r[1].g.hdr.type == MSG_SFB_U && r[1].g.peer == 1 && r[1].g.hdr.offset == 9 &&
              comm_msg_bytes(&r[1].g) == n_sfb * sizeof *sfb &&
              !memcmp(comm_msg_data(&r[1].g), sfb, n_sfb * sizeof *sfb),
          "factor: type %d from %d offset %llu", r[1].g.hdr.type, r[1].g.peer,
          (unsigned long long)r[1].g.hdr.offset);
    bool first = r[1].g.recv_ns < r[0].g.recv_ns;
    comm_mux_port_destroy(&port);
    comm_mux_destroy(&mux);
    for (int i = 0; i < 2; i++) {
        comm_msg_close(&r[i].g);
        comm_destroy(&r[i].c);
    }
    comm_destroy(&tx);
    sendq_destroy(&q);
    sendq_destroy(&rq);
    free(push);
    free(sfb);
    return first;
}

TEST(comm_order_sfb_overtakes_a_ps_push_to_the_same_peer)
{
    CHECK(factor_before_push(5, 1), "layer 1's factor waited for layer 5's push");
    /* the order off (equal layers: queue order): the earlier push goes first */
    CHECK(!factor_before_push(3, 3), "queue order did not hold");
}

/* Sends rank 0 a slice of layer 4 as a peer would: slice header si (its crc flipped when
 * bad_crc) and a piece of 48 bytes. */
static void send_slice(comm_t *tx, slice_info_t si, bool bad_crc)
{
    unsigned char buf[SLICE_HEADER_BYTES + 48];
    memset(buf, 0x5a, sizeof buf);
    slice_encode(&si, buf);
    if (bad_crc) buf[SLICE_HEADER_BYTES - 1] ^= 0xff;
    REQUIRE(comm_send(tx, 0, (msg_header_t){.type = MSG_SLICE, .layer = 4}, buf, sizeof buf,
                      NULL) == 0);
}

/* Through a comm that takes slices: a slice that continues nothing, one with a bad crc and
 * one beyond its message are refused (counted as bad, logged naming the rank), and the good
 * sliced message after them comes through whole. */
TEST(comm_order_refuses_a_bad_slice_and_keeps_going)
{
    comm_t *rx = comm_new("so", 0, 2, "tcp://127.0.0.1:*", 2000);
    comm_t *tx = comm_new("so", 1, 2, NULL, 2000);
    REQUIRE(rx && tx && comm_connect(tx, 0, comm_endpoint(rx)) == 0);
    sendq_t *q = sendq_new_shared(64 * 1024, 2000);
    comm_set_order(rx, q);
    send_slice(tx, (slice_info_t){MSG_SFB_U, 7, 96, 48}, false);
    send_slice(tx, (slice_info_t){MSG_SFB_U, 7, 96, 0}, true);
    send_slice(tx, (slice_info_t){MSG_SFB_U, 9, 40, 0}, false);
    for (uint64_t at = 0; at < 144; at += 48)
        send_slice(tx, (slice_info_t){MSG_SFB_V, 8, 144, at}, false);
    comm_msg_t g;
    REQUIRE(comm_recv(rx, NULL, &g, 5000) == 1);
    CHECK(g.hdr.type == MSG_SFB_V && g.hdr.layer == 4 && comm_msg_bytes(&g) == 144 &&
              g.peer == 1, "type %d, %zu bytes", g.hdr.type, comm_msg_bytes(&g));
    comm_msg_close(&g);
    CHECK_EQ_I64(comm_recv(rx, NULL, &g, 200), 0);
    CHECK_EQ_I64(comm_n_bad(rx), 3);
    sendq_destroy(&q);
    comm_destroy(&tx);
    comm_destroy(&rx);
}

/* ---------------------------------------------------------------- exact sums */

enum { W = 3, M = 300, N = 200, K = 64 };

typedef struct {
    comm_t *c;
    float *u, *v, *grad; /* (M, N) */
    float *buf;          /* the ring's */
    size_t count;
    precision_t wire;
    int rc;
} rank_arg_t;

static void rebuild(void *arg, int rank, const float *u, const float *v, size_t k, size_t m,
                    size_t n)
{
    (void)rank;
    rank_arg_t *a = arg;
    for (size_t i = 0; i < m; i++)
        for (size_t j = 0; j < n; j++)
            for (size_t b = 0; b < k; b++) a->grad[i * n + j] += u[b * m + i] * v[b * n + j];
}

static void *sfb_rank(void *p)
{
    rank_arg_t *a = p;
    a->rc = sfb_exchange_at(a->c, a->wire, 1, 2, a->u, a->v, K, M, N, rebuild, a, NULL, 10000);
    return NULL;
}

static void *ring_rank(void *p)
{
    rank_arg_t *a = p;
    a->rc = allreduce_sum_at(a->c, a->wire, 1, 2, a->buf, a->count, 50000, 10000);
    return NULL;
}

/* W ranks as threads, every comm connected to every other, under a shared queue per rank
 * (ordered) or none; runs fn on each. Random-ish non-integer values: the sums round, so
 * equal results mean the same terms in the same order. */
static void run_ranks(bool ordered, void *(*fn)(void *), rank_arg_t a[W])
{
    comm_t *c[W];
    sendq_t *q[W] = {0};
    for (int r = 0; r < W; r++) c[r] = comm_new("so", r, W, "tcp://127.0.0.1:*", 10000);
    for (int r = 0; r < W; r++) {
        for (int p = 0; p < W; p++)
            if (p != r) REQUIRE(comm_connect(c[r], p, comm_endpoint(c[p])) == 0);
        if (ordered) q[r] = sendq_new_shared(64 * 1024, 10000);
        comm_set_order(c[r], q[r]);
    }
    pthread_t th[W];
    for (int r = 0; r < W; r++) {
        a[r].c = c[r];
        pthread_create(&th[r], NULL, fn, &a[r]);
    }
    for (int r = 0; r < W; r++) {
        pthread_join(th[r], NULL);
        CHECK_EQ_I64(a[r].rc, 0);
        comm_destroy(&c[r]);
        sendq_destroy(&q[r]);
    }
}

static float value(size_t i, int r, int salt)
{
    return (float)(((i * 2654435761u + (size_t)r * 97 + (size_t)salt) % 10007) / 9973.0 - 0.5);
}

/* At wire precision wire (the ordered sends then queue encoded copies). */
static void sums_bit_identical(precision_t wire)
{
    rank_arg_t a[2][W];
    for (int o = 0; o < 2; o++)
        for (int r = 0; r < W; r++) {
            a[o][r] = (rank_arg_t){.u = malloc(K * M * sizeof(float)),
                                   .v = malloc(K * N * sizeof(float)),
                                   .grad = calloc(M * N, sizeof(float)), .wire = wire};
            for (size_t i = 0; i < K * M; i++) a[o][r].u[i] = value(i, r, 1);
            for (size_t i = 0; i < K * N; i++) a[o][r].v[i] = value(i, r, 2);
        }
    run_ranks(false, sfb_rank, a[0]);
    run_ranks(true, sfb_rank, a[1]);
    CHECK(a[0][0].grad[0] != 0 && a[0][0].grad[M * N - 1] != 0, "no sum");
    for (int r = 0; r < W; r++)
        CHECK(!memcmp(a[1][r].grad, a[0][0].grad, M * N * sizeof(float)),
              "wire %d: rank %d's SFB sum under layer differs from arrival's", wire, r);
    for (int o = 0; o < 2; o++)
        for (int r = 0; r < W; r++) free(a[o][r].u), free(a[o][r].v), free(a[o][r].grad);
    /* the ring: several chunks per segment, each of several slices */
    size_t count = 1000003;
    for (int o = 0; o < 2; o++)
        for (int r = 0; r < W; r++) {
            a[o][r] = (rank_arg_t){.buf = malloc(count * sizeof(float)), .count = count,
                                   .wire = wire};
            for (size_t i = 0; i < count; i++) a[o][r].buf[i] = value(i, r, 3);
        }
    run_ranks(false, ring_rank, a[0]);
    run_ranks(true, ring_rank, a[1]);
    for (int r = 0; r < W; r++)
        CHECK(!memcmp(a[1][r].buf, a[0][0].buf, count * sizeof(float)),
              "wire %d: rank %d's ring sum under layer differs from arrival's", wire, r);
    for (int o = 0; o < 2; o++)
        for (int r = 0; r < W; r++) free(a[o][r].buf);
}

TEST(comm_order_sfb_and_ring_sums_bit_identical_to_arrival)
{
    sums_bit_identical(PRECISION_FP32);
    sums_bit_identical(PRECISION_BF16);
}
