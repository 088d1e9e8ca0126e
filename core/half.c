#include "half.h"

#include <string.h>

static uint32_t f32_bits(float x)
{
    uint32_t b;
    memcpy(&b, &x, sizeof b);
    return b;
}

static float f32_from_bits(uint32_t b)
{
    float x;
    memcpy(&x, &b, sizeof x);
    return x;
}

uint16_t half_bf16_from_f32(float x)
{
    uint32_t b = f32_bits(x);
    if ((b & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((b >> 16) | 0x0040u); /* quiet NaN */
    /* add just under half an ulp of bf16, one more when the kept part is odd: a tie goes up
     * to even, below it truncates; a carry into the exponent (up to inf) is the rounding */
    b += 0x7fffu + ((b >> 16) & 1u);
    return (uint16_t)(b >> 16);
}

float half_bf16_to_f32(uint16_t h)
{
    uint32_t b = (uint32_t)h << 16;
    if ((b & 0x7fffffffu) > 0x7f800000u) b |= 0x00400000u;
    return f32_from_bits(b);
}

/* m >> shift, rounded to nearest, ties to even. */
static uint32_t shift_round_even(uint32_t m, int shift)
{
    uint32_t kept = m >> shift, rest = m & ((1u << shift) - 1), half = 1u << (shift - 1);
    return kept + (rest > half || (rest == half && (kept & 1u)));
}

uint16_t half_fp16_from_f32(float x)
{
    uint32_t b = f32_bits(x), a = b & 0x7fffffffu;
    uint16_t sign = (uint16_t)((b >> 16) & 0x8000u);
    if (a > 0x7f800000u) return sign | 0x7e00u | (uint16_t)((a >> 13) & 0x3ffu); /* NaN */
    if (a >= 0x477ff000u) return sign | 0x7c00u; /* >= 65520 (and inf): rounds to inf */
    if (a >= 0x38800000u) { /* normal: >= 2^-14; a mantissa carry may reach the exponent */
        uint32_t e = (a >> 23) - 127 + 15;
        return sign | (uint16_t)shift_round_even((e << 23) | (a & 0x7fffffu), 13);
    }
    if (a < 0x33000000u) return sign; /* < 2^-25: half the smallest subnormal rounds to 0 */
    /* subnormal: a multiple of 2^-24; the 24-bit mantissa m x 2^(e-150) is m >> (126 - e)
     * of them (rounding may give 0x400, the smallest normal, whose bits are the same) */
    int e = (int)(a >> 23);
    return sign | (uint16_t)shift_round_even((a & 0x7fffffu) | 0x800000u, 126 - e);
}

float half_fp16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    if (e == 0x1f) return f32_from_bits(sign | 0x7f800000u | (m << 13) | (m ? 0x00400000u : 0));
    if (e == 0) {
        if (m == 0) return f32_from_bits(sign);
        e = 113; /* a subnormal m x 2^-24: normalise it */
        while (!(m & 0x400u)) {
            m <<= 1;
            e--;
        }
        return f32_from_bits(sign | (e << 23) | ((m & 0x3ffu) << 13));
    }
    return f32_from_bits(sign | ((e + 112) << 23) | (m << 13));
}

void half_encode(precision_t p, void *dst, const float *src, size_t n)
{
    uint16_t *h = dst;
    if (p == PRECISION_FP32) memcpy(dst, src, n * sizeof *src);
    else if (p == PRECISION_BF16)
        for (size_t i = 0; i < n; i++) h[i] = half_bf16_from_f32(src[i]);
    else
        for (size_t i = 0; i < n; i++) h[i] = half_fp16_from_f32(src[i]);
}

void half_decode(precision_t p, float *dst, const void *src, size_t n)
{
    const uint16_t *h = src;
    if (p == PRECISION_FP32) memcpy(dst, src, n * sizeof *dst);
    else if (p == PRECISION_BF16)
        for (size_t i = 0; i < n; i++) dst[i] = half_bf16_to_f32(h[i]);
    else
        for (size_t i = 0; i < n; i++) dst[i] = half_fp16_to_f32(h[i]);
}
