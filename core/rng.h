/* rng: the only source of randomness. A GSL generator behind an explicit state, seeded
 * from the experiment; independent streams are derived from (seed, stream id) so that, for
 * example, node 3's jitter does not change when node 4 is added.
 */
#ifndef POSEIDON_RNG_H
#define POSEIDON_RNG_H

#include <stddef.h>
#include <stdint.h>

typedef struct rng rng_t;

/* A generator for stream `stream` of `seed`. Never fails (dies on allocation failure). */
rng_t *rng_new(uint64_t seed, uint64_t stream);
void rng_destroy(rng_t **rp);

double rng_uniform(rng_t *r);                       /* [0, 1) */
uint64_t rng_uint(rng_t *r, uint64_t n);            /* [0, n), n >= 1 */
double rng_gaussian(rng_t *r, double sigma);        /* mean 0 */
double rng_lognormal(rng_t *r, double zeta, double sigma);
double rng_exponential(rng_t *r, double mean);
double rng_gamma(rng_t *r, double shape, double scale);
void rng_shuffle(rng_t *r, void *base, size_t n, size_t size);

/* The generator's whole state as bytes (rng_state_bytes of them), for checkpoints: a
 * generator given back its state continues the same sequence. */
size_t rng_state_bytes(const rng_t *r);
void rng_state_save(const rng_t *r, void *out);
void rng_state_restore(rng_t *r, const void *in);

/* The underlying gsl_rng *, for callers that use other GSL distributions. */
void *rng_gsl(rng_t *r);

#endif
