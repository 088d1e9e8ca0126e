#include "precision.h"

#include <stdio.h>
#include <string.h>

#include "check.h"

static const char *const s_names[PRECISION_COUNT] = {"fp32", "bf16", "fp16"};

const char *precision_name(precision_t p)
{
    ASSERT(p >= 0 && p < PRECISION_COUNT, "bad precision %d", p);
    return s_names[p];
}

int precision_parse(const char *name, precision_t *p)
{
    for (int i = 0; i < PRECISION_COUNT; i++)
        if (!strcmp(name, s_names[i])) {
            *p = (precision_t)i;
            return 0;
        }
    return -1;
}

int precision_bytes(precision_t p) { return p == PRECISION_FP32 ? 4 : 2; }

int precision_check_pair(precision_t arith, precision_t wire, char *err, size_t errlen)
{
    if (wire != PRECISION_FP16 || arith == PRECISION_FP16) return 0;
    snprintf(err, errlen,
             "expected wire_precision = fp32 | bf16 with precision = %s (fp16 on the wire "
             "needs the loss scaling of precision = fp16), got wire_precision = fp16",
             precision_name(arith));
    return -1;
}
