/* allreduce: the ring gives the exact sum on 2..5 ranks (threads on loopback), with chunks
 * smaller than segments and with a buffer shorter than the ring; a missing peer times out. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/sync/allreduce.h"
#include "test.h"
#include "runtime/transport/clock.h"

typedef struct {
    comm_t *c;
    float *buf;
    size_t count, chunk;
    int rc;
} ar_arg_t;

static void *ar_thread(void *p)
{
    ar_arg_t *a = p;
    a->rc = 0;
    for (int it = 0; it < 2 && !a->rc; it++) /* twice: the second reuses the comm */
        a->rc = allreduce_sum(a->c, it, 3, a->buf + it * a->count, a->count, a->chunk, 5000);
    return NULL;
}

/* One all-reduce that gives up after 2 s. */
static void *ar_one_thread(void *p)
{
    ar_arg_t *a = p;
    a->rc = allreduce_sum(a->c, 0, 3, a->buf, a->count, a->chunk, 2000);
    return NULL;
}

/* Integer-valued floats: every partial sum is exact, so the check is equality. */
static void ring(int w, size_t count, size_t chunk)
{
    comm_t *c[8];
    ar_arg_t a[8];
    pthread_t th[8];
    for (int r = 0; r < w; r++) c[r] = comm_new("ar", r, w, "tcp://127.0.0.1:*", 5000);
    for (int r = 0; r < w; r++) {
        int right = (r + 1) % w;
        REQUIRE(comm_connect(c[r], right, comm_endpoint(c[right])) == 0);
    }
    for (int r = 0; r < w; r++) {
        a[r] = (ar_arg_t){.c = c[r], .buf = malloc(2 * count * sizeof(float) + 4), .count = count,
                          .chunk = chunk};
        for (size_t i = 0; i < 2 * count; i++) a[r].buf[i] = (float)((r + 1) * 1000 + (i % 977));
        pthread_create(&th[r], NULL, ar_thread, &a[r]);
    }
    for (int r = 0; r < w; r++) pthread_join(th[r], NULL);
    long bad = 0;
    for (int r = 0; r < w; r++) {
        CHECK_EQ_I64(a[r].rc, 0);
        for (size_t i = 0; i < 2 * count; i++) {
            double want = 0;
            for (int q = 0; q < w; q++) want += (q + 1) * 1000 + (double)(i % 977);
            if (a[r].buf[i] != (float)want && bad++ < 3)
                test_fail(__FILE__, __LINE__, "w=%d rank %d [%zu]: %g != %g", w, r, i,
                          a[r].buf[i], want);
        }
        free(a[r].buf);
        comm_destroy(&c[r]);
    }
    CHECK_EQ_I64(bad, 0);
}

TEST(allreduce_ring_2_to_5)
{
    for (int w = 2; w <= 5; w++) {
        ring(w, 100003, 4096); /* many chunks per segment, uneven segments */
        ring(w, 3, 4096);      /* fewer floats than ranks: empty segments */
    }
}

TEST(allreduce_ring_zero_buffer_small_chunks)
{
    /* zeros stay zeros through chunks of 3 floats over segments of 5 */
    comm_t *c[2];
    for (int r = 0; r < 2; r++) c[r] = comm_new("ar", r, 2, "tcp://127.0.0.1:*", 5000);
    for (int r = 0; r < 2; r++) comm_connect(c[r], 1 - r, comm_endpoint(c[1 - r]));
    ar_arg_t a[2];
    pthread_t th[2];
    for (int r = 0; r < 2; r++) {
        a[r] = (ar_arg_t){.c = c[r], .buf = calloc(20, sizeof(float)), .count = 10, .chunk = 3};
        pthread_create(&th[r], NULL, ar_thread, &a[r]);
    }
    for (int r = 0; r < 2; r++) pthread_join(th[r], NULL);
    CHECK(a[0].buf[0] == 0.0f && a[1].buf[5] == 0.0f);
    for (int r = 0; r < 2; r++) {
        free(a[r].buf);
        comm_destroy(&c[r]);
    }
}

TEST(allreduce_missing_peer_times_out)
{
    comm_t *c0 = comm_new("ar", 0, 2, "tcp://127.0.0.1:*", 1000);
    comm_t *c1 = comm_new("ar", 1, 2, "tcp://127.0.0.1:*", 1000);
    comm_connect(c0, 1, comm_endpoint(c1));
    float buf[8] = {0};
    int64_t t0 = clock_now_ns();
    CHECK(allreduce_sum(c0, 0, 0, buf, 8, 4, 300) == -1);
    CHECK(clock_now_ns() - t0 < 3000000000LL);
    comm_destroy(&c0);
    comm_destroy(&c1);
}

/* The ring is pipelined: rank 2 passes on the first chunk of a segment before the rest of it
 * has come. Rank 1 (played here) sends only that chunk of its step; the chunk's full sum must
 * come back around from rank 0 as the all-gather's first step. A ring that waits for whole
 * segments sends nothing on, and the wait here times out. */
TEST(allreduce_forwards_a_chunk_before_its_segment_is_in)
{
    enum { W = 3, PIECE = 4096, SEG = ALLREDUCE_PIPELINE_DEPTH * PIECE, COUNT = W * SEG };
    const size_t chunk = (size_t)PIECE * ALLREDUCE_PIPELINE_MIN_DIV;
    comm_t *c[W];
    for (int r = 0; r < W; r++) c[r] = comm_new("ar", r, W, "tcp://127.0.0.1:*", 5000);
    for (int r = 0; r < W; r++) {
        int right = (r + 1) % W;
        REQUIRE(comm_connect(c[r], right, comm_endpoint(c[right])) == 0);
    }
    static float bufs[W][COUNT];
    ar_arg_t a[W];
    pthread_t th[W];
    for (int r = 0; r < W; r += 2) { /* ranks 0 and 2; they time out once rank 1 stops */
        for (int i = 0; i < COUNT; i++) bufs[r][i] = (float)(r + 1);
        a[r] = (ar_arg_t){.c = c[r], .buf = bufs[r], .count = COUNT, .chunk = chunk, .rc = 0};
        pthread_create(&th[r], NULL, ar_one_thread, &a[r]);
    }
    for (int i = 0; i < PIECE; i++) bufs[1][i] = 2.0f;
    /* rank 1's reduce-scatter step 0 sends its own segment, 1: only its first chunk */
    msg_header_t h = {.type = MSG_AR_REDUCE, .layer = 3, .shard = 0, .iteration = 0,
                      .offset = SEG};
    REQUIRE(comm_send(c[1], 2, h, bufs[1], PIECE * sizeof(float), NULL) == 0);
    comm_match_t m = COMM_MATCH_ANY;
    m.type = MSG_AR_GATHER;
    m.peer = 0;
    comm_msg_t g;
    int got = comm_recv(c[1], &m, &g, 1500);
    CHECK(got == 1, "the chunk did not come around before its segment was complete");
    if (got == 1) {
        CHECK_EQ_I64((int64_t)g.hdr.offset, SEG);
        CHECK_EQ_I64((int64_t)comm_msg_bytes(&g), PIECE * (int64_t)sizeof(float));
        const float *v = comm_msg_data(&g);
        CHECK(v[0] == 6.0f && v[PIECE - 1] == 6.0f, "sum %g, %g, not 1 + 2 + 3", v[0],
              v[PIECE - 1]);
        comm_msg_close(&g);
    }
    for (int r = 0; r < W; r += 2) pthread_join(th[r], NULL);
    for (int r = 0; r < W; r++) comm_destroy(&c[r]);
}
