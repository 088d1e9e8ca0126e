/* ONNX import: the graphs PyTorch exported (tests/data/onnx/, made by
 * scripts/make_onnx_fixtures.py) import with PyTorch's parameter count and FLOPs, and every
 * kind of bad input is one line naming the file, never a crash.
 *
 * FLOPs compared: PyTorch's profiler (with_flops) counts 2 per multiply-add of conv2d and
 * the matrix products (addmm, mm, bmm, matmul) of a forward pass of one sample
 * (reference.csv's matrix_flops). The imported model's counterpart is the forward FLOPs of
 * its conv and fc layers less their bias additions, which the profiler does not count; the
 * two must agree exactly (tolerance 0). */
#include <stdlib.h>
#include <string.h>

#include "core/model.h"
#include "onnx/onnx_import.h"
#include "test.h"

#define DATA "tests/data/onnx/"

typedef struct {
    int64_t params, matrix_flops;
    char input_shape[64];
} reference_t;

/* The row of reference.csv for model `name`; fails the test when absent. */
static reference_t reference(const char *name)
{
    reference_t r = {0};
    FILE *f = fopen(DATA "reference.csv", "r");
    REQUIRE(f, "cannot open " DATA "reference.csv");
    char line[512];
    bool found = false;
    while (!found && fgets(line, sizeof line, f)) {
        char model[64], shape[64];
        long long p, mf, pf;
        if (sscanf(line, "%63[^,],%63[^,],%lld,%lld,%lld", model, shape, &p, &mf, &pf) == 5 &&
            !strcmp(model, name)) {
            r.params = p;
            r.matrix_flops = mf;
            snprintf(r.input_shape, sizeof r.input_shape, "%s", shape);
            found = true;
        }
    }
    fclose(f);
    REQUIRE(found, "no row for %s in reference.csv", name);
    return r;
}

/* Forward FLOPs of the multiply-adds of conv, fc and linear layers (bias additions left out)
 * and of attention's two products, Q·Kᵀ and the weighted sum of V: 4·S²·D per sample, as the
 * profiler counts the two batched products. Types are compared by name so that this file
 * builds whichever layer types the parser has. */
static int64_t matrix_flops(const model_t *m)
{
    int64_t sum = 0;
    for (int i = 0; i < m->n_layers; i++) {
        const layer_t *l = &m->layers[i];
        const char *t = layer_type_name(l->type);
        int64_t S = l->out_shape.w, D = l->out_shape.c;
        if (!strcmp(t, "conv"))
            sum += l->fwd_flops - l->biases * l->out_shape.h * l->out_shape.w;
        else if (!strcmp(t, "fc")) sum += l->fwd_flops - l->biases;
        else if (!strcmp(t, "linear")) sum += l->fwd_flops - l->biases * S;
        else if (!strcmp(t, "attention")) {
            CHECK(l->fwd_flops >= 4 * S * S * D, "attention %s counts %lld FLOPs", l->name,
                  (long long)l->fwd_flops);
            sum += 4 * S * S * D;
        }
    }
    return sum;
}

/* NULL when the model has the reference's counts, else what differs (static buffer). */
static const char *reference_mismatch(const model_t *m, const reference_t *r)
{
    static char msg[256];
    if (m->total_params != r->params)
        snprintf(msg, sizeof msg, "parameters %lld, PyTorch %lld", (long long)m->total_params,
                 (long long)r->params);
    else if (matrix_flops(m) != r->matrix_flops)
        snprintf(msg, sizeof msg, "matrix FLOPs %lld, PyTorch %lld", (long long)matrix_flops(m),
                 (long long)r->matrix_flops);
    else return NULL;
    return msg;
}

