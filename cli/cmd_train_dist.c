/* poseidon train EXPERIMENT | --workers N ...: distributed training. The job is an experiment
 * (core/experiment.h): a file, `--set KEY=VALUE` overrides, and the shorthand flags below,
 * each of which sets one experiment key in the key's own units. Each rank runs
 * runtime/exec/worker (the plan built by core/, executed for real over ZeroMQ). --workers N, or
 * an experiment file outside a launcher, forks a local job; otherwise the rank comes from the
 * launcher's environment (mpirun, srun, or RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT by hand).
 * Rank 0 prints the report rows on stdout and writes the experiment it ran. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli/commands.h"
#include "cli/flags.h"
#include "cli/job_out.h"
#include "core/check.h"
#include "core/kvfile.h"
#include "core/log.h"
#include "runtime/exec/data.h"
#include "runtime/exec/job_checkpoint.h"
#include "runtime/transport/launch.h"
#include "runtime/exec/worker.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: poseidon train EXPERIMENT [--set KEY=VALUE]... [options]\n"
            "       poseidon train --workers N --model FILE [options]   (a local job)\n"
            "       mpirun -np N poseidon train [EXPERIMENT] [options]  (or srun, or RANK=...)\n\n"
            "Data-parallel training on N workers that execute the plan of the simulator: per\n"
            "layer PS (sharded, one shard per worker), SFB or ring all-reduce, wait-free\n"
            "backprop, BSP or SSP. The job is the experiment (poseidon sim reads the same\n"
            "file and keys): one configuration of it, on as many workers as its nodes. Rank 0\n"
            "prints rows: epoch,iteration,loss,train_acc,test_acc,images_per_s,seconds (loss\n"
            "and accuracies are rank 0's), and writes the experiment it ran (--job-out), on\n"
            "which poseidon sim predicts the run.\n\n"
            "the job (each flag sets the experiment key in brackets):\n"
            "  --set KEY=VALUE     any experiment key, or cluster.KEY (poseidon sim --help)\n"
            "  --workers N         fork N local workers [cluster.nodes] (default: the\n"
            "                      experiment's nodes, or the launcher's ranks)\n"
            "  --devices-per-node D  device threads per node, each with a replica and its own\n"
            "                      batch; the node combines their gradients in memory and\n"
            "                      syncs once [cluster.devices_per_node] (1; D > 1 needs\n"
            "                      cluster.interconnect or intra_gbps/intra_latency_us);\n"
            "                      under a launcher: one rank per node\n"
            "  --model FILE        network description [model]\n"
            "  --cluster FILE      cluster file [cluster] (default: cluster defaults)\n"
            "  --scheme S          ps | ps+wfbp | sfb+wfbp | allreduce+wfbp | hybrid | hybrid3\n"
            "                      [scheme] (default hybrid)\n"
            "  --ssp S             staleness, 0: BSP [consistency] (default 0)\n"
            "  --batch K           samples per worker and step [batch] (default 32)\n"
            "  --epochs E          epochs over the training set [epochs] (default 1 when\n"
            "                      neither an experiment file nor --iterations is given)\n"
            "  --iterations I      total steps instead of epochs [iterations]\n"
            "  --data D            fashion-mnist or synthetic [data]\n"
            "  --data-dir DIR      IDX files [data_dir] (default " DATA_FASHION_MNIST_DIR ")\n"
            "  --synthetic-n N     synthetic training samples in all [synthetic_n] (1024)\n"
            "  --limit N           use only the first N training samples [limit]\n"
            "  --no-shuffle        keep each partition in order [shuffle = no]\n"
            "  --compute C         real or emulate: FWD/BWD sleep for the profile's times\n"
            "                      [compute]\n"
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
            "                      [allreduce_bucket_mb] (0: one ring per layer)\n"
            "  --lr X --momentum X --weight-decay X   SGD [lr, momentum, weight_decay]\n"
            "                      (0.01, 0.9, 0.0005)\n"
            "  --seed S            initialisation, shuffling, synthetic data [seed] (1)\n\n"
            "how this process runs it:\n"
            "  --report-every I    steps between report rows (default: one per epoch)\n"
            "  --no-eval           no test accuracy in the rows\n"
            "  --threads T         BLAS threads per worker (default 1)\n"
            "  --device D          cpu (default) or cuda: one GPU per device thread (GPU\n"
            "                      LOCAL_RANK x D + d of the visible ones); each layer's\n"
            "                      gradient goes to host memory and the synced values come\n"
            "                      back over the host link (sets cluster.host_staging = yes,\n"
            "                      and cluster.interconnect = pcie5 unless the cluster has one)\n"
            "  --timeout-ms MS     bound of every wait (default 60000)\n"
            "  --csv FILE          rank 0's rows, each with the hash of the plan that ran\n"
            "  --trace PREFIX      PREFIX-rank<R>.csv/.json per rank, merged into PREFIX.csv\n"
            "                      and one Chrome/Perfetto PREFIX.json\n"
            "  --params-out PATH   each rank writes its final parameters to PATH.<rank> (and\n"
            "                      device d > 0's replica to PATH.<rank>.<d>)\n"
            "  --job-out FILE      where rank 0 writes the experiment it ran (default\n"
            "                      out/runs/MODEL-DATE-TIME.exp; 'none': nowhere)\n"
            "  --print-plan        rank 0 prints the plan's per-unit table\n"
            "  --checkpoint-dir DIR  coordinated checkpoints: DIR/iter-K/, one file per rank\n"
            "                      and COMPLETE once all are written; the newest two stay\n"
            "  --checkpoint-every K  a checkpoint before iteration K, 2K, ... (iterations)\n"
            "  --resume DIR        start from the newest complete checkpoint in DIR (the\n"
            "                      same model, ranks, plan and seed); with\n"
            "                      --checkpoint-every, DIR is also where checkpoints go\n\n"
            "transport (every socket speaks ZeroMQ CURVE: encrypted, and only the job's ranks\n"
            "get in; a local job makes its keys in memory):\n"
            "  --keys DIR          the job's keys, from poseidon keygen --ranks N -o DIR\n"
            "                      (needed under mpirun, srun or RANK=...)\n"
            "  --insecure          plain TCP, for a job whose ranks all run on this machine\n");
}

/* The flags that stand for one experiment key each. */
static const struct {
    const char *flag, *key;
} s_shorthands[] = {
    {"--workers", "cluster.nodes"},   {"--model", "model"},
    {"--devices-per-node", "cluster.devices_per_node"},
    {"--cluster", "cluster"},         {"--scheme", "scheme"},
    {"--batch", "batch"},             {"--epochs", "epochs"},
    {"--iterations", "iterations"},   {"--warmup", "warmup"},
    {"--data", "data"},               {"--data-dir", "data_dir"},
    {"--synthetic-n", "synthetic_n"}, {"--limit", "limit"},
    {"--compute", "compute"},         {"--profile", "profile"},
    {"--probe-bytes", "probe_bytes"}, {"--kv-block-mb", "kv_block_mb"},
    {"--kv-placement", "kv_placement"}, {"--bucket-mb", "allreduce_bucket_mb"},
    {"--lr", "lr"},                   {"--momentum", "momentum"},
    {"--weight-decay", "weight_decay"}, {"--seed", "seed"},
};
#define N_SHORTHANDS ((int)(sizeof s_shorthands / sizeof s_shorthands[0]))

