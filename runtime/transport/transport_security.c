#include "runtime/transport/transport_security.h"

#include <stdio.h>
#include <string.h>

#include "core/log.h"
#include "runtime/transport/comm.h"

/* Loopback only: 127.0.0.0/8, ::1, or a name that resolves to one of them. */
static bool master_is_loopback(const launch_env_t *env)
{
    char addr[64];
    if (launch_local_addr(env->master_addr, addr, sizeof addr) != 0) return false;
    return !strncmp(addr, "127.", 4) || !strcmp(addr, "::1");
}

static int install_keys(const transport_security_t *s, const launch_env_t *env, char *err,
                        size_t errlen);

int transport_security_install(const transport_security_t *s, const launch_env_t *env,
                               char *err, size_t errlen)
{
    if (s->trusted_fabric && s->insecure) {
        snprintf(err, errlen, "--trusted-fabric authenticates every connection with the job's "
                              "keys; --insecure has none: choose one");
        return -1;
    }
    if (s->trusted_fabric) comm_set_trusted_fabric(true);
    return install_keys(s, env, err, errlen);
}

/* The rules of the header, once the fabric's mode is set. */
static int install_keys(const transport_security_t *s, const launch_env_t *env, char *err,
                        size_t errlen)
{
    if (s->keys) {
        if (s->keys->world != env->world) {
            snprintf(err, errlen, "the job's keys are for %d ranks, the job has %d",
                     s->keys->world, env->world);
            return -1;
        }
        comm_set_keyring(s->keys);
        return 0;
    }
    if (s->keys_dir) {
        char why[1024];
        keyring_t *k = keyring_load(s->keys_dir, env->rank, env->world, why, sizeof why);
        if (!k) {
            snprintf(err, errlen, "--keys: %s", why);
            return -1;
        }
        comm_set_keyring(k); /* kept for the life of the process */
        return 0;
    }
    if (!s->insecure && env->source == LAUNCH_NONE) { /* one process: keys of its own */
        keyring_t *k = keyring_generate(env->world, err, errlen);
        if (!k) return -1;
        comm_set_keyring(k);
        return 0;
    }
    if (!s->insecure) {
        snprintf(err, errlen,
                 "a job started by a launcher needs its keys: poseidon keygen --ranks %d -o "
                 "DIR, then --keys DIR on every rank (--insecure runs without them, on one "
                 "machine only)", env->world);
        return -1;
    }
    if (!master_is_loopback(env)) {
        snprintf(err, errlen, "--insecure is for jobs on one machine; the master %s is not "
                              "on loopback (give the job keys: --keys DIR)", env->master_addr);
        return -1;
    }
    if (env->rank == 0)
        log_warn("transport: plain TCP on loopback (--insecure): not encrypted, and any local "
                 "process can join the job, read and change its parameters and end it; use it "
                 "only where every local user is trusted");
    return 0;
}
