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
    static const struct option opts[] = {{"ranks", required_argument, NULL, 'r'},
                                         {"help", no_argument, NULL, 'h'},
                                         {0}};
    flag_parser_t p;
    flag_begin(&p, "keygen", argc, argv, "ho:", opts);
    for (int c; (c = flag_next(&p)) != FLAG_END;) {
        switch (c) {
        case 'h': usage(stdout); return 0;
        case 'r':
            if (flag_int32("keygen", p.opt, p.arg, 1, 1 << 20, &ranks)) return 2;
            break;
        case 'o': dir = p.arg; break;
        case FLAG_ARG:
            fprintf(stderr, "poseidon keygen: unexpected argument '%s'\n", p.arg);
            return 2;
        default: return 2;
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
