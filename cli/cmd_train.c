/* poseidon train: training as a job (core/experiment.h), on one worker or on a cluster of
 * them, on the CPU or GPUs. The command line is read once into the job and how this process
 * runs it (cli/train_args.h): an experiment file, `--set KEY=VALUE` overrides and the
 * shorthand flags below, each of which sets one experiment key in the key's own units. A job
 * of one node with one device, outside a launcher, runs in this process
 * (runtime/exec/train_one); any other runs on the distributed workers (cli/cmd_train_dist.c).
 * Either writes the job it ran, which `poseidon sim` predicts and `poseidon train` runs again.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/commands.h"
#include "cli/flags.h"
#include "cli/job_out.h"
#include "cli/train_args.h"
#include "core/check.h"
#include "core/job.h"
#include "core/kvfile.h"
#include "core/log.h"
#include "runtime/exec/data.h"
#include "runtime/exec/train_one.h"
#include "runtime/transport/launch.h"

/* The help's second half: the options of how the job runs. */
static void usage_run(FILE *f);

static void usage(FILE *f)
{
    fprintf(f,
            "usage: poseidon train --model FILE [options]               (one worker)\n"
            "       poseidon train EXPERIMENT [--set KEY=VALUE]... [options]\n"
            "       poseidon train --workers N --model FILE [options]   (a local job)\n"
            "       mpirun -np N poseidon train [EXPERIMENT] [options]  (or srun, or RANK=...)\n\n"
            "Train a network on one worker or a cluster of them, on the CPU or GPUs. The job\n"
            "is an experiment (poseidon sim reads the same file and keys); each flag below\n"
            "sets the experiment key in brackets. A job of one node with one device trains in\n"
            "this process and prints per epoch: epoch,loss,train_acc,test_acc,images_per_s.\n"
            "A job of N nodes runs N workers that execute the plan of the simulator: per layer\n"
            "PS (sharded, one shard per worker), SFB or ring all-reduce, wait-free backprop,\n"
            "BSP or SSP; rank 0 prints epoch,iteration,loss,train_acc,test_acc,images_per_s,\n"
            "seconds (loss and accuracies are rank 0's). Both write the job they ran\n"
            "(--job-out), on which poseidon sim predicts the run and poseidon train runs it\n"
            "again.\n\n"
            "the job:\n"
            "  --set KEY=VALUE     any experiment key, or cluster.KEY (poseidon sim --help)\n"
            "  --model FILE        network description [model]\n"
            "  --workers N         fork N local workers [cluster.nodes] (default: the\n"
            "                      experiment's nodes, the launcher's ranks, or 1)\n"
            "  --devices-per-node D  device threads per node, each with a replica and its own\n"
            "                      batch; the node combines their gradients in memory and\n"
            "                      syncs once [cluster.devices_per_node] (1; on GPUs D > 1\n"
            "                      needs cluster.interconnect or intra_gbps/intra_latency_us;\n"
            "                      CPU devices share the host's memory); under a launcher:\n"
            "                      one rank per node\n"
            "  --cluster FILE      cluster file [cluster] (default: cluster defaults)\n"
            "  --scheme S          ps | ps+wfbp | sfb+wfbp | allreduce+wfbp | hybrid | hybrid3\n"
            "                      [scheme] (default hybrid)\n"
            "  --ssp S             staleness, 0: BSP [consistency] (default 0)\n"
            "  --batch K           samples per worker and step [batch] (default 32)\n"
            "  --epochs E          epochs over the training set [epochs] (default 1 when\n"
            "                      neither an experiment file nor --iterations is given)\n"
            "  --iterations I      total steps instead of epochs [iterations]\n"
            "  --warmup W          steps left out of the measured time [warmup] (1)\n"
            "  --data D            fashion-mnist (default), fortunes (character-level text,\n"
            "                      for a model with a tokens input) or synthetic [data]\n"
            "  --data-dir DIR      IDX files (default " DATA_FASHION_MNIST_DIR "), or the\n"
            "                      text's folder (default " DATA_FORTUNES_DIR ") [data_dir]\n"
            "  --synthetic-n N     synthetic training samples in all [synthetic_n] (1024)\n"
            "  --limit N           use only the first N training samples [limit]\n"
            "  --no-shuffle        keep each partition in order [shuffle = no]\n"
            "  --lr X --momentum X --weight-decay X   SGD [lr, momentum, weight_decay]\n"
            "                      (0.01, 0.9, 0.0005; weight decay on weights, not biases)\n"
            "  --lr-policy P       fixed (default), step or poly [lr_policy]\n"
            "  --lr-gamma X        step: factor per --lr-step iterations [lr_gamma] (0.1)\n"
            "  --lr-step N         step: iterations per decay [lr_step] (0: two epochs)\n"
            "  --lr-power X        poly: exponent; runs to the last iteration [lr_power] (1)\n"
            "  --init I            auto (He before a ReLU, else Xavier), xavier, he [init]\n"
            "  --seed S            initialisation, shuffling, dropout, synthetic data [seed] (1)\n"
            "  --sample N          after training, print N characters the model writes\n"
            "                      [sample] (a text model, one worker)\n"
            "  --compute C         real or emulate: FWD/BWD sleep for the profile's times\n"
            "                      (without one, the cluster's device model) [compute]\n"
            "  --profile CSV       per-layer times, poseidon profile's CSV [profile]\n"
            "  --no-probe          plan with the cluster's bandwidth and latency, no link\n"
            "                      probe [probe = no]\n"
            "  --link G,L          plan with a link of G Gbit/s goodput and L us latency, no\n"
            "                      probe [cluster.nic_gbps, cluster.latency_us,\n"
            "                      cluster.nic_efficiency = 1, probe = no]\n"
            "  --probe-bytes B     bulk bytes of the probe [probe_bytes] (4194304)\n"
            "  --kv-block-mb X     PS block in MB, 0: split evenly over shards, tensor: each\n"
            "                      tensor whole [kv_block_mb] (4)\n"
            "  --kv-placement P    least_loaded or round_robin [kv_placement]\n"
            "  --bucket-mb X       fuse the all-reduce layers into buckets of >= X MB\n"
            "                      [allreduce_bucket_mb] (0: one ring per layer)\n\n");
    usage_run(f);
}

