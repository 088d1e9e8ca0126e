#include "cluster.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

/* Device presets. Peak fp32 and memory bandwidth are the vendors' data sheets (Titan X
 * Maxwell GM200: 3072 cores x 1.075 GHz boost x 2 = 6.6 TFLOP/s, 336.5 GB/s; Tesla K20:
 * 3.52 TFLOP/s, 208 GB/s; H100 SXM5: 67 TFLOP/s fp32 without tensor cores, 3.35 TB/s).
 * The efficiencies are assumptions, not measurements: cuDNN-era convolutions reach a large
 * fraction of peak on 3x3 kernels (Winograd even exceeds the direct-convolution FLOP count),
 * FC GEMMs at batch 32 somewhat less; replace them with a measured profile
 * (`poseidon profile`) whenever one exists.
 * Half-precision peaks, dense (without 2:4 sparsity): H100 SXM5 tensor cores, 989.4
 * TFLOP/s bf16 and fp16 with fp32 accumulation (NVIDIA H100 Tensor Core GPU datasheet);
 * Maxwell GM200 and Kepler GK110 have no faster half arithmetic (no fp16x2 units, no bf16:
 * NVIDIA's Pascal P100 whitepaper introduces fp16x2 at 2x; CUDA computes their halves in
 * fp32), so 0: the fp32 peak. */
static const device_t s_devices[] = {
    {"titanx-maxwell", 6.6e12, 336.5e9, 0.75, 0.70, 20000, 0, 0},
    {"k20", 3.52e12, 208e9, 0.60, 0.60, 20000, 0, 0},
    {"h100", 67e12, 3.35e12, 0.60, 0.60, 10000, 989.4e12, 989.4e12},
};

/* Interconnect presets, per direction, from the specifications (x16 links): PCIe 3.0 /
 * 4.0 / 5.0 carry 15.75 / 31.5 / 63 GB/s; NVLink 4 (H100 SXM) 450 GB/s. The latencies are
 * assumptions of the order a device-to-device copy's launch costs (a few microseconds over
 * PCIe, less over NVLink), not measurements. */
static const struct {
    const char *name;
    double Bps;
    int64_t lat_ns;
} s_interconnects[] = {
    {"pcie3", 15.75e9, 5000},
    {"pcie4", 31.5e9, 5000},
    {"pcie5", 63e9, 5000},
    {"nvlink4", 450e9, 2000},
};

int interconnect_preset(cluster_t *c, const char *name)
{
    for (size_t i = 0; i < sizeof s_interconnects / sizeof s_interconnects[0]; i++)
        if (!strcmp(s_interconnects[i].name, name)) {
            c->intra_Bps = s_interconnects[i].Bps;
            c->intra_lat_ns = s_interconnects[i].lat_ns;
            snprintf(c->interconnect, sizeof c->interconnect, "%s", name);
            return 0;
        }
    return -1;
}

int device_preset(device_t *d, const char *name)
{
    for (size_t i = 0; i < sizeof s_devices / sizeof s_devices[0]; i++)
        if (!strcmp(s_devices[i].name, name)) {
            *d = s_devices[i];
            return 0;
        }
    return -1;
}

double device_peak_flops(const device_t *d, precision_t p)
{
    double half = p == PRECISION_BF16   ? d->peak_bf16_flops
                  : p == PRECISION_FP16 ? d->peak_fp16_flops
                                        : 0;
    return half > 0 ? half : d->peak_flops;
}

void cluster_init(cluster_t *c)
{
    memset(c, 0, sizeof *c);
    c->nodes = 1;
    c->devices_per_node = 1;
    c->nic_Bps = 40e9 / 8;
    c->nic_efficiency = 1.0;
    c->lat_ns = 20000;
    int rc = device_preset(&c->device, "titanx-maxwell");
    ASSERT(rc == 0, "missing default device preset");
}

