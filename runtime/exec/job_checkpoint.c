#include "runtime/exec/job_checkpoint.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "core/check.h"
#include "core/log.h"
#include "core/outfile.h"
#include "runtime/exec/checkpoint.h"

#define JOB_CKPT_MAGIC "PSDNJOBC"
#define JOB_CKPT_VERSION 3u /* 2: devices per node, a state per device; 3: the loss scale */
#define COMPLETE_FIRST_LINE "poseidon job checkpoint"
#define KEYS_LINE "keys\n" /* opens the job's keys, after the ranks' lines */

typedef struct {
    ckpt_tag_t tag;
    job_ckpt_header_t h;
} disk_header_t;

void job_ckpt_iter_dir(char *out, size_t n, const char *dir, int64_t iter)
{
    snprintf(out, n, "%s/iter-%lld", dir, (long long)iter);
}

void job_ckpt_rank_path(char *out, size_t n, const char *dir, int64_t iter, int rank)
{
    snprintf(out, n, "%s/iter-%lld/rank-%d.ckpt", dir, (long long)iter, rank);
}

void job_ckpt_complete_path(char *out, size_t n, const char *dir, int64_t iter)
{
    snprintf(out, n, "%s/iter-%lld/COMPLETE", dir, (long long)iter);
}

/* The size of path and its last 8 bytes (the checksum ckpt_write closes a file with). */
static int file_record(const char *path, job_ckpt_file_t *f)
{
    int fd = open(path, O_RDONLY);
    if (fd < 0) return -1;
    struct stat st;
    int rc = fstat(fd, &st);
    if (rc == 0 && st.st_size < (off_t)sizeof f->checksum) rc = -1;
    if (rc == 0 && pread(fd, &f->checksum, sizeof f->checksum,
                         st.st_size - (off_t)sizeof f->checksum) != (ssize_t)sizeof f->checksum)
        rc = -1;
    if (rc == 0) f->bytes = (int64_t)st.st_size;
    close(fd);
    return rc;
}

/* Parts of a rank's state after the header: 4 arena-sized arrays, then a layer state and an
 * RNG state per device. */
static int n_state_parts(const job_ckpt_header_t *h) { return 4 + 2 * h->devices; }

/* The n_state_parts(h) parts of s, malloc'ed. */
static ckpt_part_t *state_parts(const job_ckpt_header_t *h, const job_ckpt_state_t *s)
{
    ckpt_part_t *parts = xcalloc((size_t)n_state_parts(h), sizeof *parts);
    size_t arena = (size_t)h->n_params * sizeof(float);
    parts[0] = (ckpt_part_t){s->params, arena};
    parts[1] = (ckpt_part_t){s->hist_local, arena};
    parts[2] = (ckpt_part_t){s->hist_server, arena};
    parts[3] = (ckpt_part_t){s->shard_values, arena};
    for (int d = 0; d < h->devices; d++) {
        float *state = d == 0 ? s->state : s->dev_state[d - 1];
        void *rng = d == 0 ? s->rng : s->dev_rng[d - 1];
        parts[4 + 2 * d] = (ckpt_part_t){state, (size_t)h->state_count * sizeof(float)};
        parts[5 + 2 * d] = (ckpt_part_t){rng, (size_t)h->rng_bytes};
    }
    return parts;
}

int64_t job_ckpt_rank_bytes(const job_ckpt_header_t *h)
{
    int64_t arena = h->n_params * (int64_t)sizeof(float);
    return (int64_t)sizeof(disk_header_t) + 4 * arena +
           h->devices * (h->state_count * (int64_t)sizeof(float) + h->rng_bytes) +
           (int64_t)sizeof(uint64_t);
}

int job_ckpt_disk_free(const char *dir, int64_t *free_bytes, uint64_t *fsid, char *err,
                       size_t errlen)
{
    struct statvfs fs;
    char inside[4200];
    snprintf(inside, sizeof inside, "%s/x", dir);
    if (outfile_make_parents(inside) != 0 || statvfs(dir, &fs) != 0) {
        snprintf(err, errlen, "%s: cannot use it: %s", dir, strerror(errno));
        return -1;
    }
    double avail = (double)fs.f_bavail * (double)fs.f_frsize;
    *free_bytes = avail > 9e18 ? INT64_MAX : (int64_t)avail;
    *fsid = (uint64_t)fs.f_fsid;
    return 0;
}

