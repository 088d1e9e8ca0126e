#include "simrun.h"

#include <stdio.h>
#include <time.h>

#include "job.h"
#include "plan.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

int simrun_config(const experiment_t *e, const model_t *m, int config, cluster_t *c,
                  trace_t *trace, simrun_out_t *out, char *err, size_t errlen)
{
    double t0 = now_s();
    plan_t p;
    plan_opts_t po;
    job_config(e, config, NULL, c, &po);
    out->scheme = po.scheme;
    if (plan_build_opts(&p, m, c, &po, err, errlen)) return -1;
    unit_times_t tm;
    if (e->profile_path[0]) {
        if (unit_times_profile(&tm, &p, e->profile_path, err, errlen)) {
            plan_fini(&p);
            return -1;
        }
    } else {
        unit_times_device(&tm, &p);
    }
    sim_opts_t o = {.iterations = e->iterations, .warmup = e->warmup, .seed = e->seed,
                    .trace = trace,
                    .whole_network = net_model_for(e->net_model, c->nodes) == NET_MODEL_WHOLE};
    sim_run(&p, &tm, &o, &out->r);
    out->predicted_sync_ns = plan_predicted_sync_ns(&p);
    out->n_ps = out->n_sfb = out->n_ar = 0;
    for (int u = 0; u < p.n_units; u++) {
        out->n_ps += p.units[u].method == SYNC_PS;
        out->n_sfb += p.units[u].method == SYNC_SFB;
        out->n_ar += p.units[u].method == SYNC_ALLREDUCE;
    }
    unit_times_fini(&tm);
    plan_fini(&p);
    out->wall_s = now_s() - t0;
    return 0;
}

void simrun_csv_header(FILE *f)
{
    fprintf(f, "model,nodes,gbps,scheme,consistency,batch,iter_s,images_per_s,speedup,"
               "sent_MB_per_node,recv_MB_per_node,compute_idle,comm_hidden,predicted_sync_s,"
               "layers_ps,layers_sfb,layers_allreduce,events,wall_s,net_model\n");
}

void simrun_csv_row(FILE *f, const experiment_t *e, const model_t *m, const cluster_t *c,
                    scheme_t s, const simrun_out_t *o, double speedup)
{
    char sb[64], cons[32];
    if (e->staleness) snprintf(cons, sizeof cons, "ssp:%d", e->staleness);
    else snprintf(cons, sizeof cons, "bsp");
    fprintf(f, "%s,%d,%g,%s,%s,%d,%.6f,%.2f,%.3f,%.3f,%.3f,%.4f,%.4f,%.6f,%d,%d,%d,%llu,%.6f,%s\n",
            m->name, c->nodes, c->nic_Bps * 8 / 1e9, scheme_name(s, sb, sizeof sb), cons,
            e->batch, o->r.iter_ns * 1e-9, o->r.images_per_s, speedup,
            o->r.sent_bytes_per_node / 1e6, o->r.recv_bytes_per_node / 1e6,
            o->r.compute_idle_frac, o->r.comm_hidden_frac, o->predicted_sync_ns * 1e-9, o->n_ps,
            o->n_sfb, o->n_ar, (unsigned long long)o->r.events, o->wall_s,
            net_model_name(net_model_for(e->net_model, c->nodes)));
}
