/* scheme: how a job synchronises parameters — a base (PS, SFB, all-reduce, or the per-layer
 * choices hybrid and hybrid3) and whether sync overlaps backward (wait-free backprop). The
 * planner (core/plan.c) turns a scheme into each unit's method; the experiment file, the
 * command line and the reports name schemes as scheme_parse() and scheme_name() do.
 */
#ifndef POSEIDON_SCHEME_H
#define POSEIDON_SCHEME_H

#include <stdbool.h>
#include <stddef.h>

/* How parameters are synchronised. A scheme is a base plus whether sync overlaps backward
 * (wait-free backprop). */
typedef enum {
    SCHEME_PS,        /* sharded parameter server for every layer */
    SCHEME_SFB,       /* FC weights by sufficient-factor broadcast, the rest by PS */
    SCHEME_ALLREDUCE, /* ring all-reduce for every layer */
    SCHEME_HYBRID,    /* Poseidon HybComm: per layer the cheaper of PS and SFB */
    SCHEME_HYBRID3,   /* per layer the cheapest of PS, SFB and all-reduce */
    SCHEME_BASE_COUNT
} scheme_base_t;

typedef struct {
    scheme_base_t base;
    bool wfbp;
} scheme_t;

/* "ps", "ps+wfbp", "sfb+wfbp", "allreduce+wfbp", "hybrid", "hybrid3" (and "X+none",
 * "X+wfbp" for any base). Bare ps/sfb/allreduce do not overlap; hybrid/hybrid3 do.
 * Returns 0 or -1. */
int scheme_parse(const char *s, scheme_t *out);

/* The canonical name (the short form when the overlap is the base's default). */
const char *scheme_name(scheme_t s, char *buf, size_t len);

#endif
