/* onnx_import: an ONNX model (a .onnx file) turned into a network description (.net text,
 * models/README.md), so that a network exported from a framework is simulated, planned and
 * trained like one written by hand.
 *
 * The file is decoded with libprotobuf-c from C code generated at build time from the ONNX
 * schema (onnx.proto) that Debian ships. Weights are not needed: a graph exported without
 * them (PyTorch's export_params=False) declares every parameter as a graph input with its
 * dimensions, and that is all a layer's cost needs.
 *
 * Each operator maps onto a layer type or is folded into one (a Pad into the convolution or
 * pooling after it, a MatMul followed by the Add of a bias into one fc, Flatten/Reshape/
 * Identity into the layer that reads them, since fc flattens its input); shapes are
 * inferred here from the graph's declared input and parameter dimensions. An operator (or
 * an attribute) with no faithful mapping is an error naming the file, the node and its
 * operator: the importer never guesses.
 *
 * Every graph output gets a softmax_loss (ONNX inference graphs carry no objective; the
 * testbed trains), except one made by a Softmax, which becomes that softmax_loss.
 */
#ifndef POSEIDON_ONNX_IMPORT_H
#define POSEIDON_ONNX_IMPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/model.h"

#define ONNX_RANK_MAX 8
#define ONNX_SHAPE_ARGS_MAX 16

/* ONNX operator set versions of the default domain that the mapping is written for. */
#define ONNX_OPSET_MIN 9
#define ONNX_OPSET_MAX 17

/* A shape given on the command line for a graph input: --input-shape NAME=1x3x224x224. */
typedef struct {
    char name[256];
    int rank;
    int64_t dims[ONNX_RANK_MAX];
} onnx_shape_arg_t;

typedef struct {
    int n_shapes;
    onnx_shape_arg_t shapes[ONNX_SHAPE_ARGS_MAX];
} onnx_import_opts_t;

/* Parses "NAME=D0xD1x..." into *out. Returns 0, or -1 with a message in err. */
int onnx_shape_arg_parse(const char *arg, onnx_shape_arg_t *out, char *err, size_t errlen);

/* true if path names an ONNX file (ends in ".onnx"). */
bool onnx_path_is_onnx(const char *path);

/* Imports the ONNX model held in buf (len bytes); path is used in messages only. Returns 0
 * with *net_text a malloc'd .net description (the caller frees it), or -1 with one line
 * "path: ..." in err. opts may be NULL. */
int onnx_import_buffer(const char *path, const uint8_t *buf, size_t len,
                       const onnx_import_opts_t *opts, char **net_text, char *err,
                       size_t errlen);

/* onnx_import_buffer() on the contents of the file at path. */
int onnx_import_file(const char *path, const onnx_import_opts_t *opts, char **net_text,
                     char *err, size_t errlen);

/* Imports the file and parses the result into *m (as model_load() does for a .net file),
 * checking that the layers' shapes and parameter count are those of the ONNX graph. The
 * model's name is the file's without ".onnx". Returns 0 (free m with model_fini), or -1 with
 * one line in err. net_text, when not NULL, receives the .net text (the caller frees it). */
int onnx_model_load(model_t *m, const char *path, const onnx_import_opts_t *opts,
                    char **net_text, char *err, size_t errlen);

#endif
