/* model: parser of the .net format (models/README.md) and shape/cost inference.
 *
 * Parsing runs in three steps: the text is cut into lines of tokens (rejecting binary data),
 * block definitions are collected, and the top level is expanded — blocks and repeats
 * become plain layers with full names and their inputs still as names. Names are then
 * resolved (inputs may be forward references), the layers sorted topologically (a cycle is
 * an error), and model_infer() computes shapes and costs.
 */
#include "model.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "infile.h"

#define TOKENS_MAX 64
#define BLOCK_DEPTH_MAX 16
#define REPEAT_MAX 100000

typedef struct {
    int lineno;
    int n_tok;
    char *tok[TOKENS_MAX];
} line_t;

typedef struct {
    char *name;
    int n_params;
    char *param[TOKENS_MAX];
    char *param_default[TOKENS_MAX]; /* NULL: required */
    int first, last;                 /* body: lines[first..last) */
    int lineno;
    int n_locals;
    char **locals;                   /* names defined in the body */
} block_t;

/* A layer as expanded, before its inputs are resolved. */
typedef struct {
    layer_t layer;
    int n_inputs;
    char *input_name[MODEL_MAX_INPUTS];
    char *tie_name; /* linear tie=: full name of the embed */
} raw_layer_t;

typedef struct {
    char *name;   /* full name of a block use */
    char *target; /* full name of its last layer */
    int lineno;
} alias_t;

/* Where expansion stands: the block being expanded and its bindings. */
typedef struct scope {
    const struct scope *parent;
    const block_t *block;          /* NULL at top level */
    const char *prefix;            /* "" or "use/" */
    const char *input;             /* full name bound to $in (NULL at top level) */
    int use_line;                  /* line of the use that opened the scope */
    int n_bind;
    const char *bind_key[TOKENS_MAX + 1];
    const char *bind_val[TOKENS_MAX + 1];
} scope_t;

/* A name -> index map (open addressing; the first insertion of a name stays), so that
 * resolving names is linear in the layers: `repeat 4000` had made it quadratic. */
typedef struct {
    char **key;
    int *val;
    int cap, n;
} name_index_t;

static unsigned name_hash(const char *s)
{
    unsigned h = 2166136261u;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 16777619u;
    return h;
}

static int name_index_get(const name_index_t *ix, const char *name)
{
    if (!ix->cap) return -1;
    for (unsigned i = name_hash(name) % (unsigned)ix->cap;; i = (i + 1) % (unsigned)ix->cap) {
        if (!ix->key[i]) return -1;
        if (!strcmp(ix->key[i], name)) return ix->val[i];
    }
}

static void name_index_put(name_index_t *ix, const char *name, int val)
{
    if (2 * (ix->n + 1) > ix->cap) {
        name_index_t g = {xcalloc(2 * (size_t)ix->cap + 64, sizeof(char *)),
                          xcalloc(2 * (size_t)ix->cap + 64, sizeof(int)), 2 * ix->cap + 64, 0};
        for (int i = 0; i < ix->cap; i++)
            if (ix->key[i]) {
                name_index_put(&g, ix->key[i], ix->val[i]);
                free(ix->key[i]);
            }
        free(ix->key);
        free(ix->val);
        *ix = g;
    }
    for (unsigned i = name_hash(name) % (unsigned)ix->cap;; i = (i + 1) % (unsigned)ix->cap) {
        if (!ix->key[i]) {
            ix->key[i] = xstrdup(name);
            ix->val[i] = val;
            ix->n++;
            return;
        }
        if (!strcmp(ix->key[i], name)) return; /* the first stays */
    }
}

static void name_index_free(name_index_t *ix)
{
    for (int i = 0; i < ix->cap; i++) free(ix->key[i]);
    free(ix->key);
    free(ix->val);
}

typedef struct {
    const char *path;
    char *err;
    size_t errlen;
    int failed;

    line_t *lines;
    int n_lines;
    block_t *blocks;
    int n_blocks;
    raw_layer_t *raw;
    int n_raw, cap_raw;
    alias_t *aliases;
    int n_alias, cap_alias;
    name_index_t raw_index, alias_index; /* full name -> its raw layer / alias */
    char *last_name; /* full name of the last layer made (previous-line input) */
    int depth;
} parser_t;

static const char *const s_type_names[LAYER_TYPE_COUNT] = {
    [LAYER_INPUT] = "input",         [LAYER_CONV] = "conv",     [LAYER_FC] = "fc",
    [LAYER_RELU] = "relu",           [LAYER_POOL] = "pool",     [LAYER_LRN] = "lrn",
    [LAYER_DROPOUT] = "dropout",     [LAYER_BATCHNORM] = "batchnorm",
    [LAYER_CONCAT] = "concat",       [LAYER_ADD] = "add",
    [LAYER_SOFTMAX_LOSS] = "softmax_loss",
    [LAYER_TANH] = "tanh",           [LAYER_TOKENS] = "tokens", [LAYER_EMBED] = "embed",
    [LAYER_POSEMBED] = "posembed",   [LAYER_CLSTOKEN] = "clstoken",
    [LAYER_TO_SEQ] = "to_seq",       [LAYER_LINEAR] = "linear",
    [LAYER_ATTENTION] = "attention", [LAYER_LAYERNORM] = "layernorm",
    [LAYER_GELU] = "gelu",           [LAYER_SELECT] = "select",
    [LAYER_SEQ_LOSS] = "seq_loss",
    [LAYER_ACT] = "act",             [LAYER_MUL] = "mul",       [LAYER_SLICE] = "slice",
    [LAYER_SHUFFLE] = "shuffle",     [LAYER_TO_IMAGE] = "to_image", [LAYER_SCALE] = "scale",
    [LAYER_WINATTN] = "winattn",     [LAYER_PATCHMERGE] = "patchmerge",
};

const char *layer_type_name(layer_type_t t)
{
    return (t >= 0 && t < LAYER_TYPE_COUNT) ? s_type_names[t] : "?";
}

static int type_from_name(const char *s)
{
    if (!strcmp(s, "bn")) return LAYER_BATCHNORM;
    for (int t = 0; t < LAYER_TYPE_COUNT; t++)
        if (!strcmp(s, s_type_names[t])) return t;
    return -1;
}

bool layer_has_params(const layer_t *l) { return l->params > 0; }

bool layer_is_input(const layer_t *l) { return l->type == LAYER_INPUT || l->type == LAYER_TOKENS; }

bool layer_is_loss(const layer_t *l)
{
    return l->type == LAYER_SOFTMAX_LOSS || l->type == LAYER_SEQ_LOSS;
}

int64_t layer_sf_rows(const layer_t *l)
{
    if (l->type == LAYER_FC) return 1;
    if (l->type == LAYER_LINEAR && !l->tied) return (int64_t)l->in_shape.h * l->in_shape.w;
    return 0;
}

/* ---- errors ---------------------------------------------------------------------------- */

/* Records the first error as "path:line: message" plus, inside blocks, where the block was
 * used. Returns -1 so callers can `return perr(...)`. */
