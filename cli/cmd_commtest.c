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
            "         [--kill-rank R --kill-at ITER] [--timeout-ms MS] [--keys DIR | --insecure]\n"
            "Runs the PS / all-reduce / coordinator substrate across processes. Without\n"
            "--workers, the rank comes from RANK/WORLD_SIZE, Open MPI or Slurm variables.\n"
            "Sockets speak CURVE: a local job makes its keys, a launched one needs --keys DIR\n"
            "(poseidon keygen); --insecure: plain TCP, on one machine only.\n");
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

static int run_rank(int rank_hint, void *arg)
{
    (void)rank_hint;
    const ct_opts_t *o = arg;
    launch_env_t env;
    char err[256];
    if (launch_env_detect(&env, err, sizeof err) != 0) {
        fprintf(stderr, "poseidon comm-test: %s\n", err);
        return 2;
    }
    if (transport_security_install(&o->security, &env, err, sizeof err) != 0) {
        fprintf(stderr, "poseidon comm-test: rank %d: %s\n", env.rank, err);
        return 2;
    }
    int bench = !strcmp(o->mode, "bench");
    if (bench && env.world != 2) {
        fprintf(stderr, "poseidon comm-test: bench needs exactly 2 ranks (has %d)\n", env.world);
        return 2;
    }
    coord_config_t cc = coord_config_default();
    coord_server_t *srv = NULL;
    if (env.rank == 0 && !(srv = coord_server_new(&env, cc))) return 1;
    coord_client_t *cl = coord_client_new(&env, cc, NULL);
    if (!cl) return 1;
    char addr[64];
    if (launch_local_addr(env.master_addr, addr, sizeof addr) != 0) return 1;
    char bind[128];
    snprintf(bind, sizeof bind, "tcp://%s:*", addr);

    /* the parameter arena: 3 layers, the middle one the largest */
    size_t total = bench ? (size_t)(o->total_bytes / 4) : (size_t)o->floats;
    ps_range_t ranges[3] = {{0, total / 10}, {total / 10, total - total / 10 - 3}, {total - 3, 3}};
    int n_ranges = bench ? 1 : 3;
    if (bench) ranges[0] = (ps_range_t){0, total};
    ps_layout_t layout;
    if (ps_layout_build(&layout, ranges, n_ranges, (size_t)(o->block_bytes / 4), env.world) != 0)
        return 2;
    if (bench) /* every block on rank 1: all traffic crosses the link */
        for (int b = 0; b < layout.n_blocks; b++) layout.blocks[b].shard = 1;
    float *init = xmalloc(total * sizeof(float)), *arena = xcalloc(total, sizeof(float));
    float *grad = xmalloc(total * sizeof(float));
    for (size_t i = 0; i < total; i++) init[i] = (float)(i % 100);
    ps_server_config_t pc = {.shard = env.rank, .n_workers = bench ? 1 : env.world,
                             .world = env.world, .bind = bind, .layout = &layout, .init = init,
                             .staleness = o->staleness, .update = NULL};
    pc.update = ct_ps_add;
    ps_server_t *shard = ps_server_new(&pc);
    comm_t *ar = comm_new("ar", env.rank, env.world, bind, o->timeout_ms);
    if (!shard || !ar) return 1;
    char line[600];
    snprintf(line, sizeof line, "%s %s", ps_server_endpoint(shard), comm_endpoint(ar));
    char **table = coord_client_rendezvous(cl, line);
    if (!table) coord_client_fail(cl, "rendezvous failed");
    const char **ps_eps = xcalloc((size_t)env.world, sizeof *ps_eps);
    char (*ps_buf)[300] = xcalloc((size_t)env.world, sizeof *ps_buf);
    for (int r = 0; r < env.world; r++) {
        char ar_ep[300];
        if (sscanf(table[r], "%299s %299s", ps_buf[r], ar_ep) != 2)
            coord_client_fail(cl, "bad rendezvous line of rank %d: '%s'", r, table[r]);
        ps_eps[r] = ps_buf[r];
        if (r == (env.rank + 1) % env.world && env.world > 1) comm_connect(ar, r, ar_ep);
    }
    /* the run's configuration, as the plan will travel: a blob from rank 0 */
    char cfg[200];
    snprintf(cfg, sizeof cfg, "iters=%d floats=%zu block=%lld staleness=%d", o->iters, total,
             o->block_bytes, o->staleness);
    void *blob = cfg;
    size_t blob_n = strlen(cfg) + 1;
    if (coord_client_bcast(cl, 0, 0, &blob, &blob_n, cc.join_ms) != 0)
        coord_client_fail(cl, "no configuration from rank 0");
    if (env.rank != 0) {
        if (strcmp(blob, cfg)) coord_client_fail(cl, "rank 0 runs '%s', this rank '%s'", (char *)blob, cfg);
        free(blob);
    }
    ps_client_t *pcl = ps_client_new(env.rank, env.world, &layout, ps_eps, o->timeout_ms);
    if (!pcl) coord_client_fail(cl, "cannot connect to the PS shards");
    if (coord_client_barrier(cl, 0, cc.join_ms) != 0) coord_client_fail(cl, "start barrier");
    log_info("rank %d/%d (%s): %s, %d blocks", env.rank, env.world, launch_source_name(env.source),
             cfg, layout.n_blocks);

    int bad = 0;
    int64_t t0 = comm_now_ns();
    for (int64_t t = 0; t < o->iters; t++) {
        if (bench) {
            if (env.rank != 0) break; /* rank 1 only serves */
            coord_client_progress(cl, t, 0, "PS push/pull of the benchmark range");
            if (ps_client_push(pcl, t, 0, 0, total, init) || ps_client_pull(pcl, t, 0, 0, total, arena))
                coord_client_fail(cl, "PS push/pull timed out after %d ms", o->timeout_ms);
            continue;
        }
        for (size_t i = 0; i < total; i++) grad[i] = grad_of(env.rank, t, i);
        for (int l = n_ranges - 1; l >= 0; l--) { /* backward order */
            if (env.rank == o->victim && t == o->kill_at && l == 1) {
                log_info("rank %d: killing itself at iteration %lld layer %d (as asked)", env.rank,
                         (long long)t, l);
                fflush(NULL);
                raise(SIGKILL);
            }
            char what[160];
            snprintf(what, sizeof what, "PS push/pull of layer %d (%llu floats)", l,
                     (unsigned long long)ranges[l].count);
            coord_client_progress(cl, t, l, what);
            if (ps_client_push(pcl, t, l, ranges[l].offset, ranges[l].count, grad + ranges[l].offset) ||
                ps_client_pull(pcl, t, l, ranges[l].offset, ranges[l].count, arena))
                coord_client_fail(cl, "PS sync of layer %d timed out after %d ms", l, o->timeout_ms);
        }
        /* all-reduce of the same gradients: the sum over ranks */
        coord_client_progress(cl, t, 0, "ring all-reduce of the gradient buffer");
        for (size_t i = 0; i < total; i++) grad[i] = grad_of(env.rank, t, i);
        if (allreduce_sum(ar, t, 0, grad, total, ALLREDUCE_CHUNK_FLOATS_DEFAULT / 4, o->timeout_ms))
            coord_client_fail(cl, "all-reduce timed out after %d ms", o->timeout_ms);
        for (size_t i = 0; i < total && bad < 5; i++) {
            double want = 0;
            for (int r = 0; r < env.world; r++) want += grad_of(r, t, i);
            if (grad[i] != (float)want) {
                log_error("rank %d: all-reduce [%zu] = %g, want %g", env.rank, i, grad[i], want);
                bad++;
            }
        }
    }
    double dt = (double)(comm_now_ns() - t0) * 1e-9;
    if (bench && env.rank == 0) {
        double moved = 2.0 * (double)total * 4 * o->iters;
        printf("%lld,%zu,%d,%.6f,%.0f\n", o->block_bytes, total * 4, o->iters, dt, moved / dt);
    } else if (!bench && o->staleness == 0) {
        for (size_t i = 0; i < total && bad < 10; i++) {
            double want = init[i];
            for (int t = 0; t < o->iters; t++)
                for (int r = 0; r < env.world; r++) want += grad_of(r, t, i);
            if (arena[i] != (float)want) {
                log_error("rank %d: PS value [%zu] = %g, want %g", env.rank, i, arena[i], want);
                bad++;
            }
        }
    }
    coord_client_progress(cl, o->iters, -1, "the final barrier");
    ps_client_destroy(&pcl);
    coord_client_destroy(&cl); /* final barrier: shards stay up until everyone is done */
    ps_server_destroy(&shard);
    comm_destroy(&ar);
    coord_server_destroy(&srv);
    if (!bench) {
        if (bad) printf("rank %d: FAILED (%d wrong values)\n", env.rank, bad);
        else printf("rank %d/%d: ok: %d iterations of PS and all-reduce exact over %zu floats\n",
                    env.rank, env.world, o->iters, total);
    }
    fflush(stdout);
    free(ps_eps);
    free(ps_buf);
    free(init);
    free(arena);
    free(grad);
    ps_layout_fini(&layout);
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
        {"help", no_argument, 0, 'h'},            {0, 0, 0, 0}};
    int ch, rc = 0;
    long long v = 0;
    optind = 1;
    while (rc == 0 && (ch = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (ch) {
        case 'w': rc = flag_int32("comm-test", "--workers", optarg, 0, 4096, &o.workers); break;
        case 'm': o.mode = optarg; break;
        case 'i': rc = flag_int32("comm-test", "--iters", optarg, 1, 1 << 30, &o.iters); break;
        case 'f': rc = flag_int("comm-test", "--floats", optarg, 16, 1LL << 34, &v); o.floats = v; break;
        case 'b':
            rc = flag_int("comm-test", "--block-bytes", optarg, 4, 1LL << 34, &v);
            o.block_bytes = v;
            break;
        case 't':
            rc = flag_int("comm-test", "--total-bytes", optarg, 4, 1LL << 40, &v);
            o.total_bytes = v;
            break;
        case 's': rc = flag_int32("comm-test", "--staleness", optarg, 0, 999, &o.staleness); break;
        case 'k': rc = flag_int32("comm-test", "--kill-rank", optarg, -1, 4096, &o.victim); break;
        case 'a': rc = flag_int32("comm-test", "--kill-at", optarg, -1, 1 << 30, &o.kill_at); break;
        case 'o':
            rc = flag_int32("comm-test", "--timeout-ms", optarg, 100, 1 << 30, &o.timeout_ms);
            break;
        case 'K': o.security.keys_dir = optarg; break;
        case 'I': o.security.insecure = true; break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
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