static void usage_run(FILE *f)
{
    fprintf(f,
            "how this process runs it:\n"
            "  --device D          cpu (default) or cuda: one GPU per device thread (GPU\n"
            "                      LOCAL_RANK x D + d of the visible ones); on several workers\n"
            "                      each layer's gradient goes to host memory and the synced\n"
            "                      values come back over the host link (sets\n"
            "                      cluster.host_staging = yes, and cluster.interconnect = pcie5\n"
            "                      unless the cluster has one)\n"
            "  --threads T         BLAS threads per worker (default 1; 0: all CPUs;\n"
            "                      OPENBLAS_NUM_THREADS, if set, wins)\n"
            "  --csv FILE          the rows (distributed: rank 0's, each with the hash of the\n"
            "                      plan that ran)\n"
            "  --job-out FILE      where the job it ran is written (default\n"
            "                      out/runs/MODEL-DATE-TIME.exp; 'none': nowhere)\n"
            "  --checkpoint FILE   one worker: the state after every epoch (atomically)\n"
            "  --resume FILE|DIR   one worker: start from a checkpoint FILE (its epoch count\n"
            "                      and parameters); distributed: from the newest complete\n"
            "                      checkpoint in DIR (the same model, ranks, plan and seed);\n"
            "                      with --checkpoint-every, DIR is also where checkpoints go\n"
            "  --resume-changed KEY,...  resume although these keys differ from the\n"
            "                      checkpoint's job ('all': any); without it a resume of a\n"
            "                      job that differs in a key that changes the math is refused\n\n"
            "the distributed workers only (--workers 1 runs one worker so):\n"
            "  --report-every I    steps between report rows (default: one per epoch)\n"
            "  --no-eval           no test accuracy in the rows\n"
            "  --timeout-ms MS     bound of every wait (default 60000)\n"
            "  --trace PREFIX      PREFIX-rank<R>.csv/.json per rank, merged into PREFIX.csv\n"
            "                      and one Chrome/Perfetto PREFIX.json\n"
            "  --params-out PATH   each rank writes its final parameters to PATH.<rank> (and\n"
            "                      device d > 0's replica to PATH.<rank>.<d>)\n"
            "  --print-plan        rank 0 prints the plan's per-unit table\n"
            "  --checkpoint-dir DIR  coordinated checkpoints: DIR/iter-K/, one file per rank\n"
            "                      and COMPLETE once all are written; the newest two stay\n"
            "                      [keep_checkpoints]\n"
            "  --checkpoint-every K  a checkpoint before iteration K, 2K, ... (iterations)\n"
            "  --max-restarts N    a job that fails (a rank dies, the job aborts) starts\n"
            "                      again from its newest complete checkpoint, at most N\n"
            "                      times [max_restarts] (0); under a launcher, the launcher\n"
            "                      starts the ranks again with the same command line\n\n"
            "transport (every socket speaks ZeroMQ CURVE: encrypted, and only the job's ranks\n"
            "get in; a local job makes its keys in memory):\n"
            "  --keys DIR          the job's keys, from poseidon keygen --ranks N -o DIR\n"
            "                      (needed under mpirun, srun or RANK=...)\n"
            "  --insecure          plain TCP, for a job whose ranks all run on this machine\n"
            "  --trusted-fabric    the keys authenticate every connection, but the data is not\n"
            "                      encrypted: for a network no one else can observe or alter\n"
            "                      (docs/security.md); the coordinator stays on CURVE\n");
}

