#include "runtime/sync/wire.h"

#include <stdlib.h>

#include "core/check.h"
#include "core/half.h"
#include "core/vec.h"

void *wire_pack(precision_t p, const float *src, size_t n)
{
    void *dst = xmalloc(n * (size_t)precision_bytes(p) + 1);
    half_encode(p, dst, src, n);
    return dst;
}

void wire_add(precision_t p, float *dst, const void *src, size_t n)
{
    const uint16_t *h = src;
    if (p == PRECISION_BF16)
        for (size_t i = 0; i < n; i++) dst[i] += half_bf16_to_f32(h[i]);
    else if (p == PRECISION_FP16)
        for (size_t i = 0; i < n; i++) dst[i] += half_fp16_to_f32(h[i]);
    else
        vec_add(dst, src, (int64_t)n);
}

void wire_add_rounded(precision_t p, float *dst, const float *src, size_t n)
{
    if (p == PRECISION_BF16)
        for (size_t i = 0; i < n; i++) dst[i] += half_bf16_to_f32(half_bf16_from_f32(src[i]));
    else if (p == PRECISION_FP16)
        for (size_t i = 0; i < n; i++) dst[i] += half_fp16_to_f32(half_fp16_from_f32(src[i]));
    else
        vec_add(dst, src, (int64_t)n);
}

void wire_round(precision_t p, float *x, size_t n)
{
    if (p == PRECISION_BF16)
        for (size_t i = 0; i < n; i++) x[i] = half_bf16_to_f32(half_bf16_from_f32(x[i]));
    else if (p == PRECISION_FP16)
        for (size_t i = 0; i < n; i++) x[i] = half_fp16_to_f32(half_fp16_from_f32(x[i]));
}

bool wire_overflows(precision_t p, const float *x, size_t n)
{
    /* v * 0 is 0 for a finite v and NaN for an inf or a NaN, which the sum keeps */
    float acc = 0.0f;
    if (p == PRECISION_BF16)
        for (size_t i = 0; i < n; i++) acc += half_bf16_to_f32(half_bf16_from_f32(x[i])) * 0.0f;
    else if (p == PRECISION_FP16)
        for (size_t i = 0; i < n; i++) acc += half_fp16_to_f32(half_fp16_from_f32(x[i])) * 0.0f;
    else
        for (size_t i = 0; i < n; i++) acc += x[i] * 0.0f;
    return acc != 0.0f;
}
