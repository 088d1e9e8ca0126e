/* The network format: parameter counts of the paper's networks (POSEIDON.md §6), shape
 * inference, blocks, and one test per class of bad input with its line number. */
#include <stdlib.h>
#include <string.h>

#include "core/model.h"
#include "test.h"

static void check_params(const char *path, int64_t expected)
{
    model_t m;
    char err[1024];
    if (model_load(&m, path, err, sizeof err)) {
        test_fail(__FILE__, __LINE__, "%s", err);
        return;
    }
    CHECK_EQ_I64(m.total_params, expected);
    CHECK(layer_is_input(&m.layers[0]), "first layer of %s is not an input", path);
    for (int i = 0; i < m.n_layers; i++)
        for (int k = 0; k < m.layers[i].n_inputs; k++)
            CHECK(m.layers[i].inputs[k] < i, "%s: %s not in topological order", path,
                  m.layers[i].name);
    model_fini(&m);
}

/* POSEIDON.md §6, biases and BN scale/shift included. */
TEST(model_params_cifar10_quick) { check_params("models/cifar10-quick.net", 145578); }
TEST(model_params_alexnet) { check_params("models/alexnet.net", 60965224); }
TEST(model_params_googlenet) { check_params("models/googlenet.net", 6998552); }
TEST(model_params_googlenet_aux) { check_params("models/googlenet-aux.net", 13378280); }
TEST(model_params_vgg19) { check_params("models/vgg19.net", 143667240); }
TEST(model_params_vgg19_22k) { check_params("models/vgg19-22k.net", 229052817); }
TEST(model_params_inception_v3) { check_params("models/inception-v3.net", 23834568); }
TEST(model_params_inception_v3_aux) { check_params("models/inception-v3-aux.net", 27161264); }
TEST(model_params_resnet152) { check_params("models/resnet-152.net", 60192808); }

/* Transformers: the figures PyTorch's sum(p.numel()) gives for Hugging Face's BertModel
 * (bert-base-uncased, bert-large-uncased; the pooler included, no task head) and
 * GPT2LMHeadModel (gpt2, gpt2-xl; the output layer tied to the token embedding, counted
 * once), and torchvision's vit_b_16 (its documented 86,567,656). */
TEST(model_params_bert_base) { check_params("models/bert-base.net", 109482240); }
TEST(model_params_bert_large) { check_params("models/bert-large.net", 335141888); }
TEST(model_params_gpt2) { check_params("models/gpt2.net", 124439808); }
TEST(model_params_gpt2_xl) { check_params("models/gpt2-xl.net", 1557611200); }
TEST(model_params_vit_b16) { check_params("models/vit-b16.net", 86567656); }
TEST(model_params_char_transformer) { check_params("models/char-transformer.net", 116576); }

static int parse_str(model_t *m, const char *text, char *err, size_t len);

