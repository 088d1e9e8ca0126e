#include "cli/flags.h"

#include <stdio.h>

#include "core/kvfile.h"

int flag_int(const char *cmd, const char *opt, const char *val, long long lo, long long hi,
             long long *out)
{
    long long v;
    if (!val || kv_int(val, &v) || v < lo || v > hi) {
        fprintf(stderr, "poseidon %s: %s expects an integer from %lld to %lld, got '%s'\n", cmd,
                opt, lo, hi, val ? val : "");
        return -1;
    }
    *out = v;
    return 0;
}

int flag_double(const char *cmd, const char *opt, const char *val, double lo, double hi,
                double *out)
{
    double v;
    if (!val || kv_double(val, &v) || !(v >= lo && v <= hi)) {
        fprintf(stderr, "poseidon %s: %s expects a number from %g to %g, got '%s'\n", cmd, opt,
                lo, hi, val ? val : "");
        return -1;
    }
    *out = v;
    return 0;
}

int flag_int32(const char *cmd, const char *opt, const char *val, int lo, int hi, int *out)
{
    long long v;
    if (flag_int(cmd, opt, val, lo, hi, &v)) return -1;
    *out = (int)v;
    return 0;
}
