/* flags: the number options of the subcommands, parsed one way: the whole value must be the
 * number (core/kvfile's kv_int / kv_double) and lie in [lo, hi]; otherwise one line
 * "poseidon CMD: OPT expects ..., got 'VALUE'" on stderr. Options that stand for experiment
 * keys are not parsed here: they go through experiment_override_as() with the key's own
 * checks and units. */
#ifndef POSEIDON_CLI_FLAGS_H
#define POSEIDON_CLI_FLAGS_H

/* Returns 0 with *out set, or -1 after the message. */
int flag_int(const char *cmd, const char *opt, const char *val, long long lo, long long hi,
             long long *out);
int flag_double(const char *cmd, const char *opt, const char *val, double lo, double hi,
                double *out);

/* flag_int into an int (hi at most INT_MAX). */
int flag_int32(const char *cmd, const char *opt, const char *val, int lo, int hi, int *out);

#endif