/* A decoder block's shapes and costs in closed form (models/README.md, "Costs"). */
TEST(model_sequence_shapes_and_costs_closed_form)
{
    const char *text = "tokens ids seq=10 vocab=50\n"
                       "embed e vocab=50 dim=8\n"
                       "posembed p max=16\n"
                       "layernorm ln\n"
                       "linear q out=8\nlinear k out=8 in=ln\nlinear v out=8 in=ln\n"
                       "attention a heads=2 causal=1 in=q,k,v\n"
                       "linear f out=12\n"
                       "gelu g approx=tanh\n"
                       "linear f2 out=8\n"
                       "linear head out=50 bias=0 tie=e\n"
                       "seq_loss loss\n";
    model_t m;
    char err[512];
    REQUIRE(parse_str(&m, text, err, sizeof err) == 0, "%s", err);
    const layer_t *ids = &m.layers[model_find(&m, "ids")], *e = &m.layers[model_find(&m, "e")];
    const layer_t *p = &m.layers[model_find(&m, "p")], *ln = &m.layers[model_find(&m, "ln")];
    const layer_t *q = &m.layers[model_find(&m, "q")], *a = &m.layers[model_find(&m, "a")];
    const layer_t *f = &m.layers[model_find(&m, "f")], *h = &m.layers[model_find(&m, "head")];
    CHECK(ids->seq && ids->out_shape.c == 1 && ids->out_shape.w == 10);
    CHECK(e->seq && e->out_shape.c == 8 && e->out_shape.h == 1 && e->out_shape.w == 10);
    CHECK_EQ_I64(e->params, 50 * 8);
    CHECK_EQ_I64(p->params, 16 * 8);
    CHECK_EQ_I64(ln->params, 2 * 8);
    CHECK_EQ_I64(q->params, 8 * 8 + 8);
    CHECK_EQ_I64(q->fwd_flops, 2LL * 10 * 8 * 8 + 10 * 8);
    CHECK_EQ_I64(q->bwd_flops, 4LL * 10 * 8 * 8 + 10 * 8);
    CHECK_EQ_I64(layer_sf_rows(q), 10);
    CHECK_EQ_I64(a->params, 0);
    CHECK_EQ_I64(a->fwd_flops, 4LL * 10 * 10 * 8 + 5 * 2 * 10 * 10);
    CHECK_EQ_I64(a->bwd_flops, 8LL * 10 * 10 * 8 + 3 * 2 * 10 * 10);
    CHECK_EQ_I64(a->act_bytes, 4LL * 8 * 10 + 4LL * 2 * 10 * 10);
    CHECK(f->out_shape.c == 12 && f->out_shape.w == 10);
    CHECK(h->tied && h->tie_layer == model_find(&m, "e"), "head tied to e");
    CHECK_EQ_I64(h->params, 0);
    CHECK_EQ_I64(layer_sf_rows(h), 0);
    CHECK_EQ_I64(h->fwd_flops, 2LL * 10 * 8 * 50);
    CHECK_EQ_I64(m.total_params, 400 + 128 + 16 + 3 * 72 + 8 * 12 + 12 + 12 * 8 + 8);
    model_fini(&m);

    /* ViT's path: conv, to_seq, class token, select */
    const char *vit = "input x shape=3x8x8\nconv c out=6 kernel=4 stride=4\nto_seq s\n"
                      "clstoken cls\nposembed pe\nselect first\nfc out out=5\n";
    REQUIRE(parse_str(&m, vit, err, sizeof err) == 0, "%s", err);
    const layer_t *s = &m.layers[model_find(&m, "s")], *cls = &m.layers[model_find(&m, "cls")];
    const layer_t *sel = &m.layers[model_find(&m, "first")];
    CHECK(s->seq && s->out_shape.c == 6 && s->out_shape.h == 1 && s->out_shape.w == 4);
    CHECK(cls->out_shape.w == 5 && cls->params == 6);
    CHECK_EQ_I64(m.layers[model_find(&m, "pe")].params, 5 * 6);
    CHECK(!sel->seq && sel->out_shape.c == 6 && sel->out_shape.w == 1);
    model_fini(&m);
}

