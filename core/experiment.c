#include "experiment.h"

#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

void experiment_init(experiment_t *e)
{
    memset(e, 0, sizeof *e);
    cluster_init(&e->cluster);
    e->scheme = (scheme_t){SCHEME_HYBRID, true};
    e->batch = 32;
    e->iterations = 5;
    e->warmup = 1;
    e->seed = 1;
    e->kv_block_bytes = 4 << 20;
    e->slice_bytes = 0; /* the send order's own (core/plan.h) */
    experiment_train_t *t = &e->train;
    snprintf(t->data, sizeof t->data, "fashion-mnist");
    t->synthetic_n = 1024;
    t->time_dilation = 1;
    t->tensor_scale = 1;
    t->shuffle = true;
    t->compute = COMPUTE_MODE_REAL;
    t->lr = 0.01;
    t->momentum = 0.9;
    t->weight_decay = 5e-4;
    t->lr_policy = EXP_LR_FIXED;
    t->lr_gamma = 0.1;
    t->lr_power = 1.0;
    t->init = EXP_INIT_AUTO;
    t->probe = PROBE_AUTO;
    t->probe_bytes = 4 << 20;
    t->keep_checkpoints = 2;
    t->loss_scale_init = 65536;
    t->loss_scale_growth_interval = 2000;
    t->overflow_rank = -1;
    t->overflow_iter = -1;
}

/* After the lines of a file (or none): the sweeps default to the base values. */
static void sweeps_default(experiment_t *e)
{
    if (e->n_nodes == 0) e->nodes[e->n_nodes++] = e->cluster.nodes;
    if (e->n_gbps == 0) e->gbps[e->n_gbps++] = e->cluster.nic_Bps * 8 / 1e9;
    if (e->n_schemes == 0) e->schemes[e->n_schemes++] = e->scheme;
}

void experiment_defaults(experiment_t *e)
{
    experiment_init(e);
    snprintf(e->cluster_path, sizeof e->cluster_path, "defaults");
    e->cluster_given = true;
    sweeps_default(e);
}

const char *net_model_name(net_model_t m)
{
    return m == NET_MODEL_EXACT ? "exact" : m == NET_MODEL_WHOLE ? "whole" : "auto";
}

net_model_t net_model_for(net_model_t m, int nodes)
{
    (void)nodes; /* exact max-min is fast enough at every size (README, Simulator speed) */
    return m == NET_MODEL_AUTO ? NET_MODEL_EXACT : m;
}