/* What an option does beyond (or instead of) setting its key. */
typedef enum {
    T_KEY, T_WORKERS, T_ITERATIONS, T_EPOCHS, T_SET, T_SSP, T_LINK, T_NO_SHUFFLE, T_NO_PROBE,
    T_NO_EVAL, T_PRINT_PLAN, T_INSECURE, T_TRUSTED_FABRIC, T_REPORT_EVERY, T_DEVICE, T_THREADS,
    T_TIMEOUT, T_CSV,
    T_TRACE, T_PARAMS_OUT, T_JOB_OUT, T_KEYS, T_CKPT_DIR, T_CKPT_EVERY, T_RESUME, T_CKPT,
    T_RESUME_CHANGED, T_HELP
} topt_t;

/* The options: name, what it does, the experiment key it sets (T_KEY and the counts), and
 * whether only the distributed workers have it. */
static const struct {
    const char *name;
    topt_t id;
    const char *key;
    bool dist_only;
} s_opts[] = {
    {"workers", T_WORKERS, "cluster.nodes", 0},  {"model", T_KEY, "model", 0},
    {"devices-per-node", T_KEY, "cluster.devices_per_node", 0},
    {"cluster", T_KEY, "cluster", 0},            {"scheme", T_KEY, "scheme", 0},
    {"batch", T_KEY, "batch", 0},                {"epochs", T_EPOCHS, "epochs", 0},
    {"iterations", T_ITERATIONS, "iterations", 0}, {"warmup", T_KEY, "warmup", 0},
    {"data", T_KEY, "data", 0},                  {"data-dir", T_KEY, "data_dir", 0},
    {"synthetic-n", T_KEY, "synthetic_n", 0},    {"limit", T_KEY, "limit", 0},
    {"compute", T_KEY, "compute", 0},            {"profile", T_KEY, "profile", 0},
    {"probe-bytes", T_KEY, "probe_bytes", 0},    {"kv-block-mb", T_KEY, "kv_block_mb", 0},
    {"kv-placement", T_KEY, "kv_placement", 0},  {"bucket-mb", T_KEY, "allreduce_bucket_mb", 0},
    {"lr", T_KEY, "lr", 0},                      {"momentum", T_KEY, "momentum", 0},
    {"weight-decay", T_KEY, "weight_decay", 0},  {"seed", T_KEY, "seed", 0},
    {"lr-policy", T_KEY, "lr_policy", 0},        {"lr-gamma", T_KEY, "lr_gamma", 0},
    {"lr-step", T_KEY, "lr_step", 0},            {"lr-power", T_KEY, "lr_power", 0},
    {"init", T_KEY, "init", 0},                  {"sample", T_KEY, "sample", 0},
    {"set", T_SET, NULL, 0},                     {"ssp", T_SSP, NULL, 0},
    {"link", T_LINK, NULL, 0},                   {"no-shuffle", T_NO_SHUFFLE, NULL, 0},
    {"no-probe", T_NO_PROBE, NULL, 0},           {"device", T_DEVICE, NULL, 0},
    {"threads", T_THREADS, NULL, 0},             {"csv", T_CSV, NULL, 0},
    {"job-out", T_JOB_OUT, NULL, 0},             {"resume", T_RESUME, NULL, 0},
    {"checkpoint", T_CKPT, NULL, 0},             {"no-eval", T_NO_EVAL, NULL, 1},
    {"print-plan", T_PRINT_PLAN, NULL, 1},       {"insecure", T_INSECURE, NULL, 1},
    {"trusted-fabric", T_TRUSTED_FABRIC, NULL, 1},
    {"report-every", T_REPORT_EVERY, NULL, 1},   {"timeout-ms", T_TIMEOUT, NULL, 1},
    {"trace", T_TRACE, NULL, 1},                 {"params-out", T_PARAMS_OUT, NULL, 1},
    {"keys", T_KEYS, NULL, 1},                   {"checkpoint-dir", T_CKPT_DIR, NULL, 1},
    {"checkpoint-every", T_CKPT_EVERY, NULL, 1}, {"resume-changed", T_RESUME_CHANGED, NULL, 0},
    {"max-restarts", T_KEY, "max_restarts", 1},
    {"help", T_HELP, NULL, 0},
};
#define N_OPTS ((int)(sizeof s_opts / sizeof s_opts[0]))
#define OPT_VAL0 256 /* getopt_long's val of s_opts[i]: OPT_VAL0 + i */