int job_ckpt_space_check(const char *dir, int64_t free_bytes, int64_t bytes, const char *what,
                         char *err, size_t errlen)
{
    double need = (double)bytes * 1.01 + (1 << 20);
    if ((double)free_bytes >= need) return 0;
    snprintf(err, errlen, "%s: %.1f MB free on its disk, %s needs %.1f MB: free space, write "
                          "elsewhere (--checkpoint-dir), or keep fewer checkpoints "
                          "(keep_checkpoints)", dir, free_bytes / 1e6, what, need / 1e6);
    return -1;
}

int job_ckpt_write_rank(const char *path, const job_ckpt_header_t *h,
                        const job_ckpt_state_t *s, job_ckpt_file_t *file, char *err,
                        size_t errlen)
{
    disk_header_t d;
    memset(&d, 0, sizeof d);
    memcpy(d.tag.magic, JOB_CKPT_MAGIC, 8);
    d.tag.version = JOB_CKPT_VERSION;
    d.h = *h;
    ASSERT(h->devices >= 1, "a checkpoint of %d devices", h->devices);
    int n = 1 + n_state_parts(h);
    ckpt_part_t *parts = xcalloc((size_t)n, sizeof *parts), *state = state_parts(h, s);
    parts[0] = (ckpt_part_t){&d, sizeof d};
    memcpy(parts + 1, state, (size_t)(n - 1) * sizeof *parts);
    free(state);
    int rc = ckpt_write(path, parts, n, err, errlen);
    free(parts);
    if (rc) return -1;
    if (file_record(path, file)) {
        snprintf(err, errlen, "%s: cannot read back: %s", path, strerror(errno));
        return -1;
    }
    return 0;
}

/* The first of world size, devices per node, seed and plan (want's plan_hash 0: not known
 * yet) in which a checkpoint (g, its file at path) is not of the job (want): "PATH: reason"
 * in err and -1; 0 when it is of the job in all four. */
static int job_mismatch(const char *path, const job_ckpt_header_t *g,
                        const job_ckpt_header_t *want, char *err, size_t n)
{
    if (g->world != want->world)
        snprintf(err, n, "%s: checkpoint of a %d-rank job, this job has %d ranks", path,
                 g->world, want->world);
    else if (g->devices != want->devices)
        snprintf(err, n, "%s: checkpoint of %d devices per node, this job has %d "
                         "(--devices-per-node)", path, g->devices, want->devices);
    else if (g->seed != want->seed)
        snprintf(err, n, "%s: checkpoint of seed %llu, this job's seed is %llu", path,
                 (unsigned long long)g->seed, (unsigned long long)want->seed);
    else if (want->plan_hash && g->plan_hash != want->plan_hash)
        snprintf(err, n, "%s: checkpoint of plan %016llx, this job's plan is %016llx (another "
                         "scheme, cluster, batch or link: --no-probe or --link keeps a plan)",
                 path, (unsigned long long)g->plan_hash, (unsigned long long)want->plan_hash);
    else
        return 0;
    return -1;
}

/* Why header g is not the one the job wants (want), or "" when it is. */
static void header_mismatch(const char *path, const job_ckpt_header_t *g,
                            const job_ckpt_header_t *want, char *why, size_t n)
{
    why[0] = '\0';
    if (strcmp(g->model, want->model) || g->n_params != want->n_params ||
        g->state_count != want->state_count || g->rng_bytes != want->rng_bytes)
        snprintf(why, n, "%s: checkpoint of model '%s' (%lld parameters), this job runs '%s' "
                         "(%lld)", path, g->model, (long long)g->n_params, want->model,
                 (long long)want->n_params);
    else if (job_mismatch(path, g, want, why, n))
        return;
    else if (g->rank != want->rank)
        snprintf(why, n, "%s: the file of rank %d, read by rank %d", path, g->rank, want->rank);
    else if (g->iter != want->iter)
        snprintf(why, n, "%s: checkpoint of iteration %lld, its directory says %lld", path,
                 (long long)g->iter, (long long)want->iter);
}

