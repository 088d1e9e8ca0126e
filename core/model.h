/* model: a network description (models/NAME.net) parsed into a DAG of layers with inferred
 * shapes and per-layer costs (parameters, FLOPs, bytes).
 *
 * The simulator and the runtime both build from a model_t, so everything either side needs
 * to know about a layer lives here. A model_t is plain data: tests may build one literally
 * and call model_infer() to fill in the derived fields.
 *
 * Invariants after a successful model_load()/model_parse():
 *   - layers[] is in topological order: every input index of layer i is < i;
 *   - layers[0] is the (first) input layer;
 *   - every derived field (shape, params, flops, bytes) is filled in;
 *   - names are unique full names ("mixed_5b/b1/conv" for layers made by blocks).
 *
 * Shapes are per sample (C, H, W); FC outputs are (N, 1, 1); a sequence of S positions of D
 * features is (D, 1, S). Costs are per sample: multiply
 * by the batch for a batch. FLOPs count a multiply-add as 2.
 *
 * The text format is documented in models/README.md.
 */
#ifndef POSEIDON_MODEL_H
#define POSEIDON_MODEL_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#define MODEL_NAME_MAX 96
#define MODEL_MAX_INPUTS 64 /* a concat of DenseNet-201 reads 49 */

typedef enum {
    LAYER_INPUT,
    LAYER_CONV,
    LAYER_FC,
    LAYER_RELU,
    LAYER_POOL,
    LAYER_LRN,
    LAYER_DROPOUT,
    LAYER_BATCHNORM,
    LAYER_CONCAT,
    LAYER_ADD,        /* eltwise sum of its inputs (residual) */
    LAYER_SOFTMAX_LOSS,
    /* sequences (models/README.md, "Sequences"): D x 1 x S, position-major in memory */
    LAYER_TANH,
    LAYER_TOKENS,     /* an input of S token ids */
    LAYER_EMBED,      /* token embedding, V x D */
    LAYER_POSEMBED,   /* learned position embedding, added */
    LAYER_CLSTOKEN,   /* a learned vector prepended as position 0 */
    LAYER_TO_SEQ,     /* C x H x W image -> C x 1 x (H*W) sequence */
    LAYER_LINEAR,     /* fully connected at every position */
    LAYER_ATTENTION,  /* multi-head scaled dot-product over in=Q,K,V */
    LAYER_LAYERNORM,
    LAYER_GELU,
    LAYER_SELECT,     /* one position of a sequence */
    LAYER_SEQ_LOSS,   /* cross-entropy over the vocabulary at every position */
    /* the operators of today's image networks (MobileNet, EfficientNet, ShuffleNet, ...) */
    LAYER_ACT,        /* an element-wise activation other than relu: act_t */
    LAYER_MUL,        /* x times s, s of x's shape or C x 1 x 1 (a per-channel gate) */
    LAYER_SLICE,      /* channels [slice_from, slice_from + out) of its input */
    LAYER_SHUFFLE,    /* channel shuffle across `groups` (ShuffleNet) */
    LAYER_TO_IMAGE,   /* D x 1 x S sequence -> D x h x w image (S = h*w): to_seq undone */
    LAYER_SCALE,      /* a learned factor per channel (ConvNeXt's layer scale) */
    /* Swin Transformers: a sequence that is an h x w plane of D features (channels last) */
    LAYER_WINATTN,    /* shifted-window self-attention with its projections and bias table */
    LAYER_PATCHMERGE, /* 2x2 neighbours' features side by side: h x w x D -> h/2 x w/2 x 4D */
    LAYER_TYPE_COUNT
} layer_type_t;

typedef enum { POOL_MAX, POOL_AVG } pool_op_t;

/* act: y = f(x) per element. hardsigmoid is clip(alpha x + beta, 0, 1) (PyTorch: alpha 1/6,
 * beta 1/2), hardswish x * hardsigmoid(x) with PyTorch's alpha and beta, silu x * sigmoid(x),
 * clip min(max(x, lo), hi) (ReLU6: lo 0, hi 6). */
typedef enum { ACT_SIGMOID, ACT_SILU, ACT_HARDSIGMOID, ACT_HARDSWISH, ACT_CLIP } act_t;

typedef struct {
    int c, h, w;
} shape_t;