/* Imports NAME.onnx and compares with PyTorch's counts; returns the .net text (caller frees). */
static char *check_against_pytorch(const char *name, int classes)
{
    reference_t r = reference(name);
    char path[256], err[2048], *text = NULL;
    snprintf(path, sizeof path, DATA "%s.onnx", name);
    model_t m;
    REQUIRE(onnx_model_load(&m, path, NULL, &text, err, sizeof err) == 0, "%s", err);
    const char *bad = reference_mismatch(&m, &r);
    CHECK(bad == NULL, "%s: %s", name, bad);
    CHECK(!strcmp(m.name, name), "model name %s", m.name);
    const layer_t *first = &m.layers[0], *last = &m.layers[m.n_layers - 1];
    const char *ft = layer_type_name(first->type), *lt = layer_type_name(last->type);
    if (!strcmp(ft, "tokens")) { /* 1xS token ids */
        int s;
        int fields = sscanf(r.input_shape, "1x%d", &s);
        REQUIRE(fields == 1, "shape %s", r.input_shape);
        CHECK(first->out_shape.w == s, "tokens of %d positions", first->out_shape.w);
        CHECK(!strcmp(lt, "seq_loss") && last->in_shape.c == classes,
              "ends in seq_loss over %d, not %d", last->in_shape.c, classes);
    } else { /* 1xCxHxW images, 1xCxL signals (a plane of one row) */
        int c, h, w;
        int fields = sscanf(r.input_shape, "1x%dx%dx%d", &c, &h, &w);
        if (fields == 2) {
            w = h;
            h = 1;
            fields = 3;
        }
        REQUIRE(fields == 3, "shape %s", r.input_shape);
        CHECK(!strcmp(ft, "input") && first->out_shape.c == c && first->out_shape.h == h &&
              first->out_shape.w == w, "input shape");
        CHECK(!strcmp(lt, "softmax_loss") && shape_count(last->in_shape) == classes,
              "ends in a loss over %d classes", classes);
    }
    model_fini(&m);
    return text;
}

/* true when this build's parser has the sequence layers (models/README.md, "Sequences") */
static bool parser_has_sequences(void)
{
    model_t m;
    char err[512];
    const char *probe = "tokens t seq=2 vocab=3\nembed e vocab=3 dim=4\n";
    if (model_parse(&m, "probe.net", probe, strlen(probe), err, sizeof err)) return false;
    model_fini(&m);
    return true;
}

static int count_lines(const char *text, const char *prefix, const char *needle)
{
    int n = 0;
    for (const char *s = text; s && *s; s = strchr(s, '\n') ? strchr(s, '\n') + 1 : NULL) {
        const char *end = strchr(s, '\n');
        size_t len = end ? (size_t)(end - s) : strlen(s);
        if (!strncmp(s, prefix, strlen(prefix))) {
            char line[1024];
            snprintf(line, sizeof line, "%.*s", (int)(len < 1023 ? len : 1023), s);
            n += !needle || strstr(line, needle);
        }
    }
    return n;
}

TEST(onnx_resnet50_counts_equal_pytorch) { free(check_against_pytorch("resnet50", 1000)); }
TEST(onnx_vgg16_counts_equal_pytorch) { free(check_against_pytorch("vgg16", 1000)); }
TEST(onnx_inception_v3_counts_equal_pytorch) { free(check_against_pytorch("inception_v3", 1000)); }

/* ViT-B/16 from torchvision: patches (to_seq), class token, 12 encoder layers whose packed
 * Q/K/V projection is sliced into three linear layers, erf GELU, select of the class token. */
TEST(onnx_vit_b_16_counts_equal_pytorch)
{
    if (!parser_has_sequences()) SKIP("the parser has no sequence layers (tokens, attention, ...)");
    char *text = check_against_pytorch("vit_b_16", 1000);
    REQUIRE(text);
    CHECK_EQ_I64(count_lines(text, "attention ", "heads=12 causal=0"), 12);
    CHECK_EQ_I64(count_lines(text, "gelu ", "approx=erf"), 12);
    CHECK_EQ_I64(count_lines(text, "linear ", NULL), 12 * 6);
    CHECK_EQ_I64(count_lines(text, "layernorm ", NULL), 25);
    CHECK_EQ_I64(count_lines(text, "clstoken ", NULL), 1);
    CHECK_EQ_I64(count_lines(text, "posembed ", "max=197"), 1);
    CHECK_EQ_I64(count_lines(text, "select ", "pos=0"), 1);
    CHECK_EQ_I64(count_lines(text, "dropout ", NULL), 0); /* ratio 0: no layer */
    free(text);
}

