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

#include "core/experiment.h"
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
/* train_epoch that stops after max_steps steps: the last, partial epoch of a job that counts
 * iterations (the same batches as the first max_steps of the whole epoch). */
void train_epoch_steps(nnet_t *n, solver_t *s, const dataset_t *d, int begin, int end,
                       int epoch, uint64_t seed, int max_steps, int64_t *iter,
                       train_epoch_stats_t *st, train_progress_fn progress, void *arg);

/* The job's data, for every executor of it (one worker or a rank of many): its training
 * and test sets by the job's data key (fashion-mnist or fortunes from data_dir, the packages'
 * folders when empty; synthetic: synthetic_n training and 256 test samples of the model's
 * input shape and classes, from the job's seed), the training set cut to `limit`. 0, or -1
 * with the reason in err and nothing held. */
int train_data_load(const experiment_t *job, const model_t *m, dataset_t *train, dataset_t *test,
                    char *err, size_t errlen);

/* The solver of a job whose epochs have steps_per_epoch steps and which runs iterations in
 * all: its SGD keys and learning-rate policy (a step every two epochs unless lr_step says). */
solver_config_t train_solver_config(const experiment_t *job, int64_t steps_per_epoch,
                                    int64_t iterations);

/* The solver's initialisation for the job's init key. */
init_kind_t train_init_kind(const experiment_t *job);

/* Top-1 accuracy on all of d, in evaluation mode (training mode is restored). */
double train_evaluate(nnet_t *n, const dataset_t *d);

#endif