const char *cluster_keys_help(void)
{
    return "  nodes = N                 machines, one worker each (1)\n"
           "  devices_per_node = D      devices per node, each computing a batch (1)\n"
           "  nic_gbps = G              NIC bandwidth per direction, Gbit/s (40)\n"
           "  nic_efficiency = E        usable fraction of nic_gbps (1)\n"
           "  latency_us = U            one-way message latency (20)\n"
           "  core_gbps = G             switch core capacity, 0 = non-blocking (0)\n"
           "  nodes_per_rack = K        nodes per rack switch (nodes 0..K-1 in rack 0, ...); must\n"
           "                            divide nodes; 0 = one switch (0)\n"
           "  rack_uplink_gbps = G      a rack's uplink to the core per direction, Gbit/s\n"
           "  oversubscription = X      or: uplink = nodes_per_rack x nic_gbps / X (1)\n"
           "  nic_gbps_node = N:G       NIC of node N at G Gbit/s (N or FIRST-LAST), repeatable\n"
           "  interconnect = NAME       between a node's devices: pcie3 | pcie4 | pcie5 |\n"
           "                            nvlink4 (needed when devices_per_node > 1)\n"
           "  intra_gbps = G            the interconnect's bandwidth per direction, Gbit/s\n"
           "  intra_latency_us = U      its latency per transfer\n"
           "  host_staging = yes | no   each device's gradient goes to host memory over the\n"
           "                            interconnect after its backward and the synced values\n"
           "                            come back before its next forward (GPU nodes that sync\n"
           "                            from the host, as Poseidon's); needs an interconnect (no)\n"
           "  ps_shards = P2            PS shards on nodes 0..P2-1, 0 = one per node (0)\n"
           "  server_gbps = G           PS shard apply throughput, 0 = free (0)\n"
           "  device = NAME             titanx-maxwell | k20 | h100 (titanx-maxwell)\n"
           "  peak_tflops, mem_gbps, eff_conv, eff_fc, launch_us   device overrides\n"
           "  peak_bf16_tflops, peak_fp16_tflops   the device's half-precision peaks (dense,\n"
           "                            fp32 accumulation); 0 = as peak_tflops\n"
           "  straggler_sigma = S       lognormal sigma of per-node speed (0)\n"
           "  jitter_sigma = S          lognormal sigma of per-op compute noise (0)\n"
           "  speed = NODE:FACTOR       fixed speed of one node, repeatable (1)\n";
}

/* ---- cluster keys ---- */

/* A number in [lo, hi] (or 0 when zero_ok: "none"). The bounds keep every time the
 * simulator derives from it, summed over a whole run, within int64 nanoseconds. */
static int get_in(const char *key, const char *val, double lo, double hi, bool zero_ok,
                  double *out, const char *where, char *err, size_t errlen)
{
    if (kv_double(val, out) || !((*out >= lo && *out <= hi) || (zero_ok && *out == 0)))
        return kv_error(err, errlen, where, "expected %s = %sa number from %g to %g, got '%s'",
                        key, zero_ok ? "0 or " : "", lo, hi, val);
    return 0;
}

/* cluster_set()'s groups of keys: each returns 0 when set, -1 (err filled) on a bad value,
 * 1 when the key is not one of its own. */

/* A node line's value "NODE:X" (or, when range, "FIRST-LAST:X"; *last = *first without a
 * dash): nodes from 0 below 10^7, FIRST <= LAST, X in [lo, hi]. Returns 0; -1 without a
 * colon; -2 when a part is not a number in its bounds. */
static int node_line_parse(const char *val, bool range, double lo, double hi, long long *first,
                           long long *last, double *x)
{
    char buf[128];
    snprintf(buf, sizeof buf, "%s", val);
    char *colon = strchr(buf, ':'), *dash = NULL;
    if (!colon) return -1;
    *colon = 0;
    if (range) dash = strchr(buf, '-');
    if (dash) *dash = 0;
    if (kv_int(buf, first) || *first < 0 || *first >= 10000000 ||
        (dash ? kv_int(dash + 1, last) || *last < *first || *last >= 10000000
              : (*last = *first, 0)) ||
        kv_double(colon + 1, x) || *x < lo || *x > hi)
        return -2;
    return 0;
}

/* nic_gbps_node = NODE:GBPS or FIRST-LAST:GBPS, one line per node range */
static int set_nic_node(cluster_t *c, const char *val, const char *where, char *err,
                        size_t errlen)
{
    double d;
    long long i, last;
    if (node_line_parse(val, true, 1e-3, 1e6, &i, &last, &d))
        return kv_error(err, errlen, where,
                        "expected nic_gbps_node = NODE:GBPS or FIRST-LAST:GBPS (nodes from 0, "
                        "FIRST <= LAST, Gbit/s from 0.001 to 1e+06), got '%s'", val);
    if (c->n_nic == CLUSTER_MAX_NIC)
        return kv_error(err, errlen, where, "expected at most %d nic_gbps_node lines",
                        CLUSTER_MAX_NIC);
    c->nic_first[c->n_nic] = (int)i;
    c->nic_last[c->n_nic] = (int)last;
    c->nic_line_Bps[c->n_nic++] = d * 1e9 / 8;
    return 0;
}