/* T_KEY .. T_NO_PROBE set keys of the job; the rest say how this process runs it. */
static bool is_job_option(topt_t id) { return id <= T_NO_PROBE; }

static bool takes_value(topt_t id)
{
    return id != T_NO_SHUFFLE && id != T_NO_PROBE && id != T_NO_EVAL && id != T_PRINT_PLAN &&
           id != T_INSECURE && id != T_TRUSTED_FABRIC && id != T_HELP;
}

/* The overrides of the job, "key=value" in command-line order with the flag each came from:
 * applied once the experiment (file or defaults) is there. */
typedef struct {
    struct {
        char kv[1100];
        char flag[72];
    } *set;
    int n;
    bool counts_given; /* epochs or iterations set */
} job_sets_t;

static int add_set(job_sets_t *s, const char *flag, const char *key, const char *val)
{
    s->set = xrealloc(s->set, (size_t)(s->n + 1) * sizeof *s->set);
    snprintf(s->set[s->n].flag, sizeof s->set[s->n].flag, "%s", flag);
    if (snprintf(s->set[s->n].kv, sizeof s->set[s->n].kv, "%s%s%s", key, val ? "=" : "",
                 val ? val : "") >= (int)sizeof s->set[s->n].kv) {
        fprintf(stderr, "poseidon train: %s: value too long\n", flag);
        return -1;
    }
    s->n++;
    return 0;
}

