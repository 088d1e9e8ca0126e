/* Training tests: one epoch on a Fashion-MNIST subset reaches a loss threshold, identically
 * for a seed; a checkpoint/resume run equals an uninterrupted one; a corrupted checkpoint is
 * refused; the CLI names a missing data file. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/check.h"
#include "core/job.h"
#include "core/model.h"
#include "runtime/exec/checkpoint.h"
#include "runtime/exec/worker.h"
#include "tests/bsp_ref.h"
#include "tests/exp_fixture.h"
#include "runtime/exec/train.h"
#include "test.h"

static const char *s_mlp = "input data shape=1x28x28\nfc fc1 out=64\nrelu r1\nfc fc2 out=10\n"
                           "softmax_loss loss\n";

typedef struct {
    model_t m;
    compute_t *c;
    nnet_t *n;
    solver_t *s;
} rig_t;

static void rig_init(rig_t *r, uint64_t seed)
{
    char err[256];
    ASSERT(model_parse(&r->m, "mlp.net", s_mlp, strlen(s_mlp), err, sizeof err) == 0, "%s", err);
    r->c = compute_new(COMPUTE_CPU, 1, err, sizeof err);
    r->n = nnet_new(&r->m, 32, r->c, seed, err, sizeof err);
    solver_config_t cfg = {.lr = 0.05, .momentum = 0.9, .weight_decay = 1e-4};
    r->s = solver_new(&cfg, nnet_arena(r->n));
    solver_init_params(&r->m, nnet_arena(r->n), INIT_AUTO, seed);
}

static void rig_fini(rig_t *r)
{
    solver_destroy(&r->s);
    nnet_destroy(&r->n);
    compute_destroy(&r->c);
    model_fini(&r->m);
}

static int load_subset(dataset_t *tr, dataset_t *te, int n)
{
    char err[512];
    if (data_load_fashion_mnist(NULL, tr, te, err, sizeof err)) return -1;
    data_truncate(tr, n);
    data_truncate(te, 1000);
    return 0;
}

TEST(test_train_epoch_reaches_loss_deterministically)
{
    dataset_t tr, te;
    if (load_subset(&tr, &te, 4000)) SKIP("Fashion-MNIST not installed (make deps)");
    double loss[2], acc = 0;
    float first_param[2];
    for (int run = 0; run < 2; run++) {
        rig_t r;
        rig_init(&r, 5);
        int64_t iter = 0;
        train_epoch_stats_t st;
        train_epoch(r.n, r.s, &tr, 0, tr.n, 0, 5, &iter, &st, NULL, NULL);
        loss[run] = st.loss;
        first_param[run] = nnet_arena(r.n)->params[0];
        CHECK_EQ_I64(iter, 4000 / 32);
        if (run == 0) acc = train_evaluate(r.n, &te);
        rig_fini(&r);
    }
    /* chance level is a loss of ln 10 = 2.30 and an accuracy of 0.1 */
    CHECK(loss[0] < 1.0, "epoch loss %g", loss[0]);
    CHECK(acc > 0.70, "test accuracy %g", acc);
    CHECK(loss[0] == loss[1] && first_param[0] == first_param[1], "not deterministic");
    data_fini(&tr);
    data_fini(&te);
}