/* speed = NODE:FACTOR, one line per node */
static int set_speed(cluster_t *c, const char *val, const char *where, char *err,
                     size_t errlen)
{
    double d;
    long long i, last;
    int rc = node_line_parse(val, false, 1e-3, 1e3, &i, &last, &d);
    if (rc == -1)
        return kv_error(err, errlen, where, "expected speed = NODE:FACTOR, got '%s'", val);
    if (rc)
        return kv_error(err, errlen, where,
                        "expected speed = NODE:FACTOR (node >= 0, factor from 0.001 to 1000), "
                        "got '%s'", val);
    if (c->n_speed == CLUSTER_MAX_SPEED)
        return kv_error(err, errlen, where, "expected at most %d speed lines", CLUSTER_MAX_SPEED);
    c->speed_node[c->n_speed] = (int)i;
    c->speed_factor[c->n_speed++] = d;
    return 0;
}

/* The network: node counts, NICs, latency, core and rack uplinks, servers. */
static int set_network_key(cluster_t *c, const char *key, const char *val, const char *where,
                           char *err, size_t errlen)
{
    double d;
    long long i;
    if (!strcmp(key, "nodes") || !strcmp(key, "devices_per_node") || !strcmp(key, "ps_shards")) {
        long long lo = strcmp(key, "ps_shards") ? 1 : 0;
        long long hi = strcmp(key, "devices_per_node") ? 10000000 : 4096;
        if (kv_int(val, &i) || i < lo || i > hi)
            return kv_error(err, errlen, where, "expected %s = an integer from %lld to %lld, got "
                            "'%s'", key, lo, hi, val);
        if (!strcmp(key, "nodes")) c->nodes = (int)i;
        else if (!strcmp(key, "devices_per_node")) c->devices_per_node = (int)i;
        else c->ps_shards = (int)i;
    } else if (!strcmp(key, "nic_gbps")) {
        if (get_in(key, val, 1e-3, 1e6, false, &d, where, err, errlen)) return -1;
        c->nic_Bps = d * 1e9 / 8;
    } else if (!strcmp(key, "nic_efficiency")) {
        if (kv_double(val, &d) || d <= 0 || d > 1)
            return kv_error(err, errlen, where, "expected nic_efficiency = a number in (0, 1], got '%s'",
                       val);
        c->nic_efficiency = d;
    } else if (!strcmp(key, "latency_us")) {
        if (get_in(key, val, 0, 1e7, false, &d, where, err, errlen)) return -1;
        c->lat_ns = llround(d * 1e3);
    } else if (!strcmp(key, "core_gbps")) {
        if (get_in(key, val, 1e-3, 1e9, true, &d, where, err, errlen)) return -1;
        c->core_Bps = d * 1e9 / 8;
    } else if (!strcmp(key, "nodes_per_rack")) {
        if (kv_int(val, &i) || i < 0 || i > 10000000)
            return kv_error(err, errlen, where,
                            "expected nodes_per_rack = an integer from 0 to 10000000, got '%s'",
                            val);
        c->nodes_per_rack = (int)i;
        c->rack_line = 0; /* cluster_setter names a file's line */
    } else if (!strcmp(key, "rack_uplink_gbps") || !strcmp(key, "oversubscription")) {
        bool uplink = !strcmp(key, "rack_uplink_gbps");
        if (uplink ? c->oversubscription > 0 : c->rack_uplink_Bps > 0)
            return kv_error(err, errlen, where,
                            "expected rack_uplink_gbps or oversubscription, not both");
        if (get_in(key, val, uplink ? 1e-3 : 1, uplink ? 1e9 : 1e4, false, &d, where, err,
                   errlen))
            return -1;
        if (uplink) c->rack_uplink_Bps = d * 1e9 / 8;
        else c->oversubscription = d;
    } else if (!strcmp(key, "nic_gbps_node")) {
        return set_nic_node(c, val, where, err, errlen);
    } else if (!strcmp(key, "server_gbps")) {
        if (get_in(key, val, 1e-3, 1e9, true, &d, where, err, errlen)) return -1;
        c->server_Bps = d * 1e9 / 8;
    } else {
        return 1;
    }
    return 0;
}