/* --link G,L: the link as a probe would have measured it. */
static int add_link(job_sets_t *s, const char *flag, const char *v)
{
    double g, l;
    char buf[64];
    snprintf(buf, sizeof buf, "%s", v);
    char *comma = strchr(buf, ',');
    if (comma) *comma = 0;
    if (!comma || kv_double(buf, &g) || kv_double(comma + 1, &l) || !(g > 0) || l < 0) {
        fprintf(stderr, "poseidon train: --link expects GBPS,LATENCY_US (e.g. 0.94,50), got "
                        "'%s'\n", v);
        return -1;
    }
    return add_set(s, flag, "cluster.nic_gbps", buf) ||
           add_set(s, flag, "cluster.latency_us", comma + 1) ||
           add_set(s, flag, "cluster.nic_efficiency=1", NULL) || add_set(s, flag, "probe=no", NULL)
               ? -1 : 0;
}

/* An option that sets keys of the job. 0, or -1 (printed). */
static int job_option(train_args_t *a, job_sets_t *s, int i, const char *flag, const char *v)
{
    switch (s_opts[i].id) {
    case T_WORKERS:
        if (flag_int32("train", flag, v, 1, 1 << 20, &a->workers)) return -1;
        return add_set(s, flag, s_opts[i].key, v);
    case T_ITERATIONS:
    case T_EPOCHS:
        s->counts_given = true;
        if (s_opts[i].id == T_ITERATIONS && add_set(s, flag, "epochs=0", NULL)) return -1;
        return add_set(s, flag, s_opts[i].key, v);
    case T_SET:
        if (!strncmp(v, "epochs=", 7) || !strncmp(v, "iterations=", 11)) s->counts_given = true;
        return add_set(s, flag, v, NULL);
    case T_SSP: {
        int n;
        char val[32];
        if (flag_int32("train", flag, v, 0, 999, &n)) return -1;
        snprintf(val, sizeof val, "ssp:%d", n);
        return add_set(s, flag, "consistency", n ? val : "bsp");
    }
    case T_LINK: return add_link(s, flag, v);
    case T_NO_SHUFFLE: return add_set(s, flag, "shuffle=no", NULL);
    case T_NO_PROBE: return add_set(s, flag, "probe=no", NULL);
    default: return add_set(s, flag, s_opts[i].key, v);
    }
}

/* An option of how this process runs the job. 0, or -1 (printed). */
static int run_option(train_args_t *a, int i, const char *flag, const char *v)
{
    worker_config_t *c = &a->cfg;
    long long x;
    switch (s_opts[i].id) {
    case T_NO_EVAL: c->evaluate = false; return 0;
    case T_PRINT_PLAN: c->print_plan = true; return 0;
    case T_INSECURE: c->security.insecure = true; return 0;
    case T_TRUSTED_FABRIC: c->security.trusted_fabric = true; return 0;
    case T_REPORT_EVERY:
        if (flag_int("train", flag, v, 1, 1LL << 40, &x)) return -1;
        c->report_every = x;
        return 0;
    case T_CKPT_EVERY:
        if (flag_int("train", flag, v, 1, 1LL << 40, &x)) return -1;
        c->checkpoint_every = x;
        return 0;
    case T_DEVICE:
        if (compute_kind_parse(v, &c->device) == 0) return 0;
        fprintf(stderr, "poseidon train: --device is cpu or cuda, not '%s'\n", v);
        return -1;
    case T_THREADS: return flag_int32("train", flag, v, 0, 4096, &c->threads);
    case T_TIMEOUT: return flag_int32("train", flag, v, 100, 1 << 30, &c->timeout_ms);
    case T_CSV: c->csv_path = v; return 0;
    case T_TRACE: c->trace_prefix = v; return 0;
    case T_PARAMS_OUT: c->params_out = v; return 0;
    case T_JOB_OUT: snprintf(a->job_out, sizeof a->job_out, "%s", v); return 0;
    case T_KEYS: c->security.keys_dir = v; return 0;
    case T_CKPT_DIR: c->checkpoint_dir = v; return 0;
    case T_RESUME: a->resume = v; return 0;
    case T_CKPT: a->checkpoint = v; return 0;
    case T_RESUME_CHANGED: c->resume_changed = v; return 0;
    default: ASSERT(0, "option %s unhandled", flag); return -1;
    }
}

