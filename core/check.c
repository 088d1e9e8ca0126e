#include "check.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static check_context_fn s_context_fn;
static void *s_context_arg;

void check_set_context(check_context_fn fn, void *arg)
{
    s_context_fn = fn;
    s_context_arg = arg;
}

void check_fail(const char *file, int line, const char *cond, const char *fmt, ...)
{
    char ctx[128] = "";
    if (s_context_fn && s_context_fn(ctx, sizeof ctx, s_context_arg) <= 0) ctx[0] = '\0';
    fprintf(stderr, "%s:%d: assertion failed: %s%s%s: ", file, line, cond, ctx[0] ? " " : "",
            ctx);
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    fflush(stderr);
    abort();
}

void die(const char *fmt, ...)
{
    fputs("poseidon: ", stderr);
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    exit(1);
}

void *xmalloc(size_t bytes)
{
    void *p = malloc(bytes ? bytes : 1);
    if (!p) die("out of memory allocating %zu bytes", bytes);
    return p;
}

void *xcalloc(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (!p) die("out of memory allocating %zu x %zu bytes", n, size);
    return p;
}

void *xrealloc(void *p, size_t bytes)
{
    void *q = realloc(p, bytes ? bytes : 1);
    if (!q) die("out of memory reallocating to %zu bytes", bytes);
    return q;
}

char *xstrdup(const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = xmalloc(n);
    memcpy(d, s, n);
    return d;
}
