#include "runtime/transport/fabric_auth.h"

#include <stdint.h>
#include <string.h>

#include <sodium.h>

static const char k_context[] = "poseidon trusted fabric v1";

int fabric_password(const keyring_t *k, int self, int c, int s,
                    char out[FABRIC_PASSWORD_LEN + 1])
{
    if (self != c && self != s) return -1;
    int other = self == c ? s : c;
    uint8_t sec[32], pub[32], shared[32], tag[32];
    if (sodium_init() < 0 || keyring_secret(k, self, sec) || keyring_public(k, other, pub))
        return -1;
    int rc = crypto_scalarmult(shared, sec, pub); /* -1 for a low-order public key */
    sodium_memzero(sec, sizeof sec);
    if (rc != 0) return -1;
    uint8_t msg[sizeof k_context - 1 + 8];
    memcpy(msg, k_context, sizeof k_context - 1);
    uint32_t ranks[2] = {(uint32_t)c, (uint32_t)s};
    for (int i = 0; i < 2; i++)
        for (int b = 0; b < 4; b++)
            msg[sizeof k_context - 1 + 4 * i + b] = (uint8_t)(ranks[i] >> (8 * b));
    crypto_generichash(tag, sizeof tag, msg, sizeof msg, shared, sizeof shared);
    sodium_memzero(shared, sizeof shared);
    sodium_bin2hex(out, FABRIC_PASSWORD_LEN + 1, tag, sizeof tag);
    return 0;
}

bool fabric_password_ok(const keyring_t *k, int c, int s, const char *given, size_t len)
{
    char want[FABRIC_PASSWORD_LEN + 1];
    if (len != FABRIC_PASSWORD_LEN || fabric_password(k, s, c, s, want) != 0) return false;
    bool ok = sodium_memcmp(want, given, FABRIC_PASSWORD_LEN) == 0;
    sodium_memzero(want, sizeof want);
    return ok;
}