const char *experiment_keys_help(void)
{
    return "  model = FILE.net          network (required)\n"
           "  cluster = FILE.cluster    cluster (required)\n"
           "  profile = FILE.csv        measured per-layer times (layer,batch,fwd_ns,bwd_ns)\n"
           "  scheme = S                ps | ps+wfbp | sfb+wfbp | allreduce+wfbp | hybrid |\n"
           "                            hybrid3 (hybrid)\n"
           "  consistency = C           bsp | ssp:S (bsp)\n"
           "  batch = K                 images per worker per iteration (32)\n"
           "  iterations = T            simulated iterations (5)\n"
           "  warmup = W                the first W iterations are left out of the measured\n"
           "                            time: (end of T-1 - end of W-1) / (T - W) (1)\n"
           "  seed = N                  (1)\n"
           "  kv_block_mb = B           PS key-value block, 0 = even split, tensor = each\n"
           "                            tensor whole on one shard (4)\n"
           "  kv_placement = P          which shard each KV block goes to: least_loaded (the\n"
           "                            one with the fewest bytes so far) or round_robin\n"
           "                            (least_loaded)\n"
           "  hybrid_rule = R           how hybrid and hybrid3 choose: iteration (the\n"
           "                            cheapest for all layers' syncs together) or layer\n"
           "                            (Poseidon's: each layer cheapest alone) (iteration)\n"
           "  allreduce_bucket_mb = B   fuse all-reduce units, in backward order, into buckets\n"
           "                            of >= B MB, one ring each; 0 = one per layer (0)\n"
           "  precision = P             arithmetic: fp32 | bf16 | fp16; bf16 and fp16 keep\n"
           "                            fp32 master weights, fp16 scales the loss (fp32)\n"
           "  wire_precision = P        what gradients, parameters and factors are sent as:\n"
           "                            fp32 | bf16 | fp16; fp16 needs precision = fp16 (fp32)\n"
           "  send_order = O            how transfers sharing a link go: arrival (each as it\n"
           "                            is ready), layer (sliced; the slice of the layer\n"
           "                            the next forward pass needs first goes first) or\n"
           "                            fair (sliced; a connection's messages take turns)\n"
           "                            (arrival)\n"
           "  slice_bytes = N           send_order = layer or fair: the slice, bytes, a\n"
           "                            multiple of 4 from 65536 to 1073741824 (layer\n"
           "                            1048576, fair 65536)\n"
           "  net_model = M             simulated bandwidth sharing: exact (per-flow max-min),\n"
           "                            whole (broadcasts, gathers, ring steps move as one,\n"
           "                            faster), or\n"
           "                            auto (exact at every size) (auto)\n"
           "  cluster.KEY = VALUE       one key of the cluster, after `cluster =` (which may\n"
           "                            be `defaults`: every cluster key at its default)\n"
           "training keys (poseidon train; the simulator ignores them):\n"
           "  epochs = E                epochs over the training data instead of iterations\n"
           "                            (0: run `iterations`) (0)\n"
           "  data = D                  fashion-mnist | fortunes | synthetic (fashion-mnist)\n"
           "  data_dir = DIR            IDX files, or the text's folder (the Debian\n"
           "                            packages' folders)\n"
           "  synthetic_n = N           synthetic training samples, all workers (1024)\n"
           "  limit = N                 only the first N training samples, 0 = all (0)\n"
           "  shuffle = yes | no        reshuffle each worker's partition per epoch (yes)\n"
           "  compute = real | emulate  emulate: forward/backward sleep for the profile's\n"
           "                            times (no profile: the cluster's device model, as\n"
           "                            the simulator's), communication stays real (real)\n"
           "  lr, momentum, weight_decay  SGD (0.01, 0.9, 0.0005)\n"
           "  lr_policy = P             fixed | step | poly (fixed)\n"
           "  lr_gamma = X              step: the rate's factor per lr_step iterations (0.1)\n"
           "  lr_step = N               step: iterations per decay, 0 = two epochs (0)\n"
           "  lr_power = X              poly: exponent; the rate reaches 0 at the last\n"
           "                            iteration (1)\n"
           "  init = I                  auto (He before a ReLU, else Xavier) | xavier | he\n"
           "                            (auto)\n"
           "  sample = N                after training, print N characters the model writes\n"
           "                            (a text model, one worker) (0)\n"
           "  probe = auto | yes | no   measure the links at start-up and plan with the\n"
           "                            result (auto: only when the ranks span hosts)\n"
           "  probe_bytes = B           bulk bytes of the probe (4194304)\n"
           "  time_dilation = K         the run stands for a cluster K times faster: links of\n"
           "                            rate / K (experiments/emucluster.sh -k K), emulated\n"
           "                            compute K times longer, every time it reports and\n"
           "                            waits on divided by K (1)\n"
           "  tensor_scale = S          emulated compute: every tensor exchanged S times\n"
           "                            smaller, on links S times slower (emucluster.sh -s\n"
           "                            S), so that S times less memory stands for the\n"
           "                            same cluster (1)\n"
           "  keep_checkpoints = K      a job's checkpoints kept, the newest (2)\n"
           "  max_restarts = N          a job that fails restarts from its newest complete\n"
           "                            checkpoint, at most N times (0)\n"
           "  loss_scale_init = S       precision = fp16: the first loss scale, a power of\n"
           "                            two from 1 to 2^24 (65536)\n"
           "  loss_scale_growth_interval = N  precision = fp16: good steps in a row after\n"
           "                            which the loss scale doubles (2000)\n"
           "  overflow_at = R:T         tests: an inf in rank R's gradient at iteration T\n"
           "                            (compute = real)\n"
           "sweeps (poseidon sim and plan run every configuration; train runs one):\n"
           "  sweep_nodes = 1,2,4       node counts to run\n"
           "  sweep_gbps = 40,10        NIC bandwidths to run\n"
           "  sweep_schemes = ps,hybrid schemes to run\n";
}

/* A path relative to the experiment file's folder. */
static void resolve(const experiment_t *e, const char *val, char *out, size_t len)
{
    if (val[0] == '/' || !e->path[0]) {
        snprintf(out, len, "%s", val);
        return;
    }
    char dir[512];
    snprintf(dir, sizeof dir, "%s", e->path);
    snprintf(out, len, "%s/%s", dirname(dir), val);
}

/* Comma list parser: calls item() per element; returns -1 on the first bad one. */
static int split_list(const char *val, int max, int (*item)(const char *, void *, int), void *arg,
                      int *count)
{
    char buf[1024];
    snprintf(buf, sizeof buf, "%s", val);
    int n = 0;
    char *save = NULL;
    for (char *tok = strtok_r(buf, ", \t", &save); tok; tok = strtok_r(NULL, ", \t", &save)) {
        if (n == max || item(tok, arg, n)) return -1;
        n++;
    }
    if (n == 0) return -1;
    *count = n;
    return 0;
}

static int item_nodes(const char *tok, void *arg, int i)
{
    long long v;
    if (kv_int(tok, &v) || v < 1 || v > 10000000) return -1;
    ((int *)arg)[i] = (int)v;
    return 0;
}