/* One override of the job, in command-line order: "key=value" and the flag it came from. */
typedef struct {
    char kv[1100];
    const char *flag;
} job_set_t;

typedef struct {
    worker_config_t cfg;
} td_t;

static int add_set(job_set_t **sets, int *n, const char *flag, const char *fmt, const char *a,
                   const char *b)
{
    *sets = xrealloc(*sets, (size_t)(*n + 1) * sizeof **sets);
    job_set_t *s = &(*sets)[(*n)++];
    s->flag = flag;
    if (snprintf(s->kv, sizeof s->kv, fmt, a, b) >= (int)sizeof s->kv) {
        fprintf(stderr, "poseidon train: %s: value too long\n", flag);
        return -1;
    }
    return 0;
}

/* Whether paths a and b name one existing directory. */
static bool same_dir(const char *a, const char *b)
{
    struct stat x, y;
    if (stat(a, &x) || stat(b, &y)) return !strcmp(a, b);
    return x.st_dev == y.st_dev && x.st_ino == y.st_ino;
}

/* The checkpoint flags together: --checkpoint-every goes with a directory (--resume's by
 * default), --resume needs a complete checkpoint, and a job writes into a directory that
 * holds no other run's checkpoint (its pruning would mix the two). 0, or -1 (printed). */
