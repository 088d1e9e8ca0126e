/* poseidon train: single-worker training of a network on Fashion-MNIST or synthetic data,
 * with per-epoch loss, accuracies and images/s, a CSV log, atomic checkpoints and resume.
 * The step loop lives in runtime/exec/train.c, shared with distributed workers. */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/commands.h"
#include "cli/flags.h"
#include "cli/job_out.h"
#include "core/check.h"
#include "core/experiment.h"
#include "core/job.h"
#include "core/log.h"
#include "core/model.h"
#include "runtime/exec/checkpoint.h"
#include "runtime/compute/compute.h"
#include "runtime/exec/data.h"
#include "runtime/compute/nnet.h"
#include "runtime/compute/solver.h"
#include "runtime/exec/textgen.h"
#include "runtime/exec/train.h"
#include "core/outfile.h"

static void train_usage(FILE *f)
{
    fprintf(f,
            "usage: poseidon train --model FILE [options]\n\n"
            "Train a network on one worker and print, per epoch, the mean training loss, the\n"
            "training accuracy (on the training batches, in training mode), the test accuracy\n"
            "and the training throughput.\n\n"
            "  --model FILE        network description (models/NAME.net)\n"
            "  --data D            fashion-mnist (default), fortunes (character-level text,\n"
            "                      for a model with a tokens input) or synthetic\n"
            "  --data-dir DIR      IDX files (default " DATA_FASHION_MNIST_DIR "), or the\n"
            "                      text's folder (default " DATA_FORTUNES_DIR ")\n"
            "  --sample N          after training, print N characters the model writes\n"
            "  --epochs E          epochs to run in total (default 5)\n"
            "  --batch K           samples per step (default 64)\n"
            "  --lr X              base learning rate (default 0.01)\n"
            "  --momentum X        (default 0.9)\n"
            "  --weight-decay X    on weights, not biases (default 0.0005)\n"
            "  --lr-policy P       fixed (default), step or poly\n"
            "  --lr-gamma X        step: factor per --lr-step iterations (default 0.1)\n"
            "  --lr-step N         step: iterations per decay (default: 2 epochs)\n"
            "  --lr-power X        poly: exponent (default 1); runs to the last iteration\n"
            "  --init I            auto (default: He before a ReLU, else Xavier), xavier, he\n"
            "  --seed S            initialisation, shuffling, dropout (default 1)\n"
            "  --limit N           use only the first N training samples\n"
            "  --threads T         BLAS threads (default 1; 0: all CPUs; OPENBLAS_NUM_THREADS,\n"
            "                      if set, wins)\n"
            "  --device D          cpu (default) or cuda\n"
            "  --csv FILE          per-epoch rows: epoch,loss,train_acc,test_acc,images_per_s\n"
            "  --checkpoint FILE   write the state after every epoch (atomically)\n"
            "  --resume FILE       start from a checkpoint (its epoch count and parameters)\n"
            "  --job-out FILE      write the job it ran as an experiment (default\n"
            "                      out/runs/MODEL-DATE-TIME.exp; 'none': nowhere)\n\n"
            "Distributed: poseidon train EXPERIMENT, --workers N, or a rank from\n"
            "mpirun/srun/RANK; see poseidon train --workers 2 --help for its options.\n");
}

typedef struct {
    bool tty;
    int epoch;
} progress_t;

static void show_progress(int step, int steps, double loss, void *arg)
{
    progress_t *p = arg;
    if (!p->tty || (step % 10 && step != steps)) return;
    fprintf(stderr, "\r  epoch %d  step %d/%d  loss %.4f ", p->epoch, step, steps, loss);
    if (step == steps) fputs("\r\033[K", stderr);
}

/* true when the run is distributed: an experiment file, --set, --workers, or a rank given by
 * a launcher. */
static bool train_is_distributed(int argc, char **argv)
{
    if (argc > 1 && argv[1][0] != '-') return true;
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--workers") || !strcmp(argv[i], "--set")) return true;
    return getenv("RANK") || getenv("OMPI_COMM_WORLD_RANK") || getenv("SLURM_PROCID");
}