static int item_gbps(const char *tok, void *arg, int i)
{
    double v;
    if (kv_double(tok, &v) || v <= 0) return -1;
    ((double *)arg)[i] = v;
    return 0;
}

static int item_scheme(const char *tok, void *arg, int i)
{
    return scheme_parse(tok, &((scheme_t *)arg)[i]);
}

static int parse_bool(const char *val, bool *out)
{
    if (!strcmp(val, "yes") || !strcmp(val, "true") || !strcmp(val, "1")) *out = true;
    else if (!strcmp(val, "no") || !strcmp(val, "false") || !strcmp(val, "0")) *out = false;
    else return -1;
    return 0;
}

/* `cluster = FILE` or `cluster = defaults`, read where the key is met so that later
 * `cluster.KEY` lines change it. */
static int cluster_open(experiment_t *e, const char *val, const char *where, char *err,
                        size_t errlen)
{
    e->cluster_given = true;
    if (!strcmp(val, "defaults")) {
        snprintf(e->cluster_path, sizeof e->cluster_path, "defaults");
        cluster_init(&e->cluster);
        return 0;
    }
    resolve(e, val, e->cluster_path, sizeof e->cluster_path);
    char cerr[1024];
    if (cluster_load(&e->cluster, e->cluster_path, cerr, sizeof cerr))
        return kv_error(err, errlen, where, "cluster: %s", cerr);
    return 0;
}

/* The training keys; 1 when key is none of them. */
/* precision = fp16's loss scaling keys, and the overflow a test injects. 0, -1 (err), or 1:
 * not one of them. */
static int loss_scale_set(experiment_train_t *t, const char *key, const char *val,
                          const char *where, char *err, size_t errlen)
{
    long long i;
    double d;
    if (!strcmp(key, "loss_scale_init")) {
        int e;
        /* a power of two: unscaling is exact, so only an overflow changes what trains */
        if (kv_double(val, &d) || !(d >= 1 && d <= 16777216) || frexp(d, &e) != 0.5)
            return kv_error(err, errlen, where,
                            "expected loss_scale_init = a power of two from 1 to 16777216, "
                            "got '%s'", val);
        t->loss_scale_init = d;
    } else if (!strcmp(key, "loss_scale_growth_interval")) {
        if (kv_int(val, &i) || i < 1 || i > 1000000000)
            return kv_error(err, errlen, where,
                            "expected loss_scale_growth_interval = an integer from 1 to 1e9, "
                            "got '%s'", val);
        t->loss_scale_growth_interval = i;
    } else if (!strcmp(key, "overflow_at")) {
        long long r, it;
        char end;
        if (sscanf(val, "%lld:%lld%c", &r, &it, &end) != 2 || r < 0 || r > 1000000 || it < 0)
            return kv_error(err, errlen, where,
                            "expected overflow_at = RANK:ITERATION (integers >= 0), got '%s'",
                            val);
        t->overflow_rank = (int)r;
        t->overflow_iter = it;
    } else {
        return 1;
    }
    return 0;
}

