/* half: fp32 <-> bf16 and fp32 <-> fp16, the conversions a job with a half wire or
 * arithmetic precision (core/precision.h) applies to what it sends and stores. Pure
 * functions on bit patterns, no state; in core/ because the network sync (runtime/sync), the
 * arithmetic (runtime/compute) and the checkpoints all call them.
 *
 * fp32 -> half rounds to nearest, ties to even (IEEE 754's default, as PyTorch's casts and
 * CUDA's __float2bfloat16 / __float2half do). NaN stays NaN, made quiet, sign kept (a bf16 of
 * fp32's top 16 bits alone could turn a NaN whose payload lies in the low bits into an inf).
 * ±inf stays ±inf; finite values beyond the format round to ±inf by the same rule (fp16: from
 * 65520 up, halfway between 65504, the largest finite, and 65536); values below the smallest
 * normal become subnormals (fp16: multiples of 2^-24; bf16 shares fp32's exponent range),
 * and below half the smallest subnormal, a signed zero. half -> fp32 is exact, subnormals
 * included (NaN made quiet).
 */
#ifndef POSEIDON_HALF_H
#define POSEIDON_HALF_H

#include <stddef.h>
#include <stdint.h>

#include "precision.h"

uint16_t half_bf16_from_f32(float x);
float half_bf16_to_f32(uint16_t h);
uint16_t half_fp16_from_f32(float x);
float half_fp16_to_f32(uint16_t h);

/* n values of src into dst at precision p: precision_bytes(p) bytes each (fp32: a copy). dst
 * and src must not overlap. */
void half_encode(precision_t p, void *dst, const float *src, size_t n);

/* n values of precision p from src into dst (fp32: a copy). */
void half_decode(precision_t p, float *dst, const void *src, size_t n);

#endif