/* A GPT-2-style block: token and position embeddings (a Gather each), a packed c_attn split
 * into Q, K, V, causal attention (Trilu mask folded), tanh GELU, an untied head. */
TEST(onnx_gpt2_block_counts_equal_pytorch)
{
    if (!parser_has_sequences()) SKIP("the parser has no sequence layers (tokens, attention, ...)");
    char *text = check_against_pytorch("gpt2_block", 50257);
    REQUIRE(text);
    CHECK_EQ_I64(count_lines(text, "tokens ", "seq=128 vocab=50257"), 1);
    CHECK_EQ_I64(count_lines(text, "embed ", "vocab=50257 dim=768"), 1);
    CHECK_EQ_I64(count_lines(text, "posembed ", "max=1024"), 1);
    CHECK_EQ_I64(count_lines(text, "attention ", "heads=12 causal=1"), 1);
    CHECK_EQ_I64(count_lines(text, "gelu ", "approx=tanh"), 1);
    CHECK_EQ_I64(count_lines(text, "linear ", NULL), 7);
    CHECK_EQ_I64(count_lines(text, "dropout ", "ratio=0.1"), 3);
    free(text);
}

/* GPT-2 124M as published: 12 blocks and an output head tied to the token embedding
 * (lm_head.weight is wte.weight; the exporter reads it through a Transpose into a MatMul).
 * The head becomes `linear tie=wte`, counted once, so the import has PyTorch's count, which
 * is the published 124,439,808 and models/gpt2.net's. */
TEST(onnx_gpt2_tied_head_counts_equal_pytorch)
{
    if (!parser_has_sequences()) SKIP("the parser has no sequence layers (tokens, attention, ...)");
    char *text = check_against_pytorch("gpt2_tied", 50257);
    REQUIRE(text);
    CHECK_EQ_I64(count_lines(text, "linear lm_head ", "out=50257 bias=0 tie=wte"), 1);
    CHECK_EQ_I64(count_lines(text, "linear ", "tie="), 1);
    CHECK_EQ_I64(count_lines(text, "embed wte ", "vocab=50257 dim=768"), 1);
    CHECK_EQ_I64(count_lines(text, "attention ", "heads=12 causal=1"), 12);
    CHECK_EQ_I64(count_lines(text, "linear ", NULL), 12 * 6 + 1);
    CHECK_EQ_I64(count_lines(text, "layernorm ", NULL), 25);
    model_t m, hand;
    char err[2048];
    REQUIRE(model_parse(&m, "gpt2_tied.net", text, strlen(text), err, sizeof err) == 0, "%s", err);
    REQUIRE(model_load(&hand, "models/gpt2.net", err, sizeof err) == 0, "%s", err);
    CHECK_EQ_I64(m.total_params, 124439808);
    CHECK_EQ_I64(m.total_params, hand.total_params);
    int head = model_find(&m, "lm_head");
    REQUIRE(head >= 0);
    CHECK(m.layers[head].tied && m.layers[m.layers[head].tie_layer].type == LAYER_EMBED,
          "lm_head is not tied to an embed");
    CHECK_EQ_I64(m.layers[head].weights, 0);
    model_fini(&m);
    model_fini(&hand);
    free(text);
}

/* A tied head written as Gemm(x, table, transB=1) over the (S, D) view of the sequence. */
TEST(onnx_tied_head_as_gemm_counts_equal_pytorch)
{
    if (!parser_has_sequences()) SKIP("the parser has no sequence layers (tokens, attention, ...)");
    char *text = check_against_pytorch("char_tied_gemm", 96);
    REQUIRE(text);
    CHECK_EQ_I64(count_lines(text, "linear lm_head ", "out=96 bias=0 tie=wte"), 1);
    CHECK_EQ_I64(count_lines(text, "linear ", "# Gemm /lm_head/Gemm"), 1);
    free(text);
}

/* A graph exported with its weights (export_params=True): tables and matrices are constants
 * with values, which are parameters all the same. The position table's rows 0..S-1 are not
 * folded into a constant of S = 16 rows (which would count 16 of its 32 rows); the Transpose
 * of a matrix, or of the tied table, is that matrix. */
