/* precision: the number formats a job computes in and sends — fp32, bf16 (8-bit exponent,
 * 7-bit mantissa: fp32's range) and fp16 (5-bit exponent, 10-bit mantissa: largest finite
 * 65504) — their names, their sizes and the rule on which pairs a job may use.
 *
 * A job has two: its arithmetic precision (`precision`: bf16 and fp16 keep fp32 master
 * weights, as mixed-precision training does; fp16 also scales the loss dynamically) and its
 * wire precision (`wire_precision`: what gradients, parameters and factors are sent as; the
 * plan and the cost model count every exchange at it). fp32/fp32, the default, is the job
 * as it was before precisions existed.
 */
#ifndef POSEIDON_PRECISION_H
#define POSEIDON_PRECISION_H

#include <stddef.h>

typedef enum { PRECISION_FP32, PRECISION_BF16, PRECISION_FP16, PRECISION_COUNT } precision_t;

/* "fp32", "bf16", "fp16". */
const char *precision_name(precision_t p);

/* 0 and *p set, or -1 for a name that is none of them. */
int precision_parse(const char *name, precision_t *p);

/* Bytes of one value: 4 or 2. */
int precision_bytes(precision_t p);

/* Whether a job may compute in `arith` and send in `wire`. Every pair is allowed but fp16 on
 * the wire without fp16 arithmetic: fp16's range (6e-5 .. 65504 for normal values) holds
 * gradients only once the loss scaling of fp16 arithmetic has moved them into it; fp32 and
 * bf16 gradients are not scaled, and their small values would flush to zero. Returns 0, or
 * -1 with "expected ..., got ..." (what is allowed) in err. */
int precision_check_pair(precision_t arith, precision_t wire, char *err, size_t errlen);

#endif
