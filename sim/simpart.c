#include "simpart.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

int simpart_parse(const char *s, int *part, int *nparts, char *err, size_t errlen)
{
    char *end;
    long i = strtol(s, &end, 10);
    long n = 0;
    int ok = end != s && *end == '/';
    if (ok) {
        const char *ns = end + 1;
        n = strtol(ns, &end, 10);
        ok = end != ns && *end == '\0' && n >= 1 && n <= 1000000 && i >= 1 && i <= n;
    }
    if (!ok) {
        snprintf(err, errlen, "--part expects I/N with 1 <= I <= N, got '%s'", s);
        return -1;
    }
    *part = (int)i;
    *nparts = (int)n;
    return 0;
}

int simpart_owns(int config, int part, int nparts)
{
    return config % nparts == part - 1;
}

static uint64_t fnv1a(uint64_t h, const char *s, size_t len)
{
    for (size_t i = 0; i < len; i++) {
        h ^= (unsigned char)s[i];
        h *= 1099511628211ULL;
    }
    return h;
}

/* A path differs between checkouts; the rest of a configuration's file is what it runs. */
static int is_path_line(const char *line)
{
    static const char *const keys[] = {"model = ", "profile = ", "data_dir = "};
    for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++)
        if (!strncmp(line, keys[k], strlen(keys[k]))) return 1;
    return 0;
}

uint64_t simpart_fingerprint(const experiment_t *e, const model_t *m)
{
    uint64_t h = fnv1a(14695981039346656037ULL, m->name, strlen(m->name) + 1);
    int configs = experiment_config_count(e);
    for (int i = 0; i < configs; i++) {
        char *text = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&text, &len);
        if (!f) die("simpart: open_memstream: out of memory");
        cluster_t c;
        scheme_t s;
        experiment_config(e, i, &c, &s);
        experiment_write(e, i, &c, NULL, f);
        fclose(f);
        for (char *line = text; line && *line;) {
            char *nl = strchr(line, '\n');
            size_t n = nl ? (size_t)(nl - line) + 1 : strlen(line);
            if (!is_path_line(line)) h = fnv1a(h, line, n);
            line += n;
        }
        free(text);
    }
    return h;
}

void simpart_csv_comment(FILE *f, int part, int nparts, int configs, uint64_t fingerprint)
{
    fprintf(f, "# poseidon sim part %d/%d configurations %d experiment %016" PRIx64 "\n", part,
            nparts, configs, fingerprint);
}

/* One part file: its '#' line's fields, its header and its rows (lines, '\n' kept). */
typedef struct {
    const char *path;
    int part, nparts, configs;
    uint64_t fingerprint;
    char *text;     /* the whole file */
    char **lines;   /* into text: [0] the header, then the rows */
    int n_lines;
} part_file_t;

static void part_free(part_file_t *pf)
{
    free(pf->text);
    free(pf->lines);
}

/* Reads and splits one part. 0, or -1 with err. */
static int part_read(part_file_t *pf, const char *path, char *err, size_t errlen)
{
    memset(pf, 0, sizeof *pf);
    pf->path = path;
    FILE *f = fopen(path, "r");
    if (!f) {
        snprintf(err, errlen, "%s: cannot read", path);
        return -1;
    }
    size_t len = 0, cap = 1 << 16;
    pf->text = xmalloc(cap);
    for (size_t got; (got = fread(pf->text + len, 1, cap - len - 1, f)) > 0;) {
        len += got;
        if (cap - len < 2) pf->text = xrealloc(pf->text, cap *= 2);
    }
    pf->text[len] = '\0';
    fclose(f);
    char hex[17];
    if (sscanf(pf->text, "# poseidon sim part %d/%d configurations %d experiment %16[0-9a-f]",
               &pf->part, &pf->nparts, &pf->configs, hex) != 4 ||
        pf->nparts < 1 || pf->part < 1 || pf->part > pf->nparts || pf->configs < 0) {
        snprintf(err, errlen, "%s: not a part of a sweep (no '# poseidon sim part I/N ...' "
                 "first line: written by poseidon sim --part I/N --csv)", path);
        return -1;
    }
    pf->fingerprint = strtoull(hex, NULL, 16);
    char *p = strchr(pf->text, '\n');
    int cap_lines = 16;
    pf->lines = xmalloc(cap_lines * sizeof *pf->lines);
    while (p && p[1]) {
        if (pf->n_lines == cap_lines) pf->lines = xrealloc(pf->lines, (cap_lines *= 2) * sizeof *pf->lines);
        pf->lines[pf->n_lines++] = p + 1;
        p = strchr(p + 1, '\n');
    }
    if (pf->n_lines == 0) {
        snprintf(err, errlen, "%s: no CSV header after the part line", path);
        return -1;
    }
    return 0;
}

