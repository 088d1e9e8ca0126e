/* nnet: a neural network built from a model_t, run on batches of N samples (NCHW, float), with
 * forward and backward for every layer type of core/model.h.
 *
 * Ownership: the net owns its activations, their gradients, scratch buffers and the arena of
 * parameters and gradients (nnet_arena()). It borrows the model and the compute backend, which
 * must outlive it.
 *
 * Contract of the per-layer entry points, so that a plan executor can run FWD(l) and BWD(l)
 * one at a time:
 *   - nnet_forward_layer(l) reads the outputs of l's inputs and writes output(l); run layers in
 *     index order (the model's topological order).
 *   - nnet_backward_begin() zeroes every output gradient; then nnet_backward_layer(l) for l from
 *     the last layer down to 1. A loss layer seeds its own gradient. BWD(l) ADDS its input
 *     gradient into doutput(input) (a layer output may feed several layers) and OVERWRITES
 *     l's parameter gradient range in the arena: arena.grads[layer_offset[l] ..
 *     + layer_count[l]), complete as soon as BWD(l) returns.
 *   - Gradients are of the batch objective: sum over loss layers of weight * mean over the
 *     batch of the cross-entropy.
 *
 * Every buffer (the arena, activations, their gradients, scratch) is the backend's memory,
 * and every layer runs through the backend (GEMMs, im2col/col2im and compute_layer_ops_t), so
 * on a GPU a pass never goes through host memory. The exceptions are small and host-bound:
 * the caller fills the input batch and labels on the host (sent once before the next
 * forward), dropout masks are drawn on the host and sent, each loss comes back as one number,
 * and nnet_count_correct() brings the last loss layer's probabilities back. nnet_output(),
 * nnet_doutput() and nnet_fc_factors() return backend memory.
 */
#ifndef POSEIDON_NNET_H
#define POSEIDON_NNET_H

#include <stdbool.h>
#include <stdint.h>

#include "core/model.h"
#include "runtime/compute/arena.h"
#include "runtime/compute/compute.h"

typedef struct nnet nnet_t;

/* A net for m (after model_infer()) at batch size `batch`, parameters zero (see solver_init_
 * params). seed drives dropout masks. Returns NULL with the reason in err for a model the
 * runtime cannot run (no or several input layers, a layer reading a loss layer). */
nnet_t *nnet_new(const model_t *m, int batch, compute_t *c, uint64_t seed, char *err,
               size_t errlen);
void nnet_destroy(nnet_t **np);

const model_t *nnet_model(const nnet_t *n);
arena_t *nnet_arena(nnet_t *n);
int nnet_batch(const nnet_t *n);

/* The input batch (batch x C x H x W of layer 0) and its labels (batch ints), host memory,
 * filled by the caller before a forward pass (calling these marks them to be sent to a
 * device backend before the next forward). */
float *nnet_input(nnet_t *n);
int *nnet_labels(nnet_t *n);
/* Labels per sample: 1, or S for a seq_loss over S positions (the next token of each;
 * -1: ignored). nnet_labels() holds batch x nnet_label_count() ints. */
int nnet_label_count(const nnet_t *n);

/* Training mode (default true): dropout drops and batchnorm uses batch statistics (and updates
 * its running averages); in evaluation mode dropout is the identity and batchnorm uses the
 * running averages. */
void nnet_set_train(nnet_t *n, bool train);
/* The dropout layers' random state (bytes, save, restore), for a checkpoint: a net given back
 * its state draws the masks it would have drawn. 0 bytes for a net without dropout. */
size_t nnet_rng_state_bytes(const nnet_t *n);
void nnet_rng_state_save(const nnet_t *n, void *out);
void nnet_rng_state_restore(nnet_t *n, const void *in);
/* Keep reusing the last dropout masks (for gradient checks); default false. */
void nnet_set_dropout_frozen(nnet_t *n, bool frozen);
/* The loss layers' output gradient is multiplied by scale (default 1), and so every gradient
 * of the backward: precision = fp16's loss scaling (a power of two changes no bit but the
 * exponent's). */
void nnet_set_loss_scale(nnet_t *n, float scale);
/* Whether FC or linear layer l computes its weight gradient (default true). An SFB layer's is
 * rebuilt from its factors (nnet_fc_factors), so the backward need not form it: off, dw is
 * left as it was; the bias gradient and dx are computed as ever. */
void nnet_set_weight_grad(nnet_t *n, int l, bool on);
/* Also compute the gradient with respect to the input batch (doutput(0)); default false. */
void nnet_set_input_grad(nnet_t *n, bool on);

void nnet_forward_layer(nnet_t *n, int l);
void nnet_backward_begin(nnet_t *n);
void nnet_backward_layer(nnet_t *n, int l);

/* Whole passes: forward returns the batch objective; backward fills every gradient. */
double nnet_forward(nnet_t *n);
void nnet_backward(nnet_t *n);

/* Output of layer l (batch x out_count floats) and its gradient. For softmax_loss layers the
 * output is the class probabilities (batch x in_count). */
float *nnet_output(nnet_t *n, int l);
float *nnet_doutput(nnet_t *n, int l);
int64_t nnet_out_count(const nnet_t *n, int l); /* per sample */
double nnet_layer_loss(const nnet_t *n, int l);  /* weighted mean cross-entropy of a loss layer */

/* Top-1 correct predictions of the batch for the last loss layer; for a seq_loss, each
 * sample counts the fraction of its positions predicted (the sum rounded). */
int nnet_count_correct(const nnet_t *n);

/* The sufficient factors of FC layer l for the last batch: its input x (batch x in, row-major)
 * and the gradient dy of its output (batch x out), valid after BWD(l). The layer's weight
 * gradient is dy^T x (out x in). For a linear layer over S positions the rows are the
 * batch x S tokens (layer_sf_rows()). */
void nnet_fc_factors(nnet_t *n, int l, const float **x, const float **dy, int *in_units,
                    int *out_units);

#endif
