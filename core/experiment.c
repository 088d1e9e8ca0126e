#include "experiment.h"

#include <errno.h>
#include <libgen.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

static const char *const s_base_names[SCHEME_BASE_COUNT] = {"ps", "sfb", "allreduce", "hybrid",
                                                             "hybrid3"};

int scheme_parse(const char *s, scheme_t *out)
{
    char buf[64];
    if (snprintf(buf, sizeof buf, "%s", s) >= (int)sizeof buf) return -1;
    char *plus = strchr(buf, '+');
    if (plus) *plus++ = 0;
    for (int b = 0; b < SCHEME_BASE_COUNT; b++) {
        if (strcmp(buf, s_base_names[b])) continue;
        out->base = (scheme_base_t)b;
        out->wfbp = b == SCHEME_HYBRID || b == SCHEME_HYBRID3;
        if (!plus) return 0;
        if (!strcmp(plus, "wfbp")) out->wfbp = true;
        else if (!strcmp(plus, "none")) out->wfbp = false;
        else return -1;
        return 0;
    }
    return -1;
}

const char *scheme_name(scheme_t s, char *buf, size_t len)
{
    ASSERT(s.base < SCHEME_BASE_COUNT, "bad scheme base %d", s.base);
    bool def = s.base == SCHEME_HYBRID || s.base == SCHEME_HYBRID3;
    if (s.wfbp == def) snprintf(buf, len, "%s", s_base_names[s.base]);
    else snprintf(buf, len, "%s+%s", s_base_names[s.base], s.wfbp ? "wfbp" : "none");
    return buf;
}

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
}

const char *net_model_name(net_model_t m)
{
    return m == NET_MODEL_EXACT ? "exact" : m == NET_MODEL_WHOLE ? "whole" : "auto";
}

net_model_t net_model_for(net_model_t m, int nodes)
{
    if (m != NET_MODEL_AUTO) return m;
    return nodes <= NET_MODEL_AUTO_EXACT_NODES ? NET_MODEL_EXACT : NET_MODEL_WHOLE;
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
           "  allreduce_bucket_mb = B   fuse all-reduce units, in backward order, into buckets\n"
           "                            of >= B MB, one ring each; 0 = one per layer (0)\n"
           "  net_model = M             simulated bandwidth sharing: exact (per-flow max-min),\n"
           "                            whole (broadcasts/gathers move as one, faster), or\n"
           "                            auto (exact up to 512 nodes) (auto)\n"
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

int experiment_set(experiment_t *e, const char *key, const char *val, const char *where,
                   char *err, size_t errlen)
{
    long long i;
    double d;
    if (!strcmp(key, "model")) {
        resolve(e, val, e->model_path, sizeof e->model_path);
    } else if (!strcmp(key, "cluster")) {
        resolve(e, val, e->cluster_path, sizeof e->cluster_path);
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
    } else if (!strcmp(key, "allreduce_bucket_mb")) {
        if (kv_double(val, &d) || !(d >= 0 && d <= 1e6))
            return kv_error(err, errlen, where,
                            "expected allreduce_bucket_mb = MB from 0 to 1e6, got '%s'", val);
        e->allreduce_bucket_bytes = llround(d * (1 << 20));
    } else if (!strcmp(key, "net_model")) {
        if (!strcmp(val, "auto")) e->net_model = NET_MODEL_AUTO;
        else if (!strcmp(val, "exact")) e->net_model = NET_MODEL_EXACT;
        else if (!strcmp(val, "whole")) e->net_model = NET_MODEL_WHOLE;
        else return kv_error(err, errlen, where,
                             "expected net_model = auto | exact | whole, got '%s'", val);
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

int experiment_check_overrides(const experiment_t *e, char *err, size_t errlen)
{
    return check_warmup(e, "--set", err, errlen);
}

/* What experiment_parse keeps while reading: the line of `cluster =`, for messages about
 * the cluster file. */
typedef struct {
    experiment_t *e;
    int cluster_line;
} experiment_reader_t;

static int experiment_setter(void *obj, const char *key, const char *val, int line_no,
                             const char *where, char *err, size_t errlen)
{
    experiment_reader_t *r = obj;
    if (!strcmp(key, "cluster")) r->cluster_line = line_no;
    return experiment_set(r->e, key, val, where, err, errlen);
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

    experiment_reader_t r = {.e = e};
    int line_no = 0;
    if (kv_parse_text(path, text, experiment_setter, &r, &line_no, err, errlen)) return -1;
    int cluster_line = r.cluster_line;
    char where[600];
    snprintf(where, sizeof where, "%s:%d", path, line_no);
    if (!e->model_path[0]) return kv_error(err, errlen, where, "expected a 'model = FILE' line");
    if (!e->cluster_path[0]) return kv_error(err, errlen, where, "expected a 'cluster = FILE' line");
    if (check_warmup(e, where, err, errlen)) return -1;
    char cerr[1024];
    if (cluster_load(&e->cluster, e->cluster_path, cerr, sizeof cerr)) {
        snprintf(where, sizeof where, "%s:%d", path, cluster_line);
        return kv_error(err, errlen, where, "cluster: %s", cerr);
    }
    if (e->n_nodes == 0) e->nodes[e->n_nodes++] = e->cluster.nodes;
    if (e->n_gbps == 0) e->gbps[e->n_gbps++] = e->cluster.nic_Bps * 8 / 1e9;
    if (e->n_schemes == 0) e->schemes[e->n_schemes++] = e->scheme;
    return 0;
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

int experiment_override(experiment_t *e, const char *kv, char *err, size_t errlen)
{
    char buf[1024];
    snprintf(buf, sizeof buf, "%s", kv);
    char *key, *val;
    if (kv_split(buf, &key, &val) != 1) {
        snprintf(err, errlen, "--set: expected key=value, got '%s'", kv);
        return -1;
    }
    if (!strncmp(key, "cluster.", 8)) {
        if (cluster_set(&e->cluster, key + 8, val, "--set", err, errlen)) return -1;
        /* A sweep taken from the cluster's own values follows the override. */
        if (!strcmp(key + 8, "nodes") && e->n_nodes == 1) e->nodes[0] = e->cluster.nodes;
        if (!strcmp(key + 8, "nic_gbps") && e->n_gbps == 1) e->gbps[0] = e->cluster.nic_Bps * 8 / 1e9;
        return 0;
    }
    /* Paths on the command line are relative to the working directory. */
    char saved[sizeof e->path];
    memcpy(saved, e->path, sizeof saved);
    e->path[0] = 0;
    int rc = experiment_set(e, key, val, "--set", err, errlen);
    memcpy(e->path, saved, sizeof saved);
    if (rc) return -1;
    if (!strcmp(key, "cluster")) {
        char cerr[1024];
        if (cluster_load(&e->cluster, e->cluster_path, cerr, sizeof cerr)) {
            snprintf(err, errlen, "--set: %s", cerr);
            return -1;
        }
    }
    if (!strcmp(key, "scheme") && e->n_schemes == 1) e->schemes[0] = e->scheme;
    return 0;
}