/* The command line into a (the job's overrides into s). Returns -1 to go on, or the exit
 * code (0 after --help). */
static int parse_options(train_args_t *a, job_sets_t *s, int argc, char **argv)
{
    struct option lo[N_OPTS + 1];
    for (int i = 0; i < N_OPTS; i++)
        lo[i] = (struct option){s_opts[i].name, takes_value(s_opts[i].id) ? required_argument
                                                                          : no_argument,
                                NULL, OPT_VAL0 + i};
    lo[N_OPTS] = (struct option){0};
    flag_parser_t p;
    flag_begin(&p, "train", argc, argv, "h", lo);
    for (int c; (c = flag_next(&p)) != FLAG_END;) {
        if (c == FLAG_BAD) return 2;
        if (c == 'h' || (c >= OPT_VAL0 && s_opts[c - OPT_VAL0].id == T_HELP)) {
            usage(stdout);
            return 0;
        }
        if (c == FLAG_ARG) {
            if (a->exp_path) {
                fprintf(stderr, "poseidon train: one EXPERIMENT expected, got '%s' and '%s'\n",
                        a->exp_path, p.arg);
                return 2;
            }
            a->exp_path = p.arg;
            continue;
        }
        int i = c - OPT_VAL0;
        if (s_opts[i].dist_only && !a->dist_only) a->dist_only = s_opts[i].name;
        if (is_job_option(s_opts[i].id) ? job_option(a, s, i, p.opt, p.arg)
                                        : run_option(a, i, p.opt, p.arg))
            return 2;
    }
    return -1;
}

/* The precisions the runtime cannot run yet, each refused with one line naming the key and
 * what is allowed: fp16's loss scaling on one replica or under SSP. (bf16 and fp16 compute
 * their products in half on a GPU, in fp32 on the CPU: docs/precision.md.) Returns 1 after
 * printing it, else 0. */
static int precision_refused(const train_args_t *a, const experiment_t *job)
{
    if (job->precision != PRECISION_FP16) return 0;
    if (!a->dist || (job->nodes[0] < 2 && job->cluster.devices_per_node < 2)) {
        fprintf(stderr, "poseidon train: %s: expected precision = fp32 | bf16 on one worker "
                        "of one device (the loss scaling runs on several: --workers N or "
                        "--devices-per-node D), got precision = fp16\n", job->precision_at);
        return 1;
    }
    if (job->staleness > 0) {
        fprintf(stderr, "poseidon train: %s: expected consistency = bsp with precision = fp16 "
                        "(each backward scales by the verdict of the iteration before), got "
                        "consistency = ssp:%d\n", job->precision_at, job->staleness);
        return 1;
    }
    return 0;
}

/* The job: the experiment file or the defaults, then the overrides in order; the keys a
 * device implies; the keys that constrain each other. 0, or -1 (printed). */