static int check_checkpoint_flags(worker_config_t *c)
{
    char err[8800];
    if (c->checkpoint_every && !c->checkpoint_dir) c->checkpoint_dir = c->resume_dir;
    if (c->checkpoint_every && !c->checkpoint_dir) {
        fprintf(stderr, "poseidon train: --checkpoint-every needs --checkpoint-dir DIR\n");
        return -1;
    }
    if (c->checkpoint_dir && !c->checkpoint_every) {
        fprintf(stderr, "poseidon train: --checkpoint-dir needs --checkpoint-every K\n");
        return -1;
    }
    int64_t k;
    if (c->resume_dir && job_ckpt_newest(c->resume_dir, &k, err, sizeof err)) {
        fprintf(stderr, "poseidon train: --resume: %s\n", err);
        return -1;
    }
    if (c->resume_dir) { /* what can be told before any rank starts (the plan cannot) */
        char path[4200], model[MODEL_NAME_MAX];
        job_ckpt_complete_path(path, sizeof path, c->resume_dir, k);
        const char *base = strrchr(c->job.model_path, '/');
        /* the model's name as model_load makes it: the file name without ".net" */
        snprintf(model, sizeof model, "%.95s", base ? base + 1 : c->job.model_path);
        char *dot = strstr(model, ".net");
        if (dot && dot[4] == '\0') *dot = '\0';
        job_ckpt_complete_t done;
        int rc = job_ckpt_read_complete(path, &done, NULL, err, sizeof err);
        if (rc == 0) {
            rc = job_ckpt_check_complete(&done, path, model, c->job.nodes[0],
                                         c->job.cluster.devices_per_node, c->job.seed, 0,
                                         c->job.train.epochs > 0 ? 0 : c->job.iterations, err,
                                         sizeof err);
            free(done.files);
        }
        if (rc) {
            fprintf(stderr, "poseidon train: --resume: %s\n", err);
            return -1;
        }
    }
    if (c->checkpoint_dir && (!c->resume_dir || !same_dir(c->checkpoint_dir, c->resume_dir)) &&
        job_ckpt_newest(c->checkpoint_dir, &k, err, sizeof err) == 0) {
        fprintf(stderr, "poseidon train: --checkpoint-dir: %s holds the checkpoint of "
                        "iteration %lld of another run: resume it (--resume %s) or choose "
                        "another directory\n", c->checkpoint_dir, (long long)k,
                c->checkpoint_dir);
        return -1;
    }
    return 0;
}

