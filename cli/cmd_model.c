/* poseidon model show FILE [--csv] */
#include <stdio.h>
#include <string.h>

#include "cli/commands.h"
#include "core/log.h"
#include "core/model.h"

static void model_usage(FILE *f)
{
    fprintf(f, "usage: poseidon model show FILE [--csv]\n\n"
               "Parse a network description (models/NAME.net; the format is in models/README.md)\n"
               "and print one row per layer: output shape (per sample), parameters, forward and\n"
               "backward FLOPs per sample, activation bytes; then the totals.\n\n"
               "  --csv   comma-separated, header 'layer,type,output,params,fwd_flops,bwd_flops,\n"
               "          param_bytes,act_bytes,inputs', last row 'total'\n");
}

int cmd_model(int argc, char **argv)
{
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        model_usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    if (strcmp(argv[1], "show")) {
        fprintf(stderr, "poseidon model: unknown action '%s' (expected show)\n", argv[1]);
        return 2;
    }
    const char *path = NULL;
    int csv = 0;
    for (int i = 2; i < argc; i++) {
        if (!strcmp(argv[i], "--csv")) csv = 1;
        else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            model_usage(stdout);
            return 0;
        } else if (argv[i][0] == '-' && argv[i][1]) {
            fprintf(stderr, "poseidon model show: unknown option '%s'\n", argv[i]);
            return 2;
        } else if (path) {
            fprintf(stderr, "poseidon model show: one FILE expected, got '%s' and '%s'\n", path,
                    argv[i]);
            return 2;
        } else path = argv[i];
    }
    if (!path) {
        model_usage(stderr);
        return 2;
    }
    log_banner(argc, argv, 0);
    model_t m;
    char err[1024];
    if (model_load(&m, path, err, sizeof err)) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    if (csv) model_print_csv(&m, stdout);
    else model_print_table(&m, stdout);
    model_fini(&m);
    return fflush(stdout) == 0 ? 0 : 1;
}