static int train_set(experiment_train_t *t, const experiment_t *e, const char *key,
                     const char *val, const char *where, char *err, size_t errlen)
{
    long long i;
    double d;
    if (!strcmp(key, "epochs") || !strcmp(key, "synthetic_n") || !strcmp(key, "limit")) {
        long long lo = strcmp(key, "synthetic_n") ? 0 : 1;
        if (kv_int(val, &i) || i < lo || i > 1000000000)
            return kv_error(err, errlen, where, "expected %s = an integer from %lld to 1e9, got '%s'",
                            key, lo, val);
        if (!strcmp(key, "epochs")) t->epochs = (int)i;
        else if (!strcmp(key, "synthetic_n")) t->synthetic_n = (int)i;
        else t->limit = (int)i;
    } else if (!strcmp(key, "data")) {
        if (strcmp(val, "fashion-mnist") && strcmp(val, "fortunes") && strcmp(val, "synthetic"))
            return kv_error(err, errlen, where,
                            "expected data = fashion-mnist | fortunes | synthetic, got '%s'", val);
        snprintf(t->data, sizeof t->data, "%s", val);
    } else if (!strcmp(key, "data_dir")) {
        resolve(e, val, t->data_dir, sizeof t->data_dir);
    } else if (!strcmp(key, "probe")) {
        bool b;
        if (!strcmp(val, "auto")) t->probe = PROBE_AUTO;
        else if (parse_bool(val, &b) == 0) t->probe = b ? PROBE_YES : PROBE_NO;
        else return kv_error(err, errlen, where, "expected probe = auto | yes | no, got '%s'", val);
    } else if (!strcmp(key, "shuffle")) {
        bool b;
        if (parse_bool(val, &b))
            return kv_error(err, errlen, where, "expected %s = yes | no, got '%s'", key, val);
        t->shuffle = b;
    } else if (!strcmp(key, "compute")) {
        if (!strcmp(val, "real")) t->compute = COMPUTE_MODE_REAL;
        else if (!strcmp(val, "emulate")) t->compute = COMPUTE_MODE_EMULATE;
        else return kv_error(err, errlen, where, "expected compute = real | emulate, got '%s'", val);
    } else if (!strcmp(key, "lr") || !strcmp(key, "momentum") || !strcmp(key, "weight_decay")) {
        if (kv_double(val, &d) || !(d >= 0 && d <= 1e6))
            return kv_error(err, errlen, where, "expected %s = a number from 0 to 1e6, got '%s'",
                            key, val);
        if (!strcmp(key, "lr")) t->lr = d;
        else if (!strcmp(key, "momentum")) t->momentum = d;
        else t->weight_decay = d;
    } else if (!strcmp(key, "lr_gamma") || !strcmp(key, "lr_power")) {
        if (kv_double(val, &d) || !(d >= 0 && d <= 1e6))
            return kv_error(err, errlen, where, "expected %s = a number from 0 to 1e6, got '%s'",
                            key, val);
        if (!strcmp(key, "lr_gamma")) t->lr_gamma = d;
        else t->lr_power = d;
    } else if (!strcmp(key, "lr_step") || !strcmp(key, "sample")) {
        long long hi = strcmp(key, "sample") ? 1LL << 40 : 1 << 20;
        if (kv_int(val, &i) || i < 0 || i > hi)
            return kv_error(err, errlen, where, "expected %s = an integer from 0 to %lld, got '%s'",
                            key, hi, val);
        if (!strcmp(key, "lr_step")) t->lr_step = i;
        else t->sample = (int)i;
    } else if (!strcmp(key, "lr_policy")) {
        if (!strcmp(val, "fixed")) t->lr_policy = EXP_LR_FIXED;
        else if (!strcmp(val, "step")) t->lr_policy = EXP_LR_STEP;
        else if (!strcmp(val, "poly")) t->lr_policy = EXP_LR_POLY;
        else return kv_error(err, errlen, where,
                             "expected lr_policy = fixed | step | poly, got '%s'", val);
    } else if (!strcmp(key, "init")) {
        if (!strcmp(val, "auto")) t->init = EXP_INIT_AUTO;
        else if (!strcmp(val, "xavier")) t->init = EXP_INIT_XAVIER;
        else if (!strcmp(val, "he")) t->init = EXP_INIT_HE;
        else return kv_error(err, errlen, where, "expected init = auto | xavier | he, got '%s'",
                             val);
    } else if (!strcmp(key, "time_dilation")) {
        if (kv_int(val, &i) || i < 1 || i > 10000)
            return kv_error(err, errlen, where,
                            "expected time_dilation = an integer from 1 to 10000, got '%s'", val);
        t->time_dilation = (int)i;
    } else if (!strcmp(key, "tensor_scale")) {
        if (kv_int(val, &i) || i < 1 || i > 4096)
            return kv_error(err, errlen, where,
                            "expected tensor_scale = an integer from 1 to 4096, got '%s'", val);
        t->tensor_scale = (int)i;
    } else if (!strcmp(key, "keep_checkpoints") || !strcmp(key, "max_restarts")) {
        long long lo = strcmp(key, "max_restarts") ? 1 : 0;
        if (kv_int(val, &i) || i < lo || i > 1000)
            return kv_error(err, errlen, where,
                            "expected %s = an integer from %lld to 1000, got '%s'", key, lo, val);
        if (lo) t->keep_checkpoints = (int)i;
        else t->max_restarts = (int)i;
    } else if (!strcmp(key, "probe_bytes")) {
        if (kv_int(val, &i) || i < 4 || i > (1LL << 30))
            return kv_error(err, errlen, where,
                            "expected probe_bytes = an integer from 4 to 2^30, got '%s'", val);
        t->probe_bytes = i;
    } else {
        return loss_scale_set(t, key, val, where, err, errlen);
    }
    return 0;
}

/* send_order and slice_bytes (core/plan.h). */
static int set_send_order(experiment_t *e, const char *key, const char *val, const char *where,
                          char *err, size_t errlen)
{
    long long i;
    if (!strcmp(key, "send_order")) {
        if (send_order_parse(val, &e->send_order))
            return kv_error(err, errlen, where,
                            "expected send_order = arrival | layer | fair, got '%s'", val);
        return 0;
    }
    if (kv_int(val, &i) || i < PLAN_SLICE_BYTES_MIN || i > PLAN_SLICE_BYTES_MAX || i % 4)
        return kv_error(err, errlen, where,
                        "expected slice_bytes = a multiple of 4 from %d to %d, got '%s'",
                        PLAN_SLICE_BYTES_MIN, PLAN_SLICE_BYTES_MAX, val);
    e->slice_bytes = i;
    return 0;
}