static int build_job(train_args_t *a, job_sets_t *s)
{
    char err[2048];
    experiment_t *job = &a->cfg.job;
    launch_env_t env;
    /* a launcher's environment that does not read well is still a launcher's: the workers
     * say what is wrong with it */
    int bad_env = launch_env_detect(&env, err, sizeof err);
    a->launched = bad_env || env.source != LAUNCH_NONE;
    if (a->exp_path) {
        if (experiment_load(job, a->exp_path, err, sizeof err)) {
            fprintf(stderr, "poseidon train: %s\n", err);
            return -1;
        }
    } else {
        experiment_defaults(job);
        if (!s->counts_given) job->train.epochs = 1;
        /* under a launcher without a file, the job has the launcher's ranks */
        if (a->workers == 0 && a->launched && !bad_env) {
            char n[32];
            snprintf(n, sizeof n, "cluster.nodes=%d", env.world);
            if (add_set(s, "the launcher", n, NULL)) return -1;
        }
    }
    for (int i = 0; i < s->n; i++)
        if (experiment_override_as(job, s->set[i].kv, s->set[i].flag, err, sizeof err)) {
            fprintf(stderr, "poseidon train: %s\n", err);
            return -1;
        }
    a->dist = a->workers > 0 || a->launched || job->nodes[0] > 1 ||
              job->cluster.devices_per_node > 1;
    /* GPU workers copy each layer through host memory: the plan's host-staging ops, over
     * the host link (PCIe 5 x16, an H100's, unless the cluster names its own); CPU devices
     * share the host's memory */
    if (a->cfg.device != COMPUTE_CPU && a->dist &&
        ((!(job->cluster.intra_Bps > 0) &&
          experiment_override_as(job, "cluster.interconnect=pcie5", "--device", err, sizeof err)) ||
         experiment_override_as(job, "cluster.host_staging=yes", "--device", err, sizeof err))) {
        fprintf(stderr, "poseidon train: %s\n", err);
        return -1;
    }
    if (a->cfg.device == COMPUTE_CPU && job->cluster.devices_per_node > 1)
        job_host_memory_link(&job->cluster);
    if (experiment_check_overrides(job, err, sizeof err)) {
        fprintf(stderr, "poseidon train: %s%s\n", err,
                job->model_path[0] ? "" : " (--model FILE, or an EXPERIMENT file)");
        return -1;
    }
    if (precision_refused(a, job)) return -1;
    if (experiment_config_count(job) != 1) {
        fprintf(stderr, "poseidon train: the experiment has %d configurations (sweep_nodes, "
                        "sweep_gbps, sweep_schemes); choose one with --set sweep_KEY=VALUE\n",
                experiment_config_count(job));
        return -1;
    }
    return 0;
}

/* A job of one node and one device, in this process. */
static int run_one(train_args_t *a, int argc, char **argv)
{
    const experiment_t *job = &a->cfg.job;
    if (a->dist_only) {
        fprintf(stderr, "poseidon train: --%s is for the distributed workers; a job of one node "
                        "and one device trains in this process (--workers 1 runs it on a "
                        "worker)\n", a->dist_only);
        return 2;
    }
    if (job->train.compute == COMPUTE_MODE_EMULATE || job->train.time_dilation > 1) {
        fprintf(stderr, "poseidon train: %s runs on the distributed workers (--workers N)\n",
                job->train.time_dilation > 1 ? "time_dilation" : "compute = emulate");
        return 2;
    }
    log_banner(argc, argv, job->seed);
    train_one_config_t c = {.job = job, .device = a->cfg.device, .threads = a->cfg.threads,
                            .csv_path = a->cfg.csv_path, .checkpoint = a->checkpoint,
                            .resume = a->resume, .resume_changed = a->cfg.resume_changed,
                            .job_out = strcmp(a->job_out, "none") ? a->job_out : NULL};
    return train_one_run(&c);
}

int cmd_train(int argc, char **argv)
{
    train_args_t *a = xcalloc(1, sizeof *a);
    worker_config_init(&a->cfg);
    job_sets_t s = {0};
    int rc = parse_options(a, &s, argc, argv);
    if (rc < 0 && !a->exp_path && s.n == 0 && !a->cfg.job.model_path[0]) {
        usage(stderr); /* nothing that makes a job */
        rc = 2;
    }
    if (rc < 0 && build_job(a, &s)) rc = 2;
    free(s.set);
    if (rc < 0) {
        const experiment_t *job = &a->cfg.job;
        if (!a->job_out[0]) job_out_default(job->model_path, a->job_out, sizeof a->job_out);
        rc = a->dist ? train_dist_run(a, argc, argv) : run_one(a, argc, argv);
    }
    free(a);
    return rc;
}