TEST(test_train_checkpoint_resume_round_trip)
{
    dataset_t tr, te;
    data_synthetic(&tr, (shape_t){1, 28, 28}, 10, 256, 3);
    data_synthetic(&te, (shape_t){1, 28, 28}, 10, 32, 4);
    char path[512], err[512];
    snprintf(path, sizeof path, "%s/ck.bin", test_tmpdir());
    /* two epochs straight */
    rig_t a;
    rig_init(&a, 9);
    int64_t it = 0;
    train_epoch_stats_t st;
    train_epoch(a.n, a.s, &tr, 0, tr.n, 0, 9, &it, &st, NULL, NULL);
    train_epoch(a.n, a.s, &tr, 0, tr.n, 1, 9, &it, &st, NULL, NULL);
    /* one epoch, checkpoint, a fresh replica resumes for the second */
    rig_t b;
    rig_init(&b, 9);
    int64_t itb = 0;
    train_epoch(b.n, b.s, &tr, 0, tr.n, 0, 9, &itb, &st, NULL, NULL);
    checkpoint_meta_t meta = {.epoch = 1, .iter = itb, .seed = 9};
    REQUIRE(checkpoint_save(path, &b.m, nnet_arena(b.n), solver_history(b.s), NULL, 0, &meta,
                            err, sizeof err) == 0, "%s", err);
    rig_fini(&b);
    rig_t c;
    rig_init(&c, 123); /* different init: everything must come from the file */
    checkpoint_meta_t got;
    REQUIRE(checkpoint_load(path, &c.m, nnet_arena(c.n), solver_history(c.s), NULL, 0, &got,
                            err, sizeof err) == 0, "%s", err);
    CHECK_EQ_I64(got.epoch, 1);
    CHECK_EQ_I64(got.iter, itb);
    int64_t itc = got.iter;
    train_epoch(c.n, c.s, &tr, 0, tr.n, 1, 9, &itc, &st, NULL, NULL);
    CHECK(memcmp(nnet_arena(a.n)->params, nnet_arena(c.n)->params,
                 (size_t)nnet_arena(a.n)->count * sizeof(float)) == 0,
          "resumed run differs from the uninterrupted one");
    /* a byte appended, and one taken away, are caught */
    char out[256];
    int sh = test_run(out, sizeof out, "cp %s %s.orig && printf x >>%s", path, path, path);
    REQUIRE(sh == 0);
    CHECK(checkpoint_load(path, &c.m, nnet_arena(c.n), solver_history(c.s), NULL, 0, &got, err,
                          sizeof err) == -1 && strstr(err, "bytes after the checksum"), "%s", err);
    sh = test_run(out, sizeof out, "head -c -2 %s.orig >%s", path, path);
    REQUIRE(sh == 0);
    CHECK(checkpoint_load(path, &c.m, nnet_arena(c.n), solver_history(c.s), NULL, 0, &got, err,
                          sizeof err) == -1 && strstr(err, "truncated"), "%s", err);
    sh = test_run(out, sizeof out, "cp %s.orig %s", path, path);
    REQUIRE(sh == 0);
    /* one flipped byte is caught */
    FILE *f = fopen(path, "r+b");
    fseek(f, 300, SEEK_SET);
    int ch = fgetc(f);
    fseek(f, 300, SEEK_SET);
    fputc(ch ^ 0x40, f);
    fclose(f);
    CHECK(checkpoint_load(path, &c.m, nnet_arena(c.n), solver_history(c.s), NULL, 0, &got, err,
                          sizeof err) == -1);
    CHECK(strstr(err, "checksum"), "message: %s", err);
    rig_fini(&a);
    rig_fini(&c);
    data_fini(&tr);
    data_fini(&te);
}

TEST(test_train_cli_missing_data_and_synthetic)
{
    char out[8192];
    int rc = test_run(out, sizeof out, "%s/poseidon train --model models/mlp.net --data-dir "
                      "/nonexistent --epochs 1", test_build_dir());
    CHECK(rc == 1, "exit %d: %s", rc, out);
    CHECK(strstr(out, "/nonexistent/train-images-idx3-ubyte.gz"), "output: %s", out);
    char csv[512];
    snprintf(csv, sizeof csv, "%s/t.csv", test_tmpdir());
    rc = test_run(out, sizeof out, "%s/poseidon train --model models/cifar10-quick.net --data "
                  "synthetic --limit 64 --batch 16 --epochs 1 --csv %s", test_build_dir(), csv);
    CHECK(rc == 0, "exit %d: %s", rc, out);
    FILE *f = fopen(csv, "r");
    REQUIRE(f, "no csv");
    char line[256];
    CHECK(fgets(line, sizeof line, f) &&
          !strcmp(line, "epoch,loss,train_acc,test_acc,images_per_s\n"));
    CHECK(fgets(line, sizeof line, f) && !strncmp(line, "1,", 2), "row: %s", line);
    fclose(f);
}

/* `poseidon train` killed after epoch 1 and resumed ends with the checkpoint, bit for bit,
 * of the run that never stopped (LeNet: dropout's random state is in the checkpoint), and the
 * resumed --csv continues the same table; a resume with another learning rate is refused
 * unless --resume-changed says so; a checkpoint with a byte appended is refused. */
