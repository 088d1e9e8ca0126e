/* Fuzz the profile reader (core/unit_times.c): the bytes are a profile CSV for LeNet
 * (models/lenet.net), read at batch 32, half the batch of the profile in the repository, so
 * that rows are scaled. The reader takes a path: the bytes go into a memory file, read back
 * through /proc/self/fd. Accepted times must be in range and sum within int64. */
#include "tests/fuzz/fuzz.h"

#include <sys/mman.h>
#include <unistd.h>

#include "core/cluster.h"
#include "core/model.h"
#include "core/plan.h"
#include "core/unit_times.h"

enum { FUZZ_PROFILE_BATCH = 32 };

static model_t s_model;
static plan_t s_plan;
static int s_fd = -1;
static char s_path[64];

static void setup(void)
{
    char err[1024];
    if (model_load(&s_model, "models/lenet.net", err, sizeof err) != 0) {
        fprintf(stderr, "fuzz_profile: %s (run from the repository root)\n", err);
        abort();
    }
    cluster_t c;
    cluster_init(&c);
    if (plan_build(&s_plan, &s_model, &c, (scheme_t){SCHEME_PS, true}, 0, FUZZ_PROFILE_BATCH,
                   0, err, sizeof err) != 0) {
        fprintf(stderr, "fuzz_profile: %s\n", err);
        abort();
    }
    s_fd = memfd_create("fuzz-profile", 0);
    if (s_fd < 0) abort();
    snprintf(s_path, sizeof s_path, "/proc/self/fd/%d", s_fd);
}

int fuzz_profile(const uint8_t *data, size_t size)
{
    if (s_fd < 0) setup();
    if (ftruncate(s_fd, 0) != 0 || pwrite(s_fd, data, size, 0) != (ssize_t)size) abort();
    unit_times_t t;
    char err[1024] = "";
    if (unit_times_profile(&t, &s_plan, s_path, err, sizeof err) != 0) {
        fuzz_check_error(err);
        return 0;
    }
    FUZZ_ASSERT(t.n_units == s_plan.n_units, "%d units", t.n_units);
    for (int u = 0; u < t.n_units; u++)
        FUZZ_ASSERT(t.fwd_ns[u] >= 0 && t.bwd_ns[u] >= 0 &&
                        t.fwd_ns[u] <= UNIT_TIMES_MAX_NS * FUZZ_PROFILE_BATCH * s_model.n_layers &&
                        t.bwd_ns[u] <= UNIT_TIMES_MAX_NS * FUZZ_PROFILE_BATCH * s_model.n_layers,
                    "unit %d: %lld / %lld ns", u, (long long)t.fwd_ns[u],
                    (long long)t.bwd_ns[u]);
    unit_times_fini(&t);
    return 1;
}

FUZZ_LIBFUZZER_ENTRY(fuzz_profile)