TEST(onnx_exported_with_weights_counts_equal_pytorch)
{
    if (!parser_has_sequences()) SKIP("the parser has no sequence layers (tokens, attention, ...)");
    char *text = check_against_pytorch("gpt2_tiny_weights", 32);
    REQUIRE(text);
    CHECK_EQ_I64(count_lines(text, "posembed ", "max=32"), 1);
    CHECK_EQ_I64(count_lines(text, "linear lm_head ", "out=32 bias=0 tie=wte"), 1);
    CHECK_EQ_I64(count_lines(text, "attention ", "heads=2 causal=1"), 1);
    free(text);
}

/* 1-D convolutions, batch norms and pools of (N,C,L) signals are their 2-D counterparts on
 * a plane of one row: kernel 1xK, stride 1xS, pad 0xP. PyTorch's FLOPs of Conv1d come from
 * its outputs (the profiler counts none; make_onnx_fixtures.py). */
TEST(onnx_conv1d_counts_equal_pytorch)
{
    char *text = check_against_pytorch("signal1d", 10);
    REQUIRE(text);
    CHECK_EQ_I64(count_lines(text, "input ", "shape=4x1x128"), 1);
    CHECK_EQ_I64(count_lines(text, "conv ", "kernel=1x7 stride=1x1 pad=0x3 groups=1"), 1);
    CHECK_EQ_I64(count_lines(text, "conv ", "kernel=1x5 stride=1x2 pad=0x2 groups=4"), 1);
    CHECK_EQ_I64(count_lines(text, "pool ", "op=max kernel=1x2 stride=1x2 pad=0x0"), 1);
    CHECK_EQ_I64(count_lines(text, "pool ", "op=avg kernel=1x3 stride=1x2 pad=0x1"), 1);
    CHECK_EQ_I64(count_lines(text, "batchnorm ", NULL), 2);
    free(text);
}

/* The comparison catches a count off by one in either figure. */
TEST(onnx_reference_check_can_fail)
{
    reference_t r = reference("resnet50");
    model_t m;
    char err[2048];
    REQUIRE(onnx_model_load(&m, DATA "resnet50.onnx", NULL, NULL, err, sizeof err) == 0, "%s", err);
    CHECK(reference_mismatch(&m, &r) == NULL);
    r.params++;
    CHECK(reference_mismatch(&m, &r) != NULL, "a parameter too many went unnoticed");
    r.params--;
    r.matrix_flops += 2;
    CHECK(reference_mismatch(&m, &r) != NULL, "a multiply-add too many went unnoticed");
    model_fini(&m);
}

/* The written description is a .net file like any other: same layers and totals. */
TEST(onnx_import_text_parses_back)
{
    char err[2048], *text = NULL;
    model_t m, back;
    REQUIRE(onnx_model_load(&m, DATA "inception_v3.onnx", NULL, &text, err, sizeof err) == 0,
            "%s", err);
    REQUIRE(text);
    REQUIRE(model_parse(&back, "inception_v3.net", text, strlen(text), err, sizeof err) == 0,
            "%s", err);
    CHECK_EQ_I64(back.n_layers, m.n_layers);
    CHECK_EQ_I64(back.total_params, m.total_params);
    CHECK_EQ_I64(back.total_fwd_flops, m.total_fwd_flops);
    CHECK_EQ_I64(back.total_bwd_flops, m.total_bwd_flops);
    /* Pad + AveragePool (PyTorch's avg_pool2d with padding) became one pool with pad 1 */
    int padded_avg = 0;
    for (int i = 0; i < m.n_layers; i++)
        padded_avg += m.layers[i].type == LAYER_POOL && m.layers[i].pool == POOL_AVG &&
                      m.layers[i].pad_h == 1 && m.layers[i].kernel_h == 3;
    CHECK_EQ_I64(padded_avg, 9);
    model_fini(&m);
    model_fini(&back);
    free(text);
}

static char *file_bytes(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc(n > 0 ? n : 1);
    *len = fread(buf, 1, n, f);
    fclose(f);
    return buf;
}