static size_t line_len(const char *l)
{
    const char *nl = strchr(l, '\n');
    return nl ? (size_t)(nl - l) + 1 : strlen(l);
}

/* The parts fit together: one sweep, parts 1..N once each, the rows their configurations
 * make, one header. byp[I-1] = the file of part I. 0, or -1 with err. */
static int parts_check(part_file_t *pf, int n, part_file_t **byp, char *err, size_t errlen)
{
    const part_file_t *a = &pf[0];
    for (int k = 0; k < n; k++) {
        const part_file_t *b = &pf[k];
        if (b->nparts != a->nparts || b->configs != a->configs ||
            b->fingerprint != a->fingerprint) {
            snprintf(err, errlen, "%s and %s are parts of different sweeps (part %d/%d of %d "
                     "configurations, experiment %016" PRIx64 " against part %d/%d of %d, %016"
                     PRIx64 ")", a->path, b->path, a->part, a->nparts, a->configs,
                     a->fingerprint, b->part, b->nparts, b->configs, b->fingerprint);
            return -1;
        }
        if (byp[b->part - 1]) {
            snprintf(err, errlen, "part %d/%d given twice: %s and %s", b->part, b->nparts,
                     byp[b->part - 1]->path, b->path);
            return -1;
        }
        byp[b->part - 1] = &pf[k];
        size_t hl = line_len(b->lines[0]);
        if (hl != line_len(a->lines[0]) || memcmp(b->lines[0], a->lines[0], hl)) {
            snprintf(err, errlen, "%s and %s have different CSV headers", a->path, b->path);
            return -1;
        }
        int want = b->part - 1 < b->configs ? (b->configs - b->part + b->nparts) / b->nparts : 0;
        if (b->n_lines - 1 != want) {
            snprintf(err, errlen, "%s: part %d/%d holds %d rows, its configurations make %d "
                     "(a run that stopped early?)", b->path, b->part, b->nparts, b->n_lines - 1,
                     want);
            return -1;
        }
    }
    for (int p = 0; p < a->nparts; p++)
        if (!byp[p]) {
            snprintf(err, errlen, "part %d/%d missing (%d of %d parts given)", p + 1, a->nparts,
                     n, a->nparts);
            return -1;
        }
    return 0;
}

int simpart_merge(const char *const *paths, int n, FILE *out, char *err, size_t errlen)
{
    if (n < 1) {
        snprintf(err, errlen, "no parts given");
        return -1;
    }
    part_file_t *pf = xmalloc(n * sizeof *pf);
    int read = 0, rc = 0;
    for (; read < n && rc == 0; read++) rc = part_read(&pf[read], paths[read], err, errlen);
    part_file_t **byp = NULL;
    if (rc == 0) {
        byp = xcalloc(pf[0].nparts, sizeof *byp);
        rc = parts_check(pf, n, byp, err, errlen);
    }
    if (rc == 0) {
        fwrite(pf[0].lines[0], 1, line_len(pf[0].lines[0]), out);
        for (int i = 0; i < pf[0].configs; i++) {
            const part_file_t *p = byp[i % pf[0].nparts];
            const char *row = p->lines[1 + i / pf[0].nparts];
            size_t l = line_len(row);
            fwrite(row, 1, l, out);
            if (row[l - 1] != '\n') fputc('\n', out);
        }
    }
    free(byp);
    for (int k = 0; k < read; k++) part_free(&pf[k]);
    free(pf);
    return rc;
}
