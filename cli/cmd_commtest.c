/* poseidon comm-test: exercises the distributed substrate (launch, coordinator, PS shards,
 * ring all-reduce, health) across real processes, for the integration tests and the
 * communication benchmark. Each rank takes its identity from the environment (mpirun,
 * Slurm, RANK/WORLD_SIZE), or --workers N forks a local job.
 *
 *   check: every iteration each rank pushes known gradients of 3 "layers" to the PS shards
 *          (one per rank, colocated), pulls them back, and all-reduces a buffer; the values
 *          are compared with the exact sums. Exits 0 only if all match.
 *   bench: rank 0 pushes and pulls --total-bytes per iteration to a shard on rank 1 in
 *          blocks of --block-bytes; prints one CSV row (stdout) with the goodput.
 */
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/commands.h"
#include "cli/flags.h"
#include "core/check.h"
#include "core/log.h"
#include "runtime/sync/allreduce.h"
#include "runtime/transport/comm.h"
#include "runtime/transport/coord.h"
#include "runtime/transport/launch.h"
#include "runtime/transport/transport_security.h"
#include "runtime/sync/ps.h"
#include "runtime/transport/clock.h"

typedef struct {
    int workers, iters, victim, kill_at, staleness, timeout_ms;
    long long floats, block_bytes, total_bytes;
    const char *mode;
    transport_security_t security;
} ct_opts_t;

static void usage(FILE *f)
{
    fprintf(f,
            "usage: poseidon comm-test [--workers N] [--mode check|bench] [--iters N]\n"
            "         [--floats N] [--block-bytes B] [--total-bytes B] [--staleness S]\n"
            "         [--kill-rank R --kill-at ITER] [--timeout-ms MS]\n"
            "         [--keys DIR | --insecure] [--trusted-fabric]\n"
            "Runs the PS / all-reduce / coordinator substrate across processes. Without\n"
            "--workers, the rank comes from RANK/WORLD_SIZE, Open MPI or Slurm variables.\n"
            "Sockets speak CURVE: a local job makes its keys, a launched one needs --keys DIR\n"
            "(poseidon keygen); --insecure: plain TCP, on one machine only; --trusted-fabric: data\n"
            "authenticated by the keys but not encrypted (docs/security.md).\n");
}

static float grad_of(int rank, int64_t t, size_t i)
{
    return (float)((rank + 1) * (t + 2) + (int)(i % 7));
}

/* The update rule of the check: values += sum of gradients, exact in integer floats. */
static void ct_ps_add(void *arg, float *p, const float *g, size_t n, uint64_t off, int64_t t)
{
    (void)arg, (void)off, (void)t;
    for (size_t i = 0; i < n; i++) p[i] += g[i];
}

/* One rank's state: the job's identity, its coordinator, shard, ring and PS client, and the
 * arena of 1 (bench) or 3 "layers". */
typedef struct {
    const ct_opts_t *o;
    launch_env_t env;
    bool bench;
    coord_config_t cc;
    coord_server_t *srv;
    coord_client_t *cl;
    char bind[128];
    size_t total;
    ps_range_t ranges[3];
    int n_ranges;
    ps_layout_t layout;
    bool have_layout;
    float *init, *arena, *grad;
    ps_server_t *shard;
    comm_t *ar;
    const char **ps_eps;
    char (*ps_buf)[300];
    ps_client_t *pcl;
} ct_rank_t;