TEST(model_sequence_bad_input_names_the_line)
{
    static const struct {
        const char *text, *want;
    } cases[] = {
        {"tokens t seq=4 vocab=9\nembed e vocab=8 dim=3\n",
         "t.net:2: embed 'e': vocab=8 is smaller"},
        {"input d shape=3x4x4\nembed e vocab=8 dim=3\n",
         "t.net:2: embed 'e': input 'd' is a input: expected tokens"},
        {"input d shape=3x4x4\nlinear l out=3\n",
         "t.net:2: linear 'l': input 'd' is an image of 16 pixels"},
        {"tokens t seq=4 vocab=9\nembed e vocab=9 dim=3\nconv c out=2 kernel=1\n",
         "t.net:3: conv 'c': input 'e' is a sequence of 4 positions"},
        {"tokens t seq=4 vocab=9\nembed e vocab=9 dim=6\nattention a heads=4 in=e,e,e\n",
         "t.net:3: attention 'a': 6 features do not divide into heads=4"},
        {"tokens t seq=4 vocab=9\nembed e vocab=9 dim=6\nattention a heads=2 in=e,e\n",
         "t.net:3: attention 'a': expected three inputs in=Q,K,V, got 2"},
        {"tokens t seq=4 vocab=9\nembed e vocab=9 dim=6\nlinear l out=9 tie=e\n",
         "t.net:3: linear 'l': tie=e: expected out=9 (its vocab), 6 input features (its dim) "
         "and bias=0"},
        {"tokens t seq=4 vocab=9\nembed e vocab=9 dim=6\nlinear l out=9 bias=0 tie=t\n",
         "t.net:3: linear 'l': tie=t: expected an embed layer"},
        {"tokens t seq=9 vocab=9\nembed e vocab=9 dim=6\nposembed p max=8\n",
         "t.net:3: posembed 'p': 9 positions but max=8"},
        {"tokens t seq=4 vocab=9\nembed e vocab=9 dim=6\nselect s pos=4\n",
         "t.net:3: select 's': pos=4 of a sequence of 4 positions"},
        {"tokens t seq=4 vocab=9\nembed e vocab=9 dim=6\ngelu g approx=fast\n",
         "t.net:3: gelu 'g': bad value 'fast' for approx"},
        {"tokens t seq=4\n", "t.net:1: tokens 't': missing required key 'vocab'"},
        {"tokens t seq=4 vocab=9 in=x\n", "t.net:1: tokens 't': an input takes no in="},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        model_t m;
        char err[512] = "";
        CHECK(parse_str(&m, cases[i].text, err, sizeof err) == -1, "case %zu parsed", i);
        CHECK(strstr(err, cases[i].want) != NULL, "case %zu: got '%s', want '%s'", i, err,
              cases[i].want);
    }
}

TEST(model_fashion_mnist_nets_take_28x28_and_give_10_classes)
{
    const char *paths[] = {"models/lenet.net", "models/mlp.net"};
    for (int i = 0; i < 2; i++) {
        model_t m;
        char err[1024];
        REQUIRE(model_load(&m, paths[i], err, sizeof err) == 0, "%s", err);
        shape_t in = m.layers[0].out_shape;
        CHECK(in.c == 1 && in.h == 28 && in.w == 28, "%s input", paths[i]);
        const layer_t *last = &m.layers[m.n_layers - 1];
        CHECK(last->type == LAYER_SOFTMAX_LOSS, "%s ends with a loss", paths[i]);
        CHECK_EQ_I64(shape_count(last->in_shape), 10);
        model_fini(&m);
    }
}

static int parse_str(model_t *m, const char *text, char *err, size_t len)
{
    return model_parse(m, "t.net", text, strlen(text), err, len);
}

TEST(model_shapes_and_costs_closed_form)
{
    const char *text = "input data shape=3x32x32\n"
                       "conv c1 out=8 kernel=3 pad=1 stride=2\n"       /* 8x16x16 */
                       "pool p1 op=max kernel=3 stride=2 ceil=1\n"     /* 8x8x8 (floor: 7) */
                       "conv g out=4 kernel=1 groups=2 bias=0\n"       /* 4x8x8 */
                       "fc f out=10\n";
    model_t m;
    char err[512];
    REQUIRE(parse_str(&m, text, err, sizeof err) == 0, "%s", err);
    const layer_t *c1 = &m.layers[1], *p1 = &m.layers[2], *g = &m.layers[3], *f = &m.layers[4];
    CHECK(c1->out_shape.c == 8 && c1->out_shape.h == 16 && c1->out_shape.w == 16);
    CHECK_EQ_I64(c1->params, 8 * 3 * 3 * 3 + 8);
    CHECK_EQ_I64(c1->fwd_flops, 2LL * 8 * 16 * 16 * 27 + 8 * 16 * 16);
    CHECK(p1->out_shape.h == 8 && p1->out_shape.w == 8, "ceil rounding: got %d", p1->out_shape.h);
    CHECK_EQ_I64(g->params, 4 * 4 * 1 * 1);
    CHECK_EQ_I64(f->params, 10 * 4 * 8 * 8 + 10);
    CHECK_EQ_I64(f->fwd_flops, 2LL * 10 * 256 + 10);
    CHECK_EQ_I64(m.total_params, c1->params + g->params + f->params);
    model_fini(&m);
}