/* Parses argv into the config; returns -1 to go on, or the exit code. */
static int parse(int argc, char **argv, worker_config_t *c, int *workers, char *job_out,
                 size_t job_out_len)
{
    const char *exp_path = NULL;
    job_set_t *sets = NULL;
    int n_sets = 0, rc = 2;
    bool counts_given = false;
    *workers = 0;
    job_out[0] = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            rc = 0;
            goto out;
        }
        if (a[0] != '-') {
            if (exp_path) {
                fprintf(stderr, "poseidon train: one EXPERIMENT expected, got '%s' and '%s'\n",
                        exp_path, a);
                goto out;
            }
            exp_path = a;
            continue;
        }
        if (!strcmp(a, "--no-shuffle")) {
            if (add_set(&sets, &n_sets, a, "shuffle=no%s%s", "", "")) goto out;
            continue;
        }
        if (!strcmp(a, "--no-probe")) {
            if (add_set(&sets, &n_sets, a, "probe=no%s%s", "", "")) goto out;
            continue;
        }
        if (!strcmp(a, "--no-eval")) { c->evaluate = false; continue; }
        if (!strcmp(a, "--print-plan")) { c->print_plan = true; continue; }
        if (!strcmp(a, "--insecure")) { c->security.insecure = true; continue; }
        if (i + 1 >= argc) {
            fprintf(stderr, "poseidon train: unknown option or missing value: '%s'\n", a);
            goto out;
        }
        const char *v = argv[++i];
        int k = 0;
        while (k < N_SHORTHANDS && strcmp(a, s_shorthands[k].flag)) k++;
        if (k < N_SHORTHANDS) {
            if (add_set(&sets, &n_sets, a, "%s=%s", s_shorthands[k].key, v)) goto out;
            if (!strcmp(a, "--iterations") &&
                add_set(&sets, &n_sets, a, "epochs=0%s%s", "", ""))
                goto out;
            if (!strcmp(a, "--workers") && flag_int32("train", a, v, 1, 1 << 20, workers))
                goto out;
            counts_given |= !strcmp(a, "--iterations") || !strcmp(a, "--epochs");
            continue;
        }
        if (!strcmp(a, "--link")) { /* the link as a probe would have measured it */
            double g, l;
            char buf[64];
            snprintf(buf, sizeof buf, "%s", v);
            char *comma = strchr(buf, ',');
            if (comma) *comma = 0;
            if (!comma || kv_double(buf, &g) || kv_double(comma + 1, &l) || !(g > 0) || l < 0) {
                fprintf(stderr, "poseidon train: --link expects GBPS,LATENCY_US (e.g. 0.94,50), "
                                "got '%s'\n", v);
                goto out;
            }
            if (add_set(&sets, &n_sets, a, "cluster.nic_gbps=%s%s", buf, "") ||
                add_set(&sets, &n_sets, a, "cluster.latency_us=%s%s", comma + 1, "") ||
                add_set(&sets, &n_sets, a, "cluster.nic_efficiency=1%s%s", "", "") ||
                add_set(&sets, &n_sets, a, "probe=no%s%s", "", ""))
                goto out;
        } else if (!strcmp(a, "--set")) {
            if (add_set(&sets, &n_sets, a, "%s%s", v, "")) goto out;
            if (!strncmp(v, "epochs=", 7) || !strncmp(v, "iterations=", 11)) counts_given = true;
        } else if (!strcmp(a, "--ssp")) {
            int s;
            if (flag_int32("train", a, v, 0, 999, &s)) goto out;
            char val[32];
            snprintf(val, sizeof val, "ssp:%d", s);
            if (add_set(&sets, &n_sets, a, "consistency=%s%s", s ? val : "bsp", "")) goto out;
        } else if (!strcmp(a, "--report-every")) {
            long long x;
            if (flag_int("train", a, v, 1, 1LL << 40, &x)) goto out;
            c->report_every = x;
        } else if (!strcmp(a, "--device")) {
            if (compute_kind_parse(v, &c->device)) {
                fprintf(stderr, "poseidon train: --device is cpu or cuda, not '%s'\n", v);
                goto out;
            }
        } else if (!strcmp(a, "--threads")) {
            if (flag_int32("train", a, v, 1, 4096, &c->threads)) goto out;
        } else if (!strcmp(a, "--timeout-ms")) {
            if (flag_int32("train", a, v, 100, 1 << 30, &c->timeout_ms)) goto out;
        } else if (!strcmp(a, "--csv")) c->csv_path = v;
        else if (!strcmp(a, "--trace")) c->trace_prefix = v;
        else if (!strcmp(a, "--params-out")) c->params_out = v;
        else if (!strcmp(a, "--job-out")) snprintf(job_out, job_out_len, "%s", v);
        else if (!strcmp(a, "--keys")) c->security.keys_dir = v;
        else if (!strcmp(a, "--checkpoint-dir")) c->checkpoint_dir = v;
        else if (!strcmp(a, "--resume")) c->resume_dir = v;
        else if (!strcmp(a, "--checkpoint-every")) {
            long long x;
            if (flag_int("train", a, v, 1, 1LL << 40, &x)) goto out;
            c->checkpoint_every = x;
        }
        else {
            fprintf(stderr, "poseidon train: unknown option '%s' (--help lists them)\n", a);
            goto out;
        }
    }

    char err[2048];
    experiment_t *job = &c->job;
    if (exp_path) {
        if (experiment_load(job, exp_path, err, sizeof err)) {
            fprintf(stderr, "poseidon train: %s\n", err);
            goto out;
        }
    } else {
        experiment_defaults(job);
        if (!counts_given) job->train.epochs = 1;
        /* under a launcher without a file, the job has the launcher's ranks */
        launch_env_t env;
        if (*workers == 0 && launch_env_detect(&env, err, sizeof err) == 0 &&
            env.source != LAUNCH_NONE) {
            char n[32];
            snprintf(n, sizeof n, "%d", env.world);
            if (add_set(&sets, &n_sets, "the launcher", "cluster.nodes=%s%s", n, "")) goto out;
        }
    }
    for (int i = 0; i < n_sets; i++)
        if (experiment_override_as(job, sets[i].kv, sets[i].flag, err, sizeof err)) {
            fprintf(stderr, "poseidon train: %s\n", err);
            goto out;
        }
    /* GPU workers copy each layer through host memory: the plan's host-staging ops, over
     * the host link (PCIe 5 x16, an H100's, unless the cluster names its own) */
    if (c->device != COMPUTE_CPU &&
        ((!(job->cluster.intra_Bps > 0) &&
          experiment_override_as(job, "cluster.interconnect=pcie5", "--device", err, sizeof err)) ||
         experiment_override_as(job, "cluster.host_staging=yes", "--device", err, sizeof err))) {
        fprintf(stderr, "poseidon train: %s\n", err);
        goto out;
    }
    if (c->security.insecure && c->security.keys_dir) {
        fprintf(stderr, "poseidon train: --keys and --insecure: choose one\n");
        goto out;
    }
    if (experiment_check_overrides(job, err, sizeof err)) {
        fprintf(stderr, "poseidon train: %s%s\n", err,
                job->model_path[0] ? "" : " (--model FILE, or an EXPERIMENT file)");
        goto out;
    }
    if (experiment_config_count(job) != 1) {
        fprintf(stderr, "poseidon train: the experiment has %d configurations (sweep_nodes, "
                        "sweep_gbps, sweep_schemes); choose one with --set sweep_KEY=VALUE\n",
                experiment_config_count(job));
        goto out;
    }
    if (job->kv_block_bytes % 4) {
        fprintf(stderr, "poseidon train: kv_block_mb must be a whole number of 4-byte words\n");
        goto out;
    }
    if (job->train.compute == COMPUTE_MODE_EMULATE && !job->profile_path[0]) {
        fprintf(stderr, "poseidon train: compute = emulate needs a profile (--profile CSV)\n");
        goto out;
    }
    if (exp_path && *workers == 0) { /* outside a launcher, a local job of the nodes */
        launch_env_t env;
        if (launch_env_detect(&env, err, sizeof err) == 0 && env.source == LAUNCH_NONE)
            *workers = job->nodes[0];
    }
    if (job->cluster.devices_per_node > 1) {
        int d = job->cluster.devices_per_node;
        /* the synthetic set's size is known here: said once, not by every rank */
        int n = job->train.synthetic_n;
        if (job->train.limit > 0 && job->train.limit < n) n = job->train.limit;
        if (!strcmp(job->train.data, "synthetic") &&
            job->train.compute != COMPUTE_MODE_EMULATE && n / (job->nodes[0] * d) < job->batch) {
            fprintf(stderr, "poseidon train: %d training samples over %d nodes x %d devices: "
                            "fewer than a batch of %d per device (devices_per_node = %d is "
                            "more than the data allows)\n", n, job->nodes[0], d, job->batch, d);
            goto out;
        }
    }
    /* said once, not by every rank; counted apart: the ranks are forked from here, and CUDA
     * does not survive a fork */
    if (c->device != COMPUTE_CPU && *workers > 0 && job->train.compute != COMPUTE_MODE_EMULATE &&
        compute_device_count_apart(c->device, err, sizeof err) < 1) {
        fprintf(stderr, "poseidon train: --device %s: %s\n", compute_kind_name(c->device), err);
        rc = 1;
        goto out;
    }
    if (check_checkpoint_flags(c)) goto out;
    if (!job_out[0]) job_out_default(job->model_path, job_out, job_out_len);
    rc = -1;
out:
    free(sets);
    return rc;
}

int cmd_train_distributed(int argc, char **argv)
{
    td_t *td = xmalloc(sizeof *td);
    worker_config_t *c = &td->cfg;
    worker_config_init(c);
    int workers;
    char job_out[1024];
    int rc = parse(argc, argv, c, &workers, job_out, sizeof job_out);
    if (rc >= 0) {
        free(td);
        return rc;
    }
    c->job_out = strcmp(job_out, "none") ? job_out : NULL;
    log_banner(argc, argv, c->job.seed);
    rc = workers > 0 ? worker_run_local(c, workers) : worker_run(c);
    free(td);
    return rc;
}