TEST(test_train_cli_resume_is_bit_exact)
{
    const char *d = test_tmpdir(), *bin = test_build_dir();
    char out[8192];
    const char *job = "train --model models/lenet.net --data synthetic --limit 256 --batch 32 "
                      "--job-out none";
    int rc = test_run(out, sizeof out, "%s/poseidon %s --epochs 2 --checkpoint %s/a.ck --csv %s/a.csv",
                      bin, job, d, d);
    REQUIRE(rc == 0, "straight run: %s", out);
    rc = test_run(out, sizeof out, "%s/poseidon %s --epochs 1 --checkpoint %s/b.ck --csv %s/b.csv",
                  bin, job, d, d);
    REQUIRE(rc == 0, "first half: %s", out);
    rc = test_run(out, sizeof out,
                  "%s/poseidon %s --epochs 2 --resume %s/b.ck --checkpoint %s/b.ck --csv %s/b.csv",
                  bin, job, d, d, d);
    REQUIRE(rc == 0, "resumed half: %s", out);
    rc = test_run(out, sizeof out, "cmp %s/a.ck %s/b.ck", d, d);
    CHECK(rc == 0, "the resumed run's checkpoint differs: %s", out);
    rc = test_run(out, sizeof out, "cut -d, -f1-4 %s/a.csv >%s/a4 && cut -d, -f1-4 %s/b.csv >%s/b4 "
                  "&& cmp %s/a4 %s/b4 && grep -c epoch %s/b.csv", d, d, d, d, d, d, d);
    CHECK(rc == 0 && atoi(out) == 1, "the resumed CSV is not the same table: %s", out);
    /* a resume with another learning rate is refused, naming it, unless asked for */
    rc = test_run(out, sizeof out, "%s/poseidon %s --epochs 3 --lr 0.5 --resume %s/a.ck", bin,
                  job, d);
    CHECK(rc != 0 && strstr(out, "lr (0.01 in the checkpoint, 0.5 now)") &&
              strstr(out, "--resume-changed lr"), "another lr: exit %d: %s", rc, out);
    rc = test_run(out, sizeof out, "%s/poseidon %s --epochs 3 --lr 0.5 --resume-changed lr "
                  "--resume %s/a.ck", bin, job, d);
    CHECK(rc == 0, "another lr, asked for: exit %d: %s", rc, out);
    rc = test_run(out, sizeof out, "printf x >>%s/b.ck && %s/poseidon %s --epochs 3 --resume %s/b.ck",
                  d, bin, job, d);
    CHECK(rc != 0 && strstr(out, "bytes after the checksum"), "appended byte: exit %d: %s", rc, out);
}

/* ---- one door: the single worker's knobs are job keys --------------------------------- */

/* The single worker's keys round-trip through a written job, and a bad value is refused
 * naming the key. */
TEST(test_train_job_keys_round_trip)
{
    experiment_t *e = xmalloc(sizeof *e), *back = xmalloc(sizeof *back);
    experiment_defaults(e);
    fixture_set(e, "model=models/mlp.net");
    fixture_set(e, "lr_policy=poly");
    fixture_set(e, "lr_gamma=0.25");
    fixture_set(e, "lr_step=17");
    fixture_set(e, "lr_power=2.5");
    fixture_set(e, "init=he");
    fixture_set(e, "sample=40");
    fixture_set(e, "data=fortunes");
    char path[600], err[2048];
    snprintf(path, sizeof path, "%s/keys.exp", test_tmpdir());
    cluster_t c;
    plan_opts_t po;
    job_config(e, 0, NULL, &c, &po);
    FILE *f = fopen(path, "w");
    REQUIRE(f && experiment_write(e, 0, &c, NULL, f) == 0 && fclose(f) == 0);
    REQUIRE(experiment_load(back, path, err, sizeof err) == 0, "%s", err);
    const experiment_train_t *t = &back->train;
    CHECK(t->lr_policy == EXP_LR_POLY && t->lr_gamma == 0.25 && t->lr_step == 17 &&
              t->lr_power == 2.5 && t->init == EXP_INIT_HE && t->sample == 40 &&
              !strcmp(t->data, "fortunes"),
          "the keys read back differ");
    solver_config_t sc = train_solver_config(back, 10, 30);
    CHECK(sc.policy == LR_POLY && sc.gamma == 0.25 && sc.step_iters == 17 && sc.power == 2.5 &&
              sc.max_iters == 30, "the solver of the job");
    CHECK(train_init_kind(back) == INIT_HE);
    static const char *const bad[] = {"lr_policy=exp", "init=zeros", "lr_step=-1",
                                      "sample=x", "lr_gamma=-0.1"};
    for (int i = 0; i < 5; i++) {
        int rc = experiment_override_as(back, bad[i], "--flag", err, sizeof err);
        char key[32];
        snprintf(key, sizeof key, "%.*s", (int)strcspn(bad[i], "="), bad[i]);
        CHECK(rc == -1 && strstr(err, key) && !strncmp(err, "--flag", 6), "%s: %s", bad[i], err);
    }
    free(e);
    free(back);
}