TEST(model_blocks_repeat_and_forward_references)
{
    const char *text = "block unit out\n"
                       "  conv a out=$out kernel=3 pad=1 bias=0\n"
                       "  relu r\n"
                       "  add s in=r,$in\n"
                       "end\n"
                       "input data shape=4x8x8\n"
                       "repeat 3 unit u out=4\n"
                       "concat cat in=u.1,late\n"
                       "relu late in=u\n";
    model_t m;
    char err[512];
    REQUIRE(parse_str(&m, text, err, sizeof err) == 0, "%s", err);
    CHECK(model_find(&m, "u.2/a") >= 0, "block layers are named use/local");
    int cat = model_find(&m, "cat"), late = model_find(&m, "late");
    REQUIRE(cat >= 0 && late >= 0);
    CHECK(late < cat, "forward reference ordered before its user");
    CHECK_EQ_I64(m.layers[cat].out_shape.c, 8);
    CHECK(m.layers[late].inputs[0] == model_find(&m, "u.3/s"), "a use stands for its last layer");
    CHECK(m.layers[model_find(&m, "u.1/s")].inputs[1] == 0, "$in is the block's input");
    CHECK_EQ_I64(m.total_params, 3 * 4 * 4 * 9);
    model_fini(&m);
}

/* One bad file per class: the message starts "t.net:LINE:" and says what was expected. */
static void expect_error(const char *text, size_t len, int line, const char *needle)
{
    model_t m;
    char err[1024] = "";
    int rc = model_parse(&m, "t.net", text, len, err, sizeof err);
    CHECK(rc == -1, "accepted a bad model (expected '%s')", needle);
    if (rc == 0) {
        model_fini(&m);
        return;
    }
    char prefix[32];
    snprintf(prefix, sizeof prefix, "t.net:%d: ", line);
    CHECK(strncmp(err, prefix, strlen(prefix)) == 0, "expected '%s...', got '%s'", prefix, err);
    CHECK(strstr(err, needle) != NULL, "expected '%s' in '%s'", needle, err);
    CHECK(strchr(err, '\n') == NULL, "one line: '%s'", err);
}
#define EXPECT_ERROR(text, line, needle) expect_error((text), strlen(text), (line), (needle))

TEST(model_error_unknown_layer_type)
{
    EXPECT_ERROR("input d shape=1x4x4\nconvv c out=2 kernel=1\n", 2, "unknown layer type 'convv'");
}
TEST(model_error_unknown_key)
{
    EXPECT_ERROR("input d shape=1x4x4\n\nconv c out=2 kernle=1 kernel=1\n", 3, "unknown key 'kernle'");
    EXPECT_ERROR("input d shape=1x4x4\nrelu r inplace=1\n", 2, "unknown key 'inplace'");
}
TEST(model_error_bad_value)
{
    EXPECT_ERROR("input d shape=1x4x4\nconv c out=two kernel=1\n", 2, "bad value 'two' for out");
    EXPECT_ERROR("input d shape=1x4x4\nconv c out=2 kernel=0\n", 2, "bad value '0' for kernel");
    EXPECT_ERROR("input d shape=1x4\n", 1, "expected CxHxW");
    EXPECT_ERROR("input d shape=1x4x4\ndropout x ratio=1.5\n", 2, "bad value '1.5' for ratio");
    EXPECT_ERROR("input d shape=1x4x4\npool p op=median kernel=2\n", 2, "expected max or avg");
    EXPECT_ERROR("input d shape=1x4x4\nconv c out=2 kernel=1 bias=yes\n", 2, "expected 0 or 1");
    EXPECT_ERROR("input d shape=1x4x4\nrelu r garbage\n", 2, "expected key=value");
}
TEST(model_error_missing_value)
{
    EXPECT_ERROR("input d shape=1x4x4\nconv c kernel=3\n", 2, "missing required key 'out'");
    EXPECT_ERROR("input d\n", 1, "missing required key 'shape'");
    EXPECT_ERROR("input d shape=1x4x4\nfc f out=\n", 2, "bad value '' for out");
}
TEST(model_error_shape_mismatch)
{
    EXPECT_ERROR("input d shape=1x4x4\nconv c out=2 kernel=5\n", 2, "kernel 5x5 larger");
    EXPECT_ERROR("input d shape=3x4x4\nconv c out=4 kernel=1 groups=2\n", 2, "groups=2");
    EXPECT_ERROR("input d shape=1x8x8\npool p op=max kernel=2 stride=2\nconcat c in=d,p\n", 3,
                 "shape mismatch");
    EXPECT_ERROR("input d shape=1x8x8\nconv c out=2 kernel=1\nadd s in=d,c\n", 3,
                 "shape mismatch");
}
/* Swin's layers: winattn's parameters as PyTorch's ShiftedWindowAttention(8, [3, 3], [1, 1],
 * 2) has them (Q/K/V 8x24 + 24, output 8x8 + 8, table 5x5x2 = 338), its FLOPs over the 5x6
 * plane padded to 6x6 (P = 36 positions, windows of N = 9); patchmerge's output plane; and
 * what each refuses. */
