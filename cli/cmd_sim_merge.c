/* poseidon report merge PART.csv... [-o OUT.csv]: the CSVs of `poseidon sim --part I/N` put
 * back into the whole sweep's (sim/simpart.h). */
#include <stdio.h>
#include <stdlib.h>

#include "cli/commands.h"
#include "cli/flags.h"
#include "core/check.h"
#include "core/outfile.h"
#include "sim/simpart.h"

static const char s_usage_merge[] =
    "usage: poseidon report merge PART.csv... [-o OUT.csv]\n\n"
    "The CSVs of `poseidon sim EXP --part I/N --csv PART.csv` for I = 1..N, in any order,\n"
    "put back into the CSV that `poseidon sim EXP --csv` writes for the whole sweep (rows\n"
    "in its order; the same bytes but for wall_s). Refuses, writing nothing, parts of\n"
    "different experiments or overrides, a part missing or given twice, and a part whose\n"
    "run stopped early. Default OUT: stdout.\n";

int cmd_report_merge_usage(FILE *f)
{
    return fputs(s_usage_merge, f);
}

int cmd_report_merge(int argc, char **argv)
{
    static const struct option opts[] = {
        {"out", required_argument, 0, 'o'}, {"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
    const char **parts = xcalloc((size_t)argc, sizeof *parts), *out = NULL;
    int n = 0;
    flag_parser_t p;
    flag_begin(&p, "report merge", argc, argv, "ho:", opts);
    for (int c; (c = flag_next(&p)) != FLAG_END;) {
        if (c == 'h') {
            fputs(s_usage_merge, stdout);
            free(parts);
            return 0;
        }
        if (c == 'o') out = p.arg;
        else if (c == FLAG_ARG) parts[n++] = p.arg;
        else {
            free(parts);
            return 2;
        }
    }
    if (n == 0) {
        fputs(s_usage_merge, stderr);
        free(parts);
        return 2;
    }
    char err[4096], *text = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&text, &len);
    int rc = mem ? simpart_merge(parts, n, mem, err, sizeof err) : -1;
    if (mem) fclose(mem);
    else snprintf(err, sizeof err, "out of memory");
    free(parts);
    if (rc) {
        fprintf(stderr, "poseidon report merge: %s\n", err);
        free(text);
        return 2;
    }
    FILE *f = out ? outfile_open(out, "w") : stdout;
    if (!f || fwrite(text, 1, len, f) != len || (out && fclose(f))) {
        fprintf(stderr, "poseidon report merge: %s: cannot write\n", out ? out : "stdout");
        rc = 1;
    }
    free(text);
    return rc;
}