/* A single-worker run writes its job with every knob, and `poseidon train` on that file runs
 * the same thing again: the same rows and the same job. */
TEST(test_train_cli_written_job_runs_again)
{
    const char *d = test_tmpdir(), *bin = test_build_dir();
    char out[8192], cmd[1024];
    snprintf(cmd, sizeof cmd, "%s/poseidon train --model models/mlp.net --data synthetic "
             "--limit 256 --batch 32 --epochs 2 --lr-policy step --lr-step 3 --lr-gamma 0.5 "
             "--init xavier --seed 7", bin);
    int rc = test_run(out, sizeof out, "%s --job-out %s/a.exp 2>/dev/null | cut -d, -f1-4 "
                      ">%s/a.rows", cmd, d, d);
    REQUIRE(rc == 0, "first run: %s", out);
    rc = test_run(out, sizeof out, "grep -q '^lr_policy = step$' %s/a.exp && grep -q "
                  "'^lr_step = 3$' %s/a.exp && grep -q '^init = xavier$' %s/a.exp && grep -q "
                  "'^iterations = 16$' %s/a.exp", d, d, d, d);
    CHECK(rc == 0, "the written job lacks a knob");
    rc = test_run(out, sizeof out, "%s/poseidon train %s/a.exp --job-out %s/b.exp 2>/dev/null | "
                  "cut -d, -f1-4 >%s/b.rows && cmp %s/a.rows %s/b.rows && cmp %s/a.exp %s/b.exp",
                  bin, d, d, d, d, d, d, d);
    CHECK(rc == 0, "the written job ran differently: %s", out);
    /* the comparison can fail: another policy gives other rows */
    rc = test_run(out, sizeof out, "%s/poseidon train %s/a.exp --set lr_policy=fixed --job-out "
                  "none 2>/dev/null | cut -d, -f1-4 | cmp -s - %s/a.rows", bin, d, d);
    CHECK(rc != 0, "a fixed rate gave the step policy's rows");
}

/* The options: every subcommand answers --help with 0, an unknown option or a missing
 * value is one line naming it and exit 2, an option only the workers have is refused on one
 * worker, and a step policy on several workers is refused. */
TEST(test_train_cli_options)
{
    const char *bin = test_build_dir();
    char out[8192];
    static const char *const cmds[] = {"train", "sim", "plan", "model", "model show", "profile",
                                       "keygen", "comm-test", "report"};
    for (int i = 0; i < 9; i++) {
        int rc = test_run(out, sizeof out, "%s/poseidon %s --help >/dev/null && %s/poseidon %s "
                          "-h >/dev/null", bin, cmds[i], bin, cmds[i]);
        CHECK(rc == 0, "%s --help: exit %d: %s", cmds[i], rc, out);
    }
    int rc = test_run(out, sizeof out, "%s/poseidon train --model models/mlp.net --bogus 1",
                      bin);
    int lines = 0;
    for (const char *c = out; *c; c++) lines += *c == '\n';
    CHECK(rc == 2 && strstr(out, "unknown option '--bogus'") && lines == 1, "%d: %s", rc, out);
    rc = test_run(out, sizeof out, "%s/poseidon sim x.exp --csv", bin);
    CHECK(rc == 2 && strstr(out, "--csv needs a value"), "%d: %s", rc, out);
    rc = test_run(out, sizeof out, "%s/poseidon train --model models/mlp.net --batch", bin);
    CHECK(rc == 2 && strstr(out, "--batch needs a value"), "%d: %s", rc, out);
    rc = test_run(out, sizeof out, "%s/poseidon train --model models/mlp.net --trace t", bin);
    CHECK(rc == 2 && strstr(out, "--trace is for the distributed workers"), "%d: %s", rc, out);
    rc = test_run(out, sizeof out, "%s/poseidon train --workers 2 --model models/mlp.net "
                  "--sample 10 --data synthetic --iterations 1", bin);
    CHECK(rc == 2 && strstr(out, "sample runs on one worker"), "%d: %s", rc, out);
    rc = test_run(out, sizeof out, "%s/poseidon train --model models/mlp.net --init zeros", bin);
    CHECK(rc == 2 && strstr(out, "--init: expected init = auto | xavier | he"), "%d: %s", rc,
          out);
}