int job_ckpt_read_rank(const char *path, const job_ckpt_header_t *want,
                       const job_ckpt_file_t *file, job_ckpt_state_t *s,
                       job_ckpt_header_t *got, char *err, size_t errlen)
{
    job_ckpt_file_t on_disk;
    errno = 0;
    if (file_record(path, &on_disk)) {
        snprintf(err, errlen, "%s: cannot read: %s", path, errno ? strerror(errno) : "too short");
        return -1;
    }
    if (on_disk.bytes != file->bytes) {
        snprintf(err, errlen, "%s: %lld bytes, COMPLETE recorded %lld (truncated or appended "
                              "to since it was written)", path, (long long)on_disk.bytes,
                 (long long)file->bytes);
        return -1;
    }
    if (on_disk.checksum != file->checksum) {
        snprintf(err, errlen, "%s: checksum %016llx, COMPLETE recorded %016llx (not the file "
                              "written for this checkpoint)", path,
                 (unsigned long long)on_disk.checksum, (unsigned long long)file->checksum);
        return -1;
    }
    disk_header_t d;
    ckpt_reader_t *r = ckpt_open_tagged(path, &d, sizeof d, JOB_CKPT_MAGIC, JOB_CKPT_VERSION,
                                        "job checkpoint", err, errlen);
    if (!r) return -1;
    d.h.model[sizeof d.h.model - 1] = '\0';
    header_mismatch(path, &d.h, want, err, errlen);
    if (err[0]) {
        ckpt_discard(&r);
        return -1;
    }
    ckpt_part_t *parts = state_parts(want, s);
    for (int i = 0; i < n_state_parts(want); i++)
        ckpt_read(r, (void *)parts[i].data, parts[i].bytes);
    free(parts);
    if (ckpt_close(&r, err, errlen)) return -1;
    *got = d.h;
    return 0;
}

/* ---- COMPLETE */

char *job_ckpt_complete_text(const job_ckpt_complete_t *c)
{
    size_t cap = 512 + (size_t)c->world * 80;
    char *t = xmalloc(cap);
    size_t n = (size_t)snprintf(t, cap,
                                COMPLETE_FIRST_LINE "\niteration %lld\nworld %d\ndevices %d\n"
                                "plan %016llx\nseed %llu\nmodel %s\n",
                                (long long)c->iter, c->world, c->devices,
                                (unsigned long long)c->plan_hash,
                                (unsigned long long)c->seed, c->model);
    for (int r = 0; r < c->world; r++)
        n += (size_t)snprintf(t + n, cap - n, "rank %d bytes %lld checksum %016llx\n", r,
                              (long long)c->files[r].bytes,
                              (unsigned long long)c->files[r].checksum);
    if (c->keys) {
        size_t need = n + strlen(KEYS_LINE) + strlen(c->keys) + 1;
        t = xrealloc(t, need);
        snprintf(t + n, need - n, KEYS_LINE "%s", c->keys);
    }
    return t;
}

int job_ckpt_complete_parse(const char *text, const char *what, job_ckpt_complete_t *c,
                            char *err, size_t errlen)
{
    memset(c, 0, sizeof *c);
    long long iter;
    unsigned long long hash, seed;
    int world, devices, used = 0;
    char model[MODEL_NAME_MAX];
    if (sscanf(text, COMPLETE_FIRST_LINE "\niteration %lld\nworld %d\ndevices %d\nplan %16llx\n"
                     "seed %llu\nmodel %95[^\n]\n%n",
               &iter, &world, &devices, &hash, &seed, model, &used) != 6 ||
        !used || iter < 0 || world < 1 || world > (1 << 20) || devices < 1 ||
        devices > (1 << 10)) {
        snprintf(err, errlen, "%s: not a COMPLETE file of a poseidon job checkpoint", what);
        return -1;
    }
    c->iter = iter, c->world = world, c->devices = devices, c->plan_hash = hash, c->seed = seed;
    snprintf(c->model, sizeof c->model, "%s", model);
    c->files = xcalloc((size_t)world, sizeof *c->files);
    const char *p = text + used;
    for (int r = 0; r < world; r++) {
        int rank, n = 0;
        long long bytes;
        unsigned long long sum;
        if (sscanf(p, "rank %d bytes %lld checksum %16llx\n%n", &rank, &bytes, &sum, &n) != 3 ||
            !n || rank != r || bytes <= 0) {
            snprintf(err, errlen, "%s: line of rank %d missing or malformed", what, r);
            free(c->files);
            c->files = NULL;
            return -1;
        }
        c->files[r] = (job_ckpt_file_t){bytes, sum};
        p += n;
    }
    if (!strncmp(p, KEYS_LINE, strlen(KEYS_LINE))) {
        c->keys = xstrdup(p + strlen(KEYS_LINE));
        p += strlen(p);
    }
    if (*p) {
        snprintf(err, errlen, "%s: text after the line of rank %d", what, world - 1);
        free(c->files);
        c->files = NULL;
        return -1;
    }
    return 0;
}

