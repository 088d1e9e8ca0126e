/* zap: the process's ZAP handler (ZeroMQ RFC 27), which admits a CURVE connection only with
 * a key of one of the job's ranks and names it after that rank.
 *
 * libzmq asks the handler, over inproc://zeromq.zap.01 of the socket's context, about every
 * connection to a CURVE server socket once the peer has proven it holds the secret key of
 * the public key it presents. The answer is 200 with user id "<rank>" for a key of the
 * keyring, 400 for any other (logged through reject_log with the peer's address). The comm
 * then reads the user id off each message ("User-Id"), so a rank's identity comes from its
 * key, not from the routing id it chose.
 */
#ifndef POSEIDON_ZAP_H
#define POSEIDON_ZAP_H

#include <stdbool.h>

#include "runtime/transport/keyring.h"

/* Binds the handler in ctx and starts its thread (once per process; later calls return 0).
 * The keyring must outlive the process's sockets. plain: the trusted fabric's data sockets
 * (runtime/transport/fabric_auth.h): a PLAIN connection is admitted, as rank c, when its
 * user name is "c" and its password the pair's for the server rank its ZAP domain
 * "poseidon/<s>" names. 0, or -1 with a logged error. */
int zap_start(void *ctx, const keyring_t *k, bool plain);

/* Connections refused so far. */
unsigned long zap_refused(void);

#endif