/* The identity, the coordinator, the layout and the arrays. 0, or the exit code. */
static int ct_setup(ct_rank_t *k)
{
    const ct_opts_t *o = k->o;
    char err[256];
    if (launch_env_detect(&k->env, err, sizeof err) != 0) {
        fprintf(stderr, "poseidon comm-test: %s\n", err);
        return 2;
    }
    if (transport_security_install(&o->security, &k->env, err, sizeof err) != 0) {
        fprintf(stderr, "poseidon comm-test: rank %d: %s\n", k->env.rank, err);
        return 2;
    }
    k->bench = !strcmp(o->mode, "bench");
    if (k->bench && k->env.world != 2) {
        fprintf(stderr, "poseidon comm-test: bench needs exactly 2 ranks (has %d)\n",
                k->env.world);
        return 2;
    }
    k->cc = coord_config_default();
    if (k->env.rank == 0 && !(k->srv = coord_server_new(&k->env, k->cc))) return 1;
    if (!(k->cl = coord_client_new(&k->env, k->cc, NULL))) return 1;
    char addr[64];
    if (launch_local_addr(k->env.master_addr, addr, sizeof addr) != 0) return 1;
    snprintf(k->bind, sizeof k->bind, "tcp://%s:*", addr);

    /* the parameter arena: 3 layers, the middle one the largest */
    size_t total = k->bench ? (size_t)(o->total_bytes / 4) : (size_t)o->floats;
    k->total = total;
    k->ranges[0] = (ps_range_t){0, total / 10};
    k->ranges[1] = (ps_range_t){total / 10, total - total / 10 - 3};
    k->ranges[2] = (ps_range_t){total - 3, 3};
    k->n_ranges = k->bench ? 1 : 3;
    if (k->bench) k->ranges[0] = (ps_range_t){0, total};
    if (ps_layout_build(&k->layout, k->ranges, k->n_ranges, (size_t)(o->block_bytes / 4),
                        k->env.world) != 0)
        return 2;
    k->have_layout = true;
    if (k->bench) /* every block on rank 1: all traffic crosses the link */
        for (int b = 0; b < k->layout.n_blocks; b++) k->layout.blocks[b].shard = 1;
    k->init = xmalloc(total * sizeof(float));
    k->arena = xcalloc(total, sizeof(float));
    k->grad = xmalloc(total * sizeof(float));
    for (size_t i = 0; i < total; i++) k->init[i] = (float)(i % 100);
    return 0;
}

/* The shard, the ring, the rendezvous, rank 0's configuration and the start barrier. 0, or
 * the exit code. */
static int ct_connect(ct_rank_t *k)
{
    const ct_opts_t *o = k->o;
    ps_server_config_t pc = {.shard = k->env.rank, .n_workers = k->bench ? 1 : k->env.world,
                             .world = k->env.world, .bind = k->bind, .layout = &k->layout,
                             .init = k->init, .staleness = o->staleness, .update = ct_ps_add};
    k->shard = ps_server_new(&pc);
    k->ar = comm_new("ar", k->env.rank, k->env.world, k->bind, o->timeout_ms);
    if (!k->shard || !k->ar) return 1;
    char line[600];
    snprintf(line, sizeof line, "%s %s", ps_server_endpoint(k->shard), comm_endpoint(k->ar));
    char **table = coord_client_rendezvous(k->cl, line);
    if (!table) coord_client_fail(k->cl, "rendezvous failed");
    k->ps_eps = xcalloc((size_t)k->env.world, sizeof *k->ps_eps);
    k->ps_buf = xcalloc((size_t)k->env.world, sizeof *k->ps_buf);
    for (int r = 0; r < k->env.world; r++) {
        char ar_ep[300];
        if (sscanf(table[r], "%299s %299s", k->ps_buf[r], ar_ep) != 2)
            coord_client_fail(k->cl, "bad rendezvous line of rank %d: '%s'", r, table[r]);
        k->ps_eps[r] = k->ps_buf[r];
        if (r == (k->env.rank + 1) % k->env.world && k->env.world > 1)
            comm_connect(k->ar, r, ar_ep);
    }
    /* the run's configuration, as the plan will travel: a blob from rank 0 */
    char cfg[200];
    snprintf(cfg, sizeof cfg, "iters=%d floats=%zu block=%lld staleness=%d", o->iters, k->total,
             o->block_bytes, o->staleness);
    void *blob = cfg;
    size_t blob_n = strlen(cfg) + 1;
    if (coord_client_bcast(k->cl, 0, 0, &blob, &blob_n, k->cc.join_ms) != 0)
        coord_client_fail(k->cl, "no configuration from rank 0");
    if (k->env.rank != 0) {
        if (strcmp(blob, cfg))
            coord_client_fail(k->cl, "rank 0 runs '%s', this rank '%s'", (char *)blob, cfg);
        free(blob);
    }
    k->pcl = ps_client_new(k->env.rank, k->env.world, &k->layout, k->ps_eps, o->timeout_ms);
    if (!k->pcl) coord_client_fail(k->cl, "cannot connect to the PS shards");
    if (coord_client_barrier(k->cl, 0, k->cc.join_ms) != 0)
        coord_client_fail(k->cl, "start barrier");
    log_info("rank %d/%d (%s): %s, %d blocks", k->env.rank, k->env.world,
             launch_source_name(k->env.source), cfg, k->layout.n_blocks);
    return 0;
}

/* Iteration t of the check: push and pull each layer in backward order (the victim dies
 * where asked), then the ring all-reduce, compared with the exact sums. Returns bad, the
 * wrong values found so far, with this iteration's (at most 5 in all reported). */