/* Inside a node: the devices' interconnect, the device model, stragglers and jitter. */
static int set_node_key(cluster_t *c, const char *key, const char *val, const char *where,
                        char *err, size_t errlen)
{
    double d;
    if (!strcmp(key, "interconnect")) {
        if (interconnect_preset(c, val))
            return kv_error(err, errlen, where,
                            "expected interconnect = pcie3 | pcie4 | pcie5 | nvlink4, got '%s'",
                            val);
    } else if (!strcmp(key, "intra_gbps")) {
        if (get_in(key, val, 1e-3, 1e6, false, &d, where, err, errlen)) return -1;
        c->intra_Bps = d * 1e9 / 8;
        c->interconnect[0] = 0;
    } else if (!strcmp(key, "host_staging")) {
        if (!strcmp(val, "yes") || !strcmp(val, "1")) c->host_staging = true;
        else if (!strcmp(val, "no") || !strcmp(val, "0")) c->host_staging = false;
        else return kv_error(err, errlen, where, "expected host_staging = yes | no, got '%s'", val);
    } else if (!strcmp(key, "intra_latency_us")) {
        if (get_in(key, val, 0, 1e7, false, &d, where, err, errlen)) return -1;
        c->intra_lat_ns = llround(d * 1e3);
        c->interconnect[0] = 0;
    } else if (!strcmp(key, "device")) {
        if (device_preset(&c->device, val))
            return kv_error(err, errlen, where,
                       "expected device = titanx-maxwell | k20 | h100, got '%s'", val);
    } else if (!strcmp(key, "peak_tflops")) {
        if (get_in(key, val, 1e-3, 1e6, false, &d, where, err, errlen)) return -1;
        c->device.peak_flops = d * 1e12;
    } else if (!strcmp(key, "peak_bf16_tflops") || !strcmp(key, "peak_fp16_tflops")) {
        if (get_in(key, val, 1e-3, 1e6, true, &d, where, err, errlen)) return -1;
        if (!strcmp(key, "peak_bf16_tflops")) c->device.peak_bf16_flops = d * 1e12;
        else c->device.peak_fp16_flops = d * 1e12;
    } else if (!strcmp(key, "mem_gbps")) {
        if (get_in(key, val, 1e-3, 1e9, false, &d, where, err, errlen)) return -1;
        c->device.mem_Bps = d * 1e9;
    } else if (!strcmp(key, "eff_conv") || !strcmp(key, "eff_fc")) {
        if (kv_double(val, &d) || d <= 0 || d > 2)
            return kv_error(err, errlen, where, "expected %s = a number in (0, 2], got '%s'", key, val);
        if (!strcmp(key, "eff_conv")) c->device.eff_conv = d;
        else c->device.eff_fc = d;
    } else if (!strcmp(key, "launch_us")) {
        if (get_in(key, val, 0, 1e7, false, &d, where, err, errlen)) return -1;
        c->device.launch_ns = llround(d * 1e3);
    } else if (!strcmp(key, "straggler_sigma") || !strcmp(key, "jitter_sigma")) {
        /* lognormal: sigma 3 already spans factors of e^-9 .. e^9 at three sigmas */
        if (get_in(key, val, 0, 3, false, &d, where, err, errlen)) return -1;
        if (!strcmp(key, "straggler_sigma")) c->straggler_sigma = d;
        else c->jitter_sigma = d;
    } else if (!strcmp(key, "speed")) {
        return set_speed(c, val, where, err, errlen);
    } else {
        return 1;
    }
    return 0;
}

int cluster_set(cluster_t *c, const char *key, const char *val, const char *where, char *err,
                size_t errlen)
{
    int rc = set_network_key(c, key, val, where, err, errlen);
    if (rc == 1) rc = set_node_key(c, key, val, where, err, errlen);
    if (rc == 1)
        return kv_error(err, errlen, where, "expected a cluster key (nodes, nic_gbps, latency_us, ...), "
                                       "got unknown key '%s'", key);
    return rc;
}

int cluster_check_devices(const cluster_t *c, const char *where, char *err, size_t errlen)
{
    if (c->devices_per_node > 1 && c->intra_Bps <= 0)
        return kv_error(err, errlen, where,
                        "expected an interconnect for devices_per_node = %d (interconnect = "
                        "pcie3 | pcie4 | pcie5 | nvlink4, or intra_gbps and intra_latency_us)",
                        c->devices_per_node);
    if (c->host_staging && c->intra_Bps <= 0)
        return kv_error(err, errlen, where,
                        "expected an interconnect for host_staging = yes (interconnect = "
                        "pcie3 | pcie4 | pcie5 | nvlink4, or intra_gbps and intra_latency_us)");
    return 0;
}

