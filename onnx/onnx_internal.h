/* onnx_internal: what the parts of the ONNX importer share — the values a graph's tensor names
 * stand for while the graph is walked, the layers being emitted, and the helpers that read a
 * node's inputs and attributes. Not for use outside onnx/.
 *
 *   onnx_import.c  the graph walk, image operators, the .net text and the public API
 *   onnx_fold.c    constant folding of the shape arithmetic exporters emit
 *   onnx_seq.c     sequence operators: embeddings, linear layers, layer norm, GELU, attention
 *   onnx_zoo.c     the operators of today's image networks: activations, gates, channel
 *                  slices and shuffles
 *   onnx_swin.c    Swin Transformers: shifted-window attention and patch merging, each a
 *                  region of the graph claimed whole
 *   onnx_vals.c    the value table, tensors and types, emitted layers, a node's inputs
 *   onnx_attr.c    errors, dimension arithmetic, attributes, scalar constants
 *
 * Calls go down that list and never back up: onnx_import.c calls fold, seq, zoo and swin,
 * swin calls seq's helpers, all of them call vals, and everything calls attr.
 */
#ifndef POSEIDON_ONNX_INTERNAL_H
#define POSEIDON_ONNX_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "onnx.pb-c.h"
#include "onnx/onnx_import.h"

#define ONNX_DIM_MAX ((int64_t)1 << 30)
/* Bounds that keep every cost model_infer() computes within int64, and within the 2^50 per
 * layer and sample the model parser accepts: elements of one tensor (per sample, or of one
 * weight) and multiply-adds of one layer (a backward is 4 FLOPs per multiply-add). The
 * largest layer of GPT-2 1.5B, its head, is about 2^36 multiply-adds. */
#define ONNX_ELEMS_MAX ((int64_t)1 << 36)
#define ONNX_MACS_MAX ((int64_t)1 << 46)
#define ONNX_CONST_VALUES_MAX (1 << 20) /* constants read into memory (shape arithmetic) */

typedef enum {
    VAL_UNDEFINED, /* named by a node's output, not yet made */
    VAL_INPUT,     /* a graph input nothing has read yet */
    VAL_PARAM,     /* a weight: dimensions known, data not needed */
    VAL_CONST,     /* data known (Constant nodes, initializers with data, folded arithmetic) */
    VAL_DATA,      /* the output of an emitted layer */
    VAL_SCORES,    /* attention scores Q·Kᵀ on their way to the attention layer */
    VAL_GELU,      /* a term of GELU's erf or tanh formula on its way to the gelu layer */
    VAL_POSEMB,    /* rows 0..S-1 of a position table, on their way to posembed */
    VAL_LNORM,     /* a term of layer norm written out (opsets before 17), on its way */
} val_kind_t;

/* What an axis of a sequence value is. A sequence layer holds D×1×S per sample; ONNX sees it
 * batch-first or sequence-first, with heads split out of D, transposed: each axis is named.
 * Axes of size 1 (the batch, which must be 1 in sequence graphs) are units. */
typedef enum { AX_UNIT, AX_S, AX_D, AX_H, AX_E, AX_SQ, AX_SK } ax_t;

typedef struct val {
    const char *name; /* owned by the decoded model */
    val_kind_t kind;
    int rank;
    int64_t dims[ONNX_RANK_MAX];
    bool dims_known;
    int uses;      /* node inputs and graph outputs that read it */
    int elem_type; /* graph inputs: ONNX TensorProto data type */

    /* VAL_INPUT: the first dimension that is a name or missing (-1: none), and the names */
    int dynamic_dim;
    const char *dim_name[ONNX_RANK_MAX];

    /* VAL_PARAM and VAL_CONST read as weights: the tensor first declared (Identity,
     * Transpose and Expand make aliases) and the node that took it, to refuse weights
     * shared by two layers. */
    struct val *source;
    const char *owner_node;
    int8_t src_axis[ONNX_RANK_MAX]; /* per axis, the axis of source it is (-1: a unit axis
                                       Expand added); the identity for a declared tensor */
    int embed_layer;                /* on a source: the embed layer whose table it is (-1) */
    const char *tied_node;          /* on a source: the node that made it a tied head */
    bool initializer;               /* declared by the graph as an initializer (a weight
                                       when it holds reals, exported with its values) */

    /* VAL_CONST */
    int64_t n_values;
    int64_t *ints;  /* owned; NULL for real data */
    double *reals;  /* owned; NULL for integer data */

    /* VAL_DATA (and VAL_SCORES: the layer of Q) */
    int layer;
    int64_t pad[4];       /* a Pad not yet folded: top, left, bottom, right */
    const char *pad_node; /* NULL: none */
    bool from_softmax;    /* made by a Softmax mapped to softmax_loss */

    /* sequences: VAL_DATA of a sequence layer, VAL_SCORES */
    bool seq;
    uint8_t ax[ONNX_RANK_MAX]; /* ax_t per axis */
    int heads;                 /* when D is split into AX_H × AX_E */
    double scale;              /* scalar factors applied on the way to attention (1: none) */
    int att_k;                 /* VAL_SCORES: the layer of K */
    bool causal, softmaxed;    /* VAL_SCORES */
    int gelu_stage, gelu_x;    /* VAL_GELU: the term, and the value index of GELU's input */
    bool gelu_tanh;
    int pos_table;             /* VAL_POSEMB: value index of the table (max × D) */
    int ln_stage, ln_x;        /* VAL_LNORM: the term, and the value index of the input */
    double ln_eps;             /* VAL_LNORM: from the Add to the variance on */

    /* a channel shuffle on its way (Reshape to (N,G,C/G,H,W), Transpose of axes 1 and 2,
     * Reshape back): G on the 5-D views, and whether the groups are transposed yet */
    int shuffle_groups;
    bool shuffle_transposed;
} val_t;