int job_ckpt_write_complete(const char *dir, const job_ckpt_complete_t *c, char *err,
                            size_t errlen)
{
    char path[4200];
    job_ckpt_complete_path(path, sizeof path, dir, c->iter);
    char *text = job_ckpt_complete_text(c);
    ckpt_part_t part = {text, strlen(text)};
    int rc = ckpt_write(path, &part, 1, err, errlen);
    free(text);
    return rc;
}

int job_ckpt_read_complete(const char *path, job_ckpt_complete_t *c, char **text, char *err,
                           size_t errlen)
{
    struct stat st;
    errno = 0;
    if (stat(path, &st) || st.st_size < 8 || st.st_size > (1 << 26)) {
        snprintf(err, errlen, "%s: cannot read: %s", path, errno ? strerror(errno) : "size");
        return -1;
    }
    size_t n = (size_t)st.st_size - 8;
    char *t = xmalloc(n + 1);
    ckpt_reader_t *r = ckpt_open(path, err, errlen);
    if (!r) {
        free(t);
        return -1;
    }
    ckpt_read(r, t, n);
    t[n] = '\0';
    int rc = ckpt_close(&r, err, errlen);
    if (rc == 0 && (strlen(t) != n || job_ckpt_complete_parse(t, path, c, err, errlen))) {
        if (strlen(t) != n) snprintf(err, errlen, "%s: not a COMPLETE file", path);
        rc = -1;
    }
    if (rc == 0 && text) *text = t;
    else free(t);
    return rc;
}

int job_ckpt_check_complete(const job_ckpt_complete_t *c, const char *path, const char *model,
                            int world, int devices, uint64_t seed, uint64_t plan_hash,
                            int64_t iterations, char *err, size_t errlen)
{
    job_ckpt_header_t g = {.world = c->world, .devices = c->devices, .seed = c->seed,
                           .plan_hash = c->plan_hash},
                      want = {.world = world, .devices = devices, .seed = seed,
                              .plan_hash = plan_hash};
    if (strcmp(c->model, model))
        snprintf(err, errlen, "%s: checkpoint of model '%s', this job runs '%s'", path, c->model,
                 model);
    else if (job_mismatch(path, &g, &want, err, errlen))
        return -1;
    else if (iterations > 0 && c->iter >= iterations)
        snprintf(err, errlen, "%s: checkpoint after iteration %lld, and this job runs %lld",
                 path, (long long)c->iter, (long long)iterations);
    else
        return 0;
    return -1;
}

void job_ckpt_complete_free(job_ckpt_complete_t *c)
{
    free(c->files);
    free(c->keys);
    c->files = NULL;
    c->keys = NULL;
}

char *job_ckpt_job_keys(const experiment_t *e)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    ASSERT(f, "open_memstream: %s", strerror(errno));
    experiment_write(e, 0, &e->cluster, NULL, f);
    fclose(f);
    /* the cluster's lines go: its world, devices and plan are compared on their own */
    char *out = xmalloc(len + 1), *w = out;
    for (char *line = text; *line;) {
        char *nl = strchr(line, '\n');
        size_t n = nl ? (size_t)(nl - line) + 1 : strlen(line);
        if (strncmp(line, "cluster", 7)) {
            memcpy(w, line, n);
            w += n;
        }
        line += n;
    }
    *w = '\0';
    free(text);
    return out;
}

