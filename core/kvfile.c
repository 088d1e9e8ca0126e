#include "kvfile.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "infile.h"

static char *trim(char *s)
{
    while (isspace((unsigned char)*s)) s++;
    char *e = s + strlen(s);
    while (e > s && isspace((unsigned char)e[-1])) *--e = 0;
    return s;
}

int kv_split(char *line, char **key, char **val)
{
    char *hash = strchr(line, '#');
    if (hash) *hash = 0;
    char *s = trim(line);
    if (!*s) return 0;
    char *eq = strchr(s, '=');
    if (!eq) return -1;
    *eq = 0;
    *key = trim(s);
    *val = trim(eq + 1);
    return **key ? 1 : -1;
}

int kv_int(const char *s, long long *out)
{
    if (!*s) return -1;
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || *end) return -1;
    *out = v;
    return 0;
}

int kv_double(const char *s, double *out)
{
    if (!*s) return -1;
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || *end || !isfinite(v)) return -1;
    *out = v;
    return 0;
}

const char *kv_format_double(double v, char *buf)
{
    double a = fabs(v);
    if (a == 0 || (a >= 1e-4 && a < 1e15)) /* plain decimals where they read well */
        for (int decimals = 0; decimals <= 19; decimals++) {
            snprintf(buf, 32, "%.*f", decimals, v);
            double back;
            if (kv_double(buf, &back) == 0 && back == v) return buf;
        }
    for (int digits = 1; digits <= 17; digits++) {
        snprintf(buf, 32, "%.*g", digits, v);
        double back;
        if (kv_double(buf, &back) == 0 && back == v) return buf;
    }
    return buf;
}

char *kv_read_file(const char *path)
{
    char *buf;
    size_t len;
    infile_read(path, KV_FILE_MAX_BYTES, &buf, &len, NULL, 0);
    return buf;
}

int kv_error(char *err, size_t errlen, const char *where, const char *fmt, ...)
{
    int n = snprintf(err, errlen, "%s: ", where);
    if (n < 0 || (size_t)n >= errlen) return -1;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err + n, errlen - (size_t)n, fmt, ap);
    va_end(ap);
    return -1;
}

/* A key's first line in a file: a small open-addressed table of the keys seen so far. */
typedef struct {
    char **key;
    int *line;
    int cap, n;
} seen_t;

static int seen_add(seen_t *s, const char *key, int line_no)
{
    if (2 * (s->n + 1) > s->cap) {
        seen_t g = {xcalloc(2 * (size_t)(s->cap + 8), sizeof(char *)),
                    xcalloc(2 * (size_t)(s->cap + 8), sizeof(int)), 2 * (s->cap + 8), 0};
        for (int i = 0; i < s->cap; i++)
            if (s->key[i]) seen_add(&g, s->key[i], s->line[i]), free(s->key[i]);
        free(s->key);
        free(s->line);
        *s = g;
    }
    unsigned h = 2166136261u;
    for (const char *c = key; *c; c++) h = (h ^ (unsigned char)*c) * 16777619u;
    for (int i = (int)(h % (unsigned)s->cap);; i = (i + 1) % s->cap) {
        if (!s->key[i]) {
            s->key[i] = xstrdup(key);
            s->line[i] = line_no;
            s->n++;
            return 0;
        }
        if (!strcmp(s->key[i], key)) return s->line[i];
    }
}

static int repeatable(const char *const *keys, const char *key)
{
    for (int i = 0; keys && keys[i]; i++)
        if (!strcmp(keys[i], key)) return 1;
    return 0;
}

int kv_parse_text(const char *path, const char *text, kv_setter_t set, void *obj,
                  const char *const *repeat_ok, int *n_lines, char *err, size_t errlen)
{
    char *copy = xstrdup(text);
    int line_no = 0, rc = 0;
    char where[600];
    char *next = NULL;
    seen_t seen = {0};
    /* strtok_r would skip empty lines and break the numbering: walk by hand. */
    for (char *line = copy; line && rc == 0; line = next) {
        char *nl = strchr(line, '\n');
        next = nl ? nl + 1 : NULL;
        if (nl) *nl = 0;
        if (!nl && !*line) break; /* the end of a file that ends with a newline */
        line_no++;
        snprintf(where, sizeof where, "%s:%d", path, line_no);
        char *key, *val;
        int k = kv_split(line, &key, &val), first;
        if (k < 0) rc = kv_error(err, errlen, where, "expected key = value");
        else if (k > 0 && !repeatable(repeat_ok, key) && (first = seen_add(&seen, key, line_no)))
            rc = kv_error(err, errlen, where, "expected each key once, got '%s' again (first "
                                              "at line %d)", key, first);
        else if (k > 0) rc = set(obj, key, val, line_no, where, err, errlen);
    }
    for (int i = 0; i < seen.cap; i++) free(seen.key[i]);
    free(seen.key);
    free(seen.line);
    free(copy);
    if (n_lines) *n_lines = line_no;
    return rc ? -1 : 0;
}
