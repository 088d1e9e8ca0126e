#include "runtime/exec/checkpoint.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/check.h"
#include "core/log.h"
#include "core/outfile.h"

#define FNV_START 0xcbf29ce484222325ULL

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

int ckpt_write(const char *path, const ckpt_part_t *parts, int n, char *err, size_t errlen)
{
    char tmp[4200];
    if (snprintf(tmp, sizeof tmp, "%s.tmp", path) >= (int)sizeof tmp) {
        snprintf(err, errlen, "%.200s...: path too long", path);
        return -1;
    }
    int fd = outfile_make_parents(tmp) == 0 ? open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644) : -1;
    if (fd < 0) {
        snprintf(err, errlen, "%s: cannot create: %s", tmp, strerror(errno));
        return -1;
    }
    uint64_t sum = FNV_START;
    int rc = 0;
    for (int i = 0; i < n && !rc; i++) {
        sum = fnv1a(sum, parts[i].data, parts[i].bytes);
        rc = write_all(fd, parts[i].data, parts[i].bytes);
    }
    if (!rc) rc = write_all(fd, &sum, sizeof sum);
    if (!rc) rc = fsync(fd);
    int saved = errno;
    if (close(fd) && !rc) rc = -1, saved = errno;
    if (!rc && rename(tmp, path)) rc = -1, saved = errno;
    if (rc) {
        snprintf(err, errlen, "%s: cannot write: %s", path, strerror(saved));
        unlink(tmp);
        return -1;
    }
    /* make the rename itself durable */
    char dir[4200];
    snprintf(dir, sizeof dir, "%s", path);
    int dfd = open(dirname(dir), O_RDONLY | O_DIRECTORY);
    if (dfd >= 0) {
        fsync(dfd);
        close(dfd);
    }
    return 0;
}

void ckpt_remove_stale(const char *path)
{
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    if (unlink(tmp) == 0) log_info("removed %s, left by a checkpoint write that did not finish", tmp);
}

struct ckpt_reader {
    FILE *f;
    char path[4096];
    uint64_t sum;
    bool short_read;
};

ckpt_reader_t *ckpt_open(const char *path, char *err, size_t errlen)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, errlen, "%s: cannot open: %s", path, strerror(errno));
        return NULL;
    }
    ckpt_reader_t *r = xcalloc(1, sizeof *r);
    r->f = f;
    r->sum = FNV_START;
    snprintf(r->path, sizeof r->path, "%s", path);
    return r;
}

int ckpt_read(ckpt_reader_t *r, void *out, size_t bytes)
{
    if (r->short_read) return -1;
    if (fread(out, 1, bytes, r->f) != bytes) {
        r->short_read = true;
        return -1;
    }
    r->sum = fnv1a(r->sum, out, bytes);
    return 0;
}

int ckpt_close(ckpt_reader_t **rp, char *err, size_t errlen)
{
    ckpt_reader_t *r = *rp;
    uint64_t stored = 0;
    int rc = 0;
    if (r->short_read || fread(&stored, sizeof stored, 1, r->f) != 1) {
        snprintf(err, errlen, "%s: truncated checkpoint", r->path);
        rc = -1;
    } else if (fgetc(r->f) != EOF) {
        snprintf(err, errlen, "%s: bytes after the checksum (not a checkpoint this build "
                              "wrote, or appended to)", r->path);
        rc = -1;
    } else if (stored != r->sum) {
        snprintf(err, errlen, "%s: checksum mismatch (corrupt checkpoint)", r->path);
        rc = -1;
    }
    ckpt_discard(rp);
    return rc;
}

ckpt_reader_t *ckpt_open_tagged(const char *path, void *hdr, size_t bytes, const char *magic,
                                uint32_t version, const char *kind, char *err, size_t errlen)
{
    ckpt_reader_t *r = ckpt_open(path, err, errlen);
    if (!r) return NULL;
    const ckpt_tag_t *tag = hdr;
    if (ckpt_read(r, hdr, bytes) || memcmp(tag->magic, magic, 8))
        snprintf(err, errlen, "%s: not a poseidon %s", path, kind);
    else if (tag->version != version)
        snprintf(err, errlen, "%s: %s version %u, this build reads %u", path, kind, tag->version,
                 version);
    else
        return r;
    ckpt_discard(&r);
    return NULL;
}

void ckpt_discard(ckpt_reader_t **rp)
{
    fclose((*rp)->f);
    free(*rp);
    *rp = NULL;
}

/* ---- one replica (single-worker training) */

