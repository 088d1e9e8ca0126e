/* wire: the synchronisers at a half wire precision (runtime/sync/wire.h), threads on
 * loopback. The ring's replicas end bit-identical and equal to the ring's own order of fp32
 * sums of rounded partial sums; a PS shard sums the decoded pieces in fp32, keeps fp32
 * values and answers pulls with them rounded; SFB hands every rank the same rounded factors,
 * its own included; every exchange sends exactly half the payload bytes of fp32. */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "core/half.h"
#include "runtime/sync/allreduce.h"
#include "runtime/sync/ps.h"
#include "runtime/sync/sfb.h"
#include "runtime/sync/wire.h"
#include "test.h"

static float bf16(float x) { return half_bf16_to_f32(half_bf16_from_f32(x)); }
static float fp16(float x) { return half_fp16_to_f32(half_fp16_from_f32(x)); }
static float rounded(precision_t p, float x) { return p == PRECISION_BF16 ? bf16(x) : fp16(x); }

/* A value with all of fp32's mantissa in use, so rounding to bf16 changes it. */
static float val(int r, size_t i) { return (float)sin(0.37 * (double)i + 1.3 * r) * 3.1f; }

/* Joins the n rank threads and closes their comms. Returns the payload bytes they sent. */
static uint64_t ranks_end(int n, pthread_t *th, comm_t **c)
{
    uint64_t sent = 0;
    for (int r = 0; r < n; r++) {
        pthread_join(th[r], NULL);
        sent += comm_bytes_sent(c[r]);
        comm_destroy(&c[r]);
    }
    return sent;
}

/* ------------------------------------------------------------------------ ring */

enum { RW = 3 };

typedef struct {
    comm_t *c;
    precision_t wire;
    float *buf;
    size_t count;
    int rc;
} ring_arg_t;

static void *ring_thread(void *p)
{
    ring_arg_t *a = p;
    a->rc = allreduce_sum_at(a->c, a->wire, 0, 1, a->buf, a->count, 1000, 5000);
    return NULL;
}

/* Runs the ring over RW ranks at wire; bufs[r] in and out. Returns the payload bytes sent. */
static uint64_t ring_run(precision_t wire, float **bufs, size_t count)
{
    comm_t *c[RW];
    ring_arg_t a[RW];
    pthread_t th[RW];
    for (int r = 0; r < RW; r++) c[r] = comm_new("arw", r, RW, "tcp://127.0.0.1:*", 5000);
    for (int r = 0; r < RW; r++) {
        int right = (r + 1) % RW;
        REQUIRE(comm_connect(c[r], right, comm_endpoint(c[right])) == 0);
    }
    for (int r = 0; r < RW; r++) {
        a[r] = (ring_arg_t){.c = c[r], .wire = wire, .buf = bufs[r], .count = count};
        pthread_create(&th[r], NULL, ring_thread, &a[r]);
    }
    uint64_t sent = ranks_end(RW, th, c);
    for (int r = 0; r < RW; r++) CHECK_EQ_I64(a[r].rc, 0);
    return sent;
}

/* The ring at a half wire p against its own order of fp32 sums of rounded values, and
 * against fp32's bytes. */
static void ring_case(precision_t p)
{
    const size_t count = 10007; /* uneven segments, several chunks each */
    float *b16[RW], *b32[RW];
    for (int r = 0; r < RW; r++) {
        b16[r] = malloc(count * sizeof(float));
        b32[r] = malloc(count * sizeof(float));
        for (size_t i = 0; i < count; i++) b16[r][i] = b32[r][i] = val(r, i);
    }
    uint64_t sent16 = ring_run(p, b16, count);
    uint64_t sent32 = ring_run(PRECISION_FP32, b32, count);
    CHECK_EQ_I64(2 * sent16, sent32);
    /* the ring's order: segment s starts at rank s and gathers ranks s + 1, s + 2, ...; each
     * step adds its own fp32 value to the rounded partial sum; the owner rounds the total */
    long bad = 0, moved = 0;
    for (int s = 0; s < RW; s++)
        for (size_t i = count * s / RW; i < count * (s + 1) / RW; i++) {
            float v = val(s, i);
            for (int j = 1; j < RW; j++) v = val((s + j) % RW, i) + rounded(p, v);
            float want = rounded(p, v);
            moved += want != b32[0][i]; /* the comparison can fail: fp32's sum differs */
            for (int r = 0; r < RW; r++)
                if (memcmp(&b16[r][i], &want, 4) && bad++ < 3)
                    test_fail(__FILE__, __LINE__, "rank %d [%zu]: %.9g != %.9g", r, i,
                              b16[r][i], want);
        }
    CHECK_EQ_I64(bad, 0);
    CHECK(moved > (long)count / 2, "only %ld of %zu values differ from the fp32 ring's", moved,
          count);
    for (int r = 0; r < RW; r++) {
        free(b16[r]);
        free(b32[r]);
    }
}