/* A layer of the generated .net text. */
typedef struct {
    char name[MODEL_NAME_MAX];
    const char *type;
    char keys[256];
    int bias; /* -1: no bias key */
    int n_in;
    int in[MODEL_MAX_INPUTS];
    const char *node; /* ONNX node (or graph input) it came from */
    const char *op;
    shape_t shape;    /* per sample, as model_infer must find it */
    bool split;       /* a packed projection replaced by one linear layer per part */
    int tie;          /* linear: the embed layer whose table is its weight (-1: none) */
    int64_t plane_h, plane_w; /* winattn, patchmerge: the plane of their output (0: none) */
} out_layer_t;

typedef struct {
    const char *path;
    char *err;
    size_t errlen;
    const onnx_import_opts_t *opts;
    Onnx__ModelProto *model;
    Onnx__GraphProto *g;
    int64_t opset;

    val_t *vals; /* allocated before the walk: pointers into it stay valid */
    int n_vals, cap_vals;
    char **ix_key; /* name -> value index, open addressing */
    int *ix_val;
    int ix_cap;

    out_layer_t *layers;
    int n_layers, cap_layers;
    int64_t learnable; /* elements of the weights the layers took */
    struct swin *swin; /* onnx_swin.c: the Swin regions claimed so far */
} imp_t;

/* onnx_attr.c */

