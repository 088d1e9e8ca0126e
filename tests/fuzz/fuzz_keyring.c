/* Fuzz the key file readers (runtime/transport/keyring.c). Input: byte 0 picks the world size (1-4),
 * byte 1 the rank (low bits) and the secret file's mode (top bit: 0644, to be refused, else
 * 0600); the rest is public.keys up to the first NUL byte, then rank-R.secret. The files go
 * into a temporary folder of this process and keyring_load() reads them as a rank would.
 * A keyring it accepts must hold every public key and this rank's secret. */
#include "tests/fuzz/fuzz.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runtime/transport/keyring.h"

static char s_dir[64];
static char s_public[128], s_secret[128];

static void cleanup(void)
{
    unlink(s_public);
    if (s_secret[0]) unlink(s_secret);
    rmdir(s_dir);
}

static void write_file(const char *path, const uint8_t *data, size_t size, mode_t mode)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, mode);
    if (fd < 0 || fchmod(fd, mode) != 0) abort();
    if (size && write(fd, data, size) != (ssize_t)size) abort();
    close(fd);
}

int fuzz_keyring(const uint8_t *data, size_t size)
{
    if (!s_dir[0]) {
        snprintf(s_dir, sizeof s_dir, "/tmp/poseidon-fuzz-keys-XXXXXX");
        if (!mkdtemp(s_dir)) abort();
        snprintf(s_public, sizeof s_public, "%s/public.keys", s_dir);
        atexit(cleanup);
    }
    if (size < 2) return 0;
    int world = 1 + data[0] % 4;
    int rank = (data[1] & 0x7f) % world;
    mode_t mode = (data[1] & 0x80) ? 0644 : 0600;
    data += 2, size -= 2;
    const uint8_t *nul = memchr(data, 0, size);
    size_t pub_len = nul ? (size_t)(nul - data) : size;
    size_t sec_off = nul ? pub_len + 1 : size;

    if (s_secret[0]) unlink(s_secret);
    snprintf(s_secret, sizeof s_secret, "%s/rank-%d.secret", s_dir, rank);
    write_file(s_public, data, pub_len, 0644);
    write_file(s_secret, data + sec_off, size - sec_off, mode);

    char err[1024] = "";
    keyring_t *k = keyring_load(s_dir, rank, world, err, sizeof err);
    if (!k) {
        fuzz_check_error(err);
        return 0;
    }
    FUZZ_ASSERT(k->world == world, "world %d", k->world);
    uint8_t raw[32];
    for (int r = 0; r < world; r++) {
        FUZZ_ASSERT(keyring_public(k, r, raw) == 0, "rank %d: no public key", r);
        FUZZ_ASSERT(keyring_rank_of(k, raw) >= 0, "rank %d: key not found", r);
    }
    FUZZ_ASSERT(keyring_secret(k, rank, raw) == 0, "no secret for rank %d", rank);
    keyring_destroy(&k);
    return 1;
}

FUZZ_LIBFUZZER_ENTRY(fuzz_keyring)
