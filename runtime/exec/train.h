/* train: the single-worker training loop, as reusable steps (a distributed worker runs the
 * same step with a synchronisation between backward and update).
 *
 * An epoch walks a partition [begin, end) of a dataset in an order shuffled by the rng of
 * (seed, epoch), so a run resumed at an epoch boundary sees the same batches as an
 * uninterrupted one. The last partial batch of an epoch is dropped (the net has one batch
 * size); evaluation covers every sample.
 */
#ifndef POSEIDON_TRAIN_H
#define POSEIDON_TRAIN_H

#include <stdbool.h>
#include <stdint.h>

#include "runtime/exec/data.h"
#include "runtime/compute/nnet.h"
#include "runtime/compute/solver.h"

typedef struct {
    double loss;          /* mean batch objective over the epoch */
    double train_acc;     /* top-1 on the training batches, in training mode */
    int64_t images;
    double seconds;       /* wall time of the training steps */
} train_epoch_stats_t;

/* Called after each step with (step, steps in epoch, running mean loss). */
typedef void (*train_progress_fn)(int step, int steps, double loss, void *arg);

/* Check that the model can train on this data: one input of the data's shape, a loss layer
 * with as many inputs as classes. 0, or -1 with the reason in err. */
int train_check_model(const model_t *m, const dataset_t *d, char *err, size_t errlen);

/* Forward, backward and update of one batch already in nnet_input()/nnet_labels(), at
 * iteration iter. Returns the batch objective. */
double train_step(nnet_t *n, solver_t *s, int64_t iter);

/* One epoch over samples [begin, end) of d; *iter counts iterations across epochs. */
void train_epoch(nnet_t *n, solver_t *s, const dataset_t *d, int begin, int end, int epoch,
                 uint64_t seed, int64_t *iter, train_epoch_stats_t *st,
                 train_progress_fn progress, void *arg);

/* Top-1 accuracy on all of d, in evaluation mode (training mode is restored). */
double train_evaluate(nnet_t *n, const dataset_t *d);

#endif
