#include "compute.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

int64_t compute_layer_ns(const device_t *d, const layer_t *l, int batch, int bwd)
{
    if (l->type == LAYER_INPUT) return 0;
    double flops = (double)(bwd ? l->bwd_flops : l->fwd_flops) * batch;
    double eff = l->type == LAYER_CONV ? d->eff_conv : l->type == LAYER_FC ? d->eff_fc : 1.0;
    /* Bytes touched: read the input and write the output forward; backward reads the output
     * gradient and the input and writes the input gradient. Parameters once per pass. */
    double act = (double)(shape_count(l->in_shape) * 4 + l->act_bytes) * batch;
    double bytes = (bwd ? 1.5 : 1.0) * act + (double)l->param_bytes * (bwd ? 2 : 1);
    double t_flops = flops / (d->peak_flops * eff);
    double t_mem = bytes / d->mem_Bps;
    double t = t_flops > t_mem ? t_flops : t_mem;
    return llround(t * 1e9) + d->launch_ns;
}

static void times_alloc(sim_times_t *t, const plan_t *p)
{
    t->n_units = p->n_units;
    t->fwd_ns = xcalloc((size_t)p->n_units, sizeof *t->fwd_ns);
    t->bwd_ns = xcalloc((size_t)p->n_units, sizeof *t->bwd_ns);
    t->update_flops = p->cluster.device.peak_flops * p->cluster.device.eff_fc;
}

void sim_times_device(sim_times_t *t, const plan_t *p)
{
    times_alloc(t, p);
    int batch = p->batch * p->cluster.devices_per_node;
    for (int u = 0; u < p->n_units; u++)
        for (int i = p->units[u].first; i <= p->units[u].last; i++) {
            t->fwd_ns[u] += compute_layer_ns(&p->cluster.device, &p->model->layers[i], batch, 0);
            t->bwd_ns[u] += compute_layer_ns(&p->cluster.device, &p->model->layers[i], batch, 1);
        }
}

int sim_times_profile(sim_times_t *t, const plan_t *p, const char *path, char *err, size_t errlen)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        snprintf(err, errlen, "%s:0: expected a readable profile CSV (%s)", path, strerror(errno));
        return -1;
    }
    const model_t *m = p->model;
    int64_t *fwd = xcalloc((size_t)m->n_layers, sizeof *fwd);
    int64_t *bwd = xcalloc((size_t)m->n_layers, sizeof *bwd);
    char *seen = xcalloc((size_t)m->n_layers, 1);
    int batch = p->batch * p->cluster.devices_per_node;
    char line[1024];
    int line_no = 0, rc = 0;
    while (rc == 0 && fgets(line, sizeof line, f)) {
        line_no++;
        char *nl = strchr(line, '\n');
        if (nl) *nl = 0;
        if (!line[0] || line[0] == '#') continue;
        if (line_no == 1 && !strncmp(line, "layer,", 6)) continue;
        char name[MODEL_NAME_MAX + 1];
        long long b, fns, bns;
        char extra;
        /* Columns after bwd_ns (poseidon profile --detail) are for people, not read here. */
        int got = sscanf(line, "%96[^,],%lld,%lld,%lld%c", name, &b, &fns, &bns, &extra);
        if ((got != 4 && !(got == 5 && extra == ',')) || b < 1 || fns < 0 || bns < 0) {
            snprintf(err, errlen, "%s:%d: expected layer,batch,fwd_ns,bwd_ns", path, line_no);
            rc = -1;
            break;
        }
        int li = model_find(m, name);
        if (li < 0) {
            snprintf(err, errlen, "%s:%d: expected a layer of %s, got '%s'", path, line_no,
                     m->name, name);
            rc = -1;
            break;
        }
        /* Scaled linearly to the plan's batch: a first-order model when batches differ. */
        fwd[li] = llround((double)fns * batch / (double)b);
        bwd[li] = llround((double)bns * batch / (double)b);
        seen[li] = 1;
    }
    fclose(f);
    for (int i = 0; rc == 0 && i < m->n_layers; i++)
        if (!seen[i] && m->layers[i].type != LAYER_INPUT) {
            snprintf(err, errlen, "%s:%d: expected a row for layer '%s'", path, line_no,
                     m->layers[i].name);
            rc = -1;
        }
    if (rc == 0) {
        times_alloc(t, p);
        for (int u = 0; u < p->n_units; u++)
            for (int i = p->units[u].first; i <= p->units[u].last; i++) {
                t->fwd_ns[u] += fwd[i];
                t->bwd_ns[u] += bwd[i];
            }
    }
    free(fwd);
    free(bwd);
    free(seen);
    return rc;
}

void sim_times_fini(sim_times_t *t)
{
    free(t->fwd_ns);
    free(t->bwd_ns);
    memset(t, 0, sizeof *t);
}
