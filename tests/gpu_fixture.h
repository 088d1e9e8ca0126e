/* gpu_fixture: the CUDA backend for a test that needs a GPU, or the test's SKIP saying why
 * there is none (no GPU, no driver, a build without CUDA). */
#ifndef POSEIDON_TESTS_GPU_FIXTURE_H
#define POSEIDON_TESTS_GPU_FIXTURE_H

#include "runtime/compute/compute.h"

/* A CUDA backend on the first visible GPU (the caller destroys it); without one, the running
 * test is skipped and this does not return. */
compute_t *gpu_or_skip(void);

#endif
