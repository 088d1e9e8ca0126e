#include "runtime/transport/launch.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/check.h"
#include "core/log.h"

const char *launch_source_name(launch_source_t s)
{
    switch (s) {
    case LAUNCH_MANUAL: return "RANK/WORLD_SIZE";
    case LAUNCH_OMPI: return "Open MPI";
    case LAUNCH_SLURM: return "Slurm";
    default: return "single process";
    }
}

/* Parses a non-negative decimal int; -1 if malformed. */
static int parse_nonneg(const char *s)
{
    if (!s || !*s) return -1;
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || *end || v < 0 || v > 1000000) return -1;
    return (int)v;
}

#define ERR(...)                                                                            \
    do {                                                                                    \
        if (err && err_len) snprintf(err, err_len, __VA_ARGS__);                            \
        return -1;                                                                          \
    } while (0)

/* Reads a (rank, size, local) triple; returns 1 if the rank variable is set, 0 if not,
 * -1 on error. */
static int read_triple(launch_getenv_fn get, void *arg, const char *rk, const char *sz,
                       const char *lr, int *rank, int *world, int *local, char *err,
                       size_t err_len)
{
    const char *r = get(rk, arg), *w = get(sz, arg), *l = get(lr, arg);
    if (!r) {
        if (w) ERR("%s=%s is set but %s is not", sz, w, rk);
        return 0;
    }
    if (!w) ERR("%s=%s is set but %s is not", rk, r, sz);
    *rank = parse_nonneg(r);
    *world = parse_nonneg(w);
    if (*rank < 0) ERR("%s='%s' is not a rank (a non-negative integer)", rk, r);
    if (*world < 1) ERR("%s='%s' is not a world size (a positive integer)", sz, w);
    if (*rank >= *world) ERR("%s=%d is not below %s=%d", rk, *rank, sz, *world);
    *local = 0;
    if (l) {
        *local = parse_nonneg(l);
        if (*local < 0) ERR("%s='%s' is not a local rank", lr, l);
    }
    return 1;
}

int launch_env_read(launch_getenv_fn get, void *arg, launch_env_t *env, char *err,
                    size_t err_len)
{
    memset(env, 0, sizeof *env);
    static const struct {
        launch_source_t src;
        const char *rank, *size, *local;
    } srcs[] = {
        {LAUNCH_MANUAL, "RANK", "WORLD_SIZE", "LOCAL_RANK"},
        {LAUNCH_OMPI, "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
         "OMPI_COMM_WORLD_LOCAL_RANK"},
        {LAUNCH_SLURM, "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID"},
    };
    int found = -1;
    for (int i = 0; i < 3; i++) {
        int r, w, l;
        int rc = read_triple(get, arg, srcs[i].rank, srcs[i].size, srcs[i].local, &r, &w, &l,
                             err, err_len);
        if (rc < 0) return -1;
        if (!rc) continue;
        if (found < 0) {
            found = i;
            env->rank = r;
            env->world = w;
            env->local_rank = l;
            env->source = srcs[i].src;
        } else if (r != env->rank || w != env->world) {
            ERR("inconsistent environment: %s=%d %s=%d but %s=%d %s=%d", srcs[found].rank,
                env->rank, srcs[found].size, env->world, srcs[i].rank, r, srcs[i].size, w);
        }
    }
    if (found < 0) {
        env->rank = 0;
        env->world = 1;
        env->source = LAUNCH_NONE;
    }
    const char *addr = get("MASTER_ADDR", arg);
    if (!addr && env->source == LAUNCH_SLURM) addr = get("SLURM_LAUNCH_NODE_IPADDR", arg);
    if (!addr && env->source == LAUNCH_OMPI) {
        const char *ls = get("OMPI_COMM_WORLD_LOCAL_SIZE", arg);
        if (ls && parse_nonneg(ls) == env->world) addr = "127.0.0.1";
        else
            ERR("Open MPI ranks span hosts (OMPI_COMM_WORLD_LOCAL_SIZE=%s of %d): pass the "
                "master with mpirun -x MASTER_ADDR=<rank 0's host>",
                ls ? ls : "unset", env->world);
    }
    if (!addr && env->world > 1 && env->source != LAUNCH_MANUAL && env->source != LAUNCH_OMPI)
        ERR("%s job of %d ranks without MASTER_ADDR or SLURM_LAUNCH_NODE_IPADDR",
            launch_source_name(env->source), env->world);
    if (!addr && env->source == LAUNCH_MANUAL && env->world > 1)
        ERR("RANK/WORLD_SIZE set without MASTER_ADDR (the host of rank 0)");
    if (!addr) addr = "127.0.0.1";
    if (!*addr || strlen(addr) >= sizeof env->master_addr || strpbrk(addr, " /"))
        ERR("MASTER_ADDR='%s' is not a host name or address", addr);
    snprintf(env->master_addr, sizeof env->master_addr, "%s", addr);
    const char *port = get("MASTER_PORT", arg);
    env->master_port = LAUNCH_DEFAULT_PORT;
    if (port) {
        int p = parse_nonneg(port);
        if (p < 1 || p > 65535) ERR("MASTER_PORT='%s' is not a TCP port (1..65535)", port);
        env->master_port = p;
    }
    return 0;
}

