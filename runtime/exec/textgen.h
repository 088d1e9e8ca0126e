/* textgen: text written by a trained character-level model (a tokens input, a seq_loss
 * output, the ids of runtime/exec/data.c's text: newline 0, ' '..'~' 1..95).
 *
 * One character at a time: the last S characters so far fill the window (the rest padded
 * with newlines, which a causal model cannot see), and the next one is drawn from the
 * output distribution at the last filled position, sharpened by a temperature.
 */
#ifndef POSEIDON_TEXTGEN_H
#define POSEIDON_TEXTGEN_H

#include <stddef.h>
#include <stdint.h>

#include "runtime/compute/nnet.h"

/* Writes prompt + n generated characters, NUL-terminated, into out (at most outlen bytes)
 * with the parameters of `trained` (read, not changed), on a net of batch 1 of its own.
 * temperature > 0 (1: the model's distribution). Returns 0, or -1 with the reason in err
 * (not a character model, a prompt character outside the vocabulary). */
int textgen_sample(nnet_t *trained, const char *prompt, int n, double temperature,
                   uint64_t seed, char *out, size_t outlen, char *err, size_t errlen);

#endif
