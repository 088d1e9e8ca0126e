#include "trace.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "kvfile.h"
#include "outfile.h"

const char *const trace_csv_header = "node,iteration,op,layer,peer,bytes,t_start_ns,t_end_ns";

static const char *const s_lanes[TRACE_LANE_COUNT] = {"compute", "net", "server", "update",
                                                       "interconnect"};

struct trace {
    FILE *csv, *json;
    int first;
    int n_seen;      /* nodes whose lane names were written */
    unsigned char *seen;
};

trace_t *trace_open(const char *prefix, char *err, size_t errlen)
{
    char path[1024];
    trace_t *t = xcalloc(1, sizeof *t);
    snprintf(path, sizeof path, "%s.csv", prefix);
    t->csv = outfile_open(path, "w");
    if (!t->csv) {
        snprintf(err, errlen, "%s: cannot write (%s)", path, strerror(errno));
        free(t);
        return NULL;
    }
    snprintf(path, sizeof path, "%s.json", prefix);
    t->json = outfile_open(path, "w");
    if (!t->json) {
        snprintf(err, errlen, "%s: cannot write (%s)", path, strerror(errno));
        fclose(t->csv);
        free(t);
        return NULL;
    }
    fprintf(t->csv, "%s\n", trace_csv_header);
    fprintf(t->json, "{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n");
    t->first = 1;
    return t;
}

static void json_sep(trace_t *t)
{
    if (!t->first) fputs(",\n", t->json);
    t->first = 0;
}

void trace_write(trace_t *t, const trace_row_t *r)
{
    fprintf(t->csv, "%d,%d,%s,%s,%d,%lld,%lld,%lld\n", r->node, r->iteration, r->op, r->layer,
            r->peer, (long long)r->bytes, (long long)r->t_start_ns, (long long)r->t_end_ns);
    if (r->node >= t->n_seen) {
        int n = r->node + 1;
        t->seen = xrealloc(t->seen, (size_t)n);
        memset(t->seen + t->n_seen, 0, (size_t)(n - t->n_seen));
        t->n_seen = n;
    }
    if (!t->seen[r->node]) {
        t->seen[r->node] = 1;
        json_sep(t);
        fprintf(t->json,
                "{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":%d,\"args\":{\"name\":\"node %d\"}}",
                r->node, r->node);
        for (int l = 0; l < TRACE_LANE_COUNT; l++)
            fprintf(t->json,
                    ",\n{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":%d,\"tid\":%d,"
                    "\"args\":{\"name\":\"%s\"}}",
                    r->node, l, s_lanes[l]);
    }
    json_sep(t);
    fprintf(t->json,
            "{\"ph\":\"X\",\"name\":\"%s %s\",\"cat\":\"%s\",\"pid\":%d,\"tid\":%d,\"ts\":%.3f,"
            "\"dur\":%.3f,\"args\":{\"iteration\":%d,\"peer\":%d,\"bytes\":%lld}}",
            r->op, r->layer, r->op, r->node, (int)r->lane, r->t_start_ns / 1e3,
            (r->t_end_ns - r->t_start_ns) / 1e3, r->iteration, r->peer, (long long)r->bytes);
}

int trace_close(trace_t **tp)
{
    if (!tp || !*tp) return 0;
    trace_t *t = *tp;
    fprintf(t->json, "\n]}\n");
    int bad = ferror(t->csv) | ferror(t->json);
    bad |= fclose(t->csv) != 0;
    bad |= fclose(t->json) != 0;
    free(t->seen);
    free(t);
    *tp = NULL;
    return bad ? -1 : 0;
}

/* Field i of a comma-separated line into buf; returns the rest after its comma, or NULL at
 * the end of the line (*last set) or when the field does not fit. */
static const char *field(const char *s, char *buf, size_t len, int *last)
{
    size_t n = strcspn(s, ",\r\n");
    if (n >= len) return NULL;
    memcpy(buf, s, n);
    buf[n] = 0;
    *last = s[n] != ',';
    return s + n + (s[n] == ',');
}

static int to_i64(const char *s, int64_t *out)
{
    long long v;
    if (kv_int(s, &v)) return -1;
    *out = v;
    return 0;
}

int trace_rec_parse(const char *line, trace_rec_t *r)
{
    if (!line[strspn(line, "\r\n")] || !strncmp(line, trace_csv_header, strlen(trace_csv_header)))
        return 1;
    char f[8][TRACE_LAYER_MAX];
    const char *s = line;
    int last = 0;
    for (int i = 0; i < 8; i++) {
        if (last || !(s = field(s, f[i], sizeof f[i], &last))) return -1;
    }
    if (!last) return -1; /* a ninth field */
    int64_t node, it, peer;
    if (to_i64(f[0], &node) || to_i64(f[1], &it) || to_i64(f[4], &peer) ||
        to_i64(f[5], &r->bytes) || to_i64(f[6], &r->t_start_ns) || to_i64(f[7], &r->t_end_ns))
        return -1;
    if (node < 0 || node > INT32_MAX || it < 0 || it > INT32_MAX || peer < -1 ||
        peer > INT32_MAX || r->bytes < 0 || r->t_end_ns < r->t_start_ns || !f[2][0] ||
        strlen(f[2]) >= TRACE_OP_MAX || !f[3][0])
        return -1;
    r->node = (int)node;
    r->iteration = (int)it;
    r->peer = (int)peer;
    memcpy(r->op, f[2], strlen(f[2]) + 1); /* fits: checked above */
    memcpy(r->layer, f[3], strlen(f[3]) + 1);
    return 0;
}

void trace_rec_write(FILE *f, const trace_rec_t *r)
{
    fprintf(f, "%d,%d,%s,%s,%d,%lld,%lld,%lld\n", r->node, r->iteration, r->op, r->layer,
            r->peer, (long long)r->bytes, (long long)r->t_start_ns, (long long)r->t_end_ns);
}

trace_lane_t trace_lane_of_op(const char *op)
{
    if (!strcmp(op, "FWD") || !strcmp(op, "BWD")) return TRACE_LANE_COMPUTE;
    if (!strcmp(op, "APPLY")) return TRACE_LANE_SERVER;
    if (!strcmp(op, "UPDATE")) return TRACE_LANE_UPDATE;
    if (!strcmp(op, "LREDUCE") || !strcmp(op, "LBCAST")) return TRACE_LANE_INTRA;
    return TRACE_LANE_NET;
}