/* Errors: one line "path: ..." or "path: node 'NAME' (Op): ..." in im->err; return -1. */
int ox_imp_fail(imp_t *im, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int ox_node_fail(imp_t *im, const Onnx__NodeProto *n, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
const char *ox_node_name(const Onnx__NodeProto *n);
const char *ox_node_op(const Onnx__NodeProto *n);
/* Names come from the file: control characters in s become '?'. */
void ox_printable(char *s);

int64_t ox_mul_sat(int64_t a, int64_t b);
int64_t ox_dims_count(int rank, const int64_t *dims);
void ox_dims_str(int rank, const int64_t *dims, char *buf, size_t len);

const Onnx__AttributeProto *ox_attr_find(const Onnx__NodeProto *n, const char *name);
int ox_attr_int(imp_t *im, const Onnx__NodeProto *n, const char *name, int64_t def,
                int64_t *out);
int ox_attr_float(imp_t *im, const Onnx__NodeProto *n, const char *name, double def,
                  double *out);
int ox_attr_ints(imp_t *im, const Onnx__NodeProto *n, const char *name, int want,
                 int64_t *out, int max, int *got);
int ox_attr_string(imp_t *im, const Onnx__NodeProto *n, const char *name, const char *def,
                   char *out, size_t len);

/* A scalar constant's value into *x: true when v is one. */
bool ox_const_scalar(const val_t *v, double *x);

/* onnx_vals.c */

int ox_val_find(const imp_t *im, const char *name);
/* Adds a value named name; returns its index, or -1 if the name exists already. */
int ox_val_add(imp_t *im, const char *name, val_kind_t kind);
/* Dimensions of a declared tensor type into v (dims_known false when it has no shape). */
int ox_type_dims(imp_t *im, const char *what, const Onnx__TypeProto *t, val_t *v);
int ox_tensor_read(imp_t *im, const char *what, const Onnx__TensorProto *t, val_t *v);

out_layer_t *ox_layer_add(imp_t *im, const char *type, const Onnx__NodeProto *n,
                          const char *fallback);
/* Renames a layer after an ONNX name (a node's output), unique among the layers. */
void ox_layer_rename(imp_t *im, int layer, const char *onnx_name);
int ox_data_define(imp_t *im, const Onnx__NodeProto *n, size_t k, int layer, int rank,
                   const int64_t *dims);
out_layer_t *ox_emit(imp_t *im, const Onnx__NodeProto *n, const char *type,
                     val_t *const *ins, int n_in, int rank, const int64_t *dims);
bool ox_data_is_layer_shaped(const imp_t *im, const val_t *v);

bool ox_has_input(const Onnx__NodeProto *n, size_t k);
val_t *ox_in(imp_t *im, const Onnx__NodeProto *n, size_t k); /* any kind; NULL if absent */
val_t *ox_out(imp_t *im, const Onnx__NodeProto *n, size_t k); /* NULL if absent */
val_t *ox_in_data(imp_t *im, const Onnx__NodeProto *n, size_t k);
/* Input k read as data; a pending Pad passes only where the caller folds it (allow_pad). */
val_t *ox_in_data_pad(imp_t *im, const Onnx__NodeProto *n, size_t k, bool allow_pad);
val_t *ox_in_weight(imp_t *im, const Onnx__NodeProto *n, size_t k, int rank, bool learnable);
val_t *ox_in_ints(imp_t *im, const Onnx__NodeProto *n, size_t k);
int ox_outputs_unused_from(imp_t *im, const Onnx__NodeProto *n, size_t k);
int ox_input_to_layer(imp_t *im, const Onnx__NodeProto *n, val_t *v);

/* The dimensions a Reshape of x makes into dims (rank into *rank). Returns 0, or -1 with the
 * error set. */
int ox_reshape_dims(imp_t *im, const Onnx__NodeProto *n, const val_t *x, int *rank,
                    int64_t *dims);

/* onnx_zoo.c: maps n when it is an operator of today's image networks (Clip, Sigmoid,
 * HardSigmoid, HardSwish, Mul of data, ReduceMean over the plane, Split and Slice of
 * channels, channel shuffle). Returns 1 when mapped, 0 when n is not one, -1 with the error
 * set. */
int ox_zoo_node(imp_t *im, const Onnx__NodeProto *n);

/* onnx_fold.c: evaluates node n when every input it reads is a constant with data (or, for
 * Shape, has known dimensions). Returns 1 when folded, 0 when not a folding case, -1 with
 * the error set. */
int ox_fold(imp_t *im, const Onnx__NodeProto *n);

/* onnx_seq.c: maps n when it is a sequence operator or reads a sequence value. Returns 1
 * when mapped, 0 when n is not one (the image mapping goes on), -1 with the error set. */
int ox_seq_node(imp_t *im, const Onnx__NodeProto *n);

/* onnx_seq.c: channels last, the layout of ConvNeXt's blocks: a Transpose of (1,C,H,W) image
 * data to (1,H,W,C) becomes a to_seq layer (the H*W pixels a sequence of C features, held as
 * (1,S,C)), and the Transpose back a to_image layer. Returns 1 when mapped, 0 when n is not
 * one, -1 with the error set. */
int ox_seq_channels_last(imp_t *im, const Onnx__NodeProto *n);

/* onnx_seq.c, for onnx_swin.c: a sequence layer of S positions of D features reading the
 * layers ins (returns its index, or -1 with the error set); output k of n made a (1,S,D)
 * sequence value of it; the plane of a channels-last sequence x (false when x is not one). */
int ox_seq_emit(imp_t *im, const Onnx__NodeProto *n, const char *type, const int *ins,
                int n_in, int64_t S, int64_t D);
val_t *ox_seq_define_plain(imp_t *im, const Onnx__NodeProto *n, size_t k, int layer);
bool ox_seq_plane(const imp_t *im, const val_t *x, int64_t *h, int64_t *w);

/* onnx_swin.c: the Swin Transformer's window attention and patch merging. A Pad of a
 * channels-last sequence starts a region of nodes that is one winattn or patchmerge layer:
 * ox_swin_claim, after node i is mapped, claims the regions its outputs start; ox_swin_node,
 * before node i, returns 1 when i belongs to a claimed region (skipped, or the node whose
 * output is the region's, where the layer is emitted), 0 when it does not, -1 with the
 * error set. */
int ox_swin_claim(imp_t *im, size_t i);
int ox_swin_node(imp_t *im, size_t i);
void ox_swin_free(imp_t *im);

/* onnx_seq.c: the loss of a graph output that is a sequence (seq_loss). Returns 1 when
 * emitted, 0 when v is not a sequence, -1 with the error set. */
int ox_seq_output(imp_t *im, val_t *v);

#endif