/* Keys that may differ on a resume: they do not change what the resumed iterations compute
 * (how many there are; the simulator's; the probe and emulated compute's timing; the
 * initialisation, which the checkpoint's parameters replace; restarts, kept checkpoints), or
 * the plan's hash, compared on its own, judges them. */
static const char *const s_free_keys[] = {
    "iterations", "epochs", "warmup", "net_model", "sample", "probe", "probe_bytes",
    "time_dilation", "profile", "init", "max_restarts", "keep_checkpoints",
    "scheme", "kv_block_mb", "kv_placement", "hybrid_rule", "allreduce_bucket_mb",
};

static bool key_listed(const char *key, const char *list)
{
    if (!list) return false;
    if (!strcmp(list, "all")) return true;
    size_t n = strlen(key);
    for (const char *p = list; *p;) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        if (len == n && !strncmp(p, key, n)) return true;
        p += len + (comma ? 1 : 0);
    }
    return false;
}

/* The value of key in keys ("key = value" lines) into out ("(none)" when absent). */
static void key_value(const char *keys, const char *key, char *out, size_t n)
{
    size_t klen = strlen(key);
    for (const char *line = keys; line && *line;) {
        const char *nl = strchr(line, '\n');
        size_t len = nl ? (size_t)(nl - line) : strlen(line);
        if (len > klen + 3 && !strncmp(line, key, klen) && !strncmp(line + klen, " = ", 3)) {
            snprintf(out, n, "%.*s", (int)(len - klen - 3), line + klen + 3);
            return;
        }
        line += len + (nl ? 1 : 0);
    }
    snprintf(out, n, "(none)");
}

/* Appends to diff (and names to names) every key of `from` whose value in a and b differs
 * and that may not; keys already in names are skipped. */
static void keys_differ(const char *from, const char *a, const char *b, const char *changed,
                        char *diff, size_t dn, char *names, size_t nn)
{
    for (const char *line = from; *line;) {
        const char *nl = strchr(line, '\n'), *eq = strstr(line, " = ");
        size_t len = nl ? (size_t)(nl - line) : strlen(line);
        char key[64] = "";
        if (eq && eq < line + len && eq - line < (ptrdiff_t)sizeof key)
            snprintf(key, sizeof key, "%.*s", (int)(eq - line), line);
        line += len + (nl ? 1 : 0);
        bool free_key = !key[0] || key_listed(key, changed) || key_listed(key, names);
        for (size_t i = 0; i < sizeof s_free_keys / sizeof *s_free_keys && !free_key; i++)
            free_key = !strcmp(key, s_free_keys[i]);
        if (free_key) continue;
        char va[600], vb[600];
        key_value(a, key, va, sizeof va);
        key_value(b, key, vb, sizeof vb);
        if (!strcmp(va, vb)) continue;
        size_t d = strlen(diff), m = strlen(names);
        snprintf(diff + d, dn - d, "%s%s (%s in the checkpoint, %s now)", d ? ", " : "", key,
                 va, vb);
        snprintf(names + m, nn - m, "%s%s", m ? "," : "", key);
    }
}

int job_ckpt_keys_check(const char *path, const char *was, const char *now, const char *changed,
                        char *err, size_t errlen)
{
    if (!was) return 0;
    char diff[2048] = "", names[512] = "";
    keys_differ(was, was, now, changed, diff, sizeof diff, names, sizeof names);
    keys_differ(now, was, now, changed, diff, sizeof diff, names, sizeof names);
    if (!diff[0]) return 0;
    snprintf(err, errlen, "%s: this job differs from the checkpoint's in %s; resume with the "
                          "checkpoint's values, or say so: --resume-changed %s", path, diff,
             names);
    return -1;
}

/* ---- the directory */

/* J of a directory entry named iter-J, or -1. */
static int64_t entry_iter(const char *name)
{
    if (strncmp(name, "iter-", 5) || !name[5]) return -1;
    int64_t v = 0;
    for (const char *p = name + 5; *p; p++) {
        if (*p < '0' || *p > '9' || v > INT64_MAX / 10 - 10) return -1;
        v = v * 10 + (*p - '0');
    }
    return v;
}