static const char *real_getenv(const char *name, void *arg)
{
    (void)arg;
    const char *v = getenv(name);
    return v && *v ? v : NULL;
}

int launch_env_detect(launch_env_t *env, char *err, size_t err_len)
{
    return launch_env_read(real_getenv, NULL, env, err, err_len);
}

int launch_local_addr(const char *master_addr, char *out, size_t out_len)
{
    struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_DGRAM}, *res = NULL;
    if (getaddrinfo(master_addr, "9", &hints, &res) != 0 || !res) {
        log_error("cannot resolve MASTER_ADDR '%s'", master_addr);
        return -1;
    }
    int fd = socket(AF_INET, SOCK_DGRAM, 0);
    int rc = -1;
    /* connect() on UDP sends nothing: it only picks the route and so the source address */
    if (fd >= 0 && connect(fd, res->ai_addr, res->ai_addrlen) == 0) {
        struct sockaddr_in sa;
        socklen_t len = sizeof sa;
        if (getsockname(fd, (struct sockaddr *)&sa, &len) == 0 &&
            inet_ntop(AF_INET, &sa.sin_addr, out, (socklen_t)out_len))
            rc = 0;
    }
    if (rc) log_error("no route to MASTER_ADDR '%s': %s", master_addr, strerror(errno));
    if (fd >= 0) close(fd);
    freeaddrinfo(res);
    return rc;
}

/* Whether port can be bound on every address now (as the coordinator will bind it). */
static int port_bindable(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) die("socket: %s", strerror(errno));
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    sa.sin_addr.s_addr = htonl(INADDR_ANY);
    int ok = bind(fd, (struct sockaddr *)&sa, sizeof sa) == 0;
    close(fd);
    return ok;
}

int launch_free_port(void)
{
    /* Below the kernel's ephemeral range: a port from that range, free when checked, can be
     * taken by any outgoing connection (a job's ranks open thousands) before the
     * coordinator binds it, which made a local job fail now and then with "Address already
     * in use". */
    int low = 32768;
    FILE *f = fopen("/proc/sys/net/ipv4/ip_local_port_range", "r");
    if (f) {
        if (fscanf(f, "%d", &low) != 1) low = 32768;
        fclose(f);
    }
    if (low > 12000) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        unsigned seed = (unsigned)getpid() * 2654435761u ^ (unsigned)ts.tv_nsec;
        for (int i = 0; i < 200; i++) {
            seed = seed * 1103515245u + 12345u;
            int port = 10000 + (int)((seed >> 8) % (unsigned)(low - 10000));
            if (port_bindable(port)) return port;
        }
    }
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) die("socket: %s", strerror(errno));
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = 0};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof sa;
    if (bind(fd, (struct sockaddr *)&sa, sizeof sa) != 0 ||
        getsockname(fd, (struct sockaddr *)&sa, &len) != 0)
        die("cannot find a free port on 127.0.0.1: %s", strerror(errno));
    close(fd);
    return ntohs(sa.sin_port);
}

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static volatile sig_atomic_t s_term;
static void note_term(int sig)
{
    (void)sig;
    s_term = 1;
}