int cmd_train(int argc, char **argv)
{
    if (train_is_distributed(argc, argv)) return cmd_train_distributed(argc, argv);
    const char *model_path = NULL, *data = "fashion-mnist", *data_dir = NULL, *csv_path = NULL;
    const char *job_out = NULL;
    const char *ckpt_path = NULL, *resume_path = NULL, *device = "cpu";
    /* One BLAS thread unless asked: on a machine whose cores are shared (other jobs, or the
     * workers of an emulated cluster), a second OpenBLAS thread waits for a core and spins
     * meanwhile; measured on the 2-core dev machine under load, MLP fc1 forward at batch 64
     * took 7.9 ms with 2 threads and 0.30 ms with 1. */
    int epochs = 5, batch = 64, limit = 0, threads = 1, sample = 0;
    long long seed = 1, lr_step = 0;
    solver_config_t sc = {.lr = 0.01, .momentum = 0.9, .weight_decay = 5e-4,
                          .policy = LR_FIXED, .gamma = 0.1, .power = 1.0};
    init_kind_t init = INIT_AUTO;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            train_usage(stdout);
            return 0;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "poseidon train: unknown option or missing value: '%s'\n", a);
            return 2;
        }
        const char *v = argv[++i];
        int rc = 0;
        if (!strcmp(a, "--model")) model_path = v;
        else if (!strcmp(a, "--data")) data = v;
        else if (!strcmp(a, "--data-dir")) data_dir = v;
        else if (!strcmp(a, "--csv")) csv_path = v;
        else if (!strcmp(a, "--job-out")) job_out = v;
        else if (!strcmp(a, "--checkpoint")) ckpt_path = v;
        else if (!strcmp(a, "--resume")) resume_path = v;
        else if (!strcmp(a, "--device")) device = v;
        else if (!strcmp(a, "--epochs")) rc = flag_int32("train", a, v, 1, 1 << 20, &epochs);
        else if (!strcmp(a, "--batch")) rc = flag_int32("train", a, v, 1, 1 << 20, &batch);
        else if (!strcmp(a, "--seed")) rc = flag_int("train", a, v, 0, 1LL << 62, &seed);
        else if (!strcmp(a, "--limit")) rc = flag_int32("train", a, v, 0, 1 << 30, &limit);
        else if (!strcmp(a, "--sample")) rc = flag_int32("train", a, v, 0, 1 << 20, &sample);
        else if (!strcmp(a, "--threads")) rc = flag_int32("train", a, v, 0, 4096, &threads);
        else if (!strcmp(a, "--lr")) rc = flag_double("train", a, v, 1e-12, 1e6, &sc.lr);
        else if (!strcmp(a, "--momentum")) rc = flag_double("train", a, v, 0, 1e6, &sc.momentum);
        else if (!strcmp(a, "--weight-decay"))
            rc = flag_double("train", a, v, 0, 1e6, &sc.weight_decay);
        else if (!strcmp(a, "--lr-gamma")) rc = flag_double("train", a, v, 0, 1e6, &sc.gamma);
        else if (!strcmp(a, "--lr-step")) rc = flag_int("train", a, v, 1, 1LL << 40, &lr_step);
        else if (!strcmp(a, "--lr-power")) rc = flag_double("train", a, v, 0, 1e6, &sc.power);
        else if (!strcmp(a, "--lr-policy")) {
            if (solver_policy_parse(v, &sc.policy)) {
                fprintf(stderr, "poseidon train: --lr-policy is fixed, step or poly, not '%s'\n",
                        v);
                return 2;
            }
        } else if (!strcmp(a, "--init")) {
            if (!strcmp(v, "auto")) init = INIT_AUTO;
            else if (!strcmp(v, "xavier")) init = INIT_XAVIER;
            else if (!strcmp(v, "he")) init = INIT_HE;
            else {
                fprintf(stderr, "poseidon train: --init is auto, xavier or he, not '%s'\n", v);
                return 2;
            }
        } else {
            fprintf(stderr, "poseidon train: unknown option '%s' (--help lists them)\n", a);
            return 2;
        }
        if (rc) return 2;
    }
    if (!model_path) {
        train_usage(stderr);
        return 2;
    }
    if (epochs < 1 || batch < 1 || limit < 0 || sc.lr <= 0) {
        fprintf(stderr, "poseidon train: --epochs and --batch must be >= 1, --lr > 0\n");
        return 2;
    }
    log_banner(argc, argv, (uint64_t)seed);

    char err[1024];
    compute_kind_t kind;
    if (compute_kind_parse(device, &kind)) {
        fprintf(stderr, "poseidon train: --device is cpu or cuda, not '%s'\n", device);
        return 2;
    }
    model_t m;
    if (model_load(&m, model_path, err, sizeof err)) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    dataset_t train, test;
    if (!strcmp(data, "fashion-mnist")) {
        if (data_load_fashion_mnist(data_dir, &train, &test, err, sizeof err)) {
            fprintf(stderr, "poseidon train: %s\n", err);
            model_fini(&m);
            return 1;
        }
    } else if (!strcmp(data, "fortunes")) {
        if (data_load_text(data_dir, m.layers[0].out_shape.w, &train, &test, err, sizeof err)) {
            fprintf(stderr, "poseidon train: %s\n", err);
            model_fini(&m);
            return 1;
        }
        log_info("%s: %d training windows of %d characters; unigram entropy of the text %.4f "
                 "nats per character", data_dir ? data_dir : DATA_FORTUNES_DIR, train.n,
                 train.labels, data_unigram_entropy(&train));
    } else if (!strcmp(data, "synthetic")) {
        int classes = 0;
        for (int i = 0; i < m.n_layers; i++)
            if (m.layers[i].type == LAYER_SOFTMAX_LOSS)
                classes = (int)shape_count(m.layers[m.layers[i].inputs[0]].out_shape);
        int n = limit > 0 ? (int)limit : 8 * (int)batch;
        data_synthetic(&train, m.layers[0].out_shape, classes > 0 ? classes : 1, n,
                       (uint64_t)seed);
        data_synthetic(&test, m.layers[0].out_shape, classes > 0 ? classes : 1, (int)batch,
                       (uint64_t)seed + 1);
    } else {
        fprintf(stderr, "poseidon train: --data is fashion-mnist, fortunes or synthetic, not '%s'\n",
                data);
        model_fini(&m);
        return 2;
    }
    if (limit > 0 && limit < train.n) data_truncate(&train, (int)limit);
    int rc = 1;
    compute_t *c = NULL;
    nnet_t *net = NULL;
    solver_t *solver = NULL;
    FILE *csv = NULL;
    unsigned char *rng_state = NULL;
    if (train_check_model(&m, &train, err, sizeof err)) {
        fprintf(stderr, "poseidon train: %s\n", err);
        goto out;
    }
    if (train.n < batch) {
        fprintf(stderr, "poseidon train: %d training samples, fewer than one batch of %d\n",
                train.n, (int)batch);
        goto out;
    }
    c = compute_new(kind, (int)threads, err, sizeof err);
    if (!c) {
        fprintf(stderr, "poseidon train: --device %s: %s\n", device, err);
        goto out;
    }
    net = nnet_new(&m, (int)batch, c, (uint64_t)seed, err, sizeof err);
    if (!net) {
        fprintf(stderr, "poseidon train: %s\n", err);
        goto out;
    }
    int steps = train.n / (int)batch;
    sc.step_iters = lr_step > 0 ? (int64_t)lr_step : 2 * (int64_t)steps;
    sc.max_iters = (int64_t)epochs * steps;
    solver = solver_new(&sc, nnet_arena(net));
    solver_init_params(&m, nnet_arena(net), init, (uint64_t)seed);
    checkpoint_meta_t meta = {.epoch = 0, .iter = 0, .seed = (uint64_t)seed};
    if (ckpt_path) ckpt_remove_stale(ckpt_path);
    size_t rng_bytes = nnet_rng_state_bytes(net);
    rng_state = xcalloc(1, rng_bytes + 1);
    if (resume_path) {
        if (checkpoint_load(resume_path, &m, nnet_arena(net), solver_history(solver), rng_state,
                            rng_bytes, &meta, err, sizeof err)) {
            fprintf(stderr, "poseidon train: --resume: %s\n", err);
            goto out;
        }
        nnet_rng_state_restore(net, rng_state);
        log_info("resumed from %s after epoch %lld (iteration %lld)", resume_path,
                 (long long)meta.epoch, (long long)meta.iter);
    }
    if (csv_path) {
        csv = outfile_open(csv_path, meta.epoch > 0 ? "a" : "w");
        if (!csv) {
            fprintf(stderr, "poseidon train: %s: cannot open: %s\n", csv_path, strerror(errno));
            goto out;
        }
        /* a resumed run continues the table of the run it resumes; a new file gets a header */
        if (meta.epoch == 0 || ftell(csv) == 0)
            fprintf(csv, "epoch,loss,train_acc,test_acc,images_per_s\n");
    }
    log_info("%s: %lld parameters, %d training / %d test samples, batch %d, %s, lr %g",
             m.name, (long long)nnet_arena(net)->count, train.n, test.n, (int)batch,
             compute_kind_name(kind), sc.lr);
    printf("epoch,loss,train_acc,test_acc,images_per_s\n");
    progress_t prog = {.tty = log_is_tty()};
    int64_t iter = meta.iter;
    for (int e = (int)meta.epoch; e < (int)epochs; e++) {
        train_epoch_stats_t st;
        prog.epoch = e + 1;
        train_epoch(net, solver, &train, 0, train.n, e, (uint64_t)seed, &iter, &st,
                    show_progress, &prog);
        double test_acc = train_evaluate(net, &test);
        double ips = st.seconds > 0 ? st.images / st.seconds : 0;
        printf("%d,%.6f,%.4f,%.4f,%.1f\n", e + 1, st.loss, st.train_acc, test_acc, ips);
        fflush(stdout);
        if (csv) {
            fprintf(csv, "%d,%.6f,%.4f,%.4f,%.1f\n", e + 1, st.loss, st.train_acc, test_acc, ips);
            fflush(csv);
        }
        if (ckpt_path) {
            checkpoint_meta_t now = {.epoch = e + 1, .iter = iter, .seed = (uint64_t)seed};
            nnet_rng_state_save(net, rng_state);
            if (checkpoint_save(ckpt_path, &m, nnet_arena(net), solver_history(solver),
                                rng_state, rng_bytes, &now, err, sizeof err)) {
                fprintf(stderr, "poseidon train: %s\n", err);
                goto out;
            }
        }
    }
    if (sample > 0) {
        size_t cap = (size_t)sample + 2;
        char *text = xmalloc(cap);
        if (textgen_sample(net, "", (int)sample, 0.8, (uint64_t)seed, text, cap, err,
                           sizeof err)) {
            fprintf(stderr, "poseidon train: --sample: %s\n", err);
            free(text);
            goto out;
        }
        printf("# %d characters it writes (temperature 0.8):\n%s\n", sample,
               text + 1);
        free(text);
    }
    rc = 0;
    if (!job_out || strcmp(job_out, "none")) {
        char path[1024];
        if (!job_out) job_out_default(model_path, path, sizeof path);
        else snprintf(path, sizeof path, "%s", job_out);
        /* the job as the simulator reads it: one node, this run's batch, iterations, data
         * and SGD keys */
        experiment_t *e = xmalloc(sizeof *e);
        experiment_defaults(e);
        snprintf(e->model_path, sizeof e->model_path, "%s", model_path);
        e->batch = batch;
        e->iterations = iter > 0 && iter <= INT32_MAX ? (int)iter : 1;
        e->warmup = 1;
        e->seed = (uint64_t)seed;
        snprintf(e->train.data, sizeof e->train.data, "%s", data);
        if (data_dir) snprintf(e->train.data_dir, sizeof e->train.data_dir, "%s", data_dir);
        e->train.limit = limit;
        e->train.lr = sc.lr;
        e->train.momentum = sc.momentum;
        e->train.weight_decay = sc.weight_decay;
        e->train.probe = PROBE_NO;
        cluster_t cl;
        plan_opts_t po;
        job_config(e, 0, NULL, &cl, &po);
        FILE *f = outfile_open(path, "w");
        if (!f || experiment_write(e, 0, &cl, "The job a single-worker run of poseidon train "
                                              "executed: poseidon sim on this file simulates "
                                              "it on the cluster's device.", f) ||
            fclose(f)) {
            fprintf(stderr, "poseidon train: cannot write the job to %s: %s\n", path,
                    strerror(errno));
            rc = 1;
        }
        free(e);
    }
out:
    if (csv && fclose(csv)) rc = 1;
    free(rng_state);
    solver_destroy(&solver);
    nnet_destroy(&net);
    compute_destroy(&c);
    data_fini(&train);
    data_fini(&test);
    model_fini(&m);
    return rc;
}
