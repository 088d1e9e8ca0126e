/* flags: the options of the subcommands, read one way. Every subcommand walks its argv with
 * flag_next (getopt_long over the subcommand's option table, arguments kept in their order):
 * an unknown option or one without its value is one line "poseidon CMD: ..." naming it.
 * Number options are parsed here too: the whole value must be the number (core/kvfile's
 * kv_int / kv_double) and lie in [lo, hi]; otherwise one line "poseidon CMD: OPT expects ...,
 * got 'VALUE'" on stderr. Options that stand for experiment keys are not parsed here: they go
 * through experiment_override_as() with the key's own checks and units. */
#ifndef POSEIDON_CLI_FLAGS_H
#define POSEIDON_CLI_FLAGS_H

#include <getopt.h>

/* One walk over a subcommand's arguments (argv[0] is the subcommand). */
typedef struct {
    const char *cmd;               /* "train", "model show": the messages' prefix */
    int argc;
    char **argv;
    const char *shortopts;         /* getopt's, without the leading "-:" */
    const struct option *longopts; /* ends with a zero entry */
    char opt[72];                  /* the option just read, as "--name" or "-x" */
    const char *arg;               /* its value, or the positional argument */
    int rest;                      /* after getopt's end ("--"): the next argv index; 0 before */
} flag_parser_t;

/* Starts a walk (getopt's state reset). */
void flag_begin(flag_parser_t *p, const char *cmd, int argc, char **argv, const char *shortopts,
                const struct option *longopts);

/* The next argument: an option's value (its `val`; p->arg holds its value), FLAG_ARG for a
 * positional argument (in p->arg), FLAG_END after the last, or FLAG_BAD after printing the
 * unknown option or the one missing its value. */
enum { FLAG_END = -1, FLAG_ARG = 1, FLAG_BAD = '?' };
int flag_next(flag_parser_t *p);

/* Returns 0 with *out set, or -1 after the message. */
int flag_int(const char *cmd, const char *opt, const char *val, long long lo, long long hi,
             long long *out);
int flag_double(const char *cmd, const char *opt, const char *val, double lo, double hi,
                double *out);

/* flag_int into an int (hi at most INT_MAX). */
int flag_int32(const char *cmd, const char *opt, const char *val, int lo, int hi, int *out);

#endif
