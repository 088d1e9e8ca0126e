/* poseidon profile: per-layer forward/backward time on this machine -> the CSV the simulator
 * reads (runtime/exec/profile.h). */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/commands.h"
#include "cli/flags.h"
#include "core/check.h"
#include "core/log.h"
#include "core/model.h"
#include "runtime/compute/compute.h"
#include "runtime/exec/profile.h"
#include "core/outfile.h"

static void profile_usage(FILE *f)
{
    fprintf(f,
            "usage: poseidon profile --model FILE --batch K [options]\n\n"
            "Time every layer's forward and backward pass on this machine (median over\n"
            "repeats after warm-up, synthetic data) and write the CSV the simulator reads\n"
            "(`profile = FILE` in an experiment): layer,batch,fwd_ns,bwd_ns.\n\n"
            "  --model FILE   network description\n"
            "  --batch K      samples per pass\n"
            "  --repeats R    timed passes (default 10)\n"
            "  --warmup W     untimed passes first (default 2)\n"
            "  --out FILE     CSV destination (default: stdout)\n"
            "  --detail       add type,params,fwd_flops,gemm_fwd_ns,gemm_bwd_ns (gemm_*: the\n"
            "                 bare sgemm calls of a conv/fc layer's shapes, for comparison;\n"
            "                 the simulator reads the file and skips these columns)\n"
            "  --threads T    BLAS threads (default 1; 0: all CPUs; OPENBLAS_NUM_THREADS, if set,\n"
            "                 wins)\n"
            "  --device D     cpu (default) or cuda\n"
            "  --precision P  fp32 (default), or on a GPU bf16 | fp16: the matrix products on the\n"
            "                 tensor cores (fp32 sums); the file says it, and the simulator\n"
            "                 uses it for jobs of that precision\n"
            "  --seed S       synthetic data and initialisation (default 1)\n");
}

int cmd_profile(int argc, char **argv)
{
    const char *model_path = NULL, *out_path = NULL, *device = "cpu", *precision = "fp32";
    /* One BLAS thread unless asked: on a machine whose cores are shared (other jobs, or the
     * workers of an emulated cluster), a second OpenBLAS thread waits for a core and spins
     * meanwhile; measured on the 2-core dev machine under load, MLP fc1 forward at batch 64
     * took 7.9 ms with 2 threads and 0.30 ms with 1. */
    int batch = 0, repeats = 10, warmup = 2, threads = 1, seed = 1;
    bool detail = false;
    static const struct option opts[] = {
        {"model", required_argument, NULL, 'm'},   {"out", required_argument, NULL, 'o'},
        {"device", required_argument, NULL, 'd'},  {"batch", required_argument, NULL, 'b'},
        {"repeats", required_argument, NULL, 'r'}, {"warmup", required_argument, NULL, 'w'},
        {"threads", required_argument, NULL, 't'}, {"seed", required_argument, NULL, 's'},
        {"detail", no_argument, NULL, 'D'},        {"help", no_argument, NULL, 'h'},
        {"precision", required_argument, NULL, 'p'},
        {0}};
    flag_parser_t p;
    flag_begin(&p, "profile", argc, argv, "h", opts);
    for (int c; (c = flag_next(&p)) != FLAG_END;) {
        const char *a = p.opt, *v = p.arg;
        int rc = 0;
        switch (c) {
        case 'h': profile_usage(stdout); return 0;
        case 'D': detail = true; break;
        case 'm': model_path = v; break;
        case 'o': out_path = v; break;
        case 'd': device = v; break;
        case 'p': precision = v; break;
        case 'b': rc = flag_int32("profile", a, v, 1, 1 << 30, &batch); break;
        case 'r': rc = flag_int32("profile", a, v, 1, 1 << 30, &repeats); break;
        case 'w': rc = flag_int32("profile", a, v, 0, 1 << 30, &warmup); break;
        case 't': rc = flag_int32("profile", a, v, 0, 1 << 30, &threads); break;
        case 's': rc = flag_int32("profile", a, v, 0, 1 << 30, &seed); break;
        case FLAG_ARG:
            fprintf(stderr, "poseidon profile: unexpected argument '%s' (--help lists the "
                            "options)\n", v);
            return 2;
        default: return 2;
        }
        if (rc) return 2;
    }
    if (!model_path || batch < 1) {
        profile_usage(stderr);
        return 2;
    }
    log_banner(argc, argv, (uint64_t)seed);
    compute_kind_t kind;
    if (compute_kind_parse(device, &kind)) {
        fprintf(stderr, "poseidon profile: --device is cpu or cuda, not '%s'\n", device);
        return 2;
    }
    precision_t prec;
    if (precision_parse(precision, &prec)) {
        fprintf(stderr, "poseidon profile: --precision is fp32, bf16 or fp16, not '%s'\n",
                precision);
        return 2;
    }
    if (prec != PRECISION_FP32 && kind != COMPUTE_CUDA) {
        fprintf(stderr, "poseidon profile: --precision %s needs --device cuda (the CPU computes "
                        "in fp32: its profile is the fp32 one)\n", precision);
        return 2;
    }
    char err[1024];
    model_t m;
    if (model_load(&m, model_path, err, sizeof err)) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    int rc = 1;
    profile_row_t *rows = xcalloc((size_t)m.n_layers, sizeof *rows);
    compute_t *c = compute_new(kind, threads, err, sizeof err);
    if (!c) {
        fprintf(stderr, "poseidon profile: --device %s: %s\n", device, err);
        goto out;
    }
    compute_set_gemm_precision(c, prec);
    if (profile_run(&m, batch, warmup, repeats, c, (uint64_t)seed, rows, err, sizeof err)) {
        fprintf(stderr, "poseidon profile: %s\n", err);
        goto out;
    }
    FILE *f = out_path ? outfile_open(out_path, "w") : stdout;
    if (!f) {
        fprintf(stderr, "poseidon profile: %s: cannot create: %s\n", out_path, strerror(errno));
        goto out;
    }
    profile_write_csv(f, &m, batch, rows, prec, detail);
    rc = (f == stdout ? fflush(f) : fclose(f)) ? 1 : 0;
out:
    compute_destroy(&c);
    free(rows);
    model_fini(&m);
    return rc;
}
