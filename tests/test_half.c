/* The half conversions (core/half.h): rounding to nearest even at ties, inf, NaN, fp16's
 * overflow, subnormals both ways, exact round trips of every half pattern, and the bulk
 * forms against the scalar ones. */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "core/half.h"
#include "tests/test.h"

/* fp32 from its bits and back, as a union reads them */
typedef union {
    uint32_t u;
    float f;
} f32_t;
#define from_bits(b) ((f32_t){.u = (uint32_t)(b)}.f)
#define bits_of(x) ((f32_t){.f = (x)}.u)

#define CHECK_H(got, want)                                                                  \
    CHECK((got) == (want), "%s: 0x%04x, expected 0x%04x", #got, (unsigned)(got), (unsigned)(want))

TEST(half_bf16_rounds_to_nearest_even)
{
    CHECK_H(half_bf16_from_f32(1.0f), 0x3f80);
    CHECK_H(half_bf16_from_f32(from_bits(0x3f808000)), 0x3f80); /* tie, 0x3f80 even: down */
    CHECK_H(half_bf16_from_f32(from_bits(0x3f818000)), 0x3f82); /* tie, 0x3f81 odd: up */
    CHECK_H(half_bf16_from_f32(from_bits(0x3f808001)), 0x3f81); /* just above the tie */
    CHECK_H(half_bf16_from_f32(from_bits(0x3f817fff)), 0x3f81); /* just below the tie */
    CHECK_H(half_bf16_from_f32(from_bits(0xbf818000)), 0xbf82); /* the sign is symmetric */
    CHECK_H(half_bf16_from_f32(from_bits(0x3fffffff)), 0x4000); /* the carry reaches the exponent */
    CHECK(half_bf16_to_f32(0x3f81) == 1.0078125f, "0x3f81 is 1 + 2^-7");
}

TEST(half_fp16_rounds_to_nearest_even)
{
    CHECK_H(half_fp16_from_f32(1.0f), 0x3c00);
    CHECK_H(half_fp16_from_f32(1.0f + 0x1p-11f), 0x3c00);        /* tie, even: down */
    CHECK_H(half_fp16_from_f32(1.0f + 3 * 0x1p-11f), 0x3c02);    /* tie, odd: up */
    CHECK_H(half_fp16_from_f32(nextafterf(1.0f + 0x1p-11f, 2)), 0x3c01);
    CHECK_H(half_fp16_from_f32(-2.0f - 0x1p-10f), 0xc000);       /* tie below -2: to -2 */
    CHECK_H(half_fp16_from_f32(0.1f), 0x2e66);                   /* 0.0999755859375 */
    CHECK(half_fp16_to_f32(0x2e66) == 0.0999755859375f, "0x2e66");
}

TEST(half_inf_and_nan)
{
    uint32_t nans[] = {0x7fc00000, 0xffc00000, 0x7f800001 /* signalling, low payload */,
                       0x7fa00000 /* signalling, high payload */};
    for (size_t i = 0; i < sizeof nans / sizeof nans[0]; i++) {
        float x = from_bits(nans[i]);
        uint16_t b = half_bf16_from_f32(x), f = half_fp16_from_f32(x);
        CHECK((b & 0x7fff) > 0x7f80 && (b & 0x0040), "bf16 of 0x%08x: 0x%04x, not a quiet NaN",
              (unsigned)nans[i], b);
        CHECK((f & 0x7fff) > 0x7c00 && (f & 0x0200), "fp16 of 0x%08x: 0x%04x, not a quiet NaN",
              (unsigned)nans[i], f);
        CHECK((b >> 15) == (nans[i] >> 31) && (f >> 15) == (nans[i] >> 31), "NaN sign");
    }
    /* back to fp32: NaN, quiet, from signalling half patterns too */
    uint32_t b = bits_of(half_bf16_to_f32(0x7f81)), f = bits_of(half_fp16_to_f32(0x7c01));
    CHECK(isnan(from_bits(b)) && (b & 0x00400000), "bf16 0x7f81 -> 0x%08x", (unsigned)b);
    CHECK(isnan(from_bits(f)) && (f & 0x00400000), "fp16 0x7c01 -> 0x%08x", (unsigned)f);
    CHECK_H(half_bf16_from_f32(INFINITY), 0x7f80);
    CHECK_H(half_bf16_from_f32(-INFINITY), 0xff80);
    CHECK_H(half_fp16_from_f32(INFINITY), 0x7c00);
    CHECK_H(half_fp16_from_f32(-INFINITY), 0xfc00);
    CHECK(half_bf16_to_f32(0xff80) == -INFINITY && half_fp16_to_f32(0x7c00) == INFINITY, "inf");
}

TEST(half_fp16_overflows_to_inf)
{
    CHECK_H(half_fp16_from_f32(65504.0f), 0x7bff);               /* the largest finite */
    CHECK_H(half_fp16_from_f32(nextafterf(65520.0f, 0)), 0x7bff); /* below the tie */
    CHECK_H(half_fp16_from_f32(65520.0f), 0x7c00);               /* the tie: to even, inf */
    CHECK_H(half_fp16_from_f32(1e10f), 0x7c00);
    CHECK_H(half_fp16_from_f32(-FLT_MAX), 0xfc00);
    /* bf16 has fp32's range: only the top of it rounds up to inf */
    CHECK_H(half_bf16_from_f32(1e38f), 0x7e96);
    CHECK_H(half_bf16_from_f32(FLT_MAX), 0x7f80);
    CHECK_H(half_bf16_from_f32(from_bits(0x7f7f7fff)), 0x7f7f);
}

TEST(half_subnormals_both_ways)
{
    /* fp16: subnormals are multiples of 2^-24 below 2^-14 */
    CHECK_H(half_fp16_from_f32(0x1p-24f), 0x0001);
    CHECK_H(half_fp16_from_f32(0x1p-25f), 0x0000);               /* tie with 0: even */
    CHECK_H(half_fp16_from_f32(nextafterf(0x1p-25f, 1)), 0x0001);
    CHECK_H(half_fp16_from_f32(3 * 0x1p-25f), 0x0002);           /* 1.5 x 2^-24: tie, to 2 */
    CHECK_H(half_fp16_from_f32(5 * 0x1p-25f), 0x0002);           /* 2.5 x 2^-24: tie, to 2 */
    CHECK_H(half_fp16_from_f32(-0x1p-24f), 0x8001);
    CHECK_H(half_fp16_from_f32(1023 * 0x1p-24f), 0x03ff);        /* the largest subnormal */
    CHECK_H(half_fp16_from_f32(1023.5f * 0x1p-24f), 0x0400);     /* tie: up to the least normal */
    CHECK_H(half_fp16_from_f32(0x1p-14f), 0x0400);
    CHECK_H(half_fp16_from_f32(1e-10f), 0x0000);
    CHECK_H(half_fp16_from_f32(-1e-10f), 0x8000);                /* the sign survives */
    CHECK(half_fp16_to_f32(0x0001) == 0x1p-24f, "0x0001");
    CHECK(half_fp16_to_f32(0x03ff) == 1023 * 0x1p-24f, "0x03ff");
    CHECK(half_fp16_to_f32(0x8200) == -0x1p-15f, "0x8200");
    /* bf16: fp32's subnormals, rounded to 7 bits of mantissa */
    CHECK_H(half_bf16_from_f32(from_bits(0x00010000)), 0x0001);
    CHECK_H(half_bf16_from_f32(from_bits(0x00008000)), 0x0000); /* tie with 0 */
    CHECK_H(half_bf16_from_f32(from_bits(0x00018000)), 0x0002); /* tie, odd: up */
    CHECK_H(half_bf16_from_f32(from_bits(0x00000001)), 0x0000);
    CHECK(bits_of(half_bf16_to_f32(0x0001)) == 0x00010000, "bf16 0x0001");
    CHECK(bits_of(half_bf16_to_f32(0x807f)) == 0x807f0000, "bf16 0x807f");
}

/* Every half pattern but NaN decodes to an fp32 that encodes back to it. */
TEST(half_every_pattern_round_trips)
{
    int bad_b = 0, bad_f = 0;
    for (uint32_t h = 0; h <= 0xffff; h++) {
        uint16_t v = (uint16_t)h;
        if ((v & 0x7fff) <= 0x7f80) bad_b += half_bf16_from_f32(half_bf16_to_f32(v)) != v;
        if ((v & 0x7fff) <= 0x7c00) bad_f += half_fp16_from_f32(half_fp16_to_f32(v)) != v;
    }
    CHECK(bad_b == 0 && bad_f == 0, "%d bf16 and %d fp16 patterns changed", bad_b, bad_f);
}

/* Against the compiler's own IEEE conversion, where it has _Float16: a sweep of fp32 bit
 * patterns over every exponent. */
TEST(half_fp16_matches_the_compilers_conversion)
{
#ifdef __FLT16_MAX__
    int bad = 0;
    uint32_t first_bad = 0;
    for (uint64_t b = 0; b <= 0xffffffffu; b += 0x10001 + (b & 0x3f)) {
        float x = from_bits((uint32_t)b);
        if (isnan(x)) continue;
        _Float16 want = (_Float16)x;
        uint16_t w;
        memcpy(&w, &want, sizeof w);
        if (half_fp16_from_f32(x) != w && !bad++) first_bad = (uint32_t)b;
    }
    CHECK(bad == 0, "%d mismatches, the first at 0x%08x", bad, (unsigned)first_bad);
#else
    SKIP("no _Float16 in this compiler");
#endif
}

TEST(half_bulk_matches_scalar)
{
    enum { N = 1000 };
    float src[N], back[N];
    uint16_t h[N];
    for (int i = 0; i < N; i++)
        src[i] = (float)((i - N / 2) * 0.37) * powf(2.0f, (float)(i % 40 - 20));
    src[0] = NAN;
    src[1] = INFINITY;
    src[2] = 70000.0f;
    half_encode(PRECISION_BF16, h, src, N);
    half_decode(PRECISION_BF16, back, h, N);
    int bad = 0;
    for (int i = 0; i < N; i++)
        bad += h[i] != half_bf16_from_f32(src[i]) ||
               bits_of(back[i]) != bits_of(half_bf16_to_f32(h[i]));
    half_encode(PRECISION_FP16, h, src, N);
    half_decode(PRECISION_FP16, back, h, N);
    for (int i = 0; i < N; i++)
        bad += h[i] != half_fp16_from_f32(src[i]) ||
               bits_of(back[i]) != bits_of(half_fp16_to_f32(h[i]));
    float copy[N];
    half_encode(PRECISION_FP32, copy, src, N);
    half_decode(PRECISION_FP32, back, copy, N);
    bad += memcmp(back, src, sizeof src) != 0;
    CHECK(bad == 0, "%d values differ from the scalar conversions", bad);
    CHECK(isinf(back[2]) == 0 && back[2] == 70000.0f, "fp32 copies exactly");
}