int cluster_check_racks(const cluster_t *c, int nodes, const char *where, char *err,
                        size_t errlen)
{
    char at[600];
    if (c->rack_line > 0 && c->path[0]) {
        snprintf(at, sizeof at, "%s:%d", c->path, c->rack_line);
        where = at;
    }
    int k = c->nodes_per_rack;
    if (k > 0 && nodes > k && nodes % k != 0)
        return kv_error(err, errlen, where,
                        "expected nodes_per_rack dividing the %d nodes, got %d", nodes, k);
    return 0;
}

static int cluster_setter(void *obj, const char *key, const char *val, int line_no,
                          const char *where, char *err, size_t errlen)
{
    cluster_t *c = obj;
    if (cluster_set(c, key, val, where, err, errlen)) return -1;
    if (!strcmp(key, "nodes_per_rack")) c->rack_line = line_no;
    return 0;
}

int cluster_parse(cluster_t *c, const char *path, const char *text, char *err, size_t errlen)
{
    cluster_init(c);
    snprintf(c->path, sizeof c->path, "%s", path);
    int line_no = 0;
    static const char *const repeatable[] = {"speed", "nic_gbps_node", NULL};
    if (kv_parse_text(path, text, cluster_setter, c, repeatable, &line_no, err, errlen))
        return -1;
    char where[600];
    snprintf(where, sizeof where, "%s:%d", path, line_no);
    if (c->ps_shards > c->nodes)
        return kv_error(err, errlen, where, "expected ps_shards <= nodes (%d), got %d", c->nodes,
                   c->ps_shards);
    if (cluster_check_devices(c, where, err, errlen)) return -1;
    if (cluster_check_racks(c, c->nodes, where, err, errlen)) return -1;
    for (int i = 0; i < c->n_nic; i++)
        if (c->nic_last[i] >= c->nodes)
            return kv_error(err, errlen, where,
                            "expected nic_gbps_node lines for nodes below %d, got node %d",
                            c->nodes, c->nic_last[i]);
    for (int i = 0; i < c->n_speed; i++)
        if (c->speed_node[i] >= c->nodes)
            return kv_error(err, errlen, where, "expected speed node < nodes (%d), got %d", c->nodes,
                       c->speed_node[i]);
    return 0;
}

int cluster_load(cluster_t *c, const char *path, char *err, size_t errlen)
{
    char *text = kv_read_file(path);
    if (!text) {
        cluster_init(c);
        snprintf(err, errlen, "%s:0: expected a readable cluster file (%s)", path,
                 strerror(errno));
        return -1;
    }
    int rc = cluster_parse(c, path, text, err, errlen);
    free(text);
    return rc;
}

int cluster_shards(const cluster_t *c)
{
    return c->ps_shards > 0 && c->ps_shards < c->nodes ? c->ps_shards : c->nodes;
}

double cluster_node_speed(const cluster_t *c, int node)
{
    double s = 1.0;
    for (int i = 0; i < c->n_speed; i++)
        if (c->speed_node[i] == node) s = c->speed_factor[i];
    return s;
}

double cluster_nic_Bps(const cluster_t *c) { return c->nic_Bps * c->nic_efficiency; }

double cluster_node_nic_Bps(const cluster_t *c, int node)
{
    double line = c->nic_Bps;
    for (int i = 0; i < c->n_nic; i++)
        if (node >= c->nic_first[i] && node <= c->nic_last[i]) line = c->nic_line_Bps[i];
    return line * c->nic_efficiency;
}

int cluster_racks(const cluster_t *c)
{
    int k = c->nodes_per_rack;
    return k > 0 && k < c->nodes && c->nodes % k == 0 ? c->nodes / k : 1;
}

double cluster_rack_Bps(const cluster_t *c)
{
    if (cluster_racks(c) <= 1) return 0;
    if (c->rack_uplink_Bps > 0) return c->rack_uplink_Bps * c->nic_efficiency;
    double x = c->oversubscription > 0 ? c->oversubscription : 1;
    return c->nodes_per_rack * c->nic_Bps * c->nic_efficiency / x;
}

