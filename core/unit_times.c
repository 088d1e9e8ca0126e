#include "unit_times.h"

#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

int64_t unit_times_layer_ns_at(const device_t *d, const layer_t *l, int batch, int bwd,
                               precision_t prec)
{
    if (l->type == LAYER_INPUT) return 0;
    double flops = (double)(bwd ? l->bwd_flops : l->fwd_flops) * batch;
    double eff = l->type == LAYER_CONV ? d->eff_conv : l->type == LAYER_FC ? d->eff_fc : 1.0;
    /* Bytes touched: read the input and write the output forward; backward reads the output
     * gradient and the input and writes the input gradient (activations at the arithmetic
     * precision: a half of fp32's bytes). Parameters once per pass (fp32 master weights). */
    double act = (double)(shape_count(l->in_shape) * 4 + l->act_bytes) * batch *
                 (precision_bytes(prec) / 4.0);
    double bytes = (bwd ? 1.5 : 1.0) * act + (double)l->param_bytes * (bwd ? 2 : 1);
    double t_flops = flops / (device_peak_flops(d, prec) * eff);
    double t_mem = bytes / d->mem_Bps;
    double t = t_flops > t_mem ? t_flops : t_mem;
    return llround(t * 1e9) + d->launch_ns;
}

int64_t unit_times_layer_ns(const device_t *d, const layer_t *l, int batch, int bwd)
{
    return unit_times_layer_ns_at(d, l, batch, bwd, PRECISION_FP32);
}

static void times_alloc(unit_times_t *t, const plan_t *p)
{
    t->n_units = p->n_units;
    t->fwd_ns = xcalloc((size_t)p->n_units, sizeof *t->fwd_ns);
    t->bwd_ns = xcalloc((size_t)p->n_units, sizeof *t->bwd_ns);
    const device_t *d = &p->cluster.device;
    t->update_flops = device_peak_flops(d, p->precision) * d->eff_fc;
}

void unit_times_device(unit_times_t *t, const plan_t *p)
{
    times_alloc(t, p);
    int batch = p->batch; /* per device: a node's devices compute in parallel */
    for (int u = 0; u < p->n_units; u++)
        for (int i = p->units[u].first; i <= p->units[u].last; i++) {
            const layer_t *l = &p->model->layers[i];
            t->fwd_ns[u] += unit_times_layer_ns_at(&p->cluster.device, l, batch, 0, p->precision);
            t->bwd_ns[u] += unit_times_layer_ns_at(&p->cluster.device, l, batch, 1, p->precision);
        }
}

/* A comment line `# precision = NAME`: 1 with *prec set, 0 for any other line, -1 for an
 * unknown NAME. */
static int profile_precision_line(const char *line, precision_t *prec)
{
    char name[16], extra;
    if (sscanf(line, "# precision = %15s %c", name, &extra) != 1) return 0;
    return precision_parse(name, prec) ? -1 : 1;
}

/* One row of a profile: 0 and the fields, 1 for a line that holds no row (blank, comment,
 * the header before any row), or -1. */
static int profile_row(char *line, bool first, char *name, long long *b, long long *fns,
                       long long *bns)
{
    line[strcspn(line, "\r\n")] = 0; /* LF or CRLF */
    if (!line[0] || line[0] == '#') return 1;
    if (first && !strncmp(line, "layer,", 6)) return 1;
    char extra;
    /* Columns after bwd_ns (poseidon profile --detail) are for people, not read here. */
    int got = sscanf(line, "%96[^,],%lld,%lld,%lld%c", name, b, fns, bns, &extra);
    if ((got != 4 && !(got == 5 && extra == ',')) || *b < 1 || *b > 1000000000 || *fns < 0 ||
        *bns < 0 || *fns > UNIT_TIMES_MAX_NS || *bns > UNIT_TIMES_MAX_NS)
        return -1;
    return 0;
}

int unit_times_profile(unit_times_t *t, const plan_t *p, const char *path, char *err,
                       size_t errlen)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        snprintf(err, errlen, "%s:0: expected a readable profile CSV (%s)", path, strerror(errno));
        return -1;
    }
    const model_t *m = p->model;
    int64_t *fwd = xcalloc((size_t)m->n_layers, sizeof *fwd);
    int64_t *bwd = xcalloc((size_t)m->n_layers, sizeof *bwd);
    int *seen = xcalloc((size_t)m->n_layers, sizeof *seen); /* the row's line, 0: none */
    int batch = p->batch; /* per device: a node's devices compute in parallel */
    char line[1024];
    int line_no = 0, rc = 0, n_rows = 0;
    precision_t prec = PRECISION_FP32; /* what the profile measured: fp32 unless it says */
    while (rc == 0 && fgets(line, sizeof line, f)) {
        line_no++;
        if (!strchr(line, '\n') && !feof(f)) { /* the rest would be read as a line of its own */
            snprintf(err, errlen, "%s:%d: expected a line shorter than %zu bytes", path,
                     line_no, sizeof line);
            rc = -1;
            break;
        }
        int pl = profile_precision_line(line, &prec);
        if (pl < 0) {
            snprintf(err, errlen, "%s:%d: expected # precision = fp32 | bf16 | fp16", path,
                     line_no);
            rc = -1;
            break;
        }
        char name[MODEL_NAME_MAX + 1];
        long long b, fns, bns;
        int got = profile_row(line, n_rows == 0, name, &b, &fns, &bns);
        if (got == 1) continue;
        if (got < 0) {
            snprintf(err, errlen, "%s:%d: expected layer,batch,fwd_ns,bwd_ns (a batch >= 1, "
                                  "times from 0 to 1e15 ns)", path, line_no);
            rc = -1;
            break;
        }
        int li = model_find(m, name);
        if (li < 0) {
            snprintf(err, errlen, "%s:%d: expected a layer of %s, got '%s'", path, line_no,
                     m->name, name);
            rc = -1;
        } else if (seen[li]) {
            snprintf(err, errlen, "%s:%d: expected one row per layer, got a second for '%s' "
                                  "(the first at line %d)", path, line_no, name, seen[li]);
            rc = -1;
        } else {
            /* Scaled linearly to the plan's batch: a first-order model when batches differ. */
            fwd[li] = llround((double)fns * batch / (double)b);
            bwd[li] = llround((double)bns * batch / (double)b);
            seen[li] = line_no;
            n_rows++;
        }
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
        /* measured at another precision: scaled by the device's peak ratio */
        const device_t *d = &p->cluster.device;
        double k = device_peak_flops(d, prec) / device_peak_flops(d, p->precision);
        for (int u = 0; u < p->n_units; u++)
            for (int i = p->units[u].first; i <= p->units[u].last; i++) {
                t->fwd_ns[u] += prec == p->precision ? fwd[i] : llround((double)fwd[i] * k);
                t->bwd_ns[u] += prec == p->precision ? bwd[i] : llround((double)bwd[i] * k);
            }
    }
    free(fwd);
    free(bwd);
    free(seen);
    return rc;
}

int64_t unit_times_at_speed(int64_t ns, double speed)
{
    return llround((double)ns / speed);
}

void unit_times_fini(unit_times_t *t)
{
    free(t->fwd_ns);
    free(t->bwd_ns);
    memset(t, 0, sizeof *t);
}
