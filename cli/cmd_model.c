/* poseidon model show FILE [--csv] [--input-shape NAME=DIMS]...
 * poseidon model import FILE.onnx [-o FILE.net] [--input-shape NAME=DIMS]... */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/commands.h"
#include "cli/flags.h"
#include "core/log.h"
#include "core/model.h"
#include "core/outfile.h"
#include "onnx/onnx_import.h"

static void model_usage(FILE *f)
{
    fprintf(f, "usage: poseidon model show FILE [--csv] [--input-shape NAME=DIMS]...\n"
               "       poseidon model import FILE.onnx [-o FILE.net]\n"
               "                             [--input-shape NAME=DIMS]...\n\n"
               "show: parse a network description (models/NAME.net; the format is in\n"
               "models/README.md) or an ONNX graph (FILE.onnx, imported as `import` does) and\n"
               "print one row per layer: output shape (per sample), parameters, forward and\n"
               "backward FLOPs per sample, activation bytes; then the totals.\n\n"
               "import: map an ONNX graph's operators onto layers and write the network\n"
               "description (to stdout without -o). Weights are not read: a graph exported\n"
               "without them (PyTorch: export_params=False) is enough. An operator that maps\n"
               "to no layer is an error naming its node; every graph output gets a\n"
               "softmax_loss unless it is a Softmax's (which becomes it).\n\n"
               "  --csv                      comma-separated, header 'layer,type,output,params,\n"
               "                             fwd_flops,bwd_flops,param_bytes,act_bytes,inputs',\n"
               "                             last row 'total'\n"
               "  --input-shape NAME=DIMS    shape of graph input NAME, batch first (e.g.\n"
               "                             input=1x3x224x224), for dimensions the graph leaves\n"
               "                             open; an open batch dimension is taken as 1\n"
               "  -o FILE                    where import writes the description\n");
}

int cmd_model(int argc, char **argv)
{
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        model_usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    int import = !strcmp(argv[1], "import");
    if (strcmp(argv[1], "show") && !import) {
        fprintf(stderr, "poseidon model: unknown action '%s' (expected show or import)\n",
                argv[1]);
        return 2;
    }
    const char *path = NULL, *out_path = NULL;
    int csv = 0;
    onnx_import_opts_t opts = {0};
    char err[2048];
    static const struct option lo[] = {{"csv", no_argument, NULL, 'c'},
                                       {"input-shape", required_argument, NULL, 's'},
                                       {"help", no_argument, NULL, 'h'},
                                       {0}};
    char cmd[32];
    snprintf(cmd, sizeof cmd, "model %s", argv[1]);
    flag_parser_t p;
    /* the action's own options: --csv shows, -o imports */
    flag_begin(&p, cmd, argc - 1, argv + 1, import ? "ho:" : "h", import ? lo + 1 : lo);
    for (int c; (c = flag_next(&p)) != FLAG_END;) {
        switch (c) {
        case 'h': model_usage(stdout); return 0;
        case 'c': csv = 1; break;
        case 'o': out_path = p.arg; break;
        case 's':
            if (opts.n_shapes == ONNX_SHAPE_ARGS_MAX) {
                fprintf(stderr, "poseidon %s: at most %d --input-shape\n", cmd,
                        ONNX_SHAPE_ARGS_MAX);
                return 2;
            }
            if (onnx_shape_arg_parse(p.arg, &opts.shapes[opts.n_shapes++], err, sizeof err)) {
                fprintf(stderr, "poseidon %s: %s\n", cmd, err);
                return 2;
            }
            break;
        case FLAG_ARG:
            if (path) {
                fprintf(stderr, "poseidon %s: one FILE expected, got '%s' and '%s'\n", cmd,
                        path, p.arg);
                return 2;
            }
            path = p.arg;
            break;
        default: return 2;
        }
    }
    if (!path) {
        model_usage(stderr);
        return 2;
    }
    bool onnx = onnx_path_is_onnx(path);
    if (import && !onnx) {
        fprintf(stderr, "poseidon model import: '%s' is not an ONNX file (expected FILE.onnx)\n",
                path);
        return 2;
    }
    if (!onnx && opts.n_shapes) {
        fprintf(stderr, "poseidon model show: --input-shape applies to ONNX files only\n");
        return 2;
    }
    if (!import || out_path) log_banner(argc, argv, 0); /* not into the description on stdout */
    model_t m;
    char *text = NULL;
    int rc = onnx ? onnx_model_load(&m, path, &opts, import ? &text : NULL, err, sizeof err)
                  : model_load(&m, path, err, sizeof err);
    if (rc) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    if (import) {
        FILE *f = out_path ? outfile_open(out_path, "w") : stdout;
        if (!f) {
            fprintf(stderr, "%s: cannot write\n", out_path);
            rc = 1;
        } else {
            fputs(text, f);
            if (f != stdout ? fclose(f) != 0 : fflush(f) != 0) {
                fprintf(stderr, "%s: write error\n", out_path ? out_path : "stdout");
                rc = 1;
            }
        }
        if (!rc && out_path)
            fprintf(stderr, "%s: %d layers, %lld parameters\n", out_path, m.n_layers,
                    (long long)m.total_params);
        free(text);
        model_fini(&m);
        return rc;
    }
    if (csv) model_print_csv(&m, stdout);
    else model_print_table(&m, stdout);
    model_fini(&m);
    return fflush(stdout) == 0 ? 0 : 1;
}
