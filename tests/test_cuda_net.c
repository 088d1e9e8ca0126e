/* Whole networks on the CUDA backend against the same networks on the CPU: the same
 * parameters, input, labels and dropout masks; then every layer's output, every layer's
 * output gradient, every parameter gradient, the loss, and the parameters after three SGD
 * steps must agree within |gpu - cpu| <= atol + rtol |cpu| (atol 1e-4, rtol 1e-3: cuBLAS
 * sums in another order and nvcc contracts multiply-adds into FMAs; over three steps these
 * differences stay near float rounding). A failure prints the worst element and its layer.
 * Without a GPU (or a build without CUDA) each test says SKIP and why. */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/model.h"
#include "core/rng.h"
#include "runtime/compute/compute.h"
#include "runtime/compute/nnet.h"
#include "runtime/compute/solver.h"
#include "test.h"
#include "tests/gpu_fixture.h"

static const double s_atol = 1e-4, s_rtol = 1e-3;
static bool s_corrupt; /* the harness's own test corrupts one GPU weight */

/* Elements of got (device, brought back) outside the tolerance of ref (host); prints the
 * worst. */
static int compare(const char *what, const char *layer, compute_t *gpu, const float *got_dev,
                   const float *ref, int64_t n)
{
    if (n <= 0) return 0;
    float *got = malloc((size_t)n * sizeof *got);
    gpu->ops->download(gpu->ctx, got, got_dev, (size_t)n * sizeof *got);
    int bad = 0;
    int64_t worst = 0;
    double worst_excess = -DBL_MAX;
    for (int64_t i = 0; i < n; i++) {
        double err = fabs((double)got[i] - ref[i]), tol = s_atol + s_rtol * fabs(ref[i]);
        if (!(err <= tol)) bad++;
        double excess = isnan(err) ? DBL_MAX : err - tol;
        if (excess > worst_excess) worst_excess = excess, worst = i;
    }
    if (bad)
        fprintf(stderr, "    %s of %s: %d of %lld out of tolerance; worst [%lld]: gpu %.9g, cpu "
                        "%.9g\n",
                what, layer, bad, (long long)n, (long long)worst, got[worst], ref[worst]);
    free(got);
    return bad;
}