/* One line, starting with the file's name. */
static void check_one_line(const char *err, const char *path)
{
    CHECK(!strncmp(err, path, strlen(path)), "message does not name the file: %s", err);
    CHECK(strchr(err, '\n') == NULL, "message spans lines: %s", err);
}

/* A fixture the importer must refuse, and what its one line must say. */
typedef struct {
    const char *file, *want;
} refusal_t;

static void check_refusals(const refusal_t *cases, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        char path[256], err[2048];
        model_t m;
        snprintf(path, sizeof path, DATA "%s", cases[i].file);
        CHECK(onnx_model_load(&m, path, NULL, NULL, err, sizeof err) == -1, "%s imported", path);
        check_one_line(err, path);
        CHECK(strstr(err, cases[i].want), "%s: %s", path, err);
    }
}


/* Every prefix of a real model (a file cut short) fails cleanly: decoding fails, or what
 * decodes is missing the nodes its outputs need. */
TEST(onnx_truncated_file_is_one_line)
{
    size_t len;
    char *buf = file_bytes(DATA "vgg16.onnx", &len);
    REQUIRE(buf && len > 1000);
    int failed = 0;
    for (size_t cut = 0; cut < len; cut += (cut < 400 ? 1 : 37)) {
        char *text = NULL, err[2048] = "";
        int rc = onnx_import_buffer("cut.onnx", (const uint8_t *)buf, cut, NULL, &text, err,
                                    sizeof err);
        if (rc == 0) {
            test_fail(__FILE__, __LINE__, "a %zu-byte prefix imported", cut);
            free(text);
            break;
        }
        check_one_line(err, "cut.onnx");
        failed++;
    }
    CHECK(failed > 100, "only %d prefixes tried", failed);
    free(buf);
}

TEST(onnx_not_onnx_is_one_line)
{
    char err[2048];
    model_t m;
    const char *paths[] = {"models/lenet.net", "Makefile", "tests/data/onnx/reference.csv"};
    for (int i = 0; i < 3; i++) {
        CHECK(onnx_model_load(&m, paths[i], NULL, NULL, err, sizeof err) == -1, "%s", paths[i]);
        check_one_line(err, paths[i]);
        CHECK(strstr(err, "not an ONNX model"), "%s", err);
    }
    CHECK(onnx_model_load(&m, "tests/data/onnx/no-such.onnx", NULL, NULL, err, sizeof err) == -1);
    CHECK(strstr(err, "cannot open"), "%s", err);
    char *text;
    CHECK(onnx_import_buffer("empty.onnx", (const uint8_t *)"", 0, NULL, &text, err, sizeof err) ==
          -1);
    check_one_line(err, "empty.onnx");
}

TEST(onnx_unsupported_opset_is_one_line)
{
    char err[2048];
    model_t m;
    CHECK(onnx_model_load(&m, DATA "bad_opset.onnx", NULL, NULL, err, sizeof err) == -1);
    check_one_line(err, DATA "bad_opset.onnx");
    CHECK(strstr(err, "operator set 99"), "%s", err);
}

TEST(onnx_unmapped_operator_names_node_and_op)
{
    char err[2048];
    model_t m;
    CHECK(onnx_model_load(&m, DATA "bad_unmapped_op.onnx", NULL, NULL, err, sizeof err) == -1);
    check_one_line(err, DATA "bad_unmapped_op.onnx");
    CHECK(strstr(err, "node '/Sin' (Sin)"), "%s", err);
}

