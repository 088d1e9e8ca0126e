#include "job.h"

void job_config(const experiment_t *e, int config, const job_link_t *link, cluster_t *c,
                plan_opts_t *po)
{
    scheme_t s;
    experiment_config(e, config, c, &s);
    if (link && link->bw_Bps > 0) {
        c->nic_Bps = link->bw_Bps;
        c->nic_efficiency = 1.0;
        c->lat_ns = link->lat_ns;
    }
    *po = (plan_opts_t){.scheme = s,
                        .staleness = e->staleness,
                        .batch = e->batch,
                        .kv_block_bytes = e->kv_block_bytes,
                        .allreduce_bucket_bytes = e->allreduce_bucket_bytes,
                        .kv_placement = e->kv_placement};
}
