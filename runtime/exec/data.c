#include "runtime/exec/data.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <zlib.h>

#include "core/check.h"

/* Reads exactly len bytes; returns 0, or -1 with the reason in err. */
static int gz_read_all(gzFile f, const char *path, void *buf, size_t len, char *err,
                       size_t errlen)
{
    size_t got = 0;
    while (got < len) {
        unsigned chunk = len - got > (1u << 30) ? (1u << 30) : (unsigned)(len - got);
        int r = gzread(f, (char *)buf + got, chunk);
        if (r < 0) {
            int zerr;
            const char *msg = gzerror(f, &zerr);
            snprintf(err, errlen, "%s: corrupt gzip data (%s)", path, msg);
            return -1;
        }
        if (r == 0) {
            snprintf(err, errlen, "%s: truncated: %zu of %zu bytes", path, got, len);
            return -1;
        }
        got += (size_t)r;
    }
    return 0;
}

static uint32_t be32(const unsigned char *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* Opens path and reads the IDX header; returns the open file, or NULL with err. dims[] gets
 * the dimensions (count first). */
static gzFile idx_open(const char *path, uint32_t want_magic, int want_dims, uint32_t *dims,
                       char *err, size_t errlen)
{
    gzFile f = gzopen(path, "rb");
    if (!f) {
        snprintf(err, errlen, "%s: cannot open: %s (install the Debian package "
                 "dataset-fashion-mnist: make deps)", path, strerror(errno ? errno : ENOENT));
        return NULL;
    }
    unsigned char hdr[16];
    size_t hlen = 4 + 4 * (size_t)want_dims;
    if (gz_read_all(f, path, hdr, hlen, err, errlen)) {
        gzclose(f);
        return NULL;
    }
    uint32_t magic = be32(hdr);
    if (magic != want_magic) {
        snprintf(err, errlen, "%s: not an IDX %s file (magic 0x%08x, expected 0x%08x)", path,
                 want_magic == 0x803 ? "image" : "label", magic, want_magic);
        gzclose(f);
        return NULL;
    }
    for (int i = 0; i < want_dims; i++) dims[i] = be32(hdr + 4 + 4 * i);
    return f;
}

int data_read_idx_images(const char *path, dataset_t *d, char *err, size_t errlen)
{
    uint32_t dims[3];
    gzFile f = idx_open(path, 0x803, 3, dims, err, errlen);
    if (!f) return -1;
    if (dims[0] == 0 || dims[0] > 10000000 || dims[1] == 0 || dims[1] > 4096 || dims[2] == 0 ||
        dims[2] > 4096) {
        snprintf(err, errlen, "%s: implausible IDX dimensions %ux%ux%u", path, dims[0], dims[1],
                 dims[2]);
        gzclose(f);
        return -1;
    }
    size_t per = (size_t)dims[1] * dims[2], total = per * dims[0];
    unsigned char *raw = xmalloc(total);
    int rc = gz_read_all(f, path, raw, total, err, errlen);
    gzclose(f);
    if (rc) {
        free(raw);
        return -1;
    }
    d->n = (int)dims[0];
    d->shape = (shape_t){1, (int)dims[1], (int)dims[2]};
    d->x = xmalloc(total * sizeof(float));
    for (size_t i = 0; i < total; i++) d->x[i] = raw[i];
    free(raw);
    return 0;
}

int data_read_idx_labels(const char *path, dataset_t *d, char *err, size_t errlen)
{
    uint32_t dims[1];
    gzFile f = idx_open(path, 0x801, 1, dims, err, errlen);
    if (!f) return -1;
    if (dims[0] == 0 || dims[0] > 10000000) {
        snprintf(err, errlen, "%s: implausible label count %u", path, dims[0]);
        gzclose(f);
        return -1;
    }
    unsigned char *raw = xmalloc(dims[0]);
    int rc = gz_read_all(f, path, raw, dims[0], err, errlen);
    gzclose(f);
    if (rc) {
        free(raw);
        return -1;
    }
    free(d->y);
    d->y = xmalloc(dims[0] * sizeof(int));
    int mx = 0;
    for (uint32_t i = 0; i < dims[0]; i++) {
        d->y[i] = raw[i];
        mx = raw[i] > mx ? raw[i] : mx;
    }
    free(raw);
    if (d->n && (uint32_t)d->n != dims[0]) {
        snprintf(err, errlen, "%s: %u labels for %d images", path, dims[0], d->n);
        return -1;
    }
    d->n = (int)dims[0];
    d->classes = mx + 1;
    return 0;
}

static int load_pair(const char *dir, const char *images, const char *labels, dataset_t *d,
                     char *err, size_t errlen)
{
    char path[1024];
    memset(d, 0, sizeof *d);
    snprintf(path, sizeof path, "%s/%s", dir, images);
    if (data_read_idx_images(path, d, err, errlen)) return -1;
    snprintf(path, sizeof path, "%s/%s", dir, labels);
    if (data_read_idx_labels(path, d, err, errlen)) {
        data_fini(d);
        return -1;
    }
    return 0;
}

int data_load_fashion_mnist(const char *dir, dataset_t *train, dataset_t *test, char *err,
                            size_t errlen)
{
    if (!dir) dir = DATA_FASHION_MNIST_DIR;
    if (load_pair(dir, "train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz", train, err,
                  errlen))
        return -1;
    if (load_pair(dir, "t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz", test, err,
                  errlen)) {
        data_fini(train);
        return -1;
    }
    /* normalise both sets with the training set's mean and standard deviation */
    int64_t count = (int64_t)train->n * shape_count(train->shape);
    double sum = 0, sq = 0;
    for (int64_t i = 0; i < count; i++) sum += train->x[i], sq += (double)train->x[i] * train->x[i];
    double mean = sum / count, sd = sqrt(sq / count - mean * mean);
    if (sd <= 0) sd = 1;
    for (int64_t i = 0; i < count; i++) train->x[i] = (float)((train->x[i] - mean) / sd);
    int64_t tcount = (int64_t)test->n * shape_count(test->shape);
    for (int64_t i = 0; i < tcount; i++) test->x[i] = (float)((test->x[i] - mean) / sd);
    train->classes = test->classes = train->classes > test->classes ? train->classes
                                                                    : test->classes;
    return 0;
}

void data_synthetic(dataset_t *d, shape_t shape, int classes, int n, uint64_t seed)
{
    ASSERT(n > 0 && classes > 0, "synthetic data needs n > 0 and classes > 0");
    memset(d, 0, sizeof *d);
    d->n = n;
    d->shape = shape;
    d->classes = classes;
    int64_t count = (int64_t)n * shape_count(shape);
    d->x = xmalloc((size_t)count * sizeof(float));
    d->y = xmalloc((size_t)n * sizeof(int));
    rng_t *r = rng_new(seed, 2);
    for (int64_t i = 0; i < count; i++) d->x[i] = (float)rng_gaussian(r, 1.0);
    for (int i = 0; i < n; i++) d->y[i] = (int)rng_uint(r, (uint64_t)classes);
    rng_destroy(&r);
}

void data_truncate(dataset_t *d, int n)
{
    ASSERT(n >= 0 && n <= d->n, "truncate to %d of %d samples", n, d->n);
    d->n = n;
}

void data_partition(int n, int rank, int world, int *begin, int *end)
{
    ASSERT(world >= 1 && rank >= 0 && rank < world, "rank %d of %d", rank, world);
    /* the first n % world ranks get one sample more */
    int base = n / world, extra = n % world;
    *begin = rank * base + (rank < extra ? rank : extra);
    *end = *begin + base + (rank < extra ? 1 : 0);
}

void data_order(int *order, int begin, int end, rng_t *r)
{
    for (int i = begin; i < end; i++) order[i - begin] = i;
    if (r) rng_shuffle(r, order, (size_t)(end - begin), sizeof *order);
}

void data_gather(const dataset_t *d, const int *order, int k, float *x, int *y)
{
    int64_t count = shape_count(d->shape), L = d->labels > 1 ? d->labels : 1;
    for (int i = 0; i < k; i++) {
        ASSERT(order[i] >= 0 && order[i] < d->n, "sample %d of %d", order[i], d->n);
        memcpy(x + i * count, d->x + (int64_t)order[i] * count, (size_t)count * sizeof(float));
        memcpy(y + i * L, d->y + order[i] * L, (size_t)L * sizeof(int));
    }
}

static int text_id(int c)
{
    if (c == '\n') return 0;
    if (c == '\t') c = ' ';
    return c >= ' ' && c <= '~' ? c - ' ' + 1 : -1;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* windows [first, first + n) of the id stream into d */
static void text_windows(dataset_t *d, const int *ids, int first, int n, int seq)
{
    memset(d, 0, sizeof *d);
    d->n = n;
    d->shape = (shape_t){1, 1, seq};
    d->classes = DATA_TEXT_VOCAB;
    d->labels = seq;
    d->x = xmalloc((size_t)n * seq * sizeof(float));
    d->y = xmalloc((size_t)n * seq * sizeof(int));
    for (int i = 0; i < n; i++) {
        const int *w = ids + (int64_t)(first + i) * seq;
        for (int p = 0; p < seq; p++) {
            d->x[(int64_t)i * seq + p] = (float)w[p];
            d->y[(int64_t)i * seq + p] = w[p + 1];
        }
    }
}

int data_load_text(const char *dir, int seq, dataset_t *train, dataset_t *test, char *err,
                   size_t errlen)
{
    if (!dir) dir = DATA_FORTUNES_DIR;
    DIR *dp = opendir(dir);
    if (!dp) {
        snprintf(err, errlen, "%s: cannot open: %s (install the Debian package fortunes-min: "
                 "make deps)", dir, strerror(errno));
        return -1;
    }
    int n_names = 0, cap_names = 16;
    char **names = xmalloc((size_t)cap_names * sizeof *names);
    for (struct dirent *e; (e = readdir(dp)) != NULL;) {
        size_t len = strlen(e->d_name);
        if (e->d_name[0] == '.' || (len > 4 && !strcmp(e->d_name + len - 4, ".dat"))) continue;
        if (n_names == cap_names) names = xrealloc(names, (size_t)(cap_names *= 2) * sizeof *names);
        names[n_names++] = xstrdup(e->d_name);
    }
    closedir(dp);
    qsort(names, (size_t)n_names, sizeof *names, cmp_str);
    int64_t n_ids = 0, cap_ids = 1 << 16;
    int *ids = xmalloc((size_t)cap_ids * sizeof *ids);
    int rc = 0;
    for (int i = 0; i < n_names && !rc; i++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        struct stat st;
        /* regular files only, and a symbolic link (fortunes.u8 -> fortunes) read once */
        if (lstat(path, &st) || !S_ISREG(st.st_mode)) continue;
        FILE *f = fopen(path, "rb");
        if (!f) {
            snprintf(err, errlen, "%s: cannot open: %s", path, strerror(errno));
            rc = -1;
            break;
        }
        for (int c; (c = fgetc(f)) != EOF;) {
            int id = text_id(c);
            if (id < 0) continue;
            if (n_ids == cap_ids) ids = xrealloc(ids, (size_t)(cap_ids *= 2) * sizeof *ids);
            ids[n_ids++] = id;
        }
        fclose(f);
    }
    for (int i = 0; i < n_names; i++) free(names[i]);
    free(names);
    int64_t windows = n_ids > seq ? (n_ids - 1) / seq : 0;
    int n_test = (int)(windows / 10);
    if (!rc && windows - n_test < 1) {
        snprintf(err, errlen, "%s: %lld characters of text: too few for windows of %d", dir,
                 (long long)n_ids, seq + 1);
        rc = -1;
    }
    if (!rc && windows > INT32_MAX) {
        snprintf(err, errlen, "%s: %lld windows of text: too many", dir, (long long)windows);
        rc = -1;
    }
    if (!rc) {
        text_windows(train, ids, 0, (int)(windows - n_test), seq);
        text_windows(test, ids, (int)(windows - n_test), n_test, seq);
    }
    free(ids);
    return rc;
}

double data_unigram_entropy(const dataset_t *d)
{
    int64_t L = d->labels > 1 ? d->labels : 1, n = (int64_t)d->n * L;
    int64_t *count = xcalloc((size_t)d->classes, sizeof *count);
    for (int64_t i = 0; i < n; i++)
        if (d->y[i] >= 0 && d->y[i] < d->classes) count[d->y[i]]++;
    double h = 0;
    for (int c = 0; c < d->classes; c++)
        if (count[c]) h -= (double)count[c] / n * log((double)count[c] / n);
    free(count);
    return h;
}

void data_fini(dataset_t *d)
{
    free(d->x);
    free(d->y);
    memset(d, 0, sizeof *d);
}
