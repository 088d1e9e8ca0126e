#include "runtime/emulate.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/check.h"
#include "core/cluster.h"

int emulate_profile_load(emulate_profile_t *p, const model_t *m, const char *path, int batch,
                         char *err, size_t errlen)
{
    memset(p, 0, sizeof *p);
    char *text = kv_read_file(path);
    if (!text) {
        snprintf(err, errlen, "%s: cannot read: %s", path, strerror(errno));
        return -1;
    }
    p->n_layers = m->n_layers;
    p->fwd_ns = xcalloc((size_t)m->n_layers, sizeof *p->fwd_ns);
    p->bwd_ns = xcalloc((size_t)m->n_layers, sizeof *p->bwd_ns);
    char *seen = xcalloc((size_t)m->n_layers, 1);
    int lineno = 0, rc = -1;
    char *save = NULL;
    for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        lineno++;
        if (lineno == 1 || line[0] == '#' || line[0] == '\0') continue; /* header */
        char name[MODEL_NAME_MAX];
        long long b, f, w;
        if (sscanf(line, "%95[^,],%lld,%lld,%lld", name, &b, &f, &w) != 4 || b < 1 || f < 0 ||
            w < 0) {
            snprintf(err, errlen, "%s:%d: expected layer,batch,fwd_ns,bwd_ns", path, lineno);
            goto out;
        }
        int l = -1;
        for (int i = 0; i < m->n_layers && l < 0; i++)
            if (!strcmp(m->layers[i].name, name)) l = i;
        if (l < 0) {
            snprintf(err, errlen, "%s:%d: expected a layer of %s, got '%s'", path, lineno,
                     m->path, name);
            goto out;
        }
        p->fwd_ns[l] = (int64_t)((double)f * batch / (double)b + 0.5);
        p->bwd_ns[l] = (int64_t)((double)w * batch / (double)b + 0.5);
        seen[l] = 1;
    }
    for (int i = 0; i < m->n_layers; i++)
        if (!seen[i] && m->layers[i].type != LAYER_INPUT) {
            snprintf(err, errlen, "%s: expected a row for layer '%s' of %s", path,
                     m->layers[i].name, m->path);
            goto out;
        }
    rc = 0;
out:
    free(seen);
    free(text);
    if (rc) emulate_profile_fini(p);
    return rc;
}

void emulate_profile_fini(emulate_profile_t *p)
{
    free(p->fwd_ns);
    free(p->bwd_ns);
    memset(p, 0, sizeof *p);
}

void emulate_sleep_ns(int64_t ns)
{
    if (ns <= 0) return;
    struct timespec ts = {ns / 1000000000, ns % 1000000000};
    while (nanosleep(&ts, &ts) == -1 && errno == EINTR) {}
}

void emulate_sleep_until_ns(int64_t deadline_ns)
{
    struct timespec ts = {deadline_ns / 1000000000, deadline_ns % 1000000000};
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR) {}
}
