/* fabric_auth: the trusted-fabric mode's credentials (`--trusted-fabric`).
 *
 * Threat model. The job's hosts share a fabric that no one else can observe or alter (a
 * dedicated cluster network, or loopback), but anyone may reach the ranks' ports (other users
 * of a login node, other tenants' machines). Then connections must be authenticated, so that
 * no stranger joins, reads the parameters or changes them; encrypting the bytes buys nothing
 * against that attacker and costs CURVE's per-byte work (docs/security.md: CURVE moves a
 * third of plain TCP's bytes per second on loopback). An attacker who can read the fabric can
 * replay a connection's password and read or change the traffic: this mode is not for such
 * a network; CURVE (the default) is.
 *
 * Credentials. Connections use ZeroMQ's PLAIN mechanism, checked by the ZAP handler: the
 * client of rank c connecting to the server of rank s presents user name "c" and the password
 * BLAKE2b-256(key = X25519(secret of c, public of s), "poseidon trusted fabric v1" | c | s),
 * in hex. The server computes the same from X25519(secret of s, public of c): only a holder of
 * rank c's or rank s's secret key can make it, and it binds the pair and the direction. The
 * ZAP handler answers with user id "c", as for CURVE, so the comm's check that a routing id
 * names the rank whose credentials the connection was admitted with is the same.
 */
#ifndef POSEIDON_FABRIC_AUTH_H
#define POSEIDON_FABRIC_AUTH_H

#include <stdbool.h>

#include "runtime/transport/keyring.h"

#define FABRIC_PASSWORD_LEN 64 /* hex characters, without the NUL */

/* The password of the connection from client rank c to server rank s, computed by `self`
 * (c or s), whose secret key k holds, from the other's public key. 0, or -1 when k lacks a
 * key or a rank is out of range. */
int fabric_password(const keyring_t *k, int self, int c, int s,
                    char out[FABRIC_PASSWORD_LEN + 1]);

/* Whether `given` (len bytes, from the network) is the password of c -> s, checked by s in
 * constant time. */
bool fabric_password_ok(const keyring_t *k, int c, int s, const char *given, size_t len);

#endif