/* Runs the model on both backends; returns the number of mismatching elements. */
static int run_model(model_t *mp, int batch, compute_t *gpu)
{
    char err[256];
    model_t m = *mp;
    compute_t *cpu = compute_new(COMPUTE_CPU, 1, err, sizeof err);
    nnet_t *nc = nnet_new(&m, batch, cpu, 5, err, sizeof err);
    REQUIRE(nc, "%s", err);
    nnet_t *ng = nnet_new(&m, batch, gpu, 5, err, sizeof err);
    REQUIRE(ng, "%s", err);
    arena_t *ac = nnet_arena(nc), *ag = nnet_arena(ng);
    solver_init_params(&m, ac, INIT_AUTO, 9);
    solver_init_params(&m, ag, INIT_AUTO, 9); /* the same values, staged and sent */
    if (s_corrupt) { /* one weight off by 1%: the comparison must see it */
        float w;
        gpu->ops->download(gpu->ctx, &w, ag->params, sizeof w);
        w *= 1.01f;
        gpu->ops->upload(gpu->ctx, ag->params, &w, sizeof w);
    }
    rng_t *r = rng_new(17, 0);
    bool ids = m.layers[0].type == LAYER_TOKENS;
    int classes = 2;
    for (int i = 0; i < m.n_layers; i++)
        if (m.layers[i].type == LAYER_SOFTMAX_LOSS) classes = (int)nnet_out_count(nc, i);
        else if (m.layers[i].type == LAYER_SEQ_LOSS) classes = m.layers[i].in_shape.c;
    solver_config_t sc = {.lr = 0.05, .momentum = 0.9, .weight_decay = 1e-4, .policy = LR_FIXED};
    solver_t *sc_cpu = solver_new(&sc, ac), *sc_gpu = solver_new(&sc, ag);
    int bad = 0;
    for (int step = 0; step < 3 && !bad; step++) {
        float *xc = nnet_input(nc), *xg = nnet_input(ng);
        for (int64_t i = 0; i < nnet_out_count(nc, 0) * batch; i++)
            xc[i] = xg[i] = ids ? (float)rng_uint(r, (uint64_t)m.layers[0].vocab)
                                : (float)rng_gaussian(r, 1);
        int *lc = nnet_labels(nc), *lg = nnet_labels(ng);
        for (int i = 0; i < batch * nnet_label_count(nc); i++)
            lc[i] = lg[i] = (int)rng_uint(r, (uint64_t)classes);
        double loss_c = nnet_forward(nc), loss_g = nnet_forward(ng);
        if (!(fabs(loss_c - loss_g) <= s_atol + s_rtol * fabs(loss_c))) {
            fprintf(stderr, "    step %d: loss gpu %.9g, cpu %.9g\n", step, loss_g, loss_c);
            bad++;
        }
        nnet_backward(nc);
        nnet_backward(ng);
        for (int l = 1; l < m.n_layers; l++) {
            int64_t n = nnet_out_count(nc, l) * batch;
            bad += compare("output", m.layers[l].name, gpu, nnet_output(ng, l),
                           nnet_output(nc, l), n);
            bad += compare("output gradient", m.layers[l].name, gpu, nnet_doutput(ng, l),
                           nnet_doutput(nc, l), n);
            if (ac->layer_count[l] > 0)
                bad += compare("parameter gradient", m.layers[l].name, gpu,
                               ag->grads + ac->layer_offset[l], ac->grads + ac->layer_offset[l],
                               ac->layer_count[l]);
        }
        CHECK_EQ_I64(nnet_count_correct(ng), nnet_count_correct(nc));
        solver_step(sc_cpu, step);
        solver_step(sc_gpu, step);
        bad += compare("parameters after the step", "the net", gpu, ag->params, ac->params,
                       ac->count);
        bad += compare("state after the step", "the net", gpu, ag->state, ac->state,
                       ac->state_count);
    }
    /* evaluation mode: running batch-norm statistics, dropout off */
    nnet_set_train(nc, false);
    nnet_set_train(ng, false);
    double ec = nnet_forward(nc), eg = nnet_forward(ng);
    if (!(fabs(ec - eg) <= s_atol + s_rtol * fabs(ec))) {
        fprintf(stderr, "    evaluation loss gpu %.9g, cpu %.9g\n", eg, ec);
        bad++;
    }
    solver_destroy(&sc_cpu);
    solver_destroy(&sc_gpu);
    rng_destroy(&r);
    nnet_destroy(&ng);
    nnet_destroy(&nc);
    compute_destroy(&cpu);
    return bad;
}

/* path: a model file, or NULL to parse text */
static int run_both(const char *path, const char *text, int batch, compute_t *gpu)
{
    char err[256];
    model_t m;
    int rc = path ? model_load(&m, path, err, sizeof err)
                  : model_parse(&m, "gpu.net", text, strlen(text), err, sizeof err);
    REQUIRE(rc == 0 && model_infer(&m, err, sizeof err) == 0, "%s", err);
    int bad = run_model(&m, batch, gpu);
    model_fini(&m);
    return bad;
}

typedef struct {
    const char *text;
    int batch;
} gpu_case_t;

