#include "runtime/transport/keyring.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <zmq.h>

#include "core/check.h"

static keyring_t *keyring_alloc(int world)
{
    keyring_t *k = xcalloc(1, sizeof *k);
    k->world = world;
    k->pub = xcalloc((size_t)world, sizeof *k->pub);
    k->sec = xcalloc((size_t)world, sizeof *k->sec);
    k->pub_raw = xcalloc((size_t)world, sizeof *k->pub_raw);
    return k;
}

void keyring_destroy(keyring_t **kp)
{
    if (!kp || !*kp) return;
    keyring_t *k = *kp;
    if (k->sec) memset(k->sec, 0, (size_t)k->world * sizeof *k->sec);
    free(k->pub);
    free(k->sec);
    free(k->pub_raw);
    free(k);
    *kp = NULL;
}

static int fail(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    return -1;
}

static void decode_public(keyring_t *k)
{
    for (int r = 0; r < k->world; r++)
        ASSERT(zmq_z85_decode(k->pub_raw[r], k->pub[r]), "rank %d's key '%s'", r, k->pub[r]);
}

keyring_t *keyring_generate(int world, char *err, size_t errlen)
{
    ASSERT(world >= 1, "world %d", world);
    if (!zmq_has("curve")) {
        fail(err, errlen, "this ZeroMQ was built without CURVE (libsodium); zmq_has(\"curve\") "
                          "is false");
        return NULL;
    }
    keyring_t *k = keyring_alloc(world);
    for (int r = 0; r < world; r++)
        if (zmq_curve_keypair(k->pub[r], k->sec[r]) != 0) {
            fail(err, errlen, "zmq_curve_keypair: %s", zmq_strerror(zmq_errno()));
            keyring_destroy(&k);
            return NULL;
        }
    decode_public(k);
    return k;
}

/* A Z85 key of 40 characters that decodes to 32 bytes. */
static int key_ok(const char *z85)
{
    uint8_t bin[32];
    return strlen(z85) == KEYRING_Z85_LEN && zmq_z85_decode(bin, z85) != NULL;
}

static int write_file(const char *path, mode_t mode, const char *text, char *err, size_t errlen)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL, mode);
    if (fd < 0)
        return fail(err, errlen, "%s: %s%s", path, strerror(errno),
                    errno == EEXIST ? " (keys are never overwritten: remove the old ones "
                                      "or write elsewhere)"
                                    : "");
    size_t len = strlen(text);
    int ok = write(fd, text, len) == (ssize_t)len && fsync(fd) == 0;
    int saved = errno;
    ok = close(fd) == 0 && ok;
    if (!ok) return fail(err, errlen, "%s: %s", path, strerror(saved));
    return 0;
}

int keyring_write(const keyring_t *k, const char *dir, char *err, size_t errlen)
{
    if (mkdir(dir, 0700) != 0 && errno != EEXIST)
        return fail(err, errlen, "%s: %s", dir, strerror(errno));
    size_t cap = 64 + (size_t)k->world * (KEYRING_Z85_LEN + 16);
    char *text = xmalloc(cap);
    size_t pos = (size_t)snprintf(text, cap, "poseidon-keys 1 ranks %d\n", k->world);
    for (int r = 0; r < k->world; r++)
        pos += (size_t)snprintf(text + pos, cap - pos, "%d %s\n", r, k->pub[r]);
    char path[4096];
    snprintf(path, sizeof path, "%s/public.keys", dir);
    int rc = write_file(path, 0644, text, err, errlen);
    free(text);
    for (int r = 0; r < k->world && rc == 0; r++) {
        if (!k->sec[r][0]) continue;
        char line[160];
        snprintf(line, sizeof line, "poseidon-secret 1 rank %d\n%s %s\n", r, k->pub[r], k->sec[r]);
        snprintf(path, sizeof path, "%s/rank-%d.secret", dir, r);
        rc = write_file(path, 0600, line, err, errlen);
        memset(line, 0, sizeof line);
    }
    return rc;
}

/* Whether st (a file or directory) could have been written by someone other than this
 * user or root: owned by another user, or writable by its group or by others. A line
 * naming path and what to do in err when it could. */
