#include "runtime/checkpoint.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/check.h"
#include "core/outfile.h"

#define CKPT_MAGIC "PSDNCKPT"
#define CKPT_VERSION 1u

typedef struct {
    char magic[8];
    uint32_t version, reserved;
    char model[MODEL_NAME_MAX];
    int64_t params, state;
    int64_t epoch, iter;
    uint64_t seed;
} ckpt_header_t;

/* FNV-1a 64 over bytes, continued from h. */
static uint64_t fnv1a(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 0x100000001b3ULL;
    return h;
}

static int write_all(int fd, const void *p, size_t n)
{
    const char *c = p;
    while (n > 0) {
        ssize_t w = write(fd, c, n);
        if (w < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        c += w, n -= (size_t)w;
    }
    return 0;
}

int checkpoint_save(const char *path, const model_t *m, const arena_t *a, const float *history,
                    const checkpoint_meta_t *meta, char *err, size_t errlen)
{
    ckpt_header_t h;
    memset(&h, 0, sizeof h);
    memcpy(h.magic, CKPT_MAGIC, 8);
    h.version = CKPT_VERSION;
    snprintf(h.model, sizeof h.model, "%s", m->name);
    h.params = a->count;
    h.state = a->state_count;
    h.epoch = meta->epoch, h.iter = meta->iter, h.seed = meta->seed;
    struct {
        const void *p;
        size_t n;
    } parts[] = {{&h, sizeof h},
                 {a->params, (size_t)a->count * sizeof(float)},
                 {history, (size_t)a->count * sizeof(float)},
                 {a->state, (size_t)a->state_count * sizeof(float)}};
    char tmp[1100];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    int fd = outfile_make_parents(tmp) == 0 ? open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644) : -1;
    if (fd < 0) {
        snprintf(err, errlen, "%s: cannot create: %s", tmp, strerror(errno));
        return -1;
    }
    uint64_t sum = 0xcbf29ce484222325ULL;
    int rc = 0;
    for (size_t i = 0; i < sizeof parts / sizeof parts[0] && !rc; i++) {
        sum = fnv1a(sum, parts[i].p, parts[i].n);
        rc = write_all(fd, parts[i].p, parts[i].n);
    }
    if (!rc) rc = write_all(fd, &sum, sizeof sum);
    if (!rc) rc = fsync(fd);
    if (close(fd) && !rc) rc = -1;
    if (!rc) rc = rename(tmp, path);
    if (rc) {
        snprintf(err, errlen, "%s: cannot write: %s", path, strerror(errno));
        unlink(tmp);
        return -1;
    }
    /* make the rename itself durable */
    char dir[1100];
    snprintf(dir, sizeof dir, "%s", path);
    int dfd = open(dirname(dir), O_RDONLY | O_DIRECTORY);
    if (dfd >= 0) {
        fsync(dfd);
        close(dfd);
    }
    return 0;
}

int checkpoint_load(const char *path, const model_t *m, arena_t *a, float *history,
                    checkpoint_meta_t *meta, char *err, size_t errlen)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, errlen, "%s: cannot open: %s", path, strerror(errno));
        return -1;
    }
    ckpt_header_t h;
    int rc = -1;
    if (fread(&h, sizeof h, 1, f) != 1 || memcmp(h.magic, CKPT_MAGIC, 8)) {
        snprintf(err, errlen, "%s: not a poseidon checkpoint", path);
        goto out;
    }
    if (h.version != CKPT_VERSION) {
        snprintf(err, errlen, "%s: checkpoint version %u, this build reads %u", path, h.version,
                 CKPT_VERSION);
        goto out;
    }
    h.model[sizeof h.model - 1] = '\0';
    if (strcmp(h.model, m->name) || h.params != a->count || h.state != a->state_count) {
        snprintf(err, errlen,
                 "%s: checkpoint of model '%s' (%lld parameters), not of '%s' (%lld)", path,
                 h.model, (long long)h.params, m->name, (long long)a->count);
        goto out;
    }
    uint64_t sum = fnv1a(0xcbf29ce484222325ULL, &h, sizeof h), stored;
    size_t np = (size_t)a->count, ns = (size_t)a->state_count;
    if (fread(a->params, sizeof(float), np, f) != np ||
        fread(history, sizeof(float), np, f) != np ||
        fread(a->state, sizeof(float), ns, f) != ns || fread(&stored, sizeof stored, 1, f) != 1) {
        snprintf(err, errlen, "%s: truncated checkpoint", path);
        goto out;
    }
    sum = fnv1a(sum, a->params, np * sizeof(float));
    sum = fnv1a(sum, history, np * sizeof(float));
    sum = fnv1a(sum, a->state, ns * sizeof(float));
    if (sum != stored) {
        snprintf(err, errlen, "%s: checksum mismatch (corrupt checkpoint)", path);
        goto out;
    }
    meta->epoch = h.epoch, meta->iter = h.iter, meta->seed = h.seed;
    rc = 0;
out:
    fclose(f);
    return rc;
}