int launch_local(int n, int port, int grace_ms, launch_child_fn fn, void *arg)
{
    return launch_local_why(n, port, grace_ms, fn, arg, NULL, 0);
}

int launch_local_why(int n, int port, int grace_ms, launch_child_fn fn, void *arg, char *why,
                     size_t why_len)
{
    if (why && why_len) why[0] = '\0';
    ASSERT(n >= 1 && n <= 4096, "workers %d", n);
    pid_t *pids = xcalloc((size_t)n, sizeof *pids);
    pid_t parent = getpid();
    fflush(NULL);
    for (int r = 0; r < n; r++) {
        pid_t pid = fork();
        if (pid < 0) die("fork of worker %d: %s", r, strerror(errno));
        if (pid == 0) {
            prctl(PR_SET_PDEATHSIG, SIGKILL);
            if (getppid() != parent) _exit(1); /* the launcher died before prctl */
            char v[32];
            snprintf(v, sizeof v, "%d", r);
            setenv("RANK", v, 1);
            setenv("LOCAL_RANK", v, 1);
            snprintf(v, sizeof v, "%d", n);
            setenv("WORLD_SIZE", v, 1);
            setenv("MASTER_ADDR", "127.0.0.1", 1);
            snprintf(v, sizeof v, "%d", port);
            setenv("MASTER_PORT", v, 1);
            if (n > 1) { /* the children share the launcher's terminal */
                snprintf(v, sizeof v, "[rank %d] ", r);
                log_set_prefix(v);
            }
            int rc = fn(r, arg);
            fflush(NULL);
            _exit(rc);
        }
        pids[r] = pid;
    }
    int left = n, first_bad = 0;
    int64_t kill_at = -1;
    /* a SIGTERM to the launcher (a scheduler's preemption) goes on to every worker, which
     * may stop cleanly (runtime/worker: after its next checkpoint) */
    struct sigaction term = {.sa_handler = note_term}, old_term;
    sigemptyset(&term.sa_mask);
    s_term = 0;
    sigaction(SIGTERM, &term, &old_term);
    bool forwarded = false;
    while (left > 0) {
        if (s_term && !forwarded) {
            forwarded = true;
            log_info("launch: SIGTERM: passed on to the workers");
            for (int r = 0; r < n; r++)
                if (pids[r] > 0) kill(pids[r], SIGTERM);
        }
        int st;
        pid_t pid = waitpid(-1, &st, WNOHANG);
        if (pid < 0 && errno != EINTR) break;
        if (pid <= 0) {
            if (kill_at >= 0 && now_ms() > kill_at) {
                for (int r = 0; r < n; r++)
                    if (pids[r] > 0) {
                        log_error("launch: worker %d still running %d ms after a failure: "
                                  "killing it", r, grace_ms);
                        kill(pids[r], SIGKILL);
                    }
                kill_at = now_ms() + 60000; /* SIGKILL is final; just reap */
            }
            struct timespec ts = {0, 20000000};
            nanosleep(&ts, NULL);
            continue;
        }
        int r = 0;
        while (r < n && pids[r] != pid) r++;
        if (r == n) continue;
        pids[r] = -1;
        left--;
        int code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        if (code != 0) {
            char line[128];
            if (WIFSIGNALED(st))
                snprintf(line, sizeof line, "worker %d killed by signal %d (%s)", r,
                         WTERMSIG(st), strsignal(WTERMSIG(st)));
            else snprintf(line, sizeof line, "worker %d exited with status %d", r, code);
            log_error("launch: %s", line);
            if (!first_bad && why && why_len) snprintf(why, why_len, "%s", line);
            if (!first_bad) {
                first_bad = code;
                kill_at = now_ms() + grace_ms;
            }
        }
    }
    sigaction(SIGTERM, &old_term, NULL);
    free(pids);
    return first_bad;
}