/* CPU devices of a node share the host's memory: two per node need no interconnect key, and
 * the job written plans on the host-memory link, which poseidon sim reads. */
TEST(test_train_cli_cpu_devices_need_no_interconnect)
{
    const char *d = test_tmpdir(), *bin = test_build_dir();
    char out[16384];
    int rc = test_run(out, sizeof out, "%s/poseidon train --workers 1 --model models/mlp.net "
                      "--devices-per-node 2 --data synthetic --iterations 2 --no-eval "
                      "--job-out %s/d.exp", bin, d);
    REQUIRE(rc == 0, "exit %d: %s", rc, out);
    rc = test_run(out, sizeof out, "grep -q '^cluster.intra_gbps = 56$' %s/d.exp && "
                  "%s/poseidon sim %s/d.exp --csv - 2>/dev/null | grep -q '^mlp,1,'", d, bin, d);
    CHECK(rc == 0, "the written job: %s", out);
    /* elsewhere the interconnect stays required: the check is still there */
    char path[600];
    snprintf(path, sizeof path, "%s/e.exp", d);
    fixture_write_file(path, fixture_exp_text("mlp", ""));
    rc = test_run(out, sizeof out, "%s/poseidon plan %s --set cluster.devices_per_node=2", bin,
                  path);
    CHECK(rc != 0 && strstr(out, "expected an interconnect"), "%d: %s", rc, out);
}

/* ---- a character-level transformer on text -------------------------------------------- */

/* A decoder with a tied output layer, small enough for a few distributed steps in a test. */
static const char *s_tiny_decoder =
    "tokens ids seq=16 vocab=96\nembed wte vocab=96 dim=16\nposembed wpe\n"
    "layernorm ln1\nlinear q out=16\nlinear k out=16 in=ln1\nlinear v out=16 in=ln1\n"
    "attention attn heads=2 causal=1 in=q,k,v\nlinear proj out=16\nadd res1 in=proj,wpe\n"
    "layernorm ln2\nlinear fc out=32\ngelu act approx=tanh\nlinear fc2 out=16\n"
    "add res2 in=fc2,res1\nlayernorm ln_f\nlinear head out=96 bias=0 tie=wte\nseq_loss loss\n";

static bool have_fortunes(void)
{
    dataset_t tr, te;
    char err[512];
    if (data_load_text(NULL, 16, &tr, &te, err, sizeof err)) return false;
    data_fini(&tr);
    data_fini(&te);
    return true;
}

TEST(test_train_text_windows_and_unigram_entropy)
{
    if (!have_fortunes()) SKIP("fortunes-min not installed (make deps)");
    dataset_t tr, te;
    char err[512];
    REQUIRE(data_load_text(NULL, 64, &tr, &te, err, sizeof err) == 0, "%s", err);
    CHECK(tr.labels == 64 && tr.classes == DATA_TEXT_VOCAB && tr.shape.w == 64);
    CHECK(te.n == (tr.n + te.n) / 10, "a tenth for test: %d of %d", te.n, tr.n + te.n);
    /* a label is the next input: window i's labels are its inputs shifted by one */
    for (int i = 0; i < tr.n; i++)
        for (int p = 0; p + 1 < 64; p++)
            if (tr.y[i * 64 + p] != (int)tr.x[i * 64 + p + 1]) {
                CHECK(0, "window %d position %d: label %d, next input %g", i, p,
                      tr.y[i * 64 + p], (double)tr.x[i * 64 + p + 1]);
                i = tr.n;
                break;
            }
    double h = data_unigram_entropy(&tr);
    CHECK(h > 2.5 && h < log(DATA_TEXT_VOCAB), "unigram entropy %.4f nats", h);
    data_fini(&tr);
    data_fini(&te);
    CHECK(data_load_text("/nonexistent-dir", 64, &tr, &te, err, sizeof err) == -1);
    CHECK(strstr(err, "fortunes-min") != NULL, "%s", err);
}

