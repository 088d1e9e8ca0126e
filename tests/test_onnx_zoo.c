/* ONNX import of PyTorch's default exports (eval mode: batch norms folded into convolutions,
 * initializers merged by value) of torchvision's networks: tests/data/onnx/zoo_*.onnx, made by
 * `/usr/bin/python3 scripts/onnx_zoo.py --fixtures tests/data/onnx`, with the counts made from
 * PyTorch in zoo_reference.csv (parameters less what the folding removes; 2 FLOPs per
 * multiply-add of every Conv2d and Linear, from forward hooks). Each must import with exactly
 * those counts, and the operators of today's zoo must map to the layers made for them. */
#include <stdlib.h>
#include <string.h>

#include "core/model.h"
#include "onnx/onnx_import.h"
#include "test.h"

#define DATA "tests/data/onnx/"

/* winattn's projections: its forward FLOPs less the biases, the windows' products and
 * the softmax, over the plane padded to whole windows */
static int64_t window_projection_flops(const layer_t *l)
{
    int64_t w = l->window, n = w * w, d = l->out;
    int64_t p = (l->image_h + w - 1) / w * w * ((l->image_w + w - 1) / w * w);
    return l->fwd_flops - p * l->biases - 4 * p * n * d - 5 * p * n * l->heads;
}

/* conv, fc and linear forward FLOPs less their bias additions (and winattn's projections) */
static int64_t matrix_flops(const model_t *m)
{
    int64_t sum = 0;
    for (int i = 0; i < m->n_layers; i++) {
        const layer_t *l = &m->layers[i];
        int64_t plane = (int64_t)l->out_shape.h * l->out_shape.w;
        if (l->type == LAYER_WINATTN)
            sum += window_projection_flops(l);
        else if (l->type == LAYER_CONV || l->type == LAYER_LINEAR)
            sum += l->fwd_flops - l->biases * plane;
        else if (l->type == LAYER_FC)
            sum += l->fwd_flops - l->biases;
    }
    return sum;
}

/* Imports each row's file; returns the number of rows checked. */
static int check_zoo_reference(void)
{
    FILE *f = fopen(DATA "zoo_reference.csv", "r");
    REQUIRE(f, "cannot open " DATA "zoo_reference.csv");
    char line[512];
    int rows = 0;
    while (fgets(line, sizeof line, f)) {
        char name[64], shape[64], path[256], err[2048];
        long long params, flops;
        if (sscanf(line, "%63[^,],%63[^,],%lld,%lld", name, shape, &params, &flops) != 4)
            continue; /* the header */
        snprintf(path, sizeof path, DATA "%s.onnx", name);
        model_t m;
        int rc = onnx_model_load(&m, path, NULL, NULL, err, sizeof err);
        CHECK(rc == 0, "%s", err);
        if (rc) continue;
        CHECK(m.total_params == params, "%s: %lld parameters, PyTorch %lld", name,
              (long long)m.total_params, params);
        CHECK(matrix_flops(&m) == flops, "%s: %lld conv and fc FLOPs, PyTorch %lld", name,
              (long long)matrix_flops(&m), flops);
        CHECK(m.layers[m.n_layers - 1].type == LAYER_SOFTMAX_LOSS, "%s: no loss", name);
        model_fini(&m);
        rows++;
    }
    fclose(f);
    return rows;
}

TEST(onnx_zoo_default_exports_count_equal_pytorch) { CHECK_EQ_I64(check_zoo_reference(), 10); }

/* The .net text of fixture NAME (caller frees). */
static char *zoo_text(const char *name)
{
    char path[256], err[2048], *text = NULL;
    snprintf(path, sizeof path, DATA "zoo_%s.onnx", name);
    model_t m;
    REQUIRE(onnx_model_load(&m, path, NULL, &text, err, sizeof err) == 0, "%s", err);
    model_fini(&m);
    return text;
}

static int count(const char *text, const char *needle)
{
    int n = 0;
    for (const char *s = text; (s = strstr(s, needle)) != NULL; s += strlen(needle)) n++;
    return n;
}

/* Each operator lands on its layer: ReLU6 as Clip; SiLU as Mul(x, Sigmoid(x)) and the SE
 * gates (opset 17); Hardswish as Mul(x, HardSigmoid(x)) (opset 13); Split and the channel
 * shuffle (opset 12); x.mean([2, 3]) as ReduceMean; folded batch norms as conv biases. */
