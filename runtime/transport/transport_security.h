/* transport_security: which keys a rank's sockets use, decided once per process.
 *
 *   keys given (a local job's, made in memory before the fork)   CURVE with them
 *   keys_dir (poseidon keygen's files)                           CURVE with this rank's
 *   insecure, and the master on loopback                         plain TCP
 * With trusted_fabric (and keys), the data sockets authenticate with the keys but are not
 * encrypted (runtime/transport/fabric_auth.h: for which network); without keys it is refused.
 * Anything else is refused: a job across machines without keys would let anyone who reaches
 * a port change the model, and insecure is for one machine only.
 */
#ifndef POSEIDON_TRANSPORT_SECURITY_H
#define POSEIDON_TRANSPORT_SECURITY_H

#include <stdbool.h>
#include <stddef.h>

#include "runtime/transport/keyring.h"
#include "runtime/transport/launch.h"

typedef struct {
    const keyring_t *keys; /* the whole job's, or NULL */
    const char *keys_dir;  /* or a directory of key files, or NULL */
    bool insecure;         /* plain TCP, asked for by the user */
    bool trusted_fabric;   /* data authenticated by the keys, not encrypted */
} transport_security_t;

/* Installs this rank's choice (comm_set_keyring) before any comm exists. 0; or -1 with one
 * line in err for a choice the rules above refuse or key files that do not load. The keyring
 * loaded from files lives until the process ends. */
int transport_security_install(const transport_security_t *s, const launch_env_t *env,
                               char *err, size_t errlen);

#endif