static int ct_check_iteration(ct_rank_t *k, int64_t t, int bad)
{
    const ct_opts_t *o = k->o;
    for (size_t i = 0; i < k->total; i++) k->grad[i] = grad_of(k->env.rank, t, i);
    for (int l = k->n_ranges - 1; l >= 0; l--) { /* backward order */
        if (k->env.rank == o->victim && t == o->kill_at && l == 1) {
            log_info("rank %d: killing itself at iteration %lld layer %d (as asked)",
                     k->env.rank, (long long)t, l);
            fflush(NULL);
            raise(SIGKILL);
        }
        const ps_range_t *r = &k->ranges[l];
        char what[160];
        snprintf(what, sizeof what, "PS push/pull of layer %d (%llu floats)", l,
                 (unsigned long long)r->count);
        coord_client_progress(k->cl, t, l, what);
        if (ps_client_push(k->pcl, t, l, r->offset, r->count, k->grad + r->offset) ||
            ps_client_pull(k->pcl, t, l, r->offset, r->count, k->arena))
            coord_client_fail(k->cl, "PS sync of layer %d timed out after %d ms", l,
                              o->timeout_ms);
    }
    /* all-reduce of the same gradients: the sum over ranks */
    coord_client_progress(k->cl, t, 0, "ring all-reduce of the gradient buffer");
    for (size_t i = 0; i < k->total; i++) k->grad[i] = grad_of(k->env.rank, t, i);
    if (allreduce_sum(k->ar, t, 0, k->grad, k->total, ALLREDUCE_CHUNK_FLOATS_DEFAULT / 4,
                      o->timeout_ms))
        coord_client_fail(k->cl, "all-reduce timed out after %d ms", o->timeout_ms);
    for (size_t i = 0; i < k->total && bad < 5; i++) {
        double want = 0;
        for (int r = 0; r < k->env.world; r++) want += grad_of(r, t, i);
        if (k->grad[i] != (float)want) {
            log_error("rank %d: all-reduce [%zu] = %g, want %g", k->env.rank, i, k->grad[i],
                      want);
            bad++;
        }
    }
    return bad;
}

/* The iterations, then (bench) rank 0's CSV row or (check, BSP) the PS values against the
 * exact sums. Returns the wrong values found. */
static int ct_run(ct_rank_t *k)
{
    const ct_opts_t *o = k->o;
    int bad = 0;
    int64_t t0 = clock_now_ns();
    for (int64_t t = 0; t < o->iters; t++) {
        if (!k->bench) {
            bad = ct_check_iteration(k, t, bad);
            continue;
        }
        if (k->env.rank != 0) break; /* rank 1 only serves */
        coord_client_progress(k->cl, t, 0, "PS push/pull of the benchmark range");
        if (ps_client_push(k->pcl, t, 0, 0, k->total, k->init) ||
            ps_client_pull(k->pcl, t, 0, 0, k->total, k->arena))
            coord_client_fail(k->cl, "PS push/pull timed out after %d ms", o->timeout_ms);
    }
    double dt = (double)(clock_now_ns() - t0) * 1e-9;
    if (k->bench && k->env.rank == 0) {
        double moved = 2.0 * (double)k->total * 4 * o->iters;
        printf("%lld,%zu,%d,%.6f,%.0f\n", o->block_bytes, k->total * 4, o->iters, dt,
               moved / dt);
    } else if (!k->bench && o->staleness == 0) {
        for (size_t i = 0; i < k->total && bad < 10; i++) {
            double want = k->init[i];
            for (int t = 0; t < o->iters; t++)
                for (int r = 0; r < k->env.world; r++) want += grad_of(r, t, i);
            if (k->arena[i] != (float)want) {
                log_error("rank %d: PS value [%zu] = %g, want %g", k->env.rank, i, k->arena[i],
                          want);
                bad++;
            }
        }
    }
    return bad;
}

/* Frees what the rank holds; the final barrier first (shards stay up until everyone is
 * done). */
static void ct_fini(ct_rank_t *k)
{
    coord_client_progress(k->cl, k->o->iters, -1, "the final barrier");
    ps_client_destroy(&k->pcl);
    coord_client_destroy(&k->cl);
    ps_server_destroy(&k->shard);
    comm_destroy(&k->ar);
    coord_server_destroy(&k->srv);
    free(k->ps_eps);
    free(k->ps_buf);
    free(k->init);
    free(k->arena);
    free(k->grad);
    if (k->have_layout) ps_layout_fini(&k->layout);
}

