/* compute: the one place that chooses a backend. The only #if on CUDA in the runtime. */
#include "runtime/compute.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/check.h"

#if POSEIDON_HAVE_CUDA
/* Exported as plain C by compute_cuda.cu. */
extern const compute_ops_t compute_cuda_ops;
int compute_cuda_device_count(char *why, size_t whylen);
void *compute_cuda_ctx_new(void);
#endif

int compute_kind_parse(const char *s, compute_kind_t *kind)
{
    if (!strcmp(s, "cpu")) *kind = COMPUTE_CPU;
    else if (!strcmp(s, "cuda")) *kind = COMPUTE_CUDA;
    else return -1;
    return 0;
}

const char *compute_kind_name(compute_kind_t kind)
{
    return kind == COMPUTE_CUDA ? "cuda" : "cpu";
}

bool compute_available(compute_kind_t kind, char *why, size_t whylen)
{
    if (why && whylen) why[0] = '\0';
    if (kind == COMPUTE_CPU) return true;
#if POSEIDON_HAVE_CUDA
    return compute_cuda_device_count(why, whylen) > 0;
#else
    if (why && whylen) snprintf(why, whylen, "this build has no CUDA (nvcc was not found)");
    return false;
#endif
}

compute_t *compute_new(compute_kind_t kind, int threads, char *err, size_t errlen)
{
    if (!compute_available(kind, err, errlen)) return NULL;
    compute_t *c = xcalloc(1, sizeof *c);
    c->kind = kind;
    if (kind == COMPUTE_CPU) {
        c->ops = &compute_cpu_ops;
        c->ctx = compute_cpu_ctx_new(threads);
    } else {
#if POSEIDON_HAVE_CUDA
        c->ops = &compute_cuda_ops;
        c->ctx = compute_cuda_ctx_new();
#else
        ASSERT(0, "unreachable: CUDA reported available in a build without it");
#endif
    }
    return c;
}

void compute_destroy(compute_t **cp)
{
    if (!cp || !*cp) return;
    (*cp)->ops->destroy((*cp)->ctx);
    free(*cp);
    *cp = NULL;
}
