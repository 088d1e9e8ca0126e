#include "job.h"

#include <math.h>

/* x rounded to the nearest unit * 2^k in log scale. */
static double on_grid(double x, double unit)
{
    return unit * pow(2.0, round(log2(x / unit)));
}

static bool within_factor_4(double x, double ref) { return ref > 0 && x > 0 && fabs(log2(x / ref)) < 2.0; }

job_link_t job_link_settle(const cluster_t *described, job_link_t measured)
{
    job_link_t s = measured;
    double goodput = described->nic_Bps * described->nic_efficiency;
    if (measured.bw_Bps > 0)
        s.bw_Bps = within_factor_4(measured.bw_Bps, goodput) ? goodput
                                                              : on_grid(measured.bw_Bps, 1e9 / 8);
    if (measured.lat_ns > 0)
        s.lat_ns = within_factor_4((double)measured.lat_ns, (double)described->lat_ns)
                       ? described->lat_ns
                       : llround(on_grid((double)measured.lat_ns, 1000.0));
    return s;
}

void job_config(const experiment_t *e, int config, const job_link_t *link, cluster_t *c,
                plan_opts_t *po)
{
    scheme_t s;
    experiment_config(e, config, c, &s);
    if (link && link->bw_Bps > 0) {
        job_link_t settled = job_link_settle(c, *link);
        c->nic_Bps = settled.bw_Bps;
        c->nic_efficiency = 1.0;
        c->lat_ns = settled.lat_ns;
    }
    *po = (plan_opts_t){.scheme = s,
                        .staleness = e->staleness,
                        .batch = e->batch,
                        .kv_block_bytes = e->kv_block_bytes,
                        .allreduce_bucket_bytes = e->allreduce_bucket_bytes,
                        .kv_placement = e->kv_placement,
                        .hybrid_rule = e->hybrid_rule,
                        .precision = e->precision,
                        .wire_precision = e->wire_precision,
                        .send_order = e->send_order,
                        .slice_bytes = e->slice_bytes};
}

void job_host_memory_link(cluster_t *c)
{
    if (c->intra_Bps > 0) return;
    c->intra_Bps = JOB_HOST_MEMORY_GBPS * 1e9 / 8;
    c->intra_lat_ns = llround(JOB_HOST_MEMORY_LAT_US * 1e3);
    c->interconnect[0] = 0;
}
