#include "reports/csv.h"

#include <string.h>

int csv_open(csv_t *c, const char *path)
{
    memset(c, 0, sizeof *c);
    c->f = fopen(path, "r");
    if (!c->f) return -1;
    if (fgets(c->header, sizeof c->header, c->f)) c->line_no = 1;
    else c->header[0] = 0;
    return 0;
}

void csv_close(csv_t *c)
{
    if (c->f) fclose(c->f);
    c->f = NULL;
}

/* Field k of a CSV line into buf. Returns 0, or -1 when the line has fewer. */
static int line_field(const char *line, int k, char *buf, size_t len)
{
    if (k < 0) return -1;
    const char *p = line;
    for (int i = 0; i < k; i++) {
        p = strchr(p, ',');
        if (!p) return -1;
        p++;
    }
    size_t n = strcspn(p, ",\r\n");
    if (n >= len) n = len - 1;
    memcpy(buf, p, n);
    buf[n] = '\0';
    return 0;
}

int csv_column(const csv_t *c, const char *name)
{
    char field[CSV_VALUE_MAX];
    for (int k = 0; line_field(c->header, k, field, sizeof field) == 0; k++)
        if (!strcmp(field, name)) return k;
    return -1;
}

int csv_next(csv_t *c)
{
    if (!fgets(c->row, sizeof c->row, c->f)) return 0;
    c->line_no++;
    return 1;
}

int csv_get(const csv_t *c, int k, char *buf, size_t len)
{
    return line_field(c->row, k, buf, len);
}

void csv_distinct_add(csv_distinct_t *d, const char *value)
{
    for (int i = 0; i < d->n; i++)
        if (!strcmp(d->v[i], value)) return;
    if (d->n < CSV_DISTINCT_MAX) snprintf(d->v[d->n++], sizeof d->v[0], "%s", value);
}

int csv_distinct_count(const char *path, const char *name)
{
    csv_t c;
    if (csv_open(&c, path)) return 0;
    csv_distinct_t d = {0};
    int k = csv_column(&c, name);
    char v[CSV_VALUE_MAX];
    while (k >= 0 && csv_next(&c))
        if (csv_get(&c, k, v, sizeof v) == 0) csv_distinct_add(&d, v);
    csv_close(&c);
    return d.n;
}