TEST(model_swin_layers_count_and_refuse)
{
    const char *text = "input d shape=8x5x6\nto_seq s\n"
                       "winattn a h=5 w=6 window=3 shift=1 heads=2\npatchmerge m h=5 w=6\n";
    model_t m;
    char err[512];
    REQUIRE(parse_str(&m, text, err, sizeof err) == 0, "%s", err);
    const layer_t *a = &m.layers[model_find(&m, "a")], *pm = &m.layers[model_find(&m, "m")];
    CHECK_EQ_I64(a->params, 338);
    CHECK_EQ_I64(a->fwd_flops, 2 * 36 * 8 * 32 + 36 * 32 + 4 * 36 * 9 * 8 + 5 * 36 * 9 * 2);
    CHECK_EQ_I64(a->bwd_flops, 4 * 36 * 8 * 32 + 36 * 32 + 8 * 36 * 9 * 8 + 3 * 36 * 9 * 2);
    CHECK(pm->out_shape.c == 32 && pm->out_shape.h == 1 && pm->out_shape.w == 9 && pm->seq,
          "patchmerge: 32x1x9, a sequence");
    CHECK_EQ_I64(pm->params + pm->fwd_flops, 0);
    model_fini(&m);
    EXPECT_ERROR("input d shape=8x5x6\nto_seq s\nwinattn a h=5 w=6 window=3 shift=3 heads=2\n", 3,
                 "expected less than window=3");
    EXPECT_ERROR("input d shape=8x5x6\nto_seq s\nwinattn a h=6 w=6 window=3 heads=2\n", 3,
                 "expected a sequence of 36 positions");
    EXPECT_ERROR("input d shape=8x5x6\nto_seq s\nwinattn a h=5 w=6 window=3 heads=3\n", 3,
                 "do not divide into heads=3");
    EXPECT_ERROR("input d shape=8x5x6\nwinattn a h=5 w=6 window=3 heads=2\n", 2,
                 "expected a sequence");
    EXPECT_ERROR("input d shape=8x5x6\nto_seq s\npatchmerge m h=5\n", 3, "missing required key 'w'");
}
TEST(model_error_missing_input)
{
    EXPECT_ERROR("input d shape=1x4x4\nrelu r in=nowhere\n", 2, "missing input 'nowhere'");
    EXPECT_ERROR("relu r\n", 1, "missing input");
}
TEST(model_error_cycle)
{
    EXPECT_ERROR("input d shape=1x4x4\nrelu a in=b\nrelu b in=a\nconcat c in=a,d\n", 2, "cycle");
    EXPECT_ERROR("input d shape=1x4x4\nrelu a in=a\n", 2, "cycle");
}
TEST(model_error_duplicate_name)
{
    EXPECT_ERROR("input d shape=1x4x4\nrelu r\n# comment\nrelu r\n", 4, "duplicate name 'r' (first at line 2)");
}
TEST(model_error_empty_file)
{
    EXPECT_ERROR("", 1, "empty model");
    EXPECT_ERROR("# only a comment\n\n", 1, "empty model");
    EXPECT_ERROR("block b\n relu r\nend\n", 3, "empty model");
}
TEST(model_error_binary_garbage)
{
    static const char bin[] = "input d shape=1x4x4\nrelu r\n\x7f" "ELF\x02\x01\x01\0\0\0";
    expect_error(bin, sizeof bin - 1, 3, "binary data");
    expect_error("input d shape=1x4x4\n\xff\xfe\n", 23, 2, "binary data (byte 0xff)");
}
TEST(model_error_blocks)
{
    EXPECT_ERROR("block b x\n conv c out=$x kernel=1\nend\ninput d shape=1x4x4\nb u\n", 5,
                 "missing parameter 'x'");
    EXPECT_ERROR("block b x\n conv c out=$y kernel=1\nend\ninput d shape=1x4x4\nb u x=1\n", 2,
                 "unknown parameter '$y'");
    EXPECT_ERROR("block b x\n conv c out=$x kernel=1\nend\ninput d shape=1x4x4\nb u x=1 z=2\n", 5,
                 "unknown key 'z'");
    EXPECT_ERROR("block b\n relu r\ninput d shape=1x4x4\n", 1, "no 'end'");
    EXPECT_ERROR("input d shape=1x4x4\nend\n", 2, "'end' without a block");
    EXPECT_ERROR("block b x\n conv c out=$x kernel=1 strid=2\nend\ninput d shape=1x4x4\nb u x=1\n", 2,
                 "unknown key 'strid' (expected: out, kernel, stride, pad, groups, bias, in) (in block 'b' used at line 5)");
    EXPECT_ERROR("block b x\n conv c out=$x kernel=9\nend\ninput d shape=1x4x4\nb u x=1\n", 2,
                 "conv 'u/c': shape mismatch");
}