typedef struct {
    char name[MODEL_NAME_MAX];
    layer_type_t type;
    int n_inputs;
    int inputs[MODEL_MAX_INPUTS]; /* indexes into model_t.layers, each < own index */

    /* Hyper-parameters; only those of the layer's type are meaningful. */
    int out;                       /* conv: output channels; fc: output units */
    int kernel_h, kernel_w;        /* conv, pool */
    int stride_h, stride_w;        /* conv, pool */
    int pad_h, pad_w;              /* conv, pool */
    int groups;                    /* conv; shuffle: channel groups */
    bool bias;                     /* conv, fc, linear, winattn */
    pool_op_t pool;                /* pool */
    bool ceil_mode;                /* pool: Caffe's ceil rounding of the output size */
    bool global;                   /* pool: kernel = whole input plane */
    int lrn_size;                  /* lrn: channels in the window */
    double lrn_alpha, lrn_beta, lrn_k;
    double dropout_ratio;          /* dropout: probability of dropping */
    double bn_eps, bn_momentum;    /* batchnorm */
    double loss_weight;            /* softmax_loss, seq_loss: weight in the total objective */
    int vocab;                     /* tokens: ids are < vocab; embed: rows of the matrix */
    int seq_len;                   /* tokens: positions S */
    int pos_max;                   /* posembed: positions it holds (0: the input's) */
    int heads;                     /* attention, winattn */
    bool causal;                   /* attention: position p sees positions <= p only */
    bool gelu_tanh;                /* gelu: GPT-2's tanh approximation instead of erf */
    int select_pos;                /* select */
    bool tied;                     /* linear: its weight is the embed tie_layer's matrix */
    int tie_layer;                 /* linear with tied: index of that embed (before it) */
    act_t act;                     /* act */
    double act_a, act_b;           /* act: clip's lo and hi; hardsigmoid's alpha and beta */
    int slice_from;                /* slice: first channel (out: how many) */
    int image_h, image_w;          /* to_image, winattn, patchmerge: the plane */
    int window, shift;             /* winattn: window side and cyclic shift, in positions */

    /* Derived by model_infer(). */
    shape_t in_shape;              /* shape of inputs[0] */
    shape_t out_shape;
    bool seq;                      /* the output is a sequence (position-major in memory) */
    int64_t weights;               /* learnable weights (conv/fc kernel, BN scale) */
    int64_t biases;                /* learnable biases (conv/fc bias, BN shift) */
    int64_t params;                /* weights + biases */
    int64_t fwd_flops;             /* per sample */
    int64_t bwd_flops;             /* per sample: input and parameter gradients */
    int64_t param_bytes;           /* fp32 */
    int64_t act_bytes;             /* fp32 output activations, per sample */

    int src_line;                  /* line in the .net file that defined the layer */
} layer_t;

typedef struct {
    char name[MODEL_NAME_MAX];     /* file name without directory and ".net" */
    char path[512];
    int n_layers;
    layer_t *layers;               /* owned */
    int64_t total_params;
    int64_t total_fwd_flops;
    int64_t total_bwd_flops;
    int64_t total_act_bytes;
} model_t;

/* Parse a model file. Returns 0, or -1 with a one-line message "file:line: what was
 * expected" in err (errlen bytes). On success *m owns its layers; free with model_fini(). */
int model_load(model_t *m, const char *path, char *err, size_t errlen);

/* Parse model text held in memory; `path` is only used in messages and for the name. */
int model_parse(model_t *m, const char *path, const char *text, size_t len, char *err,
                size_t errlen);

/* Fill in the derived fields of every layer and the totals. Layers must already be in
 * topological order. Returns 0, or -1 with "file:line: ..." in err on a shape mismatch. */
int model_infer(model_t *m, char *err, size_t errlen);

void model_fini(model_t *m);

/* Index of the layer with this full name, or -1. */
int model_find(const model_t *m, const char *name);

const char *layer_type_name(layer_type_t t);

/* true for layers whose parameters are synchronised (conv, fc, batchnorm, embed, ...). */
bool layer_has_params(const layer_t *l);

/* input or tokens: a layer the data fills */
bool layer_is_input(const layer_t *l);
/* softmax_loss or seq_loss */
bool layer_is_loss(const layer_t *l);

/* Rows of a sufficient factor per sample: the positions of a linear layer's input (1 for an
 * fc layer); 0 for a layer SFB cannot sync (no weight matrix of its own). */
int64_t layer_sf_rows(const layer_t *l);

/* "CxHxW" (or "N" for a 1x1 plane) into buf; returns buf. */
const char *shape_str(shape_t s, char *buf, size_t len);

static inline int64_t shape_count(shape_t s) { return (int64_t)s.c * s.h * s.w; }

/* Print the per-layer table (human) or CSV to f. */
void model_print_table(const model_t *m, FILE *f);
void model_print_csv(const model_t *m, FILE *f);

#endif