TEST(wire_ring_replicas_identical_at_bf16) { ring_case(PRECISION_BF16); }
TEST(wire_ring_replicas_identical_at_fp16) { ring_case(PRECISION_FP16); }

/* -------------------------------------------------------------------------- PS */

enum { PW = 2, PN = 1000 };

static float s_sum[PN]; /* the shard's grad_sum of iteration 0 */

static void keep_sum(void *arg, float *p, const float *g, size_t n, uint64_t off, int64_t t)
{
    (void)arg, (void)t;
    for (size_t i = 0; i < n; i++) {
        s_sum[off + i] = g[i];
        p[i] += g[i];
    }
}

typedef struct {
    int rank;
    const ps_layout_t *l;
    const char *const *eps;
    precision_t wire;
    float grad[PN], arena[PN];
    int rc;
} pw_arg_t;

static void *ps_worker(void *p)
{
    pw_arg_t *a = p;
    ps_client_t *c = ps_client_new(a->rank, PW, a->l, a->eps, 5000);
    a->rc = c ? 0 : -1;
    if (c) ps_client_set_wire(c, a->wire);
    if (!a->rc) a->rc = ps_client_push(c, 0, 0, 0, PN, a->grad);
    if (!a->rc) a->rc = ps_client_pull(c, 0, 0, 0, PN, a->arena);
    ps_client_destroy(&c);
    return NULL;
}

TEST(wire_ps_sums_decoded_pieces_in_fp32)
{
    ps_range_t range = {0, PN};
    ps_layout_t l;
    REQUIRE(ps_layout_build(&l, &range, 1, 300, 1) == 0); /* blocks of 300, 300, 300, 100 */
    float init[PN];
    for (size_t i = 0; i < PN; i++) init[i] = val(7, i);
    ps_server_config_t cfg = {.shard = 0, .n_workers = PW, .world = PW,
                              .bind = "tcp://127.0.0.1:*", .layout = &l, .init = init,
                              .update = keep_sum, .wire = PRECISION_BF16};
    ps_server_t *srv = ps_server_new(&cfg);
    REQUIRE(srv);
    const char *eps[PW] = {ps_server_endpoint(srv), NULL};
    static pw_arg_t a[PW];
    pthread_t th[PW];
    for (int r = 0; r < PW; r++) {
        a[r] = (pw_arg_t){.rank = r, .l = &l, .eps = eps, .wire = PRECISION_BF16};
        for (size_t i = 0; i < PN; i++) a[r].grad[i] = val(r, i) * 1e-3f;
        pthread_create(&th[r], NULL, ps_worker, &a[r]);
    }
    for (int r = 0; r < PW; r++) pthread_join(th[r], NULL);
    float master[PN];
    ps_server_copy_values(srv, master);
    long bad = 0, kept = 0;
    for (size_t i = 0; i < PN; i++) {
        float sum = 0.0f; /* the fp32 sum of the rounded pieces, in rank order */
        for (int r = 0; r < PW; r++) sum += bf16(a[r].grad[i]);
        float want = init[i] + sum, pulled = bf16(want);
        bad += memcmp(&s_sum[i], &sum, 4) != 0 || memcmp(&master[i], &want, 4) != 0;
        for (int r = 0; r < PW; r++) bad += memcmp(&a[r].arena[i], &pulled, 4) != 0;
        kept += master[i] != pulled; /* the shard keeps fp32, not what it sends */
    }
    CHECK_EQ_I64(bad, 0);
    CHECK(kept > PN / 2, "only %ld master values differ from their bf16", kept);
    for (int r = 0; r < PW; r++) CHECK_EQ_I64(a[r].rc, 0);
    CHECK_EQ_I64(ps_server_n_rejected(srv), 0);
    ps_server_destroy(&srv);
    ps_layout_fini(&l);
}

/* ------------------------------------------------------------------------- SFB */