static int owner_only_writes(const char *path, const struct stat *st, const char *what,
                             char *err, size_t errlen)
{
    if (st->st_uid != geteuid() && st->st_uid != 0)
        return fail(err, errlen, "%s: %s owned by uid %u, not by this user or root; keys are "
                                 "read only from places no one else controls", path, what,
                    (unsigned)st->st_uid);
    if (st->st_mode & 022)
        return fail(err, errlen, "%s: others may write this %s (mode %03o); chmod go-w it",
                    path, what, (unsigned)(st->st_mode & 0777));
    return 0;
}

/* ssh's StrictModes for a key file: path, where a symbolic link leads (resolved, then
 * checked), must be a regular file that only this user (or root) can write, in a directory
 * that only they can write; the directory named (dir) is checked too, for a link that leads
 * elsewhere. A secret file must also be unreadable by others. 0, or -1 with one line naming
 * the path in err. */
static int key_file_check(const char *dir, const char *path, int secret, char *err,
                          size_t errlen)
{
    struct stat st;
    if (stat(dir, &st) != 0) return fail(err, errlen, "%s: %s", dir, strerror(errno));
    if (owner_only_writes(dir, &st, "key directory", err, errlen) != 0) return -1;
    if (lstat(path, &st) != 0) return fail(err, errlen, "%s: %s", path, strerror(errno));
    int linked = S_ISLNK(st.st_mode);
    char real[PATH_MAX];
    if (!realpath(path, real)) return fail(err, errlen, "%s: %s", path, strerror(errno));
    if (stat(real, &st) != 0) return fail(err, errlen, "%s: %s", real, strerror(errno));
    if (!S_ISREG(st.st_mode))
        return fail(err, errlen, "%s: not a regular file", path);
    char shown[PATH_MAX + 64];
    if (linked) snprintf(shown, sizeof shown, "%s (a link to %s)", path, real);
    else snprintf(shown, sizeof shown, "%s", path);
    if (owner_only_writes(shown, &st, "key file", err, errlen) != 0) return -1;
    if (secret && (st.st_mode & 077))
        return fail(err, errlen, "%s: others may read this secret key (mode %03o); chmod 600 "
                                 "it", shown, (unsigned)(st.st_mode & 0777));
    if (!linked) return 0;
    char parent[PATH_MAX];
    snprintf(parent, sizeof parent, "%s", real);
    const char *up = dirname(parent);
    if (stat(up, &st) != 0) return fail(err, errlen, "%s: %s", up, strerror(errno));
    char shown_dir[PATH_MAX + 64];
    snprintf(shown_dir, sizeof shown_dir, "%s (where %s leads)", up, path);
    return owner_only_writes(shown_dir, &st, "key directory", err, errlen);
}

/* Reads up to cap-1 bytes of path; NULL with the reason in err. */
static char *slurp(const char *path, size_t cap, char *err, size_t errlen)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        fail(err, errlen, "%s: %s", path, strerror(errno));
        return NULL;
    }
    char *buf = xmalloc(cap);
    size_t n = fread(buf, 1, cap - 1, f);
    int too_long = !feof(f);
    fclose(f);
    buf[n] = '\0';
    if (too_long || strlen(buf) != n) {
        fail(err, errlen, "%s: not a poseidon key file (too long, or binary)", path);
        free(buf);
        return NULL;
    }
    return buf;
}

/* The next line of *text (NUL-terminated in place, CR dropped), or NULL at the end. */
static char *next_line(char **text)
{
    if (!*text || !**text) return NULL;
    char *line = *text, *nl = strchr(line, '\n');
    if (nl) {
        *nl = '\0';
        *text = nl + 1;
    } else {
        *text = line + strlen(line);
    }
    size_t len = strlen(line);
    if (len && line[len - 1] == '\r') line[len - 1] = '\0';
    return line;
}

