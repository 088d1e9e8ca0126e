/* solver: SGD with momentum and weight decay (Caffe's SGDSolver update), learning-rate
 * policies, and seeded parameter initialisation.
 *
 *   h = momentum * h + lr(t) * (g + wd * w);   w = w - h
 * Weight decay applies to weights only, never to biases or BN shifts (arena_entry_t.is_bias).
 * The momentum history h is one flat array the size of the arena, owned by the solver.
 */
#ifndef POSEIDON_SOLVER_H
#define POSEIDON_SOLVER_H

#include <stdint.h>

#include "core/model.h"
#include "runtime/compute/arena.h"

typedef enum { LR_FIXED, LR_STEP, LR_POLY } lr_policy_t;
typedef enum { INIT_AUTO, INIT_XAVIER, INIT_HE } init_kind_t;

typedef struct {
    double lr;            /* base learning rate */
    double momentum;
    double weight_decay;
    lr_policy_t policy;
    double gamma;         /* step: lr * gamma^floor(t / step_iters) */
    int64_t step_iters;
    double power;         /* poly: lr * (1 - t / max_iters)^power */
    int64_t max_iters;
} solver_config_t;

typedef struct solver solver_t;

/* "fixed" | "step" | "poly" -> policy; 0, or -1 for another string. */
int solver_policy_parse(const char *s, lr_policy_t *p);

/* The learning rate at iteration t (0-based). */
double solver_lr(const solver_config_t *cfg, int64_t t);

solver_t *solver_new(const solver_config_t *cfg, arena_t *arena);
void solver_destroy(solver_t **sp);

/* One update of every parameter from arena->grads at iteration t. */
void solver_step(solver_t *s, int64_t t);
/* Update only the parameters of model layer l (a plan executor's UPDATE(l)). */
void solver_step_layer(solver_t *s, int l, int64_t t);

/* The momentum history (arena->count floats), for checkpoints. */
float *solver_history(solver_t *s);

/* Initialise every parameter from rng stream (seed, 1): weights from Xavier's uniform
 * (+-sqrt(3/fan_in), Caffe's "xavier" filler) or He's Gaussian (sd sqrt(2/fan_in), He et al.
 * 2015); INIT_AUTO picks He for a conv/fc whose output feeds a ReLU, else Xavier. Biases and
 * BN shifts are 0, BN scales 1. */
void solver_init_params(const model_t *m, arena_t *arena, init_kind_t kind, uint64_t seed);

#endif
