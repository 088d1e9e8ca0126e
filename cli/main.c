/* poseidon: one tool, git-style subcommands. */
#include <stdio.h>
#include <string.h>

#include "cli/commands.h"
#include "core/log.h"

typedef struct {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary;
} command_t;

static const command_t s_commands[] = {
    {"model", cmd_model, "describe a network: per-layer shapes, parameters, FLOPs, bytes"},
    {"plan", cmd_plan, "per-layer sync scheme chosen and the cost of each alternative"},
    {"sim", cmd_sim, "simulate an experiment's configurations in virtual time"},
    {"comm-test", cmd_commtest, "check the PS / all-reduce / coordinator substrate across processes"},
    {"train", cmd_train, "train a network on one worker or a cluster, CPU or GPU"},
    {"profile", cmd_profile, "per-layer forward/backward time -> the CSV the simulator reads"},
    {"keygen", cmd_keygen, "the keys of a job across machines (every socket speaks CURVE)"},
    {"report", cmd_report, "plots and sim-versus-real tables from the CSVs"},
};
static const int s_n_commands = (int)(sizeof s_commands / sizeof s_commands[0]);

static void usage(FILE *f)
{
    fprintf(f, "usage: poseidon COMMAND [ARGS]   (poseidon COMMAND --help for each)\n\n"
               "Poseidon testbed: a cluster simulator and a distributed training runtime for\n"
               "data-parallel deep learning that execute one plan.\n\ncommands:\n");
    for (int i = 0; i < s_n_commands; i++)
        fprintf(f, "  %-10s %s\n", s_commands[i].name, s_commands[i].summary);
    fprintf(f, "\nversion: commit %s\n", log_commit());
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        usage(stdout);
        return 0;
    }
    if (!strcmp(argv[1], "--version")) {
        printf("poseidon %s\n", log_commit());
        return 0;
    }
    for (int i = 0; i < s_n_commands; i++)
        if (!strcmp(argv[1], s_commands[i].name)) return s_commands[i].run(argc - 1, argv + 1);
    fprintf(stderr, "poseidon: unknown command '%s' (poseidon --help lists them)\n", argv[1]);
    return 2;
}