static const gpu_case_t s_cases[] = {
    /* LeNet's and AlexNet's layers: conv (fused bias, strided, grouped), pools, ReLU, LRN,
 * dropout, fc, softmax loss */
    {"input data shape=3x15x15\n"
         "conv c1 out=8 kernel=5 pad=2\nrelu r1\nlrn n1 size=5 alpha=1e-4 beta=0.75 k=2\n"
         "pool p1 op=max kernel=3 stride=2\n"
         "conv c2 out=6 kernel=3 stride=2 pad=1 groups=2\nrelu r2\n"
         "lrn n2 size=3 alpha=0.5 beta=0.6 k=1\n"
         "pool p2 op=avg kernel=3 stride=2 pad=1 ceil=1\n"
         "fc f1 out=20\nrelu r3\ndropout d ratio=0.4\nfc f2 out=10\nsoftmax_loss loss\n",
     4},
    /* GoogLeNet's and ResNet's: 1x1 convs, concat, batch norm, residual add, global pooling */
    {"input data shape=4x9x9\n"
         "conv stem out=8 kernel=3 pad=1 bias=0\nbatchnorm bn0\nrelu r0\n"
         "conv a in=r0 out=4 kernel=1\nconv b in=r0 out=3 kernel=3 pad=1\n"
         "pool c in=r0 op=max kernel=3 stride=1 pad=1\nconcat cat in=a,b,c\n"
         "conv proj out=8 kernel=1 bias=0\nbatchnorm bn1 eps=0.001\nadd res in=bn1,r0\n"
         "relu r1\npool gap op=avg global=1\nfc out out=5\nsoftmax_loss loss\n",
     3},
    /* a ViT-style encoder: to_seq, clstoken, posembed, layer norm, attention, GELU, select */
    {"input data shape=6x2x3\nto_seq s\nclstoken cls\nposembed pos max=8\n"
         "layernorm ln\nlinear q out=6\nlinear k out=6 in=ln\nlinear v out=6 in=ln\n"
         "attention att heads=2 in=q,k,v\nlinear o out=6\nadd r in=o,pos\n"
         "linear up out=12\ngelu g\nlinear down out=6\ntanh t\nselect first pos=0\n"
         "fc head out=4\nsoftmax_loss loss\n",
     2},
    /* a GPT-style decoder: tokens, embedding tied to the head, causal attention, seq_loss */
    {"tokens ids seq=6 vocab=11\nembed e vocab=11 dim=8\nposembed p\n"
         "layernorm ln\nlinear q out=8\nlinear k out=8 in=ln\nlinear v out=8 in=ln\n"
         "attention a heads=2 causal=1 in=q,k,v\nlinear o out=8\nadd r in=o,p\n"
         "gelu g approx=tanh\nlinear head out=11 bias=0 tie=e\nseq_loss loss\n",
     2},
    /* today's image networks: ReLU6, depthwise conv, hardswish, a squeeze-and-excitation
     * gate, SiLU, channel slices and shuffle, channels-last layer norm, layer scale */
    {"input data shape=4x6x6\n"
         "conv stem out=8 kernel=3 pad=1\nact r6 fn=clip min=0 max=6\n"
         "conv dw out=8 kernel=3 pad=1 groups=8\nact hs fn=hardswish\n"
         "pool sq op=avg global=1\nconv f1 out=4 kernel=1\nact hsig fn=hardsigmoid\n"
         "conv f2 out=8 kernel=1\nact sig fn=sigmoid\nmul gate in=hs,sig\n"
         "act silu fn=silu\nslice a from=0 out=4\nslice b in=silu from=4 out=4\n"
         "concat cat in=a,b\nshuffle sh groups=2\nmul prod in=sh,silu\n"
         "to_seq cl\nlayernorm ln\nlinear up out=16\ngelu g\nlinear down out=8\n"
         "to_image img h=6 w=6\nscale ls\nadd res in=ls,prod\n"
         "pool gap op=avg global=1\nfc out out=5\nsoftmax_loss loss\n",
     3},
    /* the Swin layers: winattn shifted (a 5x6 plane padded to windows, the mask's regions on
     * both axes) and not, with 1, 2 and 4 heads, with and without biases, a plane smaller
     * than its window; patchmerge of odd sides */
    {"input data shape=4x5x6\nto_seq s\n"
         "winattn a h=5 w=6 window=3 shift=1 heads=2 bias=1\n"
         "winattn b h=5 w=6 window=3 shift=0 heads=4 bias=0\n"
         "patchmerge m h=5 w=6\n"
         "winattn c h=3 w=3 window=2 shift=1 heads=2 bias=1\n"
         "winattn d h=3 w=3 window=4 shift=1 heads=1 bias=0\n"
         "to_image img h=3 w=3\npool gap op=avg global=1\nfc out out=3\nsoftmax_loss loss\n",
     2},
    /* a small Swin: patch embedding, blocks of (shifted) window attention and MLP with
     * residuals and layer norms, patch merging, a stage at half the resolution */
    {"input data shape=3x8x8\nconv embed out=8 kernel=2 stride=2\nto_seq s\nlayernorm n0\n"
         "winattn w1 h=4 w=4 window=2 shift=0 heads=2\nadd r1 in=w1,n0\n"
         "layernorm n1\nlinear up out=16\ngelu g\nlinear down out=8\nadd r2 in=down,r1\n"
         "layernorm n2\nwinattn w2 h=4 w=4 window=2 shift=1 heads=2\nadd r3 in=w2,r2\n"
         "patchmerge m h=4 w=4\nlayernorm n3\nlinear red out=16\n"
         "winattn w3 h=2 w=2 window=2 shift=0 heads=4\nadd r4 in=w3,red\nlayernorm n4\n"
         "to_image img h=2 w=2\npool gap op=avg global=1\nfc head out=5\nsoftmax_loss loss\n",
     3},
};

