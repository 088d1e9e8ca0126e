/* sfb: three ranks exchange factors; each rebuilds sum_p U_p^T V_p and all agree with a
 * naive double-precision reference. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/sync/sfb.h"
#include "test.h"

enum { W = 3, M = 5, N = 7 };

typedef struct {
    comm_t *c;
    size_t k;
    float *u, *v;
    double grad[M * N];
    int order[W], n_calls, rc;
} sfb_arg_t;

static void rebuild(void *arg, int rank, const float *u, const float *v, size_t k, size_t m,
                    size_t n)
{
    sfb_arg_t *a = arg;
    a->order[a->n_calls++] = rank;
    for (size_t i = 0; i < m; i++)
        for (size_t j = 0; j < n; j++)
            for (size_t b = 0; b < k; b++) a->grad[i * n + j] += (double)u[b * m + i] * v[b * n + j];
}

static void *sfb_thread(void *p)
{
    sfb_arg_t *a = p;
    a->rc = sfb_exchange(a->c, 4, 2, a->u, a->v, a->k, M, N, rebuild, a, NULL, 5000);
    return NULL;
}

TEST(sfb_exchange_rebuilds_every_gradient)
{
    comm_t *c[W];
    sfb_arg_t a[W];
    pthread_t th[W];
    for (int r = 0; r < W; r++) c[r] = comm_new("sfb", r, W, "tcp://127.0.0.1:*", 5000);
    for (int r = 0; r < W; r++)
        for (int p = 0; p < W; p++)
            if (p != r) REQUIRE(comm_connect(c[r], p, comm_endpoint(c[p])) == 0);
    double ref[M * N] = {0};
    for (int r = 0; r < W; r++) {
        memset(&a[r], 0, sizeof a[r]);
        a[r].c = c[r];
        a[r].k = (size_t)(2 + r); /* different batch per rank */
        a[r].u = malloc(a[r].k * M * sizeof(float));
        a[r].v = malloc(a[r].k * N * sizeof(float));
        for (size_t i = 0; i < a[r].k * M; i++) a[r].u[i] = (float)((i * 7 + r) % 11) - 5;
        for (size_t i = 0; i < a[r].k * N; i++) a[r].v[i] = (float)((i * 3 + 2 * r) % 13) * 0.5f;
        for (size_t i = 0; i < M; i++)
            for (size_t j = 0; j < N; j++)
                for (size_t b = 0; b < a[r].k; b++)
                    ref[i * N + j] += (double)a[r].u[b * M + i] * a[r].v[b * N + j];
    }
    for (int r = 0; r < W; r++) pthread_create(&th[r], NULL, sfb_thread, &a[r]);
    for (int r = 0; r < W; r++) pthread_join(th[r], NULL);
    for (int r = 0; r < W; r++) {
        CHECK_EQ_I64(a[r].rc, 0);
        CHECK_EQ_I64(a[r].n_calls, W);
        for (int q = 0; q < W; q++) CHECK_EQ_I64(a[r].order[q], q);
        for (int i = 0; i < M * N; i++) CHECK_NEAR(a[r].grad[i], ref[i], 1e-9, 1e-12);
        free(a[r].u);
        free(a[r].v);
        comm_destroy(&c[r]);
    }
}