/* Learning, measured: a few hundred steps of the tiny decoder take its loss on held-out
 * text well below the unigram entropy (what knowing character frequencies alone gives). */
TEST(test_train_char_decoder_beats_unigram_entropy)
{
    if (!have_fortunes()) SKIP("fortunes-min not installed (make deps)");
    char err[512];
    model_t m;
    REQUIRE(model_parse(&m, "tiny.net", s_tiny_decoder, strlen(s_tiny_decoder), err,
                        sizeof err) == 0, "%s", err);
    dataset_t tr, te;
    REQUIRE(data_load_text(NULL, 16, &tr, &te, err, sizeof err) == 0, "%s", err);
    REQUIRE(train_check_model(&m, &tr, err, sizeof err) == 0, "%s", err);
    compute_t *c = compute_new(COMPUTE_CPU, 1, err, sizeof err);
    nnet_t *n = nnet_new(&m, 32, c, 1, err, sizeof err);
    REQUIRE(n, "%s", err);
    solver_config_t sc = {.lr = 0.1, .momentum = 0.9, .weight_decay = 0, .policy = LR_FIXED};
    solver_t *s = solver_new(&sc, nnet_arena(n));
    solver_init_params(&m, nnet_arena(n), INIT_AUTO, 1);
    int64_t iter = 0;
    train_epoch_stats_t st;
    for (int e = 0; e < 2; e++) train_epoch(n, s, &tr, 0, tr.n, e, 1, &iter, &st, NULL, NULL);
    /* held-out loss */
    nnet_set_train(n, false);
    double loss = 0;
    int batches = te.n / 32;
    int *order = malloc(32 * sizeof *order);
    for (int b = 0; b < batches; b++) {
        for (int i = 0; i < 32; i++) order[i] = b * 32 + i;
        data_gather(&te, order, 32, nnet_input(n), nnet_labels(n));
        loss += nnet_forward(n) / batches;
    }
    double h = data_unigram_entropy(&te);
    printf("tiny decoder, %lld steps: held-out loss %.4f, unigram entropy %.4f nats\n",
           (long long)iter, loss, h);
    CHECK(loss < h - 0.3, "held-out loss %.4f not below the unigram entropy %.4f", loss, h);
    free(order);
    solver_destroy(&s);
    nnet_destroy(&n);
    compute_destroy(&c);
    data_fini(&tr);
    data_fini(&te);
    model_fini(&m);
}

/* Distributed BSP on the decoder equals one worker on the union of the batches, per scheme:
 * SFB sends factors of batch x 16 token rows for the linear layers, the tied output layer's
 * gradient joins its embedding's, which PS or all-reduce syncs. */
TEST(test_train_char_decoder_bsp_equals_one_worker)
{
    if (!have_fortunes()) SKIP("fortunes-min not installed (make deps)");
    char model_path[600];
    snprintf(model_path, sizeof model_path, "%s/tiny-decoder.net", test_tmpdir());
    FILE *f = fopen(model_path, "w");
    REQUIRE(f && fputs(s_tiny_decoder, f) >= 0 && fclose(f) == 0);
    const char *schemes[] = {"ps", "sfb+wfbp", "allreduce+wfbp", "hybrid"};
    for (int i = 0; i < 4; i++) {
        char out[700];
        snprintf(out, sizeof out, "%s/dec-%d", test_tmpdir(), i);
        worker_config_t c;
        worker_config_init(&c);
        experiment_t *j = &c.job;
        fixture_set(j, "scheme=%s", schemes[i]);
        fixture_set(j, "model=%s", model_path);
        fixture_set(j, "data=fortunes");
        fixture_set(j, "batch=4");
        fixture_set(j, "iterations=4");
        fixture_set(j, "kv_block_mb=0.0625");
        fixture_set(j, "lr=0.1");
        c.evaluate = false;
        c.timeout_ms = 20000;
        c.params_out = out;
        int rc = bsp_launch(&c, 4);
        REQUIRE(rc == 0, "%s on 4 workers: job exited %d", schemes[i], rc);
        char what[96];
        snprintf(what, sizeof what, "char decoder, %s on 4 workers", schemes[i]);
        double worst = bsp_check_run(&c, out, 4, j->iterations, what);
        printf("%s: worst parameter at %.3f of the tolerance\n", what, worst);
    }
}