int job_ckpt_newest(const char *dir, int64_t *iter, char *err, size_t errlen)
{
    DIR *d = opendir(dir);
    if (!d) {
        snprintf(err, errlen, "%s: cannot open: %s", dir, strerror(errno));
        return -1;
    }
    int64_t best = -1;
    struct dirent *e;
    while ((e = readdir(d))) {
        int64_t j = entry_iter(e->d_name);
        if (j <= best) continue;
        char path[4200];
        job_ckpt_complete_path(path, sizeof path, dir, j);
        if (access(path, F_OK) == 0) best = j;
    }
    closedir(d);
    if (best < 0) {
        snprintf(err, errlen, "%s: no complete checkpoint (no iter-K/COMPLETE)", dir);
        return -1;
    }
    *iter = best;
    return 0;
}

/* Removes the files of DIR/iter-J and the directory. */
static void remove_iter_dir(const char *dir, int64_t j)
{
    char path[4200];
    job_ckpt_iter_dir(path, sizeof path, dir, j);
    DIR *d = opendir(path);
    if (!d) return;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        char f[4500];
        snprintf(f, sizeof f, "%s/%s", path, e->d_name);
        if (unlink(f) && errno != ENOENT) log_warn("%s: cannot remove: %s", f, strerror(errno));
    }
    closedir(d);
    if (rmdir(path) && errno != ENOENT) log_warn("%s: cannot remove: %s", path, strerror(errno));
}

/* The iter-J entries of dir (malloc'ed, *n of them); NULL when dir cannot be read. */
static int64_t *list_iters(const char *dir, int *n)
{
    *n = 0;
    DIR *d = opendir(dir);
    if (!d) return NULL;
    int cap = 16;
    int64_t *v = xmalloc((size_t)cap * sizeof *v);
    struct dirent *e;
    while ((e = readdir(d))) {
        int64_t j = entry_iter(e->d_name);
        if (j < 0) continue;
        if (*n == cap) v = xrealloc(v, (size_t)(cap *= 2) * sizeof *v);
        v[(*n)++] = j;
    }
    closedir(d);
    return v;
}

void job_ckpt_prune(const char *dir, int64_t current, int64_t oldest)
{
    int n;
    int64_t *js = list_iters(dir, &n);
    for (int i = 0; i < n; i++) {
        int64_t j = js[i];
        char done[4200];
        job_ckpt_complete_path(done, sizeof done, dir, j);
        bool drop = current >= 0 ? j < oldest || (j < current && access(done, F_OK) != 0)
                                 : j > oldest;
        if (!drop) continue;
        remove_iter_dir(dir, j);
        char path[4200];
        job_ckpt_iter_dir(path, sizeof path, dir, j);
        log_info("checkpoint: removed %s", path);
    }
    free(js);
}

static int cmp_desc(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? 1 : x > y ? -1 : 0;
}

void job_ckpt_prune_resumed(const char *dir, int64_t k, int keep)
{
    int n;
    int64_t *js = list_iters(dir, &n);
    if (!js) return;
    qsort(js, (size_t)n, sizeof *js, cmp_desc);
    int older = 0;
    for (int i = 0; i < n; i++) {
        char done[4200];
        job_ckpt_complete_path(done, sizeof done, dir, js[i]);
        if (js[i] >= k || access(done, F_OK) != 0 || ++older < keep) continue;
        remove_iter_dir(dir, js[i]);
        log_info("checkpoint: removed %s/iter-%lld (keep_checkpoints = %d)", dir,
                 (long long)js[i], keep);
    }
    free(js);
}

void job_ckpt_prune_rank(const char *dir, int rank, int64_t oldest)
{
    int n;
    int64_t *js = list_iters(dir, &n);
    for (int i = 0; i < n; i++) {
        if (js[i] >= oldest) continue;
        char path[4200], tmp[4300];
        job_ckpt_rank_path(path, sizeof path, dir, js[i], rank);
        snprintf(tmp, sizeof tmp, "%s.tmp", path);
        unlink(path);
        unlink(tmp);
        job_ckpt_iter_dir(path, sizeof path, dir, js[i]);
        rmdir(path); /* fails while another rank's files are there: theirs to remove */
    }
    free(js);
}
