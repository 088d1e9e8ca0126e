/* wire: values as the synchronisers send them, at the job's wire precision (core/precision.h).
 *
 * Every sum stays fp32: what arrives is decoded (exactly) and added in fp32; what leaves is
 * encoded, rounding to nearest even (core/half.h). At fp32 every function is a plain copy or
 * add, but the synchronisers do not call them at fp32: their fp32 paths send the float
 * buffers themselves, without a copy, as before wire precisions existed.
 */
#ifndef POSEIDON_WIRE_H
#define POSEIDON_WIRE_H

#include <stdbool.h>
#include <stddef.h>

#include "core/precision.h"

/* Whether values at p travel encoded (bf16, fp16) rather than as the floats themselves. */
static inline bool wire_encoded(precision_t p) { return p != PRECISION_FP32; }

/* A malloc'ed buffer of n values of src at p (precision_bytes(p) each); the caller frees it. */
void *wire_pack(precision_t p, const float *src, size_t n);

/* dst[i] += the value i of src (n values at p), in fp32. */
void wire_add(precision_t p, float *dst, const void *src, size_t n);

/* dst[i] += src[i] rounded to p, in fp32: what a receiver adds of floats sent at p. */
void wire_add_rounded(precision_t p, float *dst, const float *src, size_t n);

/* x rounded to p in place: what a receiver of x at p decodes, so that a sender that keeps its
 * own copy holds the same values as the receivers, bit for bit. */
void wire_round(precision_t p, float *x, size_t n);

/* Whether any of the n values of x is an inf or a NaN as p carries it (fp16: also every
 * value that rounds past its largest, 65504): what fp16's loss scaling skips a step for. */
bool wire_overflows(precision_t p, const float *x, size_t n);

#endif
