#include "rng.h"

#include <string.h>

#include <gsl/gsl_errno.h>
#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>

#include "check.h"

struct rng {
    gsl_rng *g;
};

static void gsl_error_reporter(const char *reason, const char *file, int line, int gsl_errno)
{
    die("GSL error at %s:%d: %s (%s)", file, line, reason, gsl_strerror(gsl_errno));
}

/* SplitMix64: spreads (seed, stream) over the generator's seed space. */
static uint64_t mix64(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

rng_t *rng_new(uint64_t seed, uint64_t stream)
{
    gsl_set_error_handler(gsl_error_reporter);
    rng_t *r = xcalloc(1, sizeof *r);
    r->g = gsl_rng_alloc(gsl_rng_mt19937);
    if (!r->g) die("gsl_rng_alloc failed");
    gsl_rng_set(r->g, (unsigned long)mix64(seed ^ mix64(stream + 1)));
    return r;
}

void rng_destroy(rng_t **rp)
{
    if (!rp || !*rp) return;
    gsl_rng_free((*rp)->g);
    free(*rp);
    *rp = NULL;
}

double rng_uniform(rng_t *r) { return gsl_rng_uniform(r->g); }

uint64_t rng_uint(rng_t *r, uint64_t n)
{
    ASSERT(n >= 1, "rng_uint range must be positive");
    if (n <= gsl_rng_max(r->g)) return gsl_rng_uniform_int(r->g, (unsigned long)n);
    return (uint64_t)(gsl_rng_uniform(r->g) * (double)n);
}

double rng_gaussian(rng_t *r, double sigma) { return gsl_ran_gaussian_ziggurat(r->g, sigma); }
double rng_lognormal(rng_t *r, double zeta, double sigma)
{
    return gsl_ran_lognormal(r->g, zeta, sigma);
}
double rng_exponential(rng_t *r, double mean) { return gsl_ran_exponential(r->g, mean); }
double rng_gamma(rng_t *r, double shape, double scale)
{
    return gsl_ran_gamma(r->g, shape, scale);
}
void rng_shuffle(rng_t *r, void *base, size_t n, size_t size)
{
    if (n > 1) gsl_ran_shuffle(r->g, base, n, size);
}
void *rng_gsl(rng_t *r) { return r->g; }

size_t rng_state_bytes(const rng_t *r) { return gsl_rng_size(r->g); }
void rng_state_save(const rng_t *r, void *out) { memcpy(out, gsl_rng_state(r->g), gsl_rng_size(r->g)); }
void rng_state_restore(rng_t *r, const void *in) { memcpy(gsl_rng_state(r->g), in, gsl_rng_size(r->g)); }