#define CKPT_MAGIC "PSDNCKPT"
#define CKPT_VERSION 3u /* 3: the job's keys */

typedef struct {
    ckpt_tag_t tag;
    char model[MODEL_NAME_MAX];
    int64_t params, state, rng_bytes;
    int64_t epoch, iter;
    uint64_t seed;
    int64_t keys_bytes; /* the keys' text, after the RNG state; 0: none */
} ckpt_header_t;

int checkpoint_save(const char *path, const model_t *m, const arena_t *a, const float *history,
                    const void *rng, size_t rng_bytes, const checkpoint_meta_t *meta, char *err,
                    size_t errlen)
{
    ckpt_header_t h;
    memset(&h, 0, sizeof h);
    memcpy(h.tag.magic, CKPT_MAGIC, 8);
    h.tag.version = CKPT_VERSION;
    snprintf(h.model, sizeof h.model, "%s", m->name);
    h.params = a->count;
    h.state = a->state_count;
    h.rng_bytes = (int64_t)rng_bytes;
    h.epoch = meta->epoch, h.iter = meta->iter, h.seed = meta->seed;
    h.keys_bytes = meta->keys ? (int64_t)strlen(meta->keys) : 0;
    /* a device's buffers come to the host first (parameters, history, state back to back) */
    size_t pb = (size_t)a->count * sizeof(float), sb = (size_t)a->state_count * sizeof(float);
    bool host = compute_is_host(a->compute);
    char *copy = host ? NULL : xmalloc(2 * pb + sb + 1);
    if (copy) {
        compute_download(a->compute, copy, a->params, pb);
        compute_download(a->compute, copy + pb, history, pb);
        compute_download(a->compute, copy + 2 * pb, a->state, sb);
    }
    ckpt_part_t parts[] = {{&h, sizeof h},
                           {host ? (const void *)a->params : copy, pb},
                           {host ? (const void *)history : copy + pb, pb},
                           {host ? (const void *)a->state : copy + 2 * pb, sb},
                           {rng, rng_bytes},
                           {meta->keys, (size_t)h.keys_bytes}};
    int rc = ckpt_write(path, parts, 6, err, errlen);
    free(copy);
    return rc;
}

int checkpoint_load(const char *path, const model_t *m, arena_t *a, float *history, void *rng,
                    size_t rng_bytes, checkpoint_meta_t *meta, char *err, size_t errlen)
{
    ckpt_header_t h;
    ckpt_reader_t *r =
        ckpt_open_tagged(path, &h, sizeof h, CKPT_MAGIC, CKPT_VERSION, "checkpoint", err, errlen);
    if (!r) return -1;
    h.model[sizeof h.model - 1] = '\0';
    if (strcmp(h.model, m->name) || h.params != a->count || h.state != a->state_count ||
        h.rng_bytes != (int64_t)rng_bytes || h.keys_bytes < 0 || h.keys_bytes > (1 << 20)) {
        ckpt_discard(&r);
        snprintf(err, errlen, "%s: checkpoint of model '%s' (%lld parameters), not of '%s' (%lld)",
                 path, h.model, (long long)h.params, m->name, (long long)a->count);
        return -1;
    }
    /* a device's buffers are written once the whole file has checked out */
    size_t pb = (size_t)a->count * sizeof(float), sb = (size_t)a->state_count * sizeof(float);
    bool host = compute_is_host(a->compute);
    char *copy = host ? NULL : xmalloc(2 * pb + sb + 1);
    ckpt_read(r, host ? (void *)a->params : copy, pb);
    ckpt_read(r, host ? (void *)history : copy + pb, pb);
    ckpt_read(r, host ? (void *)a->state : copy + 2 * pb, sb);
    ckpt_read(r, rng, rng_bytes);
    char *keys = h.keys_bytes ? xcalloc((size_t)h.keys_bytes + 1, 1) : NULL;
    if (keys) ckpt_read(r, keys, (size_t)h.keys_bytes);
    if (ckpt_close(&r, err, errlen)) {
        free(copy);
        free(keys);
        return -1;
    }
    if (copy) {
        compute_upload(a->compute, a->params, copy, pb);
        compute_upload(a->compute, history, copy + pb, pb);
        compute_upload(a->compute, a->state, copy + 2 * pb, sb);
        a->compute->ops->sync(a->compute->ctx); /* the uploads read copy */
        free(copy);
    }
    meta->epoch = h.epoch, meta->iter = h.iter, meta->seed = h.seed;
    meta->keys = keys;
    return 0;
}