int experiment_set(experiment_t *e, const char *key, const char *val, const char *where,
                   char *err, size_t errlen)
{
    long long i;
    double d;
    if (!strcmp(key, "model")) {
        resolve(e, val, e->model_path, sizeof e->model_path);
    } else if (!strcmp(key, "cluster")) {
        return cluster_open(e, val, where, err, errlen);
    } else if (!strncmp(key, "cluster.", 8)) {
        if (!e->cluster_given)
            return kv_error(err, errlen, where, "expected a 'cluster = FILE' line before '%s'", key);
        return cluster_set(&e->cluster, key + 8, val, where, err, errlen);
    } else if (!strcmp(key, "profile")) {
        resolve(e, val, e->profile_path, sizeof e->profile_path);
    } else if (!strcmp(key, "scheme")) {
        if (scheme_parse(val, &e->scheme))
            return kv_error(err, errlen, where,
                       "expected scheme = ps | ps+wfbp | sfb+wfbp | allreduce+wfbp | hybrid | "
                       "hybrid3, got '%s'", val);
    } else if (!strcmp(key, "consistency")) {
        if (!strcmp(val, "bsp")) e->staleness = 0;
        else if (!strncmp(val, "ssp:", 4) && !kv_int(val + 4, &i) && i >= 0 && i < 1000)
            e->staleness = (int)i;
        else return kv_error(err, errlen, where, "expected consistency = bsp | ssp:S, got '%s'", val);
    } else if (!strcmp(key, "batch") || !strcmp(key, "iterations") || !strcmp(key, "warmup")) {
        if (kv_int(val, &i) || i < 1 || i > 1000000)
            return kv_error(err, errlen, where, "expected %s = an integer >= 1, got '%s'", key, val);
        if (!strcmp(key, "batch")) e->batch = (int)i;
        else if (!strcmp(key, "iterations")) e->iterations = (int)i;
        else e->warmup = (int)i;
    } else if (!strcmp(key, "seed")) {
        if (kv_int(val, &i) || i < 0)
            return kv_error(err, errlen, where, "expected seed = an integer >= 0, got '%s'", val);
        e->seed = (uint64_t)i;
    } else if (!strcmp(key, "kv_block_mb")) {
        if (!strcmp(val, "tensor")) {
            e->kv_block_bytes = KV_BLOCK_WHOLE_TENSOR;
            return 0;
        }
        if (kv_double(val, &d) || d < 0 || d > 1e9)
            return kv_error(err, errlen, where,
                            "expected kv_block_mb = MB from 0 to 1e9 or 'tensor', got '%s'", val);
        e->kv_block_bytes = llround(d * (1 << 20));
        if (d > 0 && e->kv_block_bytes < 4)
            return kv_error(err, errlen, where, "expected kv_block_mb of at least 4 bytes");
    } else if (!strcmp(key, "kv_placement")) {
        if (kv_place_parse(val, &e->kv_placement))
            return kv_error(err, errlen, where,
                            "expected kv_placement = least_loaded | round_robin, got '%s'", val);
    } else if (!strcmp(key, "hybrid_rule")) {
        if (hybrid_rule_parse(val, &e->hybrid_rule))
            return kv_error(err, errlen, where,
                            "expected hybrid_rule = iteration | layer, got '%s'", val);
    } else if (!strcmp(key, "allreduce_bucket_mb")) {
        if (kv_double(val, &d) || !(d >= 0 && d <= 1e6))
            return kv_error(err, errlen, where,
                            "expected allreduce_bucket_mb = MB from 0 to 1e6, got '%s'", val);
        e->allreduce_bucket_bytes = llround(d * (1 << 20));
    } else if (!strcmp(key, "send_order") || !strcmp(key, "slice_bytes")) {
        return set_send_order(e, key, val, where, err, errlen);
    } else if (!strcmp(key, "net_model")) {
        if (!strcmp(val, "auto")) e->net_model = NET_MODEL_AUTO;
        else if (!strcmp(val, "exact")) e->net_model = NET_MODEL_EXACT;
        else if (!strcmp(val, "whole")) e->net_model = NET_MODEL_WHOLE;
        else return kv_error(err, errlen, where,
                             "expected net_model = auto | exact | whole, got '%s'", val);
    } else if (!strcmp(key, "precision") || !strcmp(key, "wire_precision")) {
        if (precision_parse(val, !strcmp(key, "precision") ? &e->precision : &e->wire_precision))
            return kv_error(err, errlen, where, "expected %s = fp32 | bf16 | fp16, got '%s'", key,
                            val);
        snprintf(e->precision_at, sizeof e->precision_at, "%s", where);
    } else if (!strcmp(key, "sweep_nodes")) {
        if (split_list(val, EXPERIMENT_MAX_SWEEP, item_nodes, e->nodes, &e->n_nodes))
            return kv_error(err, errlen, where,
                       "expected sweep_nodes = comma list of integers >= 1 (at most %d), got '%s'",
                       EXPERIMENT_MAX_SWEEP, val);
    } else if (!strcmp(key, "sweep_gbps")) {
        if (split_list(val, EXPERIMENT_MAX_SWEEP, item_gbps, e->gbps, &e->n_gbps))
            return kv_error(err, errlen, where,
                       "expected sweep_gbps = comma list of numbers > 0, got '%s'", val);
    } else if (!strcmp(key, "sweep_schemes")) {
        if (split_list(val, EXPERIMENT_MAX_SWEEP, item_scheme, e->schemes, &e->n_schemes))
            return kv_error(err, errlen, where,
                       "expected sweep_schemes = comma list of schemes, got '%s'", val);
    } else {
        int rc = train_set(&e->train, e, key, val, where, err, errlen);
        if (rc <= 0) return rc;
        return kv_error(err, errlen, where,
                   "expected an experiment key (model, cluster, scheme, batch, ...), got unknown "
                   "key '%s'", key);
    }
    return 0;
}