enum { SW = 3, SK = 4, SM = 5, SN = 7 };

typedef struct {
    comm_t *c;
    precision_t wire;
    float u[SK * SM], v[SK * SN];
    float got_u[SW][SK * SM], got_v[SW][SK * SN];
    int rc;
} sfb_w_arg_t;

static void keep_factors(void *arg, int rank, const float *u, const float *v, size_t k,
                         size_t m, size_t n)
{
    sfb_w_arg_t *a = arg;
    memcpy(a->got_u[rank], u, k * m * 4);
    memcpy(a->got_v[rank], v, k * n * 4);
}

static void *sfb_w_thread(void *p)
{
    sfb_w_arg_t *a = p;
    a->rc = sfb_exchange_at(a->c, a->wire, 0, 2, a->u, a->v, SK, SM, SN, keep_factors, a, NULL,
                            5000);
    return NULL;
}

/* Runs SFB over SW ranks at wire; returns the payload bytes sent. */
static uint64_t sfb_run(precision_t wire, sfb_w_arg_t *a)
{
    comm_t *c[SW];
    pthread_t th[SW];
    for (int r = 0; r < SW; r++) c[r] = comm_new("sfbw", r, SW, "tcp://127.0.0.1:*", 5000);
    for (int r = 0; r < SW; r++)
        for (int p = 0; p < SW; p++)
            if (p != r) REQUIRE(comm_connect(c[r], p, comm_endpoint(c[p])) == 0);
    for (int r = 0; r < SW; r++) {
        a[r].c = c[r];
        a[r].wire = wire;
        for (size_t i = 0; i < SK * SM; i++) a[r].u[i] = val(r, i);
        for (size_t i = 0; i < SK * SN; i++) a[r].v[i] = val(r + 5, i);
        pthread_create(&th[r], NULL, sfb_w_thread, &a[r]);
    }
    uint64_t sent = ranks_end(SW, th, c);
    for (int r = 0; r < SW; r++) CHECK_EQ_I64(a[r].rc, 0);
    return sent;
}

TEST(wire_sfb_every_rank_rebuilds_from_the_same_rounded_factors)
{
    static sfb_w_arg_t a16[SW], a32[SW];
    uint64_t sent16 = sfb_run(PRECISION_BF16, a16), sent32 = sfb_run(PRECISION_FP32, a32);
    CHECK_EQ_I64(2 * sent16, sent32);
    long bad = 0, moved = 0;
    for (int r = 0; r < SW; r++)
        for (int q = 0; q < SW; q++) { /* rank r's view of rank q's factors, q == r included */
            for (size_t i = 0; i < SK * SM; i++) {
                float want = bf16(val(q, i));
                bad += memcmp(&a16[r].got_u[q][i], &want, 4) != 0;
                moved += a32[r].got_u[q][i] != want;
            }
            for (size_t i = 0; i < SK * SN; i++) {
                float want = bf16(val(q + 5, i));
                bad += memcmp(&a16[r].got_v[q][i], &want, 4) != 0;
            }
        }
    CHECK_EQ_I64(bad, 0);
    CHECK(moved > 0, "the fp32 exchange handed out rounded factors");
}

/* ------------------------------------------------------------------- the CLI */

/* `poseidon train` with the given keys exits non-zero with one line holding `want`. */
static void refused(const char *keys, const char *want)
{
    char out[4096];
    int rc = test_run(out, sizeof out, "%s/poseidon train --workers 2 --model models/lenet.net "
                      "--data synthetic --iterations 1 %s", test_build_dir(), keys);
    CHECK(rc != 0, "%s: exited 0:\n%s", keys, out);
    CHECK(strstr(out, want) != NULL, "%s: no '%s' in:\n%s", keys, want, out);
    CHECK(strchr(out, '\n') == strrchr(out, '\n'), "%s: more than one line:\n%s", keys, out);
}

TEST(wire_train_refuses_what_the_runtime_cannot_run)
{
    /* fp16's loss scaling runs on several replicas, under BSP */
    refused("--set precision=fp16 --scheme allreduce+wfbp --ssp 1",
            "expected consistency = bsp with precision = fp16");
    refused("--set precision=fp16 --scheme hybrid --workers 1",
            "expected precision = fp32 | bf16 on one worker of one device");
    refused("--set precision=bf16 --set wire_precision=fp16",
            "expected wire_precision = fp32 | bf16 with precision = bf16");
}
