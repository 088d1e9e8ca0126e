/* worker_coord: what the ranks of a job tell one another through the coordinator
 * (runtime/transport/coord.h) outside the plan: every rank's line (worker_allgather), the
 * check that every rank runs rank 0's job, and the trace clocks' common zero. A failure ends
 * the job (coord_client_fail). */
#include "runtime/exec/worker_state.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/check.h"
#include "runtime/transport/clock.h"

int64_t worker_time_base(worker_t *w, int timeout_ms)
{
    struct {
        char host[64];
        int64_t t0_ns;
    } tb = {.t0_ns = clock_now_ns()}, mine;
    gethostname(tb.host, sizeof tb.host - 1);
    mine = tb;
    void *data = &tb;
    size_t n = sizeof tb;
    if (coord_client_bcast(w->cl, 0, 2, &data, &n, timeout_ms) != 0)
        coord_client_fail(w->cl, "no time base from rank 0");
    if (w->rank == 0) return tb.t0_ns;
    int64_t t0 = 0;
    if (n == sizeof tb) {
        memcpy(&tb, data, sizeof tb);
        tb.host[sizeof tb.host - 1] = '\0';
        if (!strcmp(tb.host, mine.host)) t0 = tb.t0_ns;
    }
    free(data);
    return t0;
}

char **worker_allgather(worker_t *w, int64_t id0, const char *line, int timeout_ms)
{
    char **tab = xcalloc((size_t)w->world, sizeof *tab);
    for (int r = 0; r < w->world; r++) {
        void *data = (void *)line;
        size_t n = strlen(line) + 1;
        if (coord_client_bcast(w->cl, r, id0 + r, &data, &n, timeout_ms) != 0)
            coord_client_fail(w->cl, "no line from rank %d (broadcast %lld)", r,
                              (long long)(id0 + r));
        tab[r] = r == w->rank ? xstrdup(line) : data;
        if (r != w->rank && (n == 0 || tab[r][n - 1] != '\0'))
            coord_client_fail(w->cl, "malformed line from rank %d (broadcast %lld)", r,
                              (long long)(id0 + r));
    }
    return tab;
}

void worker_allgather_free(worker_t *w, char **tab)
{
    if (!tab) return;
    for (int r = 0; r < w->world; r++) free(tab[r]);
    free(tab);
}

void worker_same_job_check(worker_t *w, int timeout_ms)
{
    const experiment_t *job = w->job;
    char desc[1400], sb[64];
    snprintf(desc, sizeof desc, "model=%.100s scheme=%s ssp=%d batch=%d devices=%d T=%lld "
                                "kv=%lld bucket=%lld seed=%llu compute=%d data=%.100s",
             w->model.name, scheme_name(job->schemes[0], sb, sizeof sb), job->staleness,
             job->batch, w->devices, (long long)w->iterations, (long long)job->kv_block_bytes,
             (long long)job->allreduce_bucket_bytes,
             (unsigned long long)job->seed, (int)job->train.compute,
             w->emulate ? "-" : job->train.data);
    void *blob = desc;
    size_t n = strlen(desc) + 1;
    if (coord_client_bcast(w->cl, 0, 0, &blob, &n, timeout_ms))
        coord_client_fail(w->cl, "no job description from rank 0");
    if (w->rank != 0) {
        int same = n == strlen(desc) + 1 && !memcmp(blob, desc, n);
        if (!same) coord_client_fail(w->cl, "rank 0 runs '%.*s', this rank '%s'", (int)n,
                                     (char *)blob, desc);
        free(blob);
    }
}