/* The decimal value d of a key read as `native = d * scale / div` (cluster_set's
 * conversions) that gives back exactly `native`: the nearest double to native * div / scale,
 * nudged by an ulp or two where the round trip through the multiplication is off. */
static double exact_key_value(double native, double scale, double div)
{
    double d = native * div / scale;
    for (int k = 0; k < 4 && d * scale / div != native; k++) {
        double up = nextafter(d, INFINITY), down = nextafter(d, -INFINITY);
        if (up * scale / div == native) return up;
        if (down * scale / div == native) return down;
        d = d * scale / div < native ? up : down;
    }
    return d;
}

int cluster_write(const cluster_t *c, FILE *f, const char *prefix)
{
    const device_t *d = &c->device;
    char num[32];
#define D(x) kv_format_double((x), num)
    fprintf(f, "%snodes = %d\n", prefix, c->nodes);
    fprintf(f, "%sdevices_per_node = %d\n", prefix, c->devices_per_node);
    fprintf(f, "%snic_gbps = %s\n", prefix, D(exact_key_value(c->nic_Bps, 1e9, 8)));
    fprintf(f, "%snic_efficiency = %s\n", prefix, D(c->nic_efficiency));
    fprintf(f, "%slatency_us = %s\n", prefix, D((double)c->lat_ns / 1e3));
    fprintf(f, "%score_gbps = %s\n", prefix, D(exact_key_value(c->core_Bps, 1e9, 8)));
    /* rack keys only where given: files written before racks read back the same */
    if (c->nodes_per_rack > 0) fprintf(f, "%snodes_per_rack = %d\n", prefix, c->nodes_per_rack);
    if (c->rack_uplink_Bps > 0)
        fprintf(f, "%srack_uplink_gbps = %s\n", prefix,
                D(exact_key_value(c->rack_uplink_Bps, 1e9, 8)));
    if (c->oversubscription > 0)
        fprintf(f, "%soversubscription = %s\n", prefix, D(c->oversubscription));
    for (int i = 0; i < c->n_nic; i++)
        fprintf(f, "%snic_gbps_node = %d-%d:%s\n", prefix, c->nic_first[i], c->nic_last[i],
                D(exact_key_value(c->nic_line_Bps[i], 1e9, 8)));
    if (c->interconnect[0]) fprintf(f, "%sinterconnect = %s\n", prefix, c->interconnect);
    else if (c->intra_Bps > 0) {
        fprintf(f, "%sintra_gbps = %s\n", prefix, D(exact_key_value(c->intra_Bps, 1e9, 8)));
        fprintf(f, "%sintra_latency_us = %s\n", prefix, D((double)c->intra_lat_ns / 1e3));
    }
    if (c->host_staging) fprintf(f, "%shost_staging = yes\n", prefix);
    fprintf(f, "%sps_shards = %d\n", prefix, c->ps_shards);
    fprintf(f, "%sserver_gbps = %s\n", prefix, D(exact_key_value(c->server_Bps, 1e9, 8)));
    device_t preset;
    if (device_preset(&preset, d->name) == 0) fprintf(f, "%sdevice = %s\n", prefix, d->name);
    fprintf(f, "%speak_tflops = %s\n", prefix, D(exact_key_value(d->peak_flops, 1e12, 1)));
    fprintf(f, "%speak_bf16_tflops = %s\n", prefix,
            D(exact_key_value(d->peak_bf16_flops, 1e12, 1)));
    fprintf(f, "%speak_fp16_tflops = %s\n", prefix,
            D(exact_key_value(d->peak_fp16_flops, 1e12, 1)));
    fprintf(f, "%smem_gbps = %s\n", prefix, D(exact_key_value(d->mem_Bps, 1e9, 1)));
    fprintf(f, "%seff_conv = %s\n", prefix, D(d->eff_conv));
    fprintf(f, "%seff_fc = %s\n", prefix, D(d->eff_fc));
    fprintf(f, "%slaunch_us = %s\n", prefix, D((double)d->launch_ns / 1e3));
    fprintf(f, "%sstraggler_sigma = %s\n", prefix, D(c->straggler_sigma));
    fprintf(f, "%sjitter_sigma = %s\n", prefix, D(c->jitter_sigma));
    for (int i = 0; i < c->n_speed; i++)
        fprintf(f, "%sspeed = %d:%s\n", prefix, c->speed_node[i], D(c->speed_factor[i]));
#undef D
    return ferror(f) ? -1 : 0;
}