static int run_rank(int rank_hint, void *arg)
{
    (void)rank_hint;
    ct_rank_t k = {.o = arg};
    int rc = ct_setup(&k);
    if (rc == 0) rc = ct_connect(&k);
    if (rc) return rc; /* no final barrier: the other ranks may never come to it */
    int bad = ct_run(&k);
    ct_fini(&k);
    if (!k.bench) {
        if (bad) printf("rank %d: FAILED (%d wrong values)\n", k.env.rank, bad);
        else printf("rank %d/%d: ok: %d iterations of PS and all-reduce exact over %zu floats\n",
                    k.env.rank, k.env.world, k.o->iters, k.total);
    }
    fflush(stdout);
    return bad ? 1 : 0;
}

int cmd_commtest(int argc, char **argv)
{
    log_banner(argc, argv, 0);
    ct_opts_t o = {.workers = 0, .iters = 3, .victim = -1, .kill_at = -1, .timeout_ms = 10000,
                   .floats = 100000, .block_bytes = PS_BLOCK_BYTES_DEFAULT,
                   .total_bytes = 64 << 20, .mode = "check"};
    static const struct option opts[] = {
        {"workers", required_argument, 0, 'w'},   {"mode", required_argument, 0, 'm'},
        {"iters", required_argument, 0, 'i'},     {"floats", required_argument, 0, 'f'},
        {"block-bytes", required_argument, 0, 'b'}, {"total-bytes", required_argument, 0, 't'},
        {"staleness", required_argument, 0, 's'}, {"kill-rank", required_argument, 0, 'k'},
        {"kill-at", required_argument, 0, 'a'},   {"timeout-ms", required_argument, 0, 'o'},
        {"keys", required_argument, 0, 'K'},      {"insecure", no_argument, 0, 'I'},
        {"trusted-fabric", no_argument, 0, 'F'},
        {"help", no_argument, 0, 'h'},            {0, 0, 0, 0}};
    int ch, rc = 0;
    long long v = 0;
    flag_parser_t p;
    flag_begin(&p, "comm-test", argc, argv, "h", opts);
    while (rc == 0 && (ch = flag_next(&p)) != FLAG_END) {
        const char *a = p.opt;
        const char *val = p.arg;
        switch (ch) {
        case 'w': rc = flag_int32("comm-test", a, val, 0, 4096, &o.workers); break;
        case 'm': o.mode = val; break;
        case 'i': rc = flag_int32("comm-test", a, val, 1, 1 << 30, &o.iters); break;
        case 'f': rc = flag_int("comm-test", a, val, 16, 1LL << 34, &v); o.floats = v; break;
        case 'b':
            rc = flag_int("comm-test", a, val, 4, 1LL << 34, &v);
            o.block_bytes = v;
            break;
        case 't':
            rc = flag_int("comm-test", a, val, 4, 1LL << 40, &v);
            o.total_bytes = v;
            break;
        case 's': rc = flag_int32("comm-test", a, val, 0, 999, &o.staleness); break;
        case 'k': rc = flag_int32("comm-test", a, val, -1, 4096, &o.victim); break;
        case 'a': rc = flag_int32("comm-test", a, val, -1, 1 << 30, &o.kill_at); break;
        case 'o': rc = flag_int32("comm-test", a, val, 100, 1 << 30, &o.timeout_ms); break;
        case 'K': o.security.keys_dir = val; break;
        case 'I': o.security.insecure = true; break;
        case 'F': o.security.trusted_fabric = true; break;
        case 'h': usage(stdout); return 0;
        case FLAG_ARG:
            fprintf(stderr, "poseidon comm-test: unexpected argument '%s'\n", val);
            return 2;
        default: return 2;
        }
    }
    if (rc) return 2;
    if (strcmp(o.mode, "check") && strcmp(o.mode, "bench")) {
        fprintf(stderr, "poseidon comm-test: --mode %s: expected check or bench\n", o.mode);
        return 2;
    }
    if (o.block_bytes % 4) {
        fprintf(stderr, "poseidon comm-test: --block-bytes must be a multiple of 4\n");
        return 2;
    }
    if (o.security.keys_dir && o.security.insecure) {
        fprintf(stderr, "poseidon comm-test: --keys and --insecure: choose one\n");
        return 2;
    }
    if (o.workers > 0) {
        keyring_t *keys = NULL;
        if (!o.security.keys_dir && !o.security.insecure) {
            char err[256];
            if (!(keys = keyring_generate(o.workers, err, sizeof err))) {
                fprintf(stderr, "poseidon comm-test: %s\n", err);
                return 1;
            }
            o.security.keys = keys;
        }
        rc = launch_local(o.workers, launch_free_port(), 15000, run_rank, &o);
        keyring_destroy(&keys);
        return rc;
    }
    return run_rank(-1, &o);
}