/* warmup and iterations together: at least one measured iteration after the warm-up (a
 * single iteration is its own measure). */
static int check_warmup(const experiment_t *e, const char *where, char *err, size_t errlen)
{
    if (e->iterations == 1 || e->warmup < e->iterations) return 0;
    return kv_error(err, errlen, where,
                    "expected warmup < iterations (the iterations after the warm-up are the "
                    "measured ones), got warmup = %d, iterations = %d", e->warmup, e->iterations);
}

/* Every speed and nic_gbps_node line names a node of some configuration (experiment_config
 * drops a speed line for the configurations too small for its node; a NIC line for a node a
 * configuration lacks is never read), and every configuration fills whole racks. */
static int check_node_lines(const experiment_t *e, const char *where, char *err, size_t errlen)
{
    int most = 0;
    for (int i = 0; i < e->n_nodes; i++)
        if (e->nodes[i] > most) most = e->nodes[i];
    if (e->n_nodes == 0) most = e->cluster.nodes;
    for (int i = 0; i < e->cluster.n_speed; i++)
        if (e->cluster.speed_node[i] >= most)
            return kv_error(err, errlen, where,
                            "expected speed lines for nodes below %d (the most nodes run), got "
                            "node %d", most, e->cluster.speed_node[i]);
    for (int i = 0; i < e->cluster.n_nic; i++)
        if (e->cluster.nic_last[i] >= most)
            return kv_error(err, errlen, where,
                            "expected nic_gbps_node lines for nodes below %d (the most nodes "
                            "run), got node %d", most, e->cluster.nic_last[i]);
    /* every configuration's nodes fill whole racks */
    for (int i = 0; i < e->n_nodes; i++)
        if (cluster_check_racks(&e->cluster, e->nodes[i], where, err, errlen)) return -1;
    if (e->n_nodes == 0 && cluster_check_racks(&e->cluster, most, where, err, errlen))
        return -1;
    return 0;
}

/* The arithmetic and wire precisions together (core/precision.h), named where the later of
 * the two keys was given. */
static int check_precisions(const experiment_t *e, char *err, size_t errlen)
{
    char why[512];
    if (precision_check_pair(e->precision, e->wire_precision, why, sizeof why) == 0) return 0;
    return kv_error(err, errlen, e->precision_at[0] ? e->precision_at : e->path, "%s", why);
}

int experiment_check_overrides(const experiment_t *e, char *err, size_t errlen)
{
    if (!e->model_path[0])
        return kv_error(err, errlen, "--set", "expected a model (model=FILE.net)");
    if (check_node_lines(e, "--set", err, errlen)) return -1;
    if (cluster_check_devices(&e->cluster, "--set", err, errlen)) return -1;
    if (check_precisions(e, err, errlen)) return -1;
    return check_warmup(e, "--set", err, errlen);
}

static int experiment_setter(void *obj, const char *key, const char *val, int line_no,
                             const char *where, char *err, size_t errlen)
{
    (void)line_no;
    return experiment_set(obj, key, val, where, err, errlen);
}

int experiment_parse(experiment_t *e, const char *path, const char *text, char *err,
                     size_t errlen)
{
    experiment_init(e);
    snprintf(e->path, sizeof e->path, "%s", path);
    const char *base = strrchr(path, '/');
    snprintf(e->name, sizeof e->name, "%s", base ? base + 1 : path);
    char *dot = strrchr(e->name, '.');
    if (dot) *dot = 0;

    int line_no = 0;
    static const char *const repeatable[] = {"cluster.speed", "cluster.nic_gbps_node", NULL};
    if (kv_parse_text(path, text, experiment_setter, e, repeatable, &line_no, err, errlen))
        return -1;
    char where[600];
    snprintf(where, sizeof where, "%s:%d", path, line_no);
    if (!e->model_path[0]) return kv_error(err, errlen, where, "expected a 'model = FILE' line");
    if (!e->cluster_given) return kv_error(err, errlen, where, "expected a 'cluster = FILE' line");
    if (check_warmup(e, where, err, errlen)) return -1;
    if (check_precisions(e, err, errlen)) return -1;
    if (e->cluster.ps_shards > e->cluster.nodes)
        return kv_error(err, errlen, where, "expected cluster ps_shards <= nodes (%d), got %d",
                        e->cluster.nodes, e->cluster.ps_shards);
    sweeps_default(e);
    if (cluster_check_devices(&e->cluster, where, err, errlen)) return -1;
    return check_node_lines(e, where, err, errlen);
}