TEST(onnx_zoo_operators_map_to_their_layers)
{
    char *t = zoo_text("mobilenet_v2");
    CHECK_EQ_I64(count(t, "\nact ") - count(t, "fn=clip "), 0);
    CHECK_EQ_I64(count(t, "fn=clip "), 35); /* ReLU6 after all but the projections */
    CHECK_EQ_I64(count(t, "\nbatchnorm "), 0);
    CHECK(count(t, " groups=32 ") == 1 && count(t, " groups=960 ") == 3, "depthwise convs");
    free(t);
    t = zoo_text("efficientnet_b0");
    CHECK(count(t, "fn=silu ") == 49 && count(t, "fn=sigmoid ") == 16,
          "%d silu, %d sigmoid", count(t, "fn=silu "), count(t, "fn=sigmoid "));
    CHECK_EQ_I64(count(t, "\nmul "), 16); /* one squeeze-and-excitation gate per block */
    free(t);
    t = zoo_text("mobilenet_v3_small");
    CHECK(count(t, "fn=hardswish ") > 0 && count(t, "fn=hardsigmoid ") == 9,
          "%d hardswish, %d hardsigmoid", count(t, "fn=hardswish "),
          count(t, "fn=hardsigmoid "));
    free(t);
    t = zoo_text("shufflenet_v2_x0_5");
    CHECK(count(t, "\nshuffle ") == 16 && count(t, " groups=2 ") >= 16, "%d shuffles",
          count(t, "\nshuffle "));
    CHECK(count(t, "\nslice ") == 2 * 13, "%d slices", count(t, "\nslice "));
    free(t);
    t = zoo_text("mnasnet0_5");
    CHECK_EQ_I64(count(t, "op=avg global=1 "), 1);
    free(t);
}

/* ConvNeXt at the exporter's default opset: each Transpose to channels last a to_seq, each
 * layer norm written out one layernorm (stem, 2 blocks, downsampling, head), GELU's erf form
 * a gelu, the Transpose back a to_image, the layer scale a scale. DenseNet: the Concat of the
 * first layer's one input is no layer, the block's output reads 11 (more than 8). */
TEST(onnx_zoo_channels_last_and_dense_blocks)
{
    char *t = zoo_text("convnext_2stage");
    CHECK(count(t, "\nto_seq ") == 5 && count(t, "\nto_image ") == 5, "%d to_seq, %d to_image",
          count(t, "\nto_seq "), count(t, "\nto_image "));
    CHECK_EQ_I64(count(t, "\nlayernorm "), 5);
    CHECK_EQ_I64(count(t, " approx=erf "), 2);
    CHECK_EQ_I64(count(t, "\nscale "), 2);
    free(t);
    t = zoo_text("densenet_block10");
    CHECK_EQ_I64(count(t, "\nconcat "), 10); /* layers 2 to 10, and the block's output */
    const char *last = strstr(t, "\nconcat features.denseblock1 in=");
    CHECK(last && count(last, ",") == 10, "no concat of 11 inputs");
    free(t);
}

/* A Swin Transformer cut small: each shifted-window attention (a few hundred nodes: padding,
 * roll, windows, the gathered bias, the mask) one winattn, the block after the first shifted
 * by half a window, the 10x10 plane padded to windows of 4 and the 5x5 one too; the patch
 * merge one patchmerge; the relative position tables counted as PyTorch counts them (its
 * parameters equal PyTorch's in check_zoo_reference). */
TEST(onnx_zoo_swin_windows_and_patch_merging)
{
    char *t = zoo_text("swin_2stage");
    CHECK_EQ_I64(count(t, "\nwinattn "), 3);
    CHECK_EQ_I64(count(t, " h=10 w=10 window=4 shift=0 heads=2 bias=1 "), 1);
    CHECK_EQ_I64(count(t, " h=10 w=10 window=4 shift=2 heads=2 bias=1 "), 1);
    CHECK_EQ_I64(count(t, " h=5 w=5 window=4 shift=0 heads=4 bias=1 "), 1);
    CHECK_EQ_I64(count(t, "\npatchmerge features.features.2 h=10 w=10 "), 1);
    CHECK_EQ_I64(count(t, "\nto_image permute h=5 w=5 "), 1);
    CHECK_EQ_I64(count(t, "\nlayernorm "), 1 + 2 * 3 + 1 + 1); /* stem, blocks, merge, head */
    free(t);
}

/* An exported tiny CNN with its weights: the zero biases of the folded batch norms are one
 * initializer read through Identity nodes; each conv owns its copy, as in PyTorch. */
TEST(onnx_zoo_merged_initializers_are_copies)
{
    char *t = zoo_text("tiny_weights");
    CHECK(count(t, "\nconv ") == 5 && count(t, " bias=1 ") == 6, "%s", t);
    free(t);
}

/* A convolution called twice is a weight truly shared: still refused in an eval export. */
TEST(onnx_zoo_true_sharing_is_refused)
{
    char err[2048];
    model_t m;
    CHECK(onnx_model_load(&m, DATA "bad_zoo_shared_conv.onnx", NULL, NULL, err, sizeof err) ==
          -1);
    CHECK(strstr(err, "node '/conv_1/Conv' (Conv): weight 'conv.weight' is shared with node "
                      "'/conv/Conv'") != NULL && !strchr(err, '\n'),
          "%s", err);
}

/* A window attention whose scores are scaled otherwise than the winattn layer scales them
 * (Q times (C // heads) ** -0.25, a head size of 4) is refused by name, not mapped. */
TEST(onnx_zoo_swin_other_scale_is_refused)
{
    char err[2048];
    model_t m;
    CHECK(onnx_model_load(&m, DATA "bad_swin_scale.onnx", NULL, NULL, err, sizeof err) == -1);
    CHECK(strstr(err, "node '/2/2.1/MatMul_1' (MatMul): window attention scaled by 0.707107, "
                      "not 1/sqrt(head size) = 0.5") != NULL && !strchr(err, '\n'),
          "%s", err);
}
