/* worker_batch: which training samples a replica uses at an iteration (worker.h:
 * worker_batch_order). Pure arithmetic on the data set's size and the job's seed, so that a
 * test can rebuild the union of the workers' batches. */
#include "runtime/exec/worker.h"

#include <stdlib.h>
#include <string.h>

#include "core/check.h"
#include "core/rng.h"
#include "runtime/exec/data.h"

int worker_batch_order(int n, int rank, int world, int batch, int64_t t, uint64_t seed,
                       bool shuffle, int *order)
{
    int steps = (n / world) / batch;
    ASSERT(steps >= 1, "%d samples over %d workers: no batch of %d", n, world, batch);
    int b, e;
    data_partition(n, rank, world, &b, &e);
    int64_t epoch = t / steps, i = t % steps;
    int *all = xmalloc((size_t)(e - b) * sizeof *all);
    rng_t *r = shuffle ? rng_new(seed, 100 + (uint64_t)epoch * 4096 + (uint64_t)rank) : NULL;
    data_order(all, b, e, r);
    rng_destroy(&r);
    memcpy(order, all + i * batch, (size_t)batch * sizeof *order);
    free(all);
    return steps;
}