int experiment_load(experiment_t *e, const char *path, char *err, size_t errlen)
{
    char *text = kv_read_file(path);
    if (!text) {
        experiment_init(e);
        snprintf(err, errlen, "%s:0: expected a readable experiment file (%s)", path,
                 strerror(errno));
        return -1;
    }
    int rc = experiment_parse(e, path, text, err, errlen);
    free(text);
    return rc;
}

int experiment_config_count(const experiment_t *e)
{
    return e->n_nodes * e->n_gbps * e->n_schemes;
}

void experiment_config(const experiment_t *e, int i, cluster_t *c, scheme_t *s)
{
    ASSERT(i >= 0 && i < experiment_config_count(e), "config %d out of range", i);
    int ni = i % e->n_nodes;
    int gi = (i / e->n_nodes) % e->n_gbps;
    int si = i / (e->n_nodes * e->n_gbps);
    *c = e->cluster;
    c->nodes = e->nodes[ni];
    c->nic_Bps = e->gbps[gi] * 1e9 / 8;
    if (c->ps_shards > c->nodes) c->ps_shards = 0;
    /* Speed lines naming nodes beyond this size do not apply. */
    int k = 0;
    for (int j = 0; j < c->n_speed; j++)
        if (c->speed_node[j] < c->nodes) {
            c->speed_node[k] = c->speed_node[j];
            c->speed_factor[k++] = c->speed_factor[j];
        }
    c->n_speed = k;
    *s = e->schemes[si];
}

void experiment_baseline(const experiment_t *e, experiment_t *base)
{
    *base = *e;
    base->n_nodes = base->n_gbps = base->n_schemes = 1;
    base->nodes[0] = 1;
    base->cluster.n_speed = 0;
}

int experiment_override(experiment_t *e, const char *kv, char *err, size_t errlen)
{
    return experiment_override_as(e, kv, "--set", err, errlen);
}

int experiment_override_as(experiment_t *e, const char *kv, const char *where, char *err,
                           size_t errlen)
{
    char buf[1024];
    snprintf(buf, sizeof buf, "%s", kv);
    char *key, *val;
    if (kv_split(buf, &key, &val) != 1) {
        snprintf(err, errlen, "%s: expected key=value, got '%s'", where, kv);
        return -1;
    }
    if (!strncmp(key, "cluster.", 8)) {
        if (cluster_set(&e->cluster, key + 8, val, where, err, errlen)) return -1;
        /* A sweep taken from the cluster's own values follows the override. */
        if (!strcmp(key + 8, "nodes") && e->n_nodes == 1) e->nodes[0] = e->cluster.nodes;
        if (!strcmp(key + 8, "nic_gbps") && e->n_gbps == 1) e->gbps[0] = e->cluster.nic_Bps * 8 / 1e9;
        return 0;
    }
    /* Paths on the command line are relative to the working directory. */
    char saved[sizeof e->path];
    memcpy(saved, e->path, sizeof saved);
    e->path[0] = 0;
    int rc = experiment_set(e, key, val, where, err, errlen);
    memcpy(e->path, saved, sizeof saved);
    if (rc) return -1;
    if (!strcmp(key, "cluster")) { /* the sweeps taken from the cluster follow it */
        if (e->n_nodes == 1) e->nodes[0] = e->cluster.nodes;
        if (e->n_gbps == 1) e->gbps[0] = e->cluster.nic_Bps * 8 / 1e9;
    }
    if (!strcmp(key, "scheme") && e->n_schemes == 1) e->schemes[0] = e->scheme;
    return 0;
}

/* An absolute form of path for a file that must be found from anywhere; path itself when
 * it cannot be resolved (the reader then names it). */
static const char *absolute(const char *path, char *buf)
{
    return path[0] && realpath(path, buf) ? buf : path;
}