static int perr_scope(parser_t *p, const scope_t *sc, int lineno, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int perr_scope(parser_t *p, const scope_t *sc, int lineno, const char *fmt, ...)
{
    if (p->failed) return -1;
    p->failed = 1;
    int n = snprintf(p->err, p->errlen, "%s:%d: ", p->path, lineno);
    if (n < 0 || (size_t)n >= p->errlen) return -1;
    va_list ap;
    va_start(ap, fmt);
    int m = vsnprintf(p->err + n, p->errlen - n, fmt, ap);
    va_end(ap);
    if (m < 0 || (size_t)(n + m) >= p->errlen) return -1;
    n += m;
    if (sc && sc->block)
        snprintf(p->err + n, p->errlen - n, " (in block '%s' used at line %d)", sc->block->name,
                 sc->use_line);
    return -1;
}
#define perr(p, lineno, ...) perr_scope((p), NULL, (lineno), __VA_ARGS__)

/* ---- lexing ---------------------------------------------------------------------------- */

/* Length of the UTF-8 sequence starting at s (n bytes left), or 0 if invalid. */
static int utf8_len(const unsigned char *s, size_t n)
{
    int len = s[0] < 0x80 ? 1 : (s[0] & 0xe0) == 0xc0 ? 2 : (s[0] & 0xf0) == 0xe0 ? 3
                                 : (s[0] & 0xf8) == 0xf0 ? 4 : 0;
    if (len == 0 || (size_t)len > n) return 0;
    if (len == 2 && s[0] < 0xc2) return 0;
    for (int i = 1; i < len; i++)
        if ((s[i] & 0xc0) != 0x80) return 0;
    return len;
}

static int lex(parser_t *p, const char *text, size_t len)
{
    int cap = 64, lineno = 1;
    p->lines = xcalloc(cap, sizeof *p->lines);
    size_t i = 0;
    while (i < len) {
        size_t start = i;
        while (i < len && text[i] != '\n') i++;
        size_t end = i;
        if (i < len) i++; /* the newline */

        for (size_t k = start; k < end;) {
            unsigned char c = (unsigned char)text[k];
            if (c >= 0x80) {
                int u = utf8_len((const unsigned char *)text + k, end - k);
                if (!u) return perr(p, lineno, "binary data (byte 0x%02x): expected text", c);
                k += u;
                continue;
            }
            if ((c < 0x20 && c != '\t' && c != '\r') || c == 0x7f)
                return perr(p, lineno, "binary data (byte 0x%02x): expected text", c);
            k++;
        }

        size_t cut = start;
        while (cut < end && text[cut] != '#') cut++;
        line_t ln = {.lineno = lineno};
        size_t k = start;
        while (k < cut) {
            while (k < cut && isspace((unsigned char)text[k])) k++;
            if (k >= cut) break;
            size_t t0 = k;
            while (k < cut && !isspace((unsigned char)text[k])) k++;
            if (ln.n_tok == TOKENS_MAX)
                return perr(p, lineno, "too many fields (at most %d)", TOKENS_MAX);
            char *tok = xmalloc(k - t0 + 1);
            memcpy(tok, text + t0, k - t0);
            tok[k - t0] = '\0';
            ln.tok[ln.n_tok++] = tok;
        }
        if (ln.n_tok > 0) {
            if (p->n_lines == cap) {
                cap *= 2;
                p->lines = xrealloc(p->lines, cap * sizeof *p->lines);
            }
            p->lines[p->n_lines++] = ln;
        }
        lineno++;
    }
    return 0;
}

/* ---- names ----------------------------------------------------------------------------- */

static bool valid_name(const char *s)
{
    if (!*s) return false;
    for (; *s; s++)
        if (!(isalnum((unsigned char)*s) || *s == '_' || *s == '-' || *s == '.')) return false;
    return true;
}

static const block_t *find_block(const parser_t *p, const char *name)
{
    for (int i = 0; i < p->n_blocks; i++)
        if (!strcmp(p->blocks[i].name, name)) return &p->blocks[i];
    return NULL;
}

static bool is_keyword(const char *s)
{
    return !strcmp(s, "block") || !strcmp(s, "end") || !strcmp(s, "repeat") ||
           type_from_name(s) >= 0;
}

/* Line where a full name (layer or block use) was defined, or 0. */
static int name_defined_at(const parser_t *p, const char *full)
{
    int i = name_index_get(&p->raw_index, full);
    if (i >= 0) return p->raw[i].layer.src_line;
    i = name_index_get(&p->alias_index, full);
    return i >= 0 ? p->aliases[i].lineno : 0;
}

/* true if name is a local of the scope's block, or "local.N" made by a repeat there. */
static bool scope_has_local(const scope_t *sc, const char *name)
{
    if (!sc->block) return false;
    for (int i = 0; i < sc->block->n_locals; i++) {
        const char *loc = sc->block->locals[i];
        size_t n = strlen(loc);
        if (!strncmp(loc, name, n) && (name[n] == '\0' || name[n] == '.')) return true;
    }
    return false;
}

/* Full name of a reference made in scope sc: "$in" is the scope's input, a local name of
 * the block gets the scope's prefix, anything else is taken as a full name. */
static char *resolve_ref(const scope_t *sc, const char *ref)
{
    if (!strcmp(ref, "$in") && sc->input) return xstrdup(sc->input);
    if (scope_has_local(sc, ref)) {
        size_t n = strlen(sc->prefix) + strlen(ref) + 1;
        char *s = xmalloc(n);
        snprintf(s, n, "%s%s", sc->prefix, ref);
        return s;
    }
    return xstrdup(ref);
}

/* ---- substitution of $params ------------------------------------------------------------ */

static const char *scope_lookup(const scope_t *sc, const char *key)
{
    for (int i = 0; i < sc->n_bind; i++)
        if (!strcmp(sc->bind_key[i], key)) return sc->bind_val[i];
    return NULL;
}

/* Copy of tok with every $name replaced by its binding ("$in" is left for resolve_ref).
 * Returns NULL (error recorded) on an unknown parameter. */
static char *substitute(parser_t *p, const scope_t *sc, int lineno, const char *tok)
{
    size_t cap = strlen(tok) + 64, n = 0;
    char *out = xmalloc(cap);
    for (const char *s = tok; *s;) {
        if (*s != '$') {
            if (n + 2 > cap) out = xrealloc(out, cap *= 2);
            out[n++] = *s++;
            continue;
        }
        const char *v = s + 1;
        while (isalnum((unsigned char)*v) || *v == '_') v++;
        char key[128];
        size_t klen = (size_t)(v - s - 1);
        if (klen == 0 || klen >= sizeof key) {
            free(out);
            perr_scope(p, sc, lineno, "bad parameter reference in '%s': expected $name", tok);
            return NULL;
        }
        memcpy(key, s + 1, klen);
        key[klen] = '\0';
        const char *val = scope_lookup(sc, key);
        if (!val && !strcmp(key, "in") && sc->input) val = "$in";
        if (!val) {
            free(out);
            if (!sc->block)
                perr(p, lineno, "'$%s' outside a block: parameters exist only in block bodies",
                     key);
            else
                perr_scope(p, sc, lineno, "unknown parameter '$%s' of block '%s'", key,
                           sc->block->name);
            return NULL;
        }
        size_t vlen = strlen(val);
        while (n + vlen + 2 > cap) out = xrealloc(out, cap *= 2);
        memcpy(out + n, val, vlen);
        n += vlen;
        s = v;
    }
    out[n] = '\0';
    return out;
}

/* ---- a layer line's key=value attributes (not core/kvfile's files of key = value lines) -- */

typedef struct {
    int n;
    char *key[TOKENS_MAX];
    char *val[TOKENS_MAX];
    bool used[TOKENS_MAX];
} attrs_t;

static void attrs_free(attrs_t *kv)
{
    for (int i = 0; i < kv->n; i++) {
        free(kv->key[i]);
        free(kv->val[i]);
    }
    kv->n = 0;
}

/* Splits tokens [first, n_tok) of a line (after substitution) into key=value pairs. */
static int attrs_parse(parser_t *p, const scope_t *sc, const line_t *ln, int first,
                       attrs_t *kv)
{
    memset(kv, 0, sizeof *kv);
    for (int i = first; i < ln->n_tok; i++) {
        char *t = substitute(p, sc, ln->lineno, ln->tok[i]);
        if (!t) return -1;
        char *eq = strchr(t, '=');
        if (!eq || eq == t) {
            perr_scope(p, sc, ln->lineno, "expected key=value, got '%s'", t);
            free(t);
            return -1;
        }
        *eq = '\0';
        for (int j = 0; j < kv->n; j++)
            if (!strcmp(kv->key[j], t)) {
                perr_scope(p, sc, ln->lineno, "key '%s' given twice", t);
                free(t);
                return -1;
            }
        kv->key[kv->n] = xstrdup(t);
        kv->val[kv->n] = xstrdup(eq + 1);
        kv->used[kv->n] = false;
        kv->n++;
        free(t);
    }
    return 0;
}

static const char *attrs_get(attrs_t *kv, const char *key)
{
    for (int i = 0; i < kv->n; i++)
        if (!strcmp(kv->key[i], key)) {
            kv->used[i] = true;
            return kv->val[i];
        }
    return NULL;
}

/* The typed getters below take a context for messages and return 0 / -1. */
typedef struct {
    parser_t *p;
    const scope_t *sc;
    int lineno;
    const char *what; /* "conv 'conv1'" */
    attrs_t *kv;
} args_t;

static int parse_long(const char *s, long *out)
{
    if (!*s) return -1;
    errno = 0;
    char *end;
    long v = strtol(s, &end, 10);
    if (*end || errno) return -1;
    *out = v;
    return 0;
}

static int arg_int(args_t *a, const char *key, bool required, int def, int min, int *out)
{
    const char *v = attrs_get(a->kv, key);
    if (!v) {
        if (required)
            return perr_scope(a->p, a->sc, a->lineno, "%s: missing required key '%s'", a->what,
                              key);
        *out = def;
        return 0;
    }
    long x;
    if (parse_long(v, &x) || x < min || x > INT_MAX)
        return perr_scope(a->p, a->sc, a->lineno,
                          "%s: bad value '%s' for %s: expected an integer >= %d", a->what, v,
                          key, min);
    *out = (int)x;
    return 0;
}

/* "K" or "HxW". */
static int arg_pair(args_t *a, const char *key, bool required, int def, int min, int *h, int *w)
{
    const char *v = attrs_get(a->kv, key);
    if (!v) {
        if (required)
            return perr_scope(a->p, a->sc, a->lineno, "%s: missing required key '%s'", a->what,
                              key);
        *h = *w = def;
        return 0;
    }
    char buf[64];
    snprintf(buf, sizeof buf, "%s", v);
    char *x = strchr(buf, 'x');
    long vh, vw;
    int bad;
    if (x) {
        *x = '\0';
        bad = parse_long(buf, &vh) || parse_long(x + 1, &vw);
    } else {
        bad = parse_long(buf, &vh);
        vw = vh;
    }
    if (bad || vh < min || vw < min || vh > INT_MAX || vw > INT_MAX)
        return perr_scope(a->p, a->sc, a->lineno,
                          "%s: bad value '%s' for %s: expected N or HxW, integers >= %d", a->what,
                          v, key, min);
    *h = (int)vh;
    *w = (int)vw;
    return 0;
}

static int arg_bool(args_t *a, const char *key, bool def, bool *out)
{
    const char *v = attrs_get(a->kv, key);
    if (!v) {
        *out = def;
        return 0;
    }
    if (strcmp(v, "0") && strcmp(v, "1"))
        return perr_scope(a->p, a->sc, a->lineno, "%s: bad value '%s' for %s: expected 0 or 1",
                          a->what, v, key);
    *out = v[0] == '1';
    return 0;
}

static int arg_double(args_t *a, const char *key, double def, double min, double max,
                      bool max_open, double *out)
{
    const char *v = attrs_get(a->kv, key);
    if (!v) {
        *out = def;
        return 0;
    }
    errno = 0;
    char *end;
    double x = strtod(v, &end);
    if (!*v || *end || errno || !isfinite(x) || x < min || x > max || (max_open && x >= max))
        return perr_scope(a->p, a->sc, a->lineno,
                          "%s: bad value '%s' for %s: expected a number in [%g, %g%s", a->what, v,
                          key, min, max, max_open ? ")" : "]");
    *out = x;
    return 0;
}

/* Every key given must have been read by the layer's parser. */
static int args_check_unused(args_t *a, const char *expected)
{
    for (int i = 0; i < a->kv->n; i++)
        if (!a->kv->used[i])
            return perr_scope(a->p, a->sc, a->lineno, "%s: unknown key '%s' (expected: %s)",
                              a->what, a->kv->key[i], expected);
    return 0;
}

/* A type the key parsers do not know: a bug. */
static int keys_unhandled(const layer_t *l)
{
    ASSERT(0, "unhandled layer type %d", l->type);
    return -1;
}

/* parse_layer_keys()'s steps: each reads its types' keys from kv into l and returns 0, or
 * reports the first bad key and returns -1. */

/* input: shape = CxHxW */
static int parse_input_keys(args_t *a, layer_t *l)
{
    const char *v = attrs_get(a->kv, "shape");
    if (!v)
        return perr_scope(a->p, a->sc, a->lineno, "%s: missing required key 'shape'",
                          a->what);
    long d[3];
    int nd = 0;
    char buf[96];
    snprintf(buf, sizeof buf, "%s", v);
    for (char *s = buf, *tok; nd < 4 && (tok = strsep(&s, "x")) != NULL; nd++)
        if (nd == 3 || parse_long(tok, &d[nd]) || d[nd] < 1 || d[nd] > INT_MAX) {
            nd = -1;
            break;
        }
    if (nd != 3)
        return perr_scope(a->p, a->sc, a->lineno,
                          "%s: bad value '%s' for shape: expected CxHxW, integers >= 1",
                          a->what, v);
    l->out_shape = (shape_t){(int)d[0], (int)d[1], (int)d[2]};
    return args_check_unused(a, "shape, in");
}

/* pool: op = max | avg, then its window (none when global) */
static int parse_pool_keys(args_t *a, layer_t *l)
{
    int rc = 0;
    const char *op = attrs_get(a->kv, "op");
    if (!op)
        return perr_scope(a->p, a->sc, a->lineno, "%s: missing required key 'op'", a->what);
    if (!strcmp(op, "max")) l->pool = POOL_MAX;
    else if (!strcmp(op, "avg") || !strcmp(op, "ave")) l->pool = POOL_AVG;
    else
        return perr_scope(a->p, a->sc, a->lineno,
                          "%s: bad value '%s' for op: expected max or avg", a->what, op);
    rc |= arg_bool(a, "global", false, &l->global);
    if (!rc) rc |= arg_pair(a, "kernel", !l->global, 1, 1, &l->kernel_h, &l->kernel_w);
    if (!rc) rc |= arg_pair(a, "stride", false, 1, 1, &l->stride_h, &l->stride_w);
    if (!rc) rc |= arg_pair(a, "pad", false, 0, 0, &l->pad_h, &l->pad_w);
    if (!rc) rc |= arg_bool(a, "ceil", false, &l->ceil_mode);
    return rc ? -1 : args_check_unused(a, "op, kernel, stride, pad, ceil, global, in");
}

/* The losses, softmax over classes and over a sequence's positions: their weight. */
static int parse_loss_keys(args_t *a, layer_t *l)
{
    if (arg_double(a, "weight", 1.0, 0, 1e9, false, &l->loss_weight)) return -1;
    return args_check_unused(a, "weight, in");
}

/* The image layers: conv, fc, pool, lrn, dropout, batchnorm. */
static int parse_cnn_keys(args_t *a, layer_t *l)
{
    int rc = 0;
    switch (l->type) {
    case LAYER_CONV:
        rc |= arg_int(a, "out", true, 0, 1, &l->out);
        if (!rc) rc |= arg_pair(a, "kernel", true, 0, 1, &l->kernel_h, &l->kernel_w);
        if (!rc) rc |= arg_pair(a, "stride", false, 1, 1, &l->stride_h, &l->stride_w);
        if (!rc) rc |= arg_pair(a, "pad", false, 0, 0, &l->pad_h, &l->pad_w);
        if (!rc) rc |= arg_int(a, "groups", false, 1, 1, &l->groups);
        if (!rc) rc |= arg_bool(a, "bias", true, &l->bias);
        return rc ? -1 : args_check_unused(a, "out, kernel, stride, pad, groups, bias, in");
    case LAYER_FC:
        rc |= arg_int(a, "out", true, 0, 1, &l->out);
        if (!rc) rc |= arg_bool(a, "bias", true, &l->bias);
        return rc ? -1 : args_check_unused(a, "out, bias, in");
    case LAYER_POOL:
        return parse_pool_keys(a, l);
    case LAYER_LRN:
        rc |= arg_int(a, "size", false, 5, 1, &l->lrn_size);
        if (!rc) rc |= arg_double(a, "alpha", 1e-4, 0, 1e9, false, &l->lrn_alpha);
        if (!rc) rc |= arg_double(a, "beta", 0.75, 0, 1e9, false, &l->lrn_beta);
        if (!rc) rc |= arg_double(a, "k", 1.0, 0, 1e9, false, &l->lrn_k);
        if (!rc && l->lrn_size % 2 == 0)
            return perr_scope(a->p, a->sc, a->lineno, "%s: bad value %d for size: expected odd",
                              a->what, l->lrn_size);
        return rc ? -1 : args_check_unused(a, "size, alpha, beta, k, in");
    case LAYER_DROPOUT:
        rc |= arg_double(a, "ratio", 0.5, 0, 1, true, &l->dropout_ratio);
        return rc ? -1 : args_check_unused(a, "ratio, in");
    case LAYER_BATCHNORM:
        rc |= arg_double(a, "eps", 1e-5, 0, 1, false, &l->bn_eps);
        if (!rc) rc |= arg_double(a, "momentum", 0.1, 0, 1, false, &l->bn_momentum);
        return rc ? -1 : args_check_unused(a, "eps, momentum, in");
    default:
        return keys_unhandled(l);
    }
}

/* The sequence layers: tokens, embeddings, linear, attention, layernorm, gelu, select. */
static int parse_seq_keys(args_t *a, layer_t *l)
{
    int rc = 0;
    switch (l->type) {
    case LAYER_TOKENS:
        rc |= arg_int(a, "seq", true, 0, 1, &l->seq_len);
        if (!rc) rc |= arg_int(a, "vocab", true, 0, 1, &l->vocab);
        if (!rc && l->vocab > (1 << 24))
            return perr_scope(a->p, a->sc, a->lineno,
                              "%s: vocab %d: at most %d (ids travel as exact floats)", a->what,
                              l->vocab, 1 << 24);
        return rc ? -1 : args_check_unused(a, "seq, vocab");
    case LAYER_EMBED:
        rc |= arg_int(a, "vocab", true, 0, 1, &l->vocab);
        if (!rc) rc |= arg_int(a, "dim", true, 0, 1, &l->out);
        return rc ? -1 : args_check_unused(a, "vocab, dim, in");
    case LAYER_POSEMBED:
        rc |= arg_int(a, "max", false, 0, 1, &l->pos_max);
        return rc ? -1 : args_check_unused(a, "max, in");
    case LAYER_LINEAR:
        rc |= arg_int(a, "out", true, 0, 1, &l->out);
        if (!rc) rc |= arg_bool(a, "bias", true, &l->bias);
        return rc ? -1 : args_check_unused(a, "out, bias, tie, in");
    case LAYER_ATTENTION:
        rc |= arg_int(a, "heads", true, 0, 1, &l->heads);
        if (!rc) rc |= arg_bool(a, "causal", false, &l->causal);
        return rc ? -1 : args_check_unused(a, "heads, causal, in");
    case LAYER_LAYERNORM:
        rc |= arg_double(a, "eps", 1e-5, 0, 1, false, &l->bn_eps);
        return rc ? -1 : args_check_unused(a, "eps, in");
    case LAYER_GELU: {
        const char *v = attrs_get(a->kv, "approx");
        if (v && strcmp(v, "erf") && strcmp(v, "tanh"))
            return perr_scope(a->p, a->sc, a->lineno,
                              "%s: bad value '%s' for approx: expected erf or tanh", a->what, v);
        l->gelu_tanh = v && !strcmp(v, "tanh");
        return args_check_unused(a, "approx, in");
    }
    case LAYER_SELECT:
        rc |= arg_int(a, "pos", false, 0, 0, &l->select_pos);
        return rc ? -1 : args_check_unused(a, "pos, in");
    default:
        return keys_unhandled(l);
    }
}

/* act's functions, in the order of act_t */
static const char *const s_act_names[] = {"sigmoid", "silu", "hardsigmoid", "hardswish", "clip"};

/* act fn=NAME [min= max=] [alpha= beta=]: the keys its function reads, no others */
static int parse_act_keys(args_t *a, layer_t *l)
{
    const char *v = attrs_get(a->kv, "fn");
    int fn = -1;
    for (int i = 0; v && i < (int)(sizeof s_act_names / sizeof *s_act_names); i++)
        if (!strcmp(v, s_act_names[i])) fn = i;
    if (fn < 0)
        return perr_scope(a->p, a->sc, a->lineno, "%s: %s '%s' for fn: expected sigmoid, silu, "
                          "hardsigmoid, hardswish or clip", a->what, v ? "bad value" : "missing",
                          v ? v : "");
    l->act = (act_t)fn;
    int rc = 0;
    if (l->act == ACT_CLIP) {
        rc |= arg_double(a, "min", 0.0, -1e9, 1e9, false, &l->act_a);
        if (!rc) rc |= arg_double(a, "max", 6.0, l->act_a, 1e9, false, &l->act_b);
        return rc ? -1 : args_check_unused(a, "fn, min, max, in");
    }
    if (l->act == ACT_HARDSIGMOID || l->act == ACT_HARDSWISH) {
        rc |= arg_double(a, "alpha", 1.0 / 6, -1e9, 1e9, false, &l->act_a);
        if (!rc) rc |= arg_double(a, "beta", 0.5, -1e9, 1e9, false, &l->act_b);
        return rc ? -1 : args_check_unused(a, "fn, alpha, beta, in");
    }
    return args_check_unused(a, "fn, in");
}

/* act, slice, shuffle, to_image (mul and scale take no keys) */
static int parse_zoo_keys(args_t *a, layer_t *l)
{
    int rc = 0;
    switch (l->type) {
    case LAYER_ACT:
        return parse_act_keys(a, l);
    case LAYER_SLICE:
        rc |= arg_int(a, "from", false, 0, 0, &l->slice_from);
        if (!rc) rc |= arg_int(a, "out", true, 0, 1, &l->out);
        return rc ? -1 : args_check_unused(a, "from, out, in");
    case LAYER_SHUFFLE:
        rc |= arg_int(a, "groups", true, 0, 1, &l->groups);
        return rc ? -1 : args_check_unused(a, "groups, in");
    case LAYER_TO_IMAGE:
        rc |= arg_int(a, "h", true, 0, 1, &l->image_h);
        if (!rc) rc |= arg_int(a, "w", true, 0, 1, &l->image_w);
        return rc ? -1 : args_check_unused(a, "h, w, in");
    default:
        return keys_unhandled(l);
    }
}

/* winattn h= w= window= shift= heads= bias=, patchmerge h= w= */
static int parse_window_keys(args_t *a, layer_t *l)
{
    int rc = arg_int(a, "h", true, 0, 1, &l->image_h);
    if (!rc) rc |= arg_int(a, "w", true, 0, 1, &l->image_w);
    if (rc) return -1;
    if (l->type == LAYER_PATCHMERGE) return args_check_unused(a, "h, w, in");
    rc |= arg_int(a, "window", true, 0, 1, &l->window);
    if (!rc) rc |= arg_int(a, "shift", false, 0, 0, &l->shift);
    if (!rc) rc |= arg_int(a, "heads", true, 0, 1, &l->heads);
    if (!rc) rc |= arg_bool(a, "bias", true, &l->bias);
    if (!rc && l->shift >= l->window)
        return perr_scope(a->p, a->sc, a->lineno, "%s: shift=%d: expected less than window=%d",
                          a->what, l->shift, l->window);
    return rc ? -1 : args_check_unused(a, "h, w, window, shift, heads, bias, in");
}

/* Reads the type's keys from kv into l; "in" has been consumed already. */
static int parse_layer_keys(args_t *a, layer_t *l)
{
    switch (l->type) {
    case LAYER_INPUT:
        return parse_input_keys(a, l);
    case LAYER_CONV:
    case LAYER_FC:
    case LAYER_POOL:
    case LAYER_LRN:
    case LAYER_DROPOUT:
    case LAYER_BATCHNORM:
        return parse_cnn_keys(a, l);
    case LAYER_SOFTMAX_LOSS:
    case LAYER_SEQ_LOSS:
        return parse_loss_keys(a, l);
    case LAYER_RELU:
    case LAYER_CONCAT:
    case LAYER_ADD:
    case LAYER_TANH:
    case LAYER_CLSTOKEN:
    case LAYER_TO_SEQ:
    case LAYER_MUL:
    case LAYER_SCALE:
        return args_check_unused(a, "in");
    case LAYER_ACT:
    case LAYER_SLICE:
    case LAYER_SHUFFLE:
    case LAYER_TO_IMAGE:
        return parse_zoo_keys(a, l);
    case LAYER_WINATTN:
    case LAYER_PATCHMERGE:
        return parse_window_keys(a, l);
    case LAYER_TOKENS:
    case LAYER_EMBED:
    case LAYER_POSEMBED:
    case LAYER_LINEAR:
    case LAYER_ATTENTION:
    case LAYER_LAYERNORM:
    case LAYER_GELU:
    case LAYER_SELECT:
        return parse_seq_keys(a, l);
    case LAYER_TYPE_COUNT:
        break;
    }
    return keys_unhandled(l);
}

/* ---- expansion ------------------------------------------------------------------------- */

static void set_last(parser_t *p, const char *full)
{
    free(p->last_name);
    p->last_name = xstrdup(full);
}

static int add_alias(parser_t *p, const scope_t *sc, int lineno, const char *full,
                     const char *target)
{
    int prev = name_defined_at(p, full);
    if (prev) return perr_scope(p, sc, lineno, "duplicate name '%s' (first at line %d)", full, prev);
    if (p->n_alias == p->cap_alias) {
        p->cap_alias = p->cap_alias ? 2 * p->cap_alias : 64;
        p->aliases = xrealloc(p->aliases, p->cap_alias * sizeof *p->aliases);
    }
    name_index_put(&p->alias_index, full, p->n_alias);
    p->aliases[p->n_alias++] = (alias_t){xstrdup(full), xstrdup(target), lineno};
    return 0;
}

static int expand_lines(parser_t *p, const scope_t *sc, int first, int last);

/* Expands one use of block b named `name` (full name full), its input full name `input`. */
static int expand_use(parser_t *p, const scope_t *sc, const line_t *ln, const block_t *b,
                      const char *full, const char *input, attrs_t *kv, int rep)
{
    if (p->depth >= BLOCK_DEPTH_MAX)
        return perr_scope(p, sc, ln->lineno, "blocks nested deeper than %d (a block using itself?)",
                          BLOCK_DEPTH_MAX);
    scope_t inner = {.parent = sc, .block = b, .input = input, .use_line = ln->lineno};
    size_t plen = strlen(full) + 2;
    char *prefix = xmalloc(plen);
    snprintf(prefix, plen, "%s/", full);
    inner.prefix = prefix;
    char repbuf[16];
    for (int i = 0; i < b->n_params; i++) {
        const char *v = attrs_get(kv, b->param[i]);
        if (!v) v = b->param_default[i];
        if (!v) {
            free(prefix);
            return perr_scope(p, sc, ln->lineno, "block '%s' use '%s': missing parameter '%s'",
                              b->name, full, b->param[i]);
        }
        inner.bind_key[inner.n_bind] = b->param[i];
        inner.bind_val[inner.n_bind++] = v;
    }
    if (rep > 0) {
        snprintf(repbuf, sizeof repbuf, "%d", rep);
        inner.bind_key[inner.n_bind] = "i";
        inner.bind_val[inner.n_bind++] = repbuf;
    }
    for (int i = 0; i < kv->n; i++)
        if (!kv->used[i]) {
            free(prefix);
            return perr_scope(p, sc, ln->lineno, "block '%s' use '%s': unknown key '%s'",
                              b->name, full, kv->key[i]);
        }
    set_last(p, input ? input : "");
    p->depth++;
    int rc = expand_lines(p, &inner, b->first, b->last);
    p->depth--;
    free(prefix);
    if (rc) return -1;
    return add_alias(p, sc, ln->lineno, full, p->last_name);
}

/* Full name for a name written in scope sc. */
static char *full_name(const scope_t *sc, const char *name)
{
    size_t n = strlen(sc->prefix) + strlen(name) + 1;
    char *s = xmalloc(n);
    snprintf(s, n, "%s%s", sc->prefix, name);
    return s;
}

/* The input given by in= (one name) or the previous layer, as a full name (owned). */
static char *single_input(parser_t *p, const scope_t *sc, attrs_t *kv)
{
    const char *in = attrs_get(kv, "in");
    if (in) return resolve_ref(sc, in);
    if (p->last_name && p->last_name[0]) return xstrdup(p->last_name);
    return NULL;
}

/* in=A,B,... of a layer of several inputs (concat, add, attention, mul) into r */
static int parse_inputs(parser_t *p, const scope_t *sc, int lineno, const char *what, int type,
                        attrs_t *kv, raw_layer_t *r)
{
    const char *in = attrs_get(kv, "in");
    if (!in) return perr_scope(p, sc, lineno, "%s: missing required key 'in' (A,B,...)", what);
    char buf[MODEL_MAX_INPUTS * (MODEL_NAME_MAX + 1)];
    snprintf(buf, sizeof buf, "%s", in);
    for (char *s = buf, *tok; (tok = strsep(&s, ",")) != NULL;) {
        if (!*tok) return perr_scope(p, sc, lineno, "%s: empty name in in=%s", what, in);
        if (r->n_inputs == MODEL_MAX_INPUTS)
            return perr_scope(p, sc, lineno, "%s: more than %d inputs", what, MODEL_MAX_INPUTS);
        r->input_name[r->n_inputs++] = resolve_ref(sc, tok);
    }
    if (type == LAYER_ATTENTION && r->n_inputs != 3)
        return perr_scope(p, sc, lineno, "%s: expected three inputs in=Q,K,V, got %d", what,
                          r->n_inputs);
    if (type == LAYER_MUL && r->n_inputs != 2)
        return perr_scope(p, sc, lineno, "%s: expected two inputs in=X,S, got %d", what,
                          r->n_inputs);
    if (r->n_inputs < 2)
        return perr_scope(p, sc, lineno, "%s: expected at least two inputs in in=", what);
    return 0;
}

static int expand_layer(parser_t *p, const scope_t *sc, const line_t *ln, int type)
{
    if (ln->n_tok < 2)
        return perr_scope(p, sc, ln->lineno, "%s: expected a name after the type", ln->tok[0]);
    const char *name = ln->tok[1];
    if (!valid_name(name))
        return perr_scope(p, sc, ln->lineno,
                          "bad name '%s': expected letters, digits, '_', '-' or '.'", name);
    char *full = full_name(sc, name);
    if (strlen(full) >= MODEL_NAME_MAX) {
        perr_scope(p, sc, ln->lineno, "name '%s' longer than %d characters", full,
                   MODEL_NAME_MAX - 1);
        free(full);
        return -1;
    }
    int prev = name_defined_at(p, full);
    if (prev) {
        perr_scope(p, sc, ln->lineno, "duplicate name '%s' (first at line %d)", full, prev);
        free(full);
        return -1;
    }
    attrs_t kv;
    if (attrs_parse(p, sc, ln, 2, &kv)) {
        free(full);
        attrs_free(&kv);
        return -1;
    }

    raw_layer_t r = {0};
    layer_t *l = &r.layer;
    snprintf(l->name, sizeof l->name, "%s", full);
    l->type = type;
    l->src_line = ln->lineno;
    char what[MODEL_NAME_MAX + 32];
    snprintf(what, sizeof what, "%s '%s'", s_type_names[type], name);
    args_t a = {p, sc, ln->lineno, what, &kv};

    int rc = 0;
    if (type == LAYER_INPUT || type == LAYER_TOKENS) {
        if (attrs_get(&kv, "in")) rc = perr_scope(p, sc, ln->lineno, "%s: an input takes no in=", what);
    } else if (type == LAYER_CONCAT || type == LAYER_ADD || type == LAYER_ATTENTION ||
               type == LAYER_MUL) {
        rc = parse_inputs(p, sc, ln->lineno, what, type, &kv, &r);
    } else {
        const char *in = attrs_get(&kv, "in");
        char *input = NULL;
        if (in && strchr(in, ','))
            rc = perr_scope(p, sc, ln->lineno, "%s: takes one input, got in=%s", what, in);
        else if (in)
            input = resolve_ref(sc, in);
        else if (p->last_name && p->last_name[0])
            input = xstrdup(p->last_name);
        else
            rc = perr_scope(p, sc, ln->lineno,
                            "%s: missing input: expected in=NAME or a layer on an earlier line",
                            what);
        if (input) r.input_name[r.n_inputs++] = input;
    }
    if (!rc && type == LAYER_LINEAR) {
        const char *tie = attrs_get(&kv, "tie");
        if (tie) r.tie_name = resolve_ref(sc, tie);
    }
    if (!rc) rc = parse_layer_keys(&a, l);
    attrs_free(&kv);
    if (rc) {
        free(r.tie_name);
        for (int i = 0; i < r.n_inputs; i++) free(r.input_name[i]);
        free(full);
        return -1;
    }
    if (p->n_raw == p->cap_raw) {
        p->cap_raw = p->cap_raw ? 2 * p->cap_raw : 64;
        p->raw = xrealloc(p->raw, p->cap_raw * sizeof *p->raw);
    }
    name_index_put(&p->raw_index, r.layer.name, p->n_raw);
    p->raw[p->n_raw++] = r;
    set_last(p, full);
    free(full);
    return 0;
}

/* `BLOCK NAME k=v...` or `repeat N BLOCK NAME k=v...` */
static int expand_block_line(parser_t *p, const scope_t *sc, const line_t *ln)
{
    bool is_repeat = !strcmp(ln->tok[0], "repeat");
    int at = is_repeat ? 2 : 0;
    long count = 1;
    if (is_repeat) {
        if (ln->n_tok < 4)
            return perr_scope(p, sc, ln->lineno, "expected 'repeat N BLOCK NAME key=value...'");
        char *n = substitute(p, sc, ln->lineno, ln->tok[1]);
        if (!n) return -1;
        int bad = parse_long(n, &count) || count < 1 || count > REPEAT_MAX;
        if (bad) perr_scope(p, sc, ln->lineno, "bad repeat count '%s': expected 1..%d", n, REPEAT_MAX);
        free(n);
        if (bad) return -1;
    }
    const block_t *b = find_block(p, ln->tok[at]);
    if (!b) {
        if (is_repeat)
            return perr_scope(p, sc, ln->lineno, "repeat: unknown block '%s'", ln->tok[at]);
        return perr_scope(p, sc, ln->lineno,
                          "unknown layer type '%s' (expected a layer type or a block: input, "
                          "conv, fc, relu, pool, lrn, dropout, batchnorm, concat, add, "
                          "softmax_loss, tanh, tokens, embed, posembed, clstoken, to_seq, "
                          "linear, attention, layernorm, gelu, select, seq_loss, act, mul, "
                          "slice, shuffle, to_image, scale)",
                          ln->tok[at]);
    }
    if (ln->n_tok < at + 2)
        return perr_scope(p, sc, ln->lineno, "block '%s': expected a name after it", b->name);
    const char *name = ln->tok[at + 1];
    if (!valid_name(name))
        return perr_scope(p, sc, ln->lineno,
                          "bad name '%s': expected letters, digits, '_', '-' or '.'", name);
    attrs_t kv;
    if (attrs_parse(p, sc, ln, at + 2, &kv)) {
        attrs_free(&kv);
        return -1;
    }
    char *input = single_input(p, sc, &kv);
    char *base = full_name(sc, name);
    int rc = 0;
    for (long rep = 1; !rc && rep <= count; rep++) {
        char full[MODEL_NAME_MAX * 2];
        if (is_repeat) snprintf(full, sizeof full, "%s.%ld", base, rep);
        else snprintf(full, sizeof full, "%s", base);
        for (int i = 0; i < kv.n; i++) kv.used[i] = !strcmp(kv.key[i], "in");
        char *rep_input = rep == 1 ? (input ? xstrdup(input) : NULL) : xstrdup(p->last_name);
        rc = expand_use(p, sc, ln, b, full, rep_input, &kv, is_repeat ? (int)rep : 0);
        free(rep_input);
    }
    if (!rc && is_repeat) rc = add_alias(p, sc, ln->lineno, base, p->last_name);
    free(base);
    free(input);
    attrs_free(&kv);
    return rc;
}

static int expand_lines(parser_t *p, const scope_t *sc, int first, int last)
{
    for (int i = first; i < last; i++) {
        const line_t *ln = &p->lines[i];
        if (!strcmp(ln->tok[0], "block")) {
            /* Skip a definition (collected already); only at top level. */
            if (sc->block)
                return perr_scope(p, sc, ln->lineno, "block definitions cannot be nested");
            while (i < last && strcmp(p->lines[i].tok[0], "end")) i++;
            continue;
        }
        if (!strcmp(ln->tok[0], "end"))
            return perr_scope(p, sc, ln->lineno, "'end' without a block");
        int type = type_from_name(ln->tok[0]);
        int rc = type >= 0 ? expand_layer(p, sc, ln, type) : expand_block_line(p, sc, ln);
        if (rc) return -1;
    }
    return 0;
}

/* Collects `block NAME params... / body / end` definitions. */
static int collect_blocks(parser_t *p)
{
    int cap = 0;
    for (int i = 0; i < p->n_lines; i++) {
        line_t *ln = &p->lines[i];
        if (strcmp(ln->tok[0], "block")) continue;
        if (ln->n_tok < 2) return perr(p, ln->lineno, "expected 'block NAME [param[=default]...]'");
        const char *name = ln->tok[1];
        if (!valid_name(name) || strchr(name, '.'))
            return perr(p, ln->lineno, "bad block name '%s': expected letters, digits, '_', '-'",
                        name);
        if (is_keyword(name))
            return perr(p, ln->lineno, "block name '%s' is a layer type or keyword", name);
        const block_t *dup = find_block(p, name);
        if (dup) return perr(p, ln->lineno, "duplicate block '%s' (first at line %d)", name, dup->lineno);
        if (p->n_blocks == cap) {
            cap = cap ? 2 * cap : 16;
            p->blocks = xrealloc(p->blocks, cap * sizeof *p->blocks);
        }
        block_t *b = &p->blocks[p->n_blocks];
        memset(b, 0, sizeof *b);
        b->name = ln->tok[1];
        b->lineno = ln->lineno;
        for (int k = 2; k < ln->n_tok; k++) {
            char *eq = strchr(ln->tok[k], '=');
            if (eq) *eq = '\0';
            const char *pn = ln->tok[k];
            bool ok = *pn != '\0' && strcmp(pn, "in") && strcmp(pn, "i");
            for (const char *c = pn; ok && *c; c++) ok = isalnum((unsigned char)*c) || *c == '_';
            if (!ok) return perr(p, ln->lineno, "bad block parameter '%s': expected a name (not in or i)", pn);
            b->param[b->n_params] = ln->tok[k];
            b->param_default[b->n_params++] = eq ? eq + 1 : NULL;
        }
        b->first = i + 1;
        int j = i + 1;
        while (j < p->n_lines && strcmp(p->lines[j].tok[0], "end")) {
            if (!strcmp(p->lines[j].tok[0], "block"))
                return perr(p, p->lines[j].lineno,
                            "block definitions cannot be nested (missing 'end' for block '%s' "
                            "of line %d?)", b->name, b->lineno);
            j++;
        }
        if (j == p->n_lines) return perr(p, ln->lineno, "block '%s' has no 'end'", name);
        if (p->lines[j].n_tok != 1) return perr(p, p->lines[j].lineno, "expected 'end' alone");
        b->last = j;
        if (b->first == b->last) return perr(p, ln->lineno, "block '%s' is empty", name);
        b->locals = xcalloc(b->last - b->first, sizeof *b->locals);
        for (int k = b->first; k < b->last; k++) {
            const line_t *bl = &p->lines[k];
            int at = !strcmp(bl->tok[0], "repeat") ? 2 : 0;
            if (bl->n_tok > at + 1) b->locals[b->n_locals++] = bl->tok[at + 1];
        }
        p->n_blocks++;
        i = j;
    }
    return 0;
}

/* ---- resolution and ordering ----------------------------------------------------------- */

static int find_raw(const parser_t *p, const char *full)
{
    return name_index_get(&p->raw_index, full);
}

static int resolve_input(const parser_t *p, const char *name)
{
    for (int hops = 0; hops <= p->n_alias; hops++) {
        int r = find_raw(p, name);
        if (r >= 0) return r;
        int a = name_index_get(&p->alias_index, name);
        if (a < 0) return -1;
        name = p->aliases[a].target;
    }
    return -1;
}

/* Orders the raw layers topologically (stable: definition order among ready layers) into
 * m->layers. */
static int order_layers(parser_t *p, model_t *m)
{
    int n = p->n_raw;
    int *in_idx = xcalloc((size_t)n * MODEL_MAX_INPUTS, sizeof *in_idx);
    for (int i = 0; i < n; i++) {
        raw_layer_t *r = &p->raw[i];
        for (int k = 0; k < r->n_inputs; k++) {
            int j = resolve_input(p, r->input_name[k]);
            if (j < 0) {
                free(in_idx);
                return perr(p, r->layer.src_line, "%s '%s': missing input '%s' (no such layer)",
                            s_type_names[r->layer.type], r->layer.name, r->input_name[k]);
            }
            if (j == i) {
                free(in_idx);
                return perr(p, r->layer.src_line, "cycle: layer '%s' is its own input",
                            r->layer.name);
            }
            in_idx[i * MODEL_MAX_INPUTS + k] = j;
        }
    }
    int *pos = xmalloc(n * sizeof *pos); /* raw index -> position in the order, -1: not yet */
    for (int i = 0; i < n; i++) pos[i] = -1;
    m->layers = xcalloc(n, sizeof *m->layers);
    int placed = 0;
    while (placed < n) {
        int progress = 0;
        for (int i = 0; i < n; i++) {
            if (pos[i] >= 0) continue;
            raw_layer_t *r = &p->raw[i];
            bool ready = true;
            for (int k = 0; k < r->n_inputs && ready; k++)
                ready = pos[in_idx[i * MODEL_MAX_INPUTS + k]] >= 0;
            if (!ready) continue;
            layer_t *l = &m->layers[placed];
            *l = r->layer;
            l->n_inputs = r->n_inputs;
            for (int k = 0; k < r->n_inputs; k++) l->inputs[k] = pos[in_idx[i * MODEL_MAX_INPUTS + k]];
            pos[i] = placed++;
            progress = 1;
        }
        if (!progress) {
            /* Walk inputs among the unplaced until a layer repeats: that is a cycle. */
            int start = 0;
            while (pos[start] >= 0) start++;
            int *seen = xcalloc(n, sizeof *seen);
            int cur = start, step = 1;
            while (!seen[cur]) {
                seen[cur] = step++;
                raw_layer_t *r = &p->raw[cur];
                int next = -1;
                for (int k = 0; k < r->n_inputs && next < 0; k++)
                    if (pos[in_idx[cur * MODEL_MAX_INPUTS + k]] < 0) next = in_idx[cur * MODEL_MAX_INPUTS + k];
                cur = next;
            }
            const raw_layer_t *r = &p->raw[cur];
            char path[512] = "";
            size_t used = 0;
            int c = cur;
            do {
                used += snprintf(path + used, used < sizeof path ? sizeof path - used : 0, "%s <- ",
                                 p->raw[c].layer.name);
                int next = -1;
                for (int k = 0; k < p->raw[c].n_inputs && next < 0; k++) {
                    int j = in_idx[c * MODEL_MAX_INPUTS + k];
                    if (pos[j] < 0 && seen[j]) next = j;
                }
                c = next;
            } while (c != cur && c >= 0 && used < sizeof path);
            snprintf(path + (used < sizeof path ? used : sizeof path - 1),
                     used < sizeof path ? sizeof path - used : 1, "%s", r->layer.name);
            free(seen);
            free(pos);
            free(in_idx);
            return perr(p, r->layer.src_line, "cycle: %s (expected a DAG)", path);
        }
    }
    m->n_layers = n;
    for (int i = 0; i < n; i++) {
        const raw_layer_t *r = &p->raw[i];
        if (!r->tie_name) continue;
        layer_t *l = &m->layers[pos[i]];
        int j = resolve_input(p, r->tie_name);
        if (j < 0 || p->raw[j].layer.type != LAYER_EMBED || pos[j] > pos[i]) {
            free(pos);
            free(in_idx);
            return perr(p, r->layer.src_line,
                        "linear '%s': tie=%s: expected an embed layer that comes before it",
                        l->name, r->tie_name);
        }
        l->tied = true;
        l->tie_layer = pos[j];
    }
    free(pos);
    free(in_idx);
    if (!layer_is_input(&m->layers[0]))
        return perr(p, m->layers[0].src_line, "'%s' has no input: expected an input layer first",
                    m->layers[0].name);
    return 0;
}

static void parser_free(parser_t *p)
{
    for (int i = 0; i < p->n_lines; i++)
        for (int k = 0; k < p->lines[i].n_tok; k++) free(p->lines[i].tok[k]);
    free(p->lines);
    for (int i = 0; i < p->n_blocks; i++) free(p->blocks[i].locals);
    free(p->blocks);
    for (int i = 0; i < p->n_raw; i++) {
        for (int k = 0; k < p->raw[i].n_inputs; k++) free(p->raw[i].input_name[k]);
        free(p->raw[i].tie_name);
    }
    free(p->raw);
    for (int i = 0; i < p->n_alias; i++) {
        free(p->aliases[i].name);
        free(p->aliases[i].target);
    }
    free(p->aliases);
    name_index_free(&p->raw_index);
    name_index_free(&p->alias_index);
    free(p->last_name);
}

int model_parse(model_t *m, const char *path, const char *text, size_t len, char *err,
                size_t errlen)
{
    memset(m, 0, sizeof *m);
    snprintf(m->path, sizeof m->path, "%s", path);
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    snprintf(m->name, sizeof m->name, "%s", base);
    char *dot = strstr(m->name, ".net");
    if (dot && dot[4] == '\0') *dot = '\0';

    parser_t p = {.path = path, .err = err, .errlen = errlen};
    scope_t top = {.prefix = ""};
    int rc = lex(&p, text, len);
    if (!rc) rc = collect_blocks(&p);
    if (!rc) rc = expand_lines(&p, &top, 0, p.n_lines);
    if (!rc && p.n_raw == 0)
        rc = perr(&p, p.n_lines ? p.lines[p.n_lines - 1].lineno : 1,
                  "empty model: expected layer lines such as 'input data shape=3x224x224'");
    if (!rc) rc = order_layers(&p, m);
    parser_free(&p);
    if (!rc) rc = model_infer(m, err, errlen);
    if (rc) model_fini(m);
    return rc;
}

int model_load(model_t *m, const char *path, char *err, size_t errlen)
{
    memset(m, 0, sizeof *m);
    char *buf;
    size_t n;
    if (infile_read(path, SIZE_MAX, &buf, &n, err, errlen)) return -1;
    int rc = model_parse(m, path, buf, n, err, errlen);
    free(buf);
    return rc;
}

void model_fini(model_t *m)
{
    if (!m) return;
    free(m->layers);
    m->layers = NULL;
    m->n_layers = 0;
}

int model_find(const model_t *m, const char *name)
{
    for (int i = 0; i < m->n_layers; i++)
        if (!strcmp(m->layers[i].name, name)) return i;
    return -1;
}

/* ---- inference ------------------------------------------------------------------------- */

/* A layer's elements, parameters, FLOPs and bytes per sample are refused past 2^50, and a
 * model's totals past 2^60: times the batch and the iterations they stay within int64. */
#define MODEL_COST_MAX ((int64_t)1 << 50)
#define MODEL_TOTAL_MAX ((int64_t)1 << 60)

/* a * b for a, b >= 0, or MODEL_COST_MAX + 1 when that is larger (never overflows). */
static int64_t cost_mul(int64_t a, int64_t b)
{
    if (a != 0 && b > MODEL_COST_MAX / a) return MODEL_COST_MAX + 1;
    return a * b;
}

static int64_t shape_elems(shape_t s) { return cost_mul(cost_mul(s.c, s.h), s.w); }

static int ierr(const model_t *m, const layer_t *l, char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
static int ierr(const model_t *m, const layer_t *l, char *err, size_t errlen, const char *fmt, ...)
{
    int n = snprintf(err, errlen, "%s:%d: %s '%s': ", m->path, l->src_line,
                     layer_type_name(l->type), l->name);
    if (n >= 0 && (size_t)n < errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err + n, errlen - n, fmt, ap);
        va_end(ap);
    }
    return -1;
}

const char *shape_str(shape_t s, char *buf, size_t len)
{
    if (s.h == 1 && s.w == 1) snprintf(buf, len, "%d", s.c);
    else snprintf(buf, len, "%dx%dx%d", s.c, s.h, s.w);
    return buf;
}

/* Output size of a pooling window along one axis; Caffe's rule in ceil mode (the last
 * window must start inside the input or its left padding). */
static int64_t pool_out(int in, int k, int s, int pad, bool ceil_mode)
{
    int64_t span = (int64_t)in + 2 * (int64_t)pad - k;
    if (span < 0) return 0;
    int64_t out = (ceil_mode ? (span + s - 1) / s : span / s) + 1;
    if (ceil_mode && pad > 0 && (out - 1) * s >= (int64_t)in + pad) out--;
    return out;
}

/* Image layers read images (or one position), sequence layers read sequences (or one pixel):
 * the two lay their values out differently in memory (models/README.md, "Sequences"). */
static int seq_check(const model_t *m, const layer_t *l, const layer_t *src, char *err,
                     size_t errlen)
{
    if (!src) return 0;
    int64_t pos = (int64_t)src->out_shape.h * src->out_shape.w;
    switch (l->type) {
    case LAYER_CONV: case LAYER_POOL: case LAYER_LRN: case LAYER_BATCHNORM: case LAYER_CONCAT:
    case LAYER_FC: case LAYER_SOFTMAX_LOSS: case LAYER_TO_SEQ:
        for (int k = 0; k < l->n_inputs; k++) {
            const layer_t *in = &m->layers[l->inputs[k]];
            int64_t p = (int64_t)in->out_shape.h * in->out_shape.w;
            if (in->seq && p > 1)
                return ierr(m, l, err, errlen,
                            "input '%s' is a sequence of %lld positions: expected an image "
                            "(select or linear read sequences)",
                            in->name, (long long)p);
        }
        return 0;
    case LAYER_POSEMBED: case LAYER_CLSTOKEN: case LAYER_LINEAR: case LAYER_ATTENTION:
    case LAYER_LAYERNORM: case LAYER_SELECT: case LAYER_SEQ_LOSS: case LAYER_WINATTN:
    case LAYER_PATCHMERGE:
        if (!src->seq && pos > 1)
            return ierr(m, l, err, errlen,
                        "input '%s' is an image of %lld pixels: expected a sequence (to_seq "
                        "turns an image into one)",
                        src->name, (long long)pos);
        return 0;
    default: return 0;
    }
}

/* One layer's inference under way: its input (the first one's shape; as a sequence, S
 * positions of D features), the output shape and the activation bytes kept besides it. */
typedef struct {
    model_t *m;
    layer_t *l;
    const layer_t *src; /* the first input, NULL for an input layer */
    shape_t in, out;
    int64_t in_count, S, D;
    int64_t extra_act;
    bool in_seq;
    char *err;
    size_t errlen;
} infer_t;

static int infer_conv(infer_t *x)
{
    layer_t *l = x->l;
    shape_t in = x->in;
    if (in.c % l->groups || l->out % l->groups)
        return ierr(x->m, l, x->err, x->errlen,
                    "shape mismatch: %d input and %d output channels must both divide "
                    "into groups=%d",
                    in.c, l->out, l->groups);
    int64_t ph = in.h + 2 * (int64_t)l->pad_h, pw = in.w + 2 * (int64_t)l->pad_w;
    if (l->kernel_h > ph || l->kernel_w > pw)
        return ierr(x->m, l, x->err, x->errlen,
                    "shape mismatch: kernel %dx%d larger than the padded input %lldx%lld",
                    l->kernel_h, l->kernel_w, (long long)ph, (long long)pw);
    int64_t oh = (ph - l->kernel_h) / l->stride_h + 1;
    int64_t ow = (pw - l->kernel_w) / l->stride_w + 1;
    if (oh > INT_MAX || ow > INT_MAX)
        return ierr(x->m, l, x->err, x->errlen, "an output plane over %d values a side", INT_MAX);
    x->out = (shape_t){l->out, (int)oh, (int)ow};
    int64_t k_size = cost_mul(cost_mul(in.c / l->groups, l->kernel_h), l->kernel_w);
    l->weights = cost_mul(l->out, k_size);
    l->biases = l->bias ? l->out : 0;
    int64_t macs = cost_mul(shape_elems(x->out), k_size);
    l->fwd_flops = 2 * macs + (l->bias ? shape_elems(x->out) : 0);
    l->bwd_flops = 4 * macs + (l->bias ? shape_elems(x->out) : 0);
    return 0;
}

static int infer_pool(infer_t *x)
{
    layer_t *l = x->l;
    shape_t in = x->in;
    if (l->global) {
        l->kernel_h = in.h;
        l->kernel_w = in.w;
        l->stride_h = l->stride_w = 1;
        l->pad_h = l->pad_w = 0;
    }
    if (l->pad_h >= l->kernel_h || l->pad_w >= l->kernel_w)
        return ierr(x->m, l, x->err, x->errlen, "pad %dx%d must be smaller than the kernel %dx%d",
                    l->pad_h, l->pad_w, l->kernel_h, l->kernel_w);
    int64_t oh = pool_out(in.h, l->kernel_h, l->stride_h, l->pad_h, l->ceil_mode);
    int64_t ow = pool_out(in.w, l->kernel_w, l->stride_w, l->pad_w, l->ceil_mode);
    if (oh < 1 || ow < 1)
        return ierr(x->m, l, x->err, x->errlen,
                    "shape mismatch: kernel %dx%d larger than the padded input %lldx%lld",
                    l->kernel_h, l->kernel_w, in.h + 2 * (long long)l->pad_h,
                    in.w + 2 * (long long)l->pad_w);
    if (oh > INT_MAX || ow > INT_MAX)
        return ierr(x->m, l, x->err, x->errlen, "an output plane over %d values a side", INT_MAX);
    x->out = (shape_t){in.c, (int)oh, (int)ow};
    l->fwd_flops = cost_mul(cost_mul(shape_elems(x->out), l->kernel_h), l->kernel_w);
    l->bwd_flops = l->fwd_flops;
    return 0;
}

/* concat: planes must agree; the channels add up */
static int infer_concat(infer_t *x)
{
    model_t *m = x->m;
    layer_t *l = x->l;
    shape_t in = x->in;
    char b1[48], b2[48];
    int64_t c = 0;
    l->seq = false;
    for (int k = 0; k < l->n_inputs; k++) {
        const layer_t *src = &m->layers[l->inputs[k]];
        shape_t s = src->out_shape;
        if (s.h != in.h || s.w != in.w)
            return ierr(m, l, x->err, x->errlen,
                        "shape mismatch: input '%s' is %s but '%s' is %s (planes must agree)",
                        src->name, shape_str(s, b1, sizeof b1),
                        m->layers[l->inputs[0]].name, shape_str(in, b2, sizeof b2));
        c += s.c;
    }
    if (c > INT_MAX) return ierr(m, l, x->err, x->errlen, "more than %d channels", INT_MAX);
    x->out.c = (int)c;
    return 0;
}

/* add: every input the first's shape (and, as sequences of more than one position, kind) */
static int infer_add(infer_t *x)
{
    model_t *m = x->m;
    layer_t *l = x->l;
    shape_t in = x->in;
    bool in_seq = x->in_seq;
    char b1[48], b2[48];
    for (int k = 1; k < l->n_inputs; k++) {
        const layer_t *src = &m->layers[l->inputs[k]];
        shape_t s = src->out_shape;
        if (s.c != in.c || s.h != in.h || s.w != in.w || (x->S > 1 && src->seq != in_seq))
            return ierr(m, l, x->err, x->errlen,
                        "shape mismatch: input '%s' is %s%s but '%s' is %s",
                        src->name, shape_str(s, b1, sizeof b1),
                        src->seq != in_seq ? (src->seq ? " (a sequence)" : " (an image)") : "",
                        m->layers[l->inputs[0]].name, shape_str(in, b2, sizeof b2));
    }
    l->fwd_flops = x->in_count * (l->n_inputs - 1);
    l->bwd_flops = x->in_count;
    return 0;
}

/* batchnorm (per channel) and layernorm (per feature): a scale and a shift per channel */
static int infer_norm(infer_t *x)
{
    layer_t *l = x->l;
    l->weights = x->in.c;
    l->biases = x->in.c;
    l->fwd_flops = 5 * x->in_count; /* mean, variance, normalise, scale, shift */
    l->bwd_flops = 8 * x->in_count;
    return 0;
}

/* FLOPs per element of act's functions, forward and backward, in the order of act_t:
 * sigmoid 1/(1+exp(-x)) 4 (negate, exp, add, divide), its gradient s(1-s)dy 3; silu one
 * multiply more, its gradient (s + x s (1-s)) dy 6; hardsigmoid a multiply-add and a clamp
 * 3, its gradient a test and a multiply 2; hardswish a multiply more 4 and 4; clip a
 * compare and a select, counted 1 as relu. */
static const int s_act_flops[][2] = {{4, 3}, {5, 6}, {3, 2}, {4, 4}, {1, 1}};

/* mul: s is x's shape, or C x 1 x 1 with x's channels (scaled over the plane) */
static int infer_mul(infer_t *x)
{
    model_t *m = x->m;
    layer_t *l = x->l;
    const layer_t *g = &m->layers[l->inputs[1]];
    shape_t s = g->out_shape, in = x->in;
    bool same = s.c == in.c && s.h == in.h && s.w == in.w && g->seq == x->in_seq;
    bool gate = s.c == in.c && s.h == 1 && s.w == 1 && !g->seq && !x->in_seq;
    char b1[48], b2[48];
    if (!same && !gate)
        return ierr(m, l, x->err, x->errlen, "shape mismatch: '%s' is %s, not %s nor %dx1x1",
                    g->name, shape_str(s, b1, sizeof b1), shape_str(in, b2, sizeof b2), in.c);
    l->fwd_flops = x->in_count;     /* one multiply per output */
    l->bwd_flops = 2 * x->in_count; /* dx = dy s, ds = dy x (summed over the plane) */
    return 0;
}

/* act, mul, slice, shuffle, to_image, scale: the layers of today's image networks */
static int infer_zoo(infer_t *x)
{
    layer_t *l = x->l;
    shape_t in = x->in;
    switch (l->type) {
    case LAYER_ACT:
        l->fwd_flops = cost_mul(x->in_count, s_act_flops[l->act][0]);
        l->bwd_flops = cost_mul(x->in_count, s_act_flops[l->act][1]);
        return 0;
    case LAYER_MUL:
        return infer_mul(x);
    case LAYER_SLICE:
        if (x->in_seq || (int64_t)l->slice_from + l->out > in.c)
            return ierr(x->m, l, x->err, x->errlen, "channels %d..%d of %s input of %d",
                        l->slice_from, l->slice_from + l->out - 1, x->in_seq ? "a sequence" : "an",
                        in.c);
        x->out.c = l->out;
        return 0;
    case LAYER_SHUFFLE:
        if (x->in_seq || in.c % l->groups)
            return ierr(x->m, l, x->err, x->errlen, "%d channels do not split into groups=%d",
                        in.c, l->groups);
        return 0;
    case LAYER_TO_IMAGE:
        if (!x->in_seq || x->S != (int64_t)l->image_h * l->image_w)
            return ierr(x->m, l, x->err, x->errlen, "h=%d w=%d: expected a sequence of %lld "
                        "positions", l->image_h, l->image_w, (long long)l->image_h * l->image_w);
        x->out = (shape_t){in.c, l->image_h, l->image_w};
        l->seq = false;
        return 0;
    case LAYER_SCALE:
        if (x->in_seq && x->S > 1)
            return ierr(x->m, l, x->err, x->errlen, "scales the channels of an image, not a sequence");
        l->weights = in.c;
        l->fwd_flops = x->in_count;     /* one multiply per value */
        l->bwd_flops = 2 * x->in_count; /* dx = dy w, dw = sum of dy x */
        return 0;
    default:
        break;
    }
    ASSERT(0, "bad layer type");
    return -1;
}

/* The image layers and those that read either kind (relu, dropout, tanh, gelu, add). */
static int infer_image(infer_t *x)
{
    layer_t *l = x->l;
    int64_t in_count = x->in_count;
    switch (l->type) {
    case LAYER_INPUT:
        x->out = l->out_shape;
        return 0;
    case LAYER_CONV:
        return infer_conv(x);
    case LAYER_FC:
        x->out = (shape_t){l->out, 1, 1};
        l->weights = cost_mul(l->out, in_count);
        l->biases = l->bias ? l->out : 0;
        l->fwd_flops = 2 * l->weights + l->biases;
        l->bwd_flops = 4 * l->weights + l->biases;
        return 0;
    case LAYER_RELU:
    case LAYER_DROPOUT:
        l->fwd_flops = l->bwd_flops = in_count;
        return 0;
    case LAYER_TANH:
        l->fwd_flops = 4 * in_count;
        l->bwd_flops = 2 * in_count;
        return 0;
    case LAYER_GELU:
        l->fwd_flops = 8 * in_count;
        l->bwd_flops = 12 * in_count;
        return 0;
    case LAYER_POOL:
        return infer_pool(x);
    case LAYER_LRN:
        /* square, window sum, scale, power, divide: ~(size + 4) per element */
        l->fwd_flops = cost_mul(in_count, (int64_t)l->lrn_size + 4);
        l->bwd_flops = 2 * l->fwd_flops;
        return 0;
    case LAYER_BATCHNORM:
        return infer_norm(x);
    case LAYER_CONCAT:
        return infer_concat(x);
    case LAYER_ADD:
        return infer_add(x);
    case LAYER_SOFTMAX_LOSS:
        x->out = (shape_t){1, 1, 1};
        l->fwd_flops = 4 * in_count; /* max, exp, sum, divide */
        l->bwd_flops = in_count;
        return 0;
    default:
        return infer_zoo(x);
    }
    ASSERT(0, "bad layer type");
    return -1;
}

static int infer_embed(infer_t *x)
{
    layer_t *l = x->l;
    const layer_t *src = x->src;
    if (src->type != LAYER_TOKENS)
        return ierr(x->m, l, x->err, x->errlen, "input '%s' is a %s: expected tokens", src->name,
                    layer_type_name(src->type));
    if (l->vocab < src->vocab)
        return ierr(x->m, l, x->err, x->errlen, "vocab=%d is smaller than the vocab=%d of '%s'",
                    l->vocab, src->vocab, src->name);
    x->out = (shape_t){l->out, 1, (int)x->S};
    l->weights = cost_mul(l->vocab, l->out);
    l->bwd_flops = cost_mul(l->out, x->S);
    l->seq = true;
    return 0;
}

/* linear: per position; tied, it shares the embedding's (vocab, dim) weights */
static int infer_linear(infer_t *x)
{
    layer_t *l = x->l;
    int64_t S = x->S, D = x->D;
    if (S > INT_MAX) return ierr(x->m, l, x->err, x->errlen, "too many positions");
    x->out = (shape_t){l->out, 1, (int)S};
    if (l->tied) {
        const layer_t *e = &x->m->layers[l->tie_layer];
        if (l->out != e->vocab || D != e->out || l->bias)
            return ierr(x->m, l, x->err, x->errlen,
                        "tie=%s: expected out=%d (its vocab), %d input features (its "
                        "dim) and bias=0; got out=%d, %lld features, bias=%d",
                        e->name, e->vocab, e->out, l->out, (long long)D, l->bias);
    } else {
        l->weights = cost_mul(l->out, D);
    }
    l->biases = l->bias ? l->out : 0;
    l->fwd_flops = cost_mul(cost_mul(2 * S, D), l->out) + cost_mul(S, l->biases);
    l->bwd_flops = cost_mul(cost_mul(4 * S, D), l->out) + cost_mul(S, l->biases);
    return 0;
}

/* attention: Q, K and V alike; the heads split the features */
static int infer_attention(infer_t *x)
{
    model_t *m = x->m;
    layer_t *l = x->l;
    shape_t in = x->in;
    int64_t S = x->S, D = x->D;
    char b1[48], b2[48];
    for (int k = 1; k < l->n_inputs; k++) {
        const layer_t *o = &m->layers[l->inputs[k]];
        if (o->out_shape.c != in.c || o->out_shape.h != in.h || o->out_shape.w != in.w ||
            o->seq != x->in_seq)
            return ierr(m, l, x->err, x->errlen,
                        "shape mismatch: input '%s' is %s but '%s' is %s (Q, K and V "
                        "must agree)",
                        o->name, shape_str(o->out_shape, b1, sizeof b1), x->src->name,
                        shape_str(in, b2, sizeof b2));
    }
    if (D % l->heads)
        return ierr(m, l, x->err, x->errlen, "%lld features do not divide into heads=%d",
                    (long long)D, l->heads);
    l->fwd_flops = cost_mul(cost_mul(4 * S, S), D) +
                   cost_mul(cost_mul(5 * (int64_t)l->heads, S), S);
    l->bwd_flops = cost_mul(cost_mul(8 * S, S), D) +
                   cost_mul(cost_mul(3 * (int64_t)l->heads, S), S);
    x->extra_act = cost_mul(cost_mul(4 * (int64_t)l->heads, S), S);
    return 0;
}

/* winattn on an h x w plane of D features (S = h*w), cut into window x window windows after
 * padding each side to a whole number of windows (P positions in all, zeros added): per
 * position the Q, K, V projections (3D x D and 3D biases) and the output one (D x D and D),
 * per window and head the scores of its N = window^2 positions plus the relative position
 * bias, a (2 window - 1)^2 x heads table. FLOPs as linear and attention count theirs. */
static int infer_winattn(infer_t *x)
{
    layer_t *l = x->l;
    int64_t D = x->D, w = l->window, N = w * w;
    if (x->S != (int64_t)l->image_h * l->image_w)
        return ierr(x->m, l, x->err, x->errlen, "h=%d w=%d: expected a sequence of %lld "
                    "positions", l->image_h, l->image_w, (long long)l->image_h * l->image_w);
    if (D % l->heads)
        return ierr(x->m, l, x->err, x->errlen, "%lld features do not divide into heads=%d",
                    (long long)D, l->heads);
    int64_t P = cost_mul((l->image_h + w - 1) / w * w, (l->image_w + w - 1) / w * w);
    l->out = (int)D;
    l->weights = cost_mul(4 * D, D) + cost_mul((2 * w - 1) * (2 * w - 1), l->heads);
    l->biases = l->bias ? 4 * D : 0;
    int64_t proj = cost_mul(cost_mul(P, D), 4 * D), att = cost_mul(cost_mul(P, N), D);
    int64_t soft = cost_mul(cost_mul(P, N), l->heads);
    l->fwd_flops = 2 * proj + cost_mul(P, l->biases) + 4 * att + 5 * soft;
    l->bwd_flops = 4 * proj + cost_mul(P, l->biases) + 8 * att + 3 * soft;
    x->extra_act = cost_mul(4 * P, 4 * D) + cost_mul(4, soft); /* Q, K, V, O and P */
    return 0;
}

/* patchmerge: an h x w plane (odd sides padded with zeros) to ceil(h/2) x ceil(w/2)
 * positions of the 4D features of (0,0), (1,0), (0,1), (1,1) of each 2 x 2 square. */
static int infer_patchmerge(infer_t *x)
{
    layer_t *l = x->l;
    if (x->S != (int64_t)l->image_h * l->image_w)
        return ierr(x->m, l, x->err, x->errlen, "h=%d w=%d: expected a sequence of %lld "
                    "positions", l->image_h, l->image_w, (long long)l->image_h * l->image_w);
    if (4 * x->D > INT_MAX) return ierr(x->m, l, x->err, x->errlen, "too many features");
    x->out = (shape_t){(int)(4 * x->D), 1, ((l->image_h + 1) / 2) * ((l->image_w + 1) / 2)};
    return 0;
}

/* The sequence layers; every other type goes on to infer_image(). */
static int infer_seq(infer_t *x)
{
    layer_t *l = x->l;
    int64_t S = x->S, D = x->D, in_count = x->in_count;
    switch (l->type) {
    case LAYER_TOKENS:
        x->out = l->out_shape;
        l->seq = true;
        return 0;
    case LAYER_EMBED:
        return infer_embed(x);
    case LAYER_POSEMBED:
        if (l->pos_max == 0) l->pos_max = (int)S;
        if (S > l->pos_max)
            return ierr(x->m, l, x->err, x->errlen, "%lld positions but max=%d", (long long)S,
                        l->pos_max);
        l->weights = cost_mul(l->pos_max, D);
        l->fwd_flops = l->bwd_flops = D * S;
        return 0;
    case LAYER_CLSTOKEN:
        if (S + 1 > INT_MAX) return ierr(x->m, l, x->err, x->errlen, "too many positions");
        x->out = (shape_t){(int)D, 1, (int)S + 1};
        l->weights = D;
        l->bwd_flops = D;
        l->seq = true;
        return 0;
    case LAYER_TO_SEQ:
        if (S > INT_MAX) return ierr(x->m, l, x->err, x->errlen, "too many positions");
        x->out = (shape_t){(int)D, 1, (int)S};
        l->seq = true;
        return 0;
    case LAYER_LINEAR:
        return infer_linear(x);
    case LAYER_ATTENTION:
        return infer_attention(x);
    case LAYER_WINATTN:
        return infer_winattn(x);
    case LAYER_PATCHMERGE:
        return infer_patchmerge(x);
    case LAYER_LAYERNORM:
        return infer_norm(x);
    case LAYER_SELECT:
        if (l->select_pos >= S)
            return ierr(x->m, l, x->err, x->errlen, "pos=%d of a sequence of %lld positions",
                        l->select_pos, (long long)S);
        x->out = (shape_t){(int)D, 1, 1};
        l->bwd_flops = D;
        l->seq = false;
        return 0;
    case LAYER_SEQ_LOSS:
        x->out = (shape_t){1, 1, 1};
        l->fwd_flops = 4 * in_count;
        l->bwd_flops = in_count;
        l->seq = false;
        return 0;
    default:
        return infer_image(x);
    }
}

/* Layer i's input: it has one (unless an input layer), within the per-sample bound, of the
 * kind it reads; its cost fields cleared. */
static int infer_begin(infer_t *x, model_t *m, int i, char *err, size_t errlen)
{
    layer_t *l = &m->layers[i];
    char b1[48];
    for (int k = 0; k < l->n_inputs; k++)
        ASSERT(l->inputs[k] >= 0 && l->inputs[k] < i, "layer %s: input %d not before it",
               l->name, l->inputs[k]);
    if (!layer_is_input(l) && l->n_inputs == 0)
        return ierr(m, l, err, errlen, "missing input");
    if (l->type == LAYER_TOKENS) l->out_shape = (shape_t){1, 1, l->seq_len};
    shape_t in = l->n_inputs ? m->layers[l->inputs[0]].out_shape : l->out_shape;
    int64_t in_count = shape_elems(in);
    if (in_count > MODEL_COST_MAX)
        return ierr(m, l, err, errlen, "%s: more than 2^50 values per sample",
                    shape_str(in, b1, sizeof b1));
    l->in_shape = in;
    l->weights = l->biases = 0;
    l->fwd_flops = l->bwd_flops = 0;
    const layer_t *src = l->n_inputs ? &m->layers[l->inputs[0]] : NULL;
    *x = (infer_t){.m = m, .l = l, .src = src, .in = in, .out = in, .in_count = in_count,
                   .S = (int64_t)in.h * in.w, .D = in.c, .in_seq = src && src->seq,
                   .err = err, .errlen = errlen};
    l->seq = x->in_seq;
    return seq_check(m, l, src, err, errlen) ? -1 : 0;
}

/* The layer's output, parameters and activation bytes, within the per-sample bounds, added
 * to the model's totals. */
static int infer_end(const infer_t *x)
{
    model_t *m = x->m;
    layer_t *l = x->l;
    char b1[48];
    l->out_shape = x->out;
    int64_t out_count = shape_elems(x->out);
    if (out_count > MODEL_COST_MAX || l->weights > MODEL_COST_MAX ||
        l->fwd_flops > MODEL_COST_MAX || l->bwd_flops > MODEL_COST_MAX ||
        x->extra_act > MODEL_COST_MAX)
        return ierr(m, l, x->err, x->errlen, "more than 2^50 values, parameters or FLOPs per "
                                             "sample (output %s)",
                    shape_str(x->out, b1, sizeof b1));
    l->params = l->weights + l->biases;
    l->param_bytes = 4 * l->params;
    l->act_bytes = 4 * out_count + x->extra_act;
    m->total_params += l->params;
    m->total_fwd_flops += l->fwd_flops;
    m->total_bwd_flops += l->bwd_flops;
    m->total_act_bytes += l->act_bytes;
    if (m->total_params > MODEL_TOTAL_MAX || m->total_fwd_flops > MODEL_TOTAL_MAX ||
        m->total_bwd_flops > MODEL_TOTAL_MAX || m->total_act_bytes > MODEL_TOTAL_MAX)
        return ierr(m, l, x->err, x->errlen, "the model's totals pass 2^60 parameters, FLOPs or "
                                             "bytes per sample");
    return 0;
}

int model_infer(model_t *m, char *err, size_t errlen)
{
    m->total_params = m->total_fwd_flops = m->total_bwd_flops = m->total_act_bytes = 0;
    for (int i = 0; i < m->n_layers; i++) {
        infer_t x = {0};
        if (infer_begin(&x, m, i, err, errlen) || infer_seq(&x) || infer_end(&x)) return -1;
    }
    return 0;
}

/* ---- printing -------------------------------------------------------------------------- */

static void inputs_str(const model_t *m, const layer_t *l, char *buf, size_t len)
{
    size_t n = 0;
    buf[0] = '\0';
    for (int k = 0; k < l->n_inputs && n < len; k++)
        n += snprintf(buf + n, len - n, "%s%s", k ? "+" : "", m->layers[l->inputs[k]].name);
}

void model_print_csv(const model_t *m, FILE *f)
{
    fprintf(f, "layer,type,output,params,fwd_flops,bwd_flops,param_bytes,act_bytes,inputs\n");
    char sh[48], ins[1024];
    for (int i = 0; i < m->n_layers; i++) {
        const layer_t *l = &m->layers[i];
        inputs_str(m, l, ins, sizeof ins);
        fprintf(f, "%s,%s,%s,%lld,%lld,%lld,%lld,%lld,%s\n", l->name, layer_type_name(l->type),
                shape_str(l->out_shape, sh, sizeof sh), (long long)l->params,
                (long long)l->fwd_flops, (long long)l->bwd_flops, (long long)l->param_bytes,
                (long long)l->act_bytes, ins);
    }
    fprintf(f, "total,,,%lld,%lld,%lld,%lld,%lld,\n", (long long)m->total_params,
            (long long)m->total_fwd_flops, (long long)m->total_bwd_flops,
            (long long)(4 * m->total_params), (long long)m->total_act_bytes);
}

/* 1234567 -> "1,234,567" */
static const char *grouped(int64_t v, char *buf, size_t len)
{
    char raw[32];
    snprintf(raw, sizeof raw, "%lld", (long long)v);
    size_t n = strlen(raw), o = 0;
    for (size_t i = 0; i < n && o + 2 < len; i++) {
        if (i && (n - i) % 3 == 0 && raw[i - 1] != '-') buf[o++] = ',';
        buf[o++] = raw[i];
    }
    buf[o] = '\0';
    return buf;
}

static const char *human(double v, const char *unit, char *buf, size_t len)
{
    const char *pre[] = {"", "K", "M", "G", "T", "P"};
    int k = 0;
    while (fabs(v) >= 1000 && k < 5) {
        v /= 1000;
        k++;
    }
    snprintf(buf, len, k ? "%.2f %s%s" : "%.0f %s%s", v, pre[k], unit);
    return buf;
}

void model_print_table(const model_t *m, FILE *f)
{
    int w = 5;
    for (int i = 0; i < m->n_layers; i++) {
        int n = (int)strlen(m->layers[i].name);
        if (n > w) w = n;
    }
    if (w > 48) w = 48;
    fprintf(f, "%s (%s): %d layers\n\n", m->name, m->path, m->n_layers);
    fprintf(f, "%-*s  %-12s  %-14s  %13s  %12s  %12s  %11s\n", w, "layer", "type", "output",
            "params", "fwd FLOPs", "bwd FLOPs", "activations");
    char sh[48], p[32], fw[32], bw[32], ab[32];
    for (int i = 0; i < m->n_layers; i++) {
        const layer_t *l = &m->layers[i];
        fprintf(f, "%-*s  %-12s  %-14s  %13s  %12s  %12s  %11s\n", w, l->name,
                layer_type_name(l->type), shape_str(l->out_shape, sh, sizeof sh),
                grouped(l->params, p, sizeof p), human((double)l->fwd_flops, "", fw, sizeof fw),
                human((double)l->bwd_flops, "", bw, sizeof bw),
                human((double)l->act_bytes, "B", ab, sizeof ab));
    }
    fprintf(f, "%-*s  %-12s  %-14s  %13s  %12s  %12s  %11s\n", w, "total", "", "",
            grouped(m->total_params, p, sizeof p),
            human((double)m->total_fwd_flops, "", fw, sizeof fw),
            human((double)m->total_bwd_flops, "", bw, sizeof bw),
            human((double)m->total_act_bytes, "B", ab, sizeof ab));
    fprintf(f, "\nparameters: %s (%s fp32); per sample: forward %s, backward %sFLOP\n",
            grouped(m->total_params, p, sizeof p), human(4.0 * m->total_params, "B", ab, sizeof ab),
            human((double)m->total_fwd_flops, "FLOP", fw, sizeof fw),
            human((double)m->total_bwd_flops, "", bw, sizeof bw));
}