TEST(onnx_dynamic_shape_needs_input_shape)
{
    char err[2048];
    model_t m;
    const char *path = DATA "bad_dynamic_hw.onnx";
    CHECK(onnx_model_load(&m, path, NULL, NULL, err, sizeof err) == -1);
    check_one_line(err, path);
    CHECK(strstr(err, "--input-shape input="), "%s", err);
    CHECK(strstr(err, "'height'"), "%s", err);

    onnx_import_opts_t o = {.n_shapes = 1};
    REQUIRE(onnx_shape_arg_parse("input=1x3x64x48", &o.shapes[0], err, sizeof err) == 0, "%s", err);
    REQUIRE(onnx_model_load(&m, path, &o, NULL, err, sizeof err) == 0, "%s", err);
    CHECK(m.layers[0].out_shape.h == 64 && m.layers[0].out_shape.w == 48);
    CHECK_EQ_I64(m.total_params, 8 * 3 * 3 * 3 + 8);
    /* conv 3x3 without padding: 62x46 outputs, 27 multiply-adds and a bias each */
    CHECK_EQ_I64(m.layers[1].fwd_flops, 8LL * 62 * 46 * (2 * 27 + 1));
    model_fini(&m);

    /* a shape contradicting a fixed dimension, or of another rank, or for no input */
    REQUIRE(onnx_shape_arg_parse("input=1x4x64x48", &o.shapes[0], err, sizeof err) == 0);
    CHECK(onnx_model_load(&m, path, &o, NULL, err, sizeof err) == -1);
    CHECK(strstr(err, "dimension 1 is 4"), "%s", err);
    REQUIRE(onnx_shape_arg_parse("input=3x64x48", &o.shapes[0], err, sizeof err) == 0);
    CHECK(onnx_model_load(&m, path, &o, NULL, err, sizeof err) == -1);
    REQUIRE(onnx_shape_arg_parse("image=1x3x64x48", &o.shapes[0], err, sizeof err) == 0);
    CHECK(onnx_model_load(&m, path, &o, NULL, err, sizeof err) == -1);
    CHECK(strstr(err, "not a graph input"), "%s", err);

    /* an open batch dimension alone needs nothing */
    REQUIRE(onnx_model_load(&m, DATA "small_dynamic_batch.onnx", NULL, NULL, err, sizeof err) == 0,
            "%s", err);
    model_fini(&m);
}

TEST(onnx_shape_arg_parse_rejects_bad_text)
{
    onnx_shape_arg_t s;
    char err[256];
    CHECK(onnx_shape_arg_parse("x=1x3x224x224", &s, err, sizeof err) == 0 && s.rank == 4 &&
          s.dims[3] == 224 && !strcmp(s.name, "x"));
    const char *bad[] = {"x",      "=1x2", "x=",  "x=1x", "x=0x3", "x=1xax3",
                         "x=-1",   "x=1x2x3x4x5x6x7x8x9", "x=99999999999999999999"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        CHECK(onnx_shape_arg_parse(bad[i], &s, err, sizeof err) == -1, "'%s' accepted", bad[i]);
}

/* Random corruption of a real model: always a clean result, never a crash (the test runs in
 * its own process, so a crash fails it). */
static void corrupt_and_import(const char *path, int rounds)
{
    size_t len;
    char *orig = file_bytes(path, &len);
    REQUIRE(orig);
    char *buf = malloc(len);
    uint64_t x = 88172645463325252ull; /* xorshift64, fixed seed */
    int failed = 0;
    for (int round = 0; round < rounds; round++) {
        memcpy(buf, orig, len);
        for (int k = 0; k < 1 + round % 8; k++) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            buf[x % len] = (char)(x >> 32);
        }
        char *text = NULL, err[2048] = "";
        if (onnx_import_buffer("bad.onnx", (const uint8_t *)buf, len, NULL, &text, err,
                               sizeof err)) {
            check_one_line(err, "bad.onnx");
            failed++;
        }
        free(text);
    }
    CHECK(failed > 0, "%s: no corruption was noticed", path);
    free(buf);
    free(orig);
}

TEST(onnx_corrupted_bytes_never_crash)
{
    corrupt_and_import(DATA "resnet50.onnx", 300);
    corrupt_and_import(DATA "gpt2_block.onnx", 300); /* sequence mapping and folding */
    corrupt_and_import(DATA "char_tied_gemm.onnx", 300); /* a tied head */
    corrupt_and_import(DATA "signal1d.onnx", 300);      /* 1-D windows */
}

/* Attention whose scores are not scaled by 1/sqrt(head size) is refused by name, not mapped
 * onto an attention layer that would scale them. */