int experiment_write(const experiment_t *e, int config, const cluster_t *c, const char *comment,
                     FILE *f)
{
    cluster_t cc;
    scheme_t s;
    experiment_config(e, config, &cc, &s);
    char buf[PATH_MAX], sb[64], num[32];
    if (comment) {
        char line[1024];
        snprintf(line, sizeof line, "%s", comment);
        char *save = NULL;
        for (char *l = strtok_r(line, "\n", &save); l; l = strtok_r(NULL, "\n", &save))
            fprintf(f, "# %s\n", l);
    }
    fprintf(f, "model = %s\n", absolute(e->model_path, buf));
    if (e->profile_path[0]) fprintf(f, "profile = %s\n", absolute(e->profile_path, buf));
    fprintf(f, "scheme = %s\n", scheme_name(s, sb, sizeof sb));
    if (e->staleness) fprintf(f, "consistency = ssp:%d\n", e->staleness);
    else fprintf(f, "consistency = bsp\n");
    fprintf(f, "batch = %d\n", e->batch);
    fprintf(f, "iterations = %d\n", e->iterations);
    fprintf(f, "warmup = %d\n", e->warmup);
    fprintf(f, "seed = %llu\n", (unsigned long long)e->seed);
    if (e->kv_block_bytes == KV_BLOCK_WHOLE_TENSOR) fprintf(f, "kv_block_mb = tensor\n");
    else fprintf(f, "kv_block_mb = %s\n", kv_format_double((double)e->kv_block_bytes / (1 << 20), num));
    fprintf(f, "kv_placement = %s\n", kv_place_name(e->kv_placement));
    fprintf(f, "hybrid_rule = %s\n", hybrid_rule_name(e->hybrid_rule));
    fprintf(f, "allreduce_bucket_mb = %s\n",
            kv_format_double((double)e->allreduce_bucket_bytes / (1 << 20), num));
    fprintf(f, "net_model = %s\n", net_model_name(e->net_model));
    fprintf(f, "precision = %s\n", precision_name(e->precision));
    fprintf(f, "wire_precision = %s\n", precision_name(e->wire_precision));
    if (e->send_order != SEND_ORDER_ARRIVAL) /* absent: arrival, as every older job file */
        fprintf(f, "send_order = %s\nslice_bytes = %lld\n", send_order_name(e->send_order),
                (long long)send_order_slice_bytes(e->send_order, e->slice_bytes));
    const experiment_train_t *t = &e->train;
    fprintf(f, "epochs = %d\n", t->epochs);
    fprintf(f, "data = %s\n", t->data);
    if (t->data_dir[0]) fprintf(f, "data_dir = %s\n", absolute(t->data_dir, buf));
    fprintf(f, "synthetic_n = %d\n", t->synthetic_n);
    fprintf(f, "limit = %d\n", t->limit);
    fprintf(f, "shuffle = %s\n", t->shuffle ? "yes" : "no");
    fprintf(f, "compute = %s\n", t->compute == COMPUTE_MODE_EMULATE ? "emulate" : "real");
    fprintf(f, "lr = %s\n", kv_format_double(t->lr, num));
    fprintf(f, "momentum = %s\n", kv_format_double(t->momentum, num));
    fprintf(f, "weight_decay = %s\n", kv_format_double(t->weight_decay, num));
    static const char *const policies[] = {"fixed", "step", "poly"};
    static const char *const inits[] = {"auto", "xavier", "he"};
    fprintf(f, "lr_policy = %s\n", policies[t->lr_policy]);
    fprintf(f, "lr_gamma = %s\n", kv_format_double(t->lr_gamma, num));
    fprintf(f, "lr_step = %lld\n", (long long)t->lr_step);
    fprintf(f, "lr_power = %s\n", kv_format_double(t->lr_power, num));
    fprintf(f, "init = %s\n", inits[t->init]);
    fprintf(f, "sample = %d\n", t->sample);
    fprintf(f, "probe = %s\n", t->probe == PROBE_AUTO ? "auto" : t->probe == PROBE_YES ? "yes" : "no");
    fprintf(f, "probe_bytes = %lld\n", (long long)t->probe_bytes);
    if (t->time_dilation != 1) fprintf(f, "time_dilation = %d\n", t->time_dilation);
    if (t->tensor_scale != 1) fprintf(f, "tensor_scale = %d\n", t->tensor_scale);
    if (t->keep_checkpoints != 2) fprintf(f, "keep_checkpoints = %d\n", t->keep_checkpoints);
    if (t->max_restarts) fprintf(f, "max_restarts = %d\n", t->max_restarts);
    if (e->precision == PRECISION_FP16 || t->loss_scale_init != 65536 ||
        t->loss_scale_growth_interval != 2000)
        fprintf(f, "loss_scale_init = %s\nloss_scale_growth_interval = %lld\n",
                kv_format_double(t->loss_scale_init, num),
                (long long)t->loss_scale_growth_interval);
    if (t->overflow_rank >= 0)
        fprintf(f, "overflow_at = %d:%lld\n", t->overflow_rank, (long long)t->overflow_iter);
    fprintf(f, "cluster = defaults\n");
    if (cluster_write(c, f, "cluster.")) return -1;
    return ferror(f) ? -1 : 0;
}