/* The checker itself: a wrong expectation must be reported. */
TEST(model_error_checker_can_fail)
{
    model_t m;
    char err[256] = "";
    int rc = parse_str(&m, "input d shape=1x4x4\nrelu r in=nowhere\n", err, sizeof err);
    REQUIRE(rc == -1);
    CHECK(strncmp(err, "t.net:1: ", 9) != 0, "a wrong line number would pass: '%s'", err);
}

TEST(model_cli_csv_ends_with_total)
{
    char out[1 << 16];
    int rc = test_run(out, sizeof out, "%s/poseidon model show models/vgg19.net --csv 2>/dev/null",
                      test_build_dir());
    REQUIRE(rc == 0, "exit %d: %s", rc, out);
    const char *header = "layer,type,output,params,fwd_flops,bwd_flops";
    CHECK(strncmp(out, header, strlen(header)) == 0, "header: %.80s", out);
    char *last = out + strlen(out) - 1;
    while (last > out && last[-1] != '\n') last--;
    CHECK(strncmp(last, "total,,,143667240,", 18) == 0, "last row: %s", last);
}

TEST(model_cli_bad_file_exits_nonzero_with_line)
{
    char path[512], out[4096];
    snprintf(path, sizeof path, "%s/bad.net", test_tmpdir());
    FILE *f = fopen(path, "w");
    REQUIRE(f);
    fputs("input data shape=3x8x8\nconv c1 out=4 kernel=3 strid=2\n", f);
    fclose(f);
    int rc = test_run(out, sizeof out, "%s/poseidon model show %s 2>&1 >/dev/null | grep -v '^#'",
                      test_build_dir(), path);
    (void)rc;
    CHECK(strstr(out, "bad.net:2: conv 'c1': unknown key 'strid'") != NULL, "got: %s", out);
    rc = test_run(out, sizeof out, "%s/poseidon model show %s", test_build_dir(), path);
    CHECK(rc == 1, "exit code %d", rc);
    rc = test_run(out, sizeof out, "%s/poseidon model show /nonexistent.net", test_build_dir());
    CHECK(rc == 1 && strstr(out, "/nonexistent.net: cannot open"), "exit %d: %s", rc, out);
}
