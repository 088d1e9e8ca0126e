/* emulate: compute that takes the time a measured profile says it takes, for runs whose
 * communication is real but whose FWD/BWD only sleep (--compute emulate --profile CSV): a
 * VGG19-size model then runs on a small machine, and the network alone decides the time.
 *
 * The profile is the CSV `poseidon profile` writes (header, then layer,batch,fwd_ns,bwd_ns,...
 * per layer but the input). Every layer of the model but the input must have a row; a
 * profile measured at another batch is scaled linearly (as the simulator does).
 */
#ifndef POSEIDON_EMULATE_H
#define POSEIDON_EMULATE_H

#include <stddef.h>
#include <stdint.h>

#include "core/model.h"

typedef struct {
    int n_layers;
    int64_t *fwd_ns, *bwd_ns; /* per model layer, at the run's batch; owned */
} emulate_profile_t;

/* Reads path for model m at this batch. 0, or -1 with "file:line: expected ..." in err. */
int emulate_profile_load(emulate_profile_t *p, const model_t *m, const char *path, int batch,
                         char *err, size_t errlen);
void emulate_profile_fini(emulate_profile_t *p);

/* Sleeps ns nanoseconds (restarting after signals). */
void emulate_sleep_ns(int64_t ns);

/* Sleeps until CLOCK_MONOTONIC reads deadline_ns (restarting after signals). A chain of ops
 * that sleeps to deadlines start + d1, start + d1 + d2, ... does not accumulate each
 * wake-up's lateness, as consecutive relative sleeps do. */
void emulate_sleep_until_ns(int64_t deadline_ns);

#endif
