#include "trace.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "outfile.h"

const char *const trace_csv_header = "node,iteration,op,layer,peer,bytes,t_start_ns,t_end_ns";

static const char *const s_lanes[TRACE_LANE_COUNT] = {"compute", "net", "server", "update"};

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

void trace_close(trace_t **tp)
{
    if (!tp || !*tp) return;
    trace_t *t = *tp;
    fprintf(t->json, "\n]}\n");
    fclose(t->csv);
    fclose(t->json);
    free(t->seen);
    free(t);
    *tp = NULL;
}
