/* keyring: a job's CURVE keys, one key pair per rank.
 *
 * Every socket of a secure job speaks ZeroMQ's CURVE (comm.h): a connection is encrypted,
 * and a peer gets in only with the secret key of one of the job's ranks; the ZAP handler
 * (runtime/transport/zap.h) names the connection after that rank. A rank needs every rank's public
 * key (to know whom it connects to, and who may connect) and its own secret key.
 *
 * On disk (`poseidon keygen --ranks N -o DIR`), for jobs across machines:
 *   DIR/public.keys      "poseidon-keys 1 ranks N", then one line "R <public key>" per rank
 *   DIR/rank-R.secret    "poseidon-secret 1 rank R", then "<public key> <secret key>"
 *                        (mode 0600; a file that others may read is refused, as ssh does)
 * As ssh's StrictModes: a key file, and the directory that holds it, that anyone but this
 * user (or root) can write is refused, and a symbolic link in place of a key file is
 * followed and what it leads to (file and directory) checked the same way.
 * Keys are Z85 text, 40 characters. A local job (`poseidon train --workers N`) makes its
 * keys in memory before it forks, so nothing is written.
 */
#ifndef POSEIDON_KEYRING_H
#define POSEIDON_KEYRING_H

#include <stddef.h>
#include <stdint.h>

#define KEYRING_Z85_LEN 40

typedef struct {
    int world;
    char (*pub)[KEYRING_Z85_LEN + 1]; /* every rank's public key */
    char (*sec)[KEYRING_Z85_LEN + 1]; /* secret keys; "" for a rank whose key this process
                                       * does not hold */
    uint8_t (*pub_raw)[32];           /* the public keys decoded, for the ZAP handler */
} keyring_t;

/* Fresh key pairs for ranks 0..world-1, every secret held (libsodium's random source).
 * NULL with the reason in err when this ZeroMQ has no CURVE. */
keyring_t *keyring_generate(int world, char *err, size_t errlen);

/* Writes public.keys and one rank-R.secret per rank into dir (created if missing; existing
 * key files are not overwritten). 0, or -1 with the reason in err. */
int keyring_write(const keyring_t *k, const char *dir, char *err, size_t errlen);

/* Reads dir/public.keys and dir/rank-<rank>.secret for a job of world ranks. NULL with
 * "file:line: what" in err for a missing, malformed or foreign file, a world size that
 * differs, a secret key that does not belong to its public key, a secret file that
 * others may read, or a key file or directory (or where a link leads) that others may
 * write. */
keyring_t *keyring_load(const char *dir, int rank, int world, char *err, size_t errlen);

/* The rank whose public key is the 32 bytes key, or -1. */
int keyring_rank_of(const keyring_t *k, const uint8_t key[32]);

/* The binary (32-byte) form of rank's public or secret key; 0, or -1 when not held. */
int keyring_public(const keyring_t *k, int rank, uint8_t out[32]);
int keyring_secret(const keyring_t *k, int rank, uint8_t out[32]);

void keyring_destroy(keyring_t **kp);

#endif
