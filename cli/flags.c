#include "cli/flags.h"

#include <stdio.h>
#include <string.h>

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

void flag_begin(flag_parser_t *p, const char *cmd, int argc, char **argv, const char *shortopts,
                const struct option *longopts)
{
    *p = (flag_parser_t){.cmd = cmd, .argc = argc, .argv = argv, .shortopts = shortopts,
                         .longopts = longopts};
    optind = 0; /* glibc: a full reset, for a second walk in one process (the tests) */
    opterr = 0; /* the messages are ours */
}

/* The option getopt stopped at, as typed (without "=VALUE"). */
static void bad_name(const flag_parser_t *p, char *out, size_t len)
{
    const char *a = optind > 0 && optind <= p->argc ? p->argv[optind - 1] : "";
    if (!strncmp(a, "--", 2) || !optopt || optopt > 127)
        snprintf(out, len, "%.*s", (int)strcspn(a, "="), a);
    else
        snprintf(out, len, "-%c", optopt);
}

int flag_next(flag_parser_t *p)
{
    if (p->rest) { /* getopt is done: the rest are positional, getopt not asked again */
        if (p->rest >= p->argc) return FLAG_END;
        p->arg = p->argv[p->rest++];
        return FLAG_ARG;
    }
    char spec[128];
    /* '-': positional arguments in their place (argv stays as typed, for the banner);
     * ':': a missing value is told apart from an unknown option */
    snprintf(spec, sizeof spec, "-:%s", p->shortopts);
    int index = -1;
    optopt = 0;
    int c = getopt_long(p->argc, p->argv, spec, p->longopts, &index);
    p->arg = optarg;
    if (c == -1) { /* the end, or "--": what follows it is positional */
        p->rest = optind > 0 ? optind : p->argc;
        return flag_next(p);
    }
    if (c == 1) return FLAG_ARG;
    if (c == '?' || c == ':') {
        char name[72];
        bad_name(p, name, sizeof name);
        if (c == ':')
            fprintf(stderr, "poseidon %s: %s needs a value\n", p->cmd, name);
        else
            fprintf(stderr, "poseidon %s: unknown option '%s' (--help lists them)\n", p->cmd,
                    name);
        return FLAG_BAD;
    }
    if (index >= 0) snprintf(p->opt, sizeof p->opt, "--%s", p->longopts[index].name);
    else snprintf(p->opt, sizeof p->opt, "-%c", c);
    return c;
}