TEST(onnx_attention_without_its_scale_is_refused)
{
    char err[2048];
    model_t m;
    const char *path = DATA "bad_attention_scale.onnx";
    CHECK(onnx_model_load(&m, path, NULL, NULL, err, sizeof err) == -1);
    check_one_line(err, path);
    CHECK(strstr(err, "node '/MatMul_1' (MatMul): scores scaled by 1, not 1/sqrt(head size)"),
          "%s", err);
}

/* Sharing that is not a tied head is refused by name: two projections of one weight, the
 * table multiplied as stored (x·E, not x·Eᵀ), a tied head with a bias, a second tied head. */
TEST(onnx_other_shared_weights_are_refused)
{
    refusal_t cases[] = {
        {"bad_shared_weight.onnx", "node '/fc2/MatMul' (MatMul): weight 'fc1.weight' (read as "
                                   "'/fc2/Transpose_output_0') is shared with node '/fc1/MatMul'"},
        {"bad_shared_untransposed.onnx", "node '/MatMul' (MatMul): multiplies by the table "
                                         "'wte.weight' of embedding 'wte' other than by its "
                                         "transpose"},
        {"bad_tied_bias.onnx", "node '/lm_head/Add' (Add): adds 'lm_head.bias' to the output "
                               "head 'lm_head' tied to embedding 'wte'"},
        {"bad_tied_twice.onnx", "node '/MatMul_1' (MatMul): the table 'wte.weight' of "
                                "embedding 'wte' is already the output head of node '/MatMul'"},
    };
    check_refusals(cases, sizeof cases / sizeof *cases);
}

/* Windows a conv computes differently are refused by name: dilation, and padding that is not
 * alike on both sides of an axis (2-D pads, and 1-D SAME_UPPER of an even kernel). */
TEST(onnx_conv_dilation_and_one_sided_padding_are_refused)
{
    refusal_t cases[] = {
        {"bad_dilated_conv.onnx", "node '/conv/Conv' (Conv): dilations 2x2: dilated windows do "
                                  "not map"},
        {"bad_asymmetric_pad.onnx", "node '/conv/Conv' (Conv): asymmetric padding (top 0, left "
                                    "0, bottom 1, right 1)"},
        {"bad_asymmetric_pad_1d.onnx", "node '/conv/Conv' (Conv): asymmetric padding (start 1, "
                                       "end 2)"},
    };
    check_refusals(cases, sizeof cases / sizeof *cases);
}

/* Node and producer names are the file's: a line break, bytes outside ASCII or 3,000
 * characters in them stay inside one comment line of the .net, which parses back with the
 * graph's four layers and its loss (a line break once started a layer of its own, and a
 * non-ASCII byte made the text unparsable). */
TEST(onnx_odd_names_stay_in_their_comments)
{
    char err[2048], *text = NULL;
    model_t m, back;
    REQUIRE(onnx_model_load(&m, DATA "odd_names.onnx", NULL, &text, err, sizeof err) == 0, "%s",
            err);
    REQUIRE(text);
    CHECK_EQ_I64(m.n_layers, 5);
    CHECK_EQ_I64(m.total_params, 4 * 3 * 3 * 3 + 5 * 144);
    int lines = 0;
    size_t longest = 0, len = 0;
    for (const unsigned char *c = (const unsigned char *)text; *c; c++) {
        CHECK(*c == '\n' || (*c >= 0x20 && *c < 0x7f), "byte 0x%02x in the text", *c);
        if (*c == '\n') {
            lines++;
            longest = len > longest ? len : longest;
            len = 0;
        } else
            len++;
    }
    CHECK_EQ_I64(lines, 2 + 5); /* two comment lines, then one per layer */
    CHECK(longest < 600, "a line of %zu characters", longest);
    CHECK(strstr(text, "producer line?break") != NULL, "%s", text);
    CHECK_EQ_I64(count_lines(text, "fc injected", NULL), 0);
    REQUIRE(model_parse(&back, "odd.net", text, strlen(text), err, sizeof err) == 0, "%s", err);
    CHECK_EQ_I64(back.n_layers, 5);
    model_fini(&back);
    model_fini(&m);
    free(text);
}
