#include "tests/gpu_fixture.h"

#include "tests/test.h"

compute_t *gpu_or_skip(void)
{
    char why[512];
    if (!compute_available(COMPUTE_CUDA, why, sizeof why)) SKIP("cuda backend: %s", why);
    compute_t *g = compute_new(COMPUTE_CUDA, 0, why, sizeof why);
    REQUIRE(g, "%s", why);
    return g;
}