/* Case i of s_cases on the GPU against the CPU. */
static void run_case(size_t i)
{
    compute_t *g = gpu_or_skip();
    CHECK(run_both(NULL, s_cases[i].text, s_cases[i].batch, g) == 0, "case %zu", i);
    compute_destroy(&g);
}

TEST(test_cuda_net_conv_pool_lrn_dropout_fc) { run_case(0); }

TEST(test_cuda_net_inception_residual_bn) { run_case(1); }

TEST(test_cuda_net_vit_block) { run_case(2); }

TEST(test_cuda_net_decoder) { run_case(3); }

TEST(test_cuda_net_zoo_layers) { run_case(4); }

TEST(test_cuda_net_swin_layers) { run_case(5); }

TEST(test_cuda_net_swin_network) { run_case(6); }

/* LeNet as shipped */
TEST(test_cuda_net_lenet_file)
{
    compute_t *g = gpu_or_skip();
    CHECK(run_both("models/lenet.net", NULL, 8, g) == 0);
    compute_destroy(&g);
}

/* The harness itself, with a second CPU backend in the GPU's place: it runs every case here
 * (so the model texts and the comparisons are exercised without a GPU), and it catches one
 * corrupted parameter. */
TEST(test_cuda_net_harness_on_cpu)
{
    char err[256];
    compute_t *c2 = compute_new(COMPUTE_CPU, 1, err, sizeof err);
    REQUIRE(c2, "%s", err);
    CHECK(run_both("models/lenet.net", NULL, 2, c2) == 0);
    for (size_t i = 0; i < sizeof s_cases / sizeof *s_cases; i++)
        CHECK(run_both(NULL, s_cases[i].text, s_cases[i].batch, c2) == 0, "case %zu", i);
    s_corrupt = true;
    CHECK(run_both(NULL, s_cases[0].text, s_cases[0].batch, c2) > 0, "a corrupted weight passed");
    s_corrupt = false;
    compute_destroy(&c2);
}

/* An out-of-memory batch is one message naming --batch, not a CUDA error code. */
TEST(test_cuda_out_of_memory_names_the_batch)
{
    compute_t *g = gpu_or_skip();
    compute_destroy(&g);
    char out[4096];
    int rc = test_run(out, sizeof out,
                      "%s/poseidon profile --device cuda --model models/vgg19.net --batch 100000 "
                      "--repeats 1 --warmup 0 2>&1",
                      test_build_dir());
    CHECK(rc != 0 && strstr(out, "out of GPU memory") && strstr(out, "--batch"), "rc %d: %s",
          rc, out);
}
