/* poseidon keygen --ranks N -o DIR: the CURVE keys of a job across machines (runtime/transport/keyring.h).
 * Copy DIR/public.keys to every machine and DIR/rank-R.secret to the machine of rank R only
 * (or share DIR on a file system only the job's user can read). */
#include <stdio.h>
#include <string.h>

#include "cli/commands.h"
#include "cli/flags.h"
#include "runtime/transport/keyring.h"

static void usage(FILE *f)
{
    fprintf(f, "usage: poseidon keygen --ranks N -o DIR\n\n"
               "Makes one CURVE key pair per rank of a job: DIR/public.keys (every rank's public\n"
               "key) and DIR/rank-R.secret (mode 600). Every rank of `poseidon train ... --keys\n"
               "DIR` needs public.keys and its own secret file; a peer without one of these\n"
               "keys cannot connect to any socket of the job. Existing keys are never\n"
               "overwritten.\n");
}

int cmd_keygen(int argc, char **argv)
{
    int ranks = 0;
    const char *dir = NULL;
    /* every option takes a value: the loop steps over both */
    for (int i = 1; i < argc; i += 2) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage(stdout);
            return 0;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "poseidon keygen: unknown option or missing value: '%s'\n", argv[i]);
            return 2;
        }
        if (!strcmp(argv[i], "--ranks")) {
            if (flag_int32("keygen", argv[i], argv[i + 1], 1, 1 << 20, &ranks)) return 2;
        } else if (!strcmp(argv[i], "-o")) {
            dir = argv[i + 1];
        } else {
            fprintf(stderr, "poseidon keygen: unknown option '%s'\n", argv[i]);
            return 2;
        }
    }
    if (!ranks || !dir) {
        usage(stderr);
        return 2;
    }
    char err[1024];
    keyring_t *k = keyring_generate(ranks, err, sizeof err);
    if (!k) {
        fprintf(stderr, "poseidon keygen: %s\n", err);
        return 1;
    }
    int rc = keyring_write(k, dir, err, sizeof err);
    keyring_destroy(&k);
    if (rc) {
        fprintf(stderr, "poseidon keygen: %s\n", err);
        return 1;
    }
    printf("%s/public.keys and %d secret keys %s/rank-0..%d.secret\n", dir, ranks, dir, ranks - 1);
    return 0;
}
