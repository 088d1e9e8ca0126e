/* emulate: compute that takes the time a measured profile says it takes, for runs whose
 * communication is real but whose FWD/BWD only sleep (compute = emulate, with a `profile`):
 * a VGG19-size model then runs on a small machine, and the network alone decides the time.
 * The times are the simulator's (core/unit_times.h reads the profile); this module sleeps
 * them without accumulating each wake-up's lateness.
 */
#ifndef POSEIDON_EMULATE_H
#define POSEIDON_EMULATE_H

#include <stddef.h>
#include <stdint.h>

/* Sleeps ns nanoseconds (restarting after signals). */
void emulate_sleep_ns(int64_t ns);

/* Sleeps until CLOCK_MONOTONIC reads deadline_ns (restarting after signals). A chain of ops
 * that sleeps to deadlines start + d1, start + d1 + d2, ... does not accumulate each
 * wake-up's lateness, as consecutive relative sleeps do. */
void emulate_sleep_until_ns(int64_t deadline_ns);

#endif