static int load_public(keyring_t *k, const char *dir, char *err, size_t errlen)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/public.keys", dir);
    if (key_file_check(dir, path, 0, err, errlen) != 0) return -1;
    char *buf = slurp(path, 64 + (size_t)k->world * 64 + 4096, err, errlen);
    if (!buf) return -1;
    char *p = buf, *line;
    int lineno = 0, rc = 0, seen = 0;
    while (rc == 0 && (line = next_line(&p))) {
        lineno++;
        if (lineno == 1) {
            int world = 0, used = 0;
            if (sscanf(line, "poseidon-keys 1 ranks %d%n", &world, &used) != 1 || line[used])
                rc = fail(err, errlen, "%s:1: expected 'poseidon-keys 1 ranks N' (made by "
                                       "poseidon keygen)", path);
            else if (world != k->world)
                rc = fail(err, errlen, "%s:1: keys for %d ranks, the job has %d", path, world,
                          k->world);
            continue;
        }
        int r = -1, used = 0;
        char key[64];
        if (sscanf(line, "%d %63s%n", &r, key, &used) != 2 || line[used] || !key_ok(key))
            rc = fail(err, errlen, "%s:%d: expected 'RANK KEY' (a 40-character Z85 key)", path,
                      lineno);
        else if (seen == k->world) /* before the copy: pub[] has world entries */
            rc = fail(err, errlen, "%s:%d: more keys than the %d ranks", path, lineno,
                      k->world);
        else if (r != seen)
            rc = fail(err, errlen, "%s:%d: expected rank %d, got %d", path, lineno, seen, r);
        else {
            memcpy(k->pub[r], key, KEYRING_Z85_LEN + 1);
            seen++;
        }
    }
    if (rc == 0 && lineno == 0) rc = fail(err, errlen, "%s: empty", path);
    if (rc == 0 && seen != k->world)
        rc = fail(err, errlen, "%s:%d: %d keys for %d ranks", path, lineno, seen, k->world);
    free(buf);
    return rc;
}

static int load_secret(keyring_t *k, const char *dir, int rank, char *err, size_t errlen)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/rank-%d.secret", dir, rank);
    if (key_file_check(dir, path, 1, err, errlen) != 0) return -1;
    char *buf = slurp(path, 512, err, errlen);
    if (!buf) return -1;
    char *p = buf, *line = next_line(&p);
    int r = -1, used = 0, rc = 0;
    char pub[64], sec[64], derived[KEYRING_Z85_LEN + 1];
    if (!line || sscanf(line, "poseidon-secret 1 rank %d%n", &r, &used) != 1 || line[used])
        rc = fail(err, errlen, "%s:1: expected 'poseidon-secret 1 rank R' (made by poseidon "
                               "keygen)", path);
    else if (r != rank)
        rc = fail(err, errlen, "%s:1: the key of rank %d, this is rank %d", path, r, rank);
    else if (!(line = next_line(&p)) || sscanf(line, "%63s %63s%n", pub, sec, &used) != 2 ||
             line[used] || !key_ok(pub) || !key_ok(sec))
        rc = fail(err, errlen, "%s:2: expected 'PUBLIC SECRET' (two 40-character Z85 keys)",
                  path);
    else if (zmq_curve_public(derived, sec) != 0 || strcmp(derived, pub) != 0)
        rc = fail(err, errlen, "%s:2: the secret key does not belong to its public key", path);
    else if (strcmp(pub, k->pub[rank]) != 0)
        rc = fail(err, errlen, "%s:2: this key is not rank %d's in %s/public.keys (keys of "
                               "another job?)", path, rank, dir);
    else if ((line = next_line(&p)) && line[0])
        rc = fail(err, errlen, "%s:3: unexpected text after the keys", path);
    else
        memcpy(k->sec[rank], sec, KEYRING_Z85_LEN + 1);
    memset(sec, 0, sizeof sec);
    memset(buf, 0, strlen(buf));
    free(buf);
    return rc;
}

keyring_t *keyring_load(const char *dir, int rank, int world, char *err, size_t errlen)
{
    ASSERT(world >= 1 && rank >= 0 && rank < world, "rank %d of %d", rank, world);
    if (!zmq_has("curve")) {
        fail(err, errlen, "this ZeroMQ was built without CURVE (libsodium)");
        return NULL;
    }
    keyring_t *k = keyring_alloc(world);
    if (load_public(k, dir, err, errlen) != 0 || load_secret(k, dir, rank, err, errlen) != 0)
        keyring_destroy(&k);
    else
        decode_public(k);
    return k;
}

int keyring_public(const keyring_t *k, int rank, uint8_t out[32])
{
    if (rank < 0 || rank >= k->world || !k->pub[rank][0]) return -1;
    return zmq_z85_decode(out, k->pub[rank]) ? 0 : -1;
}

int keyring_secret(const keyring_t *k, int rank, uint8_t out[32])
{
    if (rank < 0 || rank >= k->world || !k->sec[rank][0]) return -1;
    return zmq_z85_decode(out, k->sec[rank]) ? 0 : -1;
}

int keyring_rank_of(const keyring_t *k, const uint8_t key[32])
{
    for (int r = 0; r < k->world; r++)
        if (memcmp(k->pub_raw[r], key, 32) == 0) return r;
    return -1;
}
