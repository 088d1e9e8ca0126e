/* The subcommands of `poseidon`. Each takes the arguments after its name (argv[0] is the
 * subcommand) and returns the process exit code. cli/ stays thin: parse flags, call into
 * core/, sim/ or runtime/, print. */
#ifndef POSEIDON_COMMANDS_H
#define POSEIDON_COMMANDS_H

#include <stdio.h>

int cmd_model(int argc, char **argv);
int cmd_commtest(int argc, char **argv);
/* the CURVE keys of a job across machines (cli/cmd_keygen.c) */
int cmd_keygen(int argc, char **argv);

/* training on one worker or a cluster (cli/cmd_train.c) */
int cmd_train(int argc, char **argv);
int cmd_profile(int argc, char **argv);

int cmd_plan(int argc, char **argv);
int cmd_sim(int argc, char **argv);
/* plots and trace comparisons from the CSVs (cli/cmd_report.c) */
int cmd_report(int argc, char **argv);
/* report merge: the CSVs of a sweep's parts into the whole sweep's (cli/cmd_sim_merge.c) */
int cmd_report_merge(int argc, char **argv);
int cmd_report_merge_usage(FILE *f);

#endif
