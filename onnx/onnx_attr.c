/* onnx_attr: the bottom of the ONNX importer — one-line errors about the file or a node,
 * dimension arithmetic that saturates instead of overflowing, a node's attributes, and
 * scalar constants. It calls nothing else in onnx/; every other part calls it
 * (onnx_internal.h has the declarations and the layering).
 */
#include "onnx/onnx_internal.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* ---- errors ---------------------------------------------------------------------------- */

/* Names come from the file: a control character in one must not break the one-line error. */
void ox_printable(char *s)
{
    for (; *s; s++)
        if ((unsigned char)*s < 0x20 || *s == 0x7f) *s = '?';
}

int ox_imp_fail(imp_t *im, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int ox_imp_fail(imp_t *im, const char *fmt, ...)
{
    int n = snprintf(im->err, im->errlen, "%s: ", im->path);
    if (n >= 0 && (size_t)n < im->errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(im->err + n, im->errlen - n, fmt, ap);
        va_end(ap);
    }
    ox_printable(im->err);
    return -1;
}

const char *ox_node_name(const Onnx__NodeProto *n)
{
    return n->name && n->name[0] ? n->name : (n->n_output && n->output[0][0] ? n->output[0] : "?");
}

const char *ox_node_op(const Onnx__NodeProto *n) { return n->op_type ? n->op_type : "?"; }

int ox_node_fail(imp_t *im, const Onnx__NodeProto *n, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
int ox_node_fail(imp_t *im, const Onnx__NodeProto *n, const char *fmt, ...)
{
    int k = snprintf(im->err, im->errlen, "%s: node '%s' (%s): ", im->path, ox_node_name(n),
                     ox_node_op(n));
    if (k >= 0 && (size_t)k < im->errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(im->err + k, im->errlen - k, fmt, ap);
        va_end(ap);
    }
    ox_printable(im->err);
    return -1;
}

/* a * b for non-negative a and b, INT64_MAX when it does not fit */
int64_t ox_mul_sat(int64_t a, int64_t b)
{
    int64_t r;
    return __builtin_mul_overflow(a, b, &r) ? INT64_MAX : r;
}

int64_t ox_dims_count(int rank, const int64_t *dims)
{
    int64_t n = 1;
    for (int i = 0; i < rank; i++) n = ox_mul_sat(n, dims[i] < 0 ? 0 : dims[i]);
    return n;
}

void ox_dims_str(int rank, const int64_t *dims, char *buf, size_t len)
{
    size_t o = 0;
    buf[0] = '\0';
    for (int i = 0; i < rank && o < len; i++)
        o += snprintf(buf + o, len - o, "%s%" PRId64, i ? "x" : "", dims[i]);
    if (rank == 0) snprintf(buf, len, "scalar");
}

/* ---- attributes ------------------------------------------------------------------------ */

const Onnx__AttributeProto *ox_attr_find(const Onnx__NodeProto *n, const char *name)
{
    for (size_t i = 0; i < n->n_attribute; i++)
        if (n->attribute[i]->name && !strcmp(n->attribute[i]->name, name)) return n->attribute[i];
    return NULL;
}

int ox_attr_int(imp_t *im, const Onnx__NodeProto *n, const char *name, int64_t def,
                    int64_t *out)
{
    const Onnx__AttributeProto *a = ox_attr_find(n, name);
    if (!a) {
        *out = def;
        return 0;
    }
    if (a->type != ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT)
        return ox_node_fail(im, n, "attribute '%s' is not an integer", name);
    *out = a->i;
    return 0;
}

int ox_attr_float(imp_t *im, const Onnx__NodeProto *n, const char *name, double def,
                      double *out)
{
    const Onnx__AttributeProto *a = ox_attr_find(n, name);
    if (!a) {
        *out = def;
        return 0;
    }
    if (a->type != ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT)
        return ox_node_fail(im, n, "attribute '%s' is not a float", name);
    *out = a->f;
    return 0;
}

/* Reads an integer list of exactly want entries (want < 0: any up to max) into out; absent:
 * *n = 0. */
int ox_attr_ints(imp_t *im, const Onnx__NodeProto *n, const char *name, int want,
                     int64_t *out, int max, int *got)
{
    const Onnx__AttributeProto *a = ox_attr_find(n, name);
    *got = 0;
    if (!a) return 0;
    if (a->type != ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS)
        return ox_node_fail(im, n, "attribute '%s' is not a list of integers", name);
    if ((want >= 0 && a->n_ints != (size_t)want) || a->n_ints > (size_t)max)
        return ox_node_fail(im, n, "attribute '%s' has %zu values, expected %d", name, a->n_ints,
                         want >= 0 ? want : max);
    for (size_t i = 0; i < a->n_ints; i++) out[i] = a->ints[i];
    *got = (int)a->n_ints;
    return 0;
}

/* A string attribute, or def when absent. */
int ox_attr_string(imp_t *im, const Onnx__NodeProto *n, const char *name, const char *def,
                       char *out, size_t len)
{
    const Onnx__AttributeProto *a = ox_attr_find(n, name);
    if (!a) {
        snprintf(out, len, "%s", def);
        return 0;
    }
    if (a->type != ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING || !a->has_s)
        return ox_node_fail(im, n, "attribute '%s' is not a string", name);
    size_t k = a->s.len < len - 1 ? a->s.len : len - 1;
    memcpy(out, a->s.data, k);
    out[k] = '\0';
    return 0;
}

/* ---- constants ----------------------------------------------------------------------- */

bool ox_const_scalar(const val_t *v, double *x)
{
    if (!v || v->kind != VAL_CONST || v->n_values != 1) return false;
    *x = v->reals ? v->reals[0] : (double)v->ints[0];
    return true;
}
