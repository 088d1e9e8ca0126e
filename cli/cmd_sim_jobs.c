#include "cli/cmd_sim_jobs.h"

#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/check.h"

/* What the processes share: the next task to take, and a stop after a failure. */
typedef struct {
    int next;
    int stop;
} shared_t;

/* One task's output as it crosses the pipe: this header, then len bytes. */
typedef struct {
    int32_t task, rc;
    uint64_t len;
} record_t;

/* One worker process as the parent sees it. */
typedef struct {
    pid_t pid;
    int fd;        /* the read end of its pipe; -1 after its end */
    char *buf;     /* bytes read and not yet parsed into records */
    size_t len, cap;
} worker_t;

/* A task's result in the parent, kept until its turn comes. */
typedef struct {
    char *out;
    size_t len;
    int rc, done;
} result_t;

int sim_jobs_cores(void)
{
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0)
        return CPU_COUNT(&set);
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

static int write_all(int fd, const void *p, size_t len)
{
    for (const char *c = p; len > 0;) {
        ssize_t w = write(fd, c, len);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return -1;
        c += w;
        len -= (size_t)w;
    }
    return 0;
}

/* A child: takes tasks until none is left, a task fails, or the parent says stop. */
static noreturn void child_loop(shared_t *sh, int fd, int n, sim_jobs_task_fn task, void *arg)
{
    for (;;) {
        if (__atomic_load_n(&sh->stop, __ATOMIC_SEQ_CST)) break;
        int i = __atomic_fetch_add(&sh->next, 1, __ATOMIC_SEQ_CST);
        if (i >= n) break;
        char *out = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&out, &len);
        if (!f) die("poseidon sim: open_memstream: out of memory");
        int rc = task(i, f, arg);
        fclose(f);
        record_t r = {.task = i, .rc = rc ? -1 : 0, .len = len};
        if (write_all(fd, &r, sizeof r) || write_all(fd, out, len)) _exit(1);
        free(out);
        if (rc) break;
    }
    _exit(0);
}

/* Reads what worker w has written; complete records go to res. 0 at the pipe's end. */
static int worker_read(worker_t *w, result_t *res, int n)
{
    if (w->cap - w->len < 65536) w->buf = xrealloc(w->buf, w->cap = w->cap * 2 + 65536);
    ssize_t got = read(w->fd, w->buf + w->len, w->cap - w->len);
    if (got < 0 && errno == EINTR) return 1;
    if (got <= 0) return 0;
    w->len += (size_t)got;
    size_t at = 0;
    for (record_t r; w->len - at >= sizeof r;) {
        memcpy(&r, w->buf + at, sizeof r);
        if (w->len - at - sizeof r < r.len) break;
        ASSERT(r.task >= 0 && r.task < n && !res[r.task].done, "task %d", r.task);
        result_t *x = &res[r.task];
        x->out = xmalloc(r.len + 1);
        memcpy(x->out, w->buf + at + sizeof r, r.len);
        x->len = r.len;
        x->rc = r.rc;
        x->done = 1;
        at += sizeof r + r.len;
    }
    memmove(w->buf, w->buf + at, w->len - at);
    w->len -= at;
    return 1;
}

/* Starts the workers: 0, or -1 after a line (no pipe or fork). */
static int workers_start(worker_t *ws, int jobs, shared_t *sh, int n, sim_jobs_task_fn task,
                         void *arg)
{
    fflush(NULL); /* nothing buffered may be written twice */
    for (int k = 0; k < jobs; k++) {
        int p[2];
        if (pipe(p)) {
            perror("poseidon sim: pipe");
            return -1;
        }
        pid_t pid = fork();
        if (pid < 0) {
            perror("poseidon sim: fork");
            close(p[0]);
            close(p[1]);
            return -1;
        }
        if (pid == 0) {
            close(p[0]);
            for (int o = 0; o < k; o++) close(ws[o].fd);
            child_loop(sh, p[1], n, task, arg);
        }
        close(p[1]);
        ws[k] = (worker_t){.pid = pid, .fd = p[0]};
    }
    return 0;
}

/* Reads the workers' records and emits them in task order until every pipe has ended or a
 * task failed. Returns the number of tasks emitted; *failed is set when a task failed. */
static int collect(worker_t *ws, int jobs, result_t *res, int n, sim_jobs_emit_fn emit,
                   void *arg, int *failed)
{
    struct pollfd *pf = xmalloc(jobs * sizeof *pf);
    int next = 0, open = jobs;
    while (next < n && open > 0 && !*failed) {
        int m = 0;
        for (int k = 0; k < jobs; k++)
            if (ws[k].fd >= 0) pf[m++] = (struct pollfd){.fd = ws[k].fd, .events = POLLIN};
        if (poll(pf, m, -1) < 0) {
            if (errno == EINTR) continue;
            die("poseidon sim: poll: %s", strerror(errno));
        }
        for (int k = 0, j = 0; k < jobs; k++) {
            if (ws[k].fd < 0) continue;
            if (pf[j++].revents && !worker_read(&ws[k], res, n)) {
                close(ws[k].fd);
                ws[k].fd = -1;
                open--;
            }
        }
        for (; next < n && res[next].done && !*failed; next++) {
            if (res[next].rc) *failed = 1;
            else emit(next, res[next].out, res[next].len, arg);
            free(res[next].out);
            res[next].out = NULL;
        }
    }
    free(pf);
    return next - *failed;
}

int sim_jobs_run(int n, int jobs, sim_jobs_task_fn task, sim_jobs_emit_fn emit, void *arg)
{
    if (jobs > n) jobs = n;
    if (jobs < 1) return 0;
    shared_t *sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
                        -1, 0);
    if (sh == MAP_FAILED) die("poseidon sim: mmap: %s", strerror(errno));
    *sh = (shared_t){0};
    worker_t *ws = xcalloc(jobs, sizeof *ws);
    result_t *res = xcalloc(n, sizeof *res);
    int started = 0, failed = 0, emitted = 0;
    if (workers_start(ws, jobs, sh, n, task, arg) == 0) {
        started = jobs;
        emitted = collect(ws, jobs, res, n, emit, arg, &failed);
    } else {
        for (; started < jobs && ws[started].pid > 0; started++) {}
        failed = 1;
    }
    if (failed) { /* what the others still run is not wanted */
        __atomic_store_n(&sh->stop, 1, __ATOMIC_SEQ_CST);
        for (int k = 0; k < started; k++) kill(ws[k].pid, SIGTERM);
    }
    int died = 0;
    for (int k = 0; k < started; k++) {
        int st;
        while (waitpid(ws[k].pid, &st, 0) < 0 && errno == EINTR) {}
        if (!failed && !(WIFEXITED(st) && WEXITSTATUS(st) == 0) && !died++)
            fprintf(stderr, "poseidon sim: worker process %d of %d %s %d\n", k + 1, started,
                    WIFSIGNALED(st) ? "killed by signal" : "exited with",
                    WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
        if (ws[k].fd >= 0) close(ws[k].fd);
        free(ws[k].buf);
    }
    if (!failed && !died && emitted < n) {
        fprintf(stderr, "poseidon sim: worker processes ended with %d of %d configurations "
                "not done\n", n - emitted, n);
        died = 1;
    }
    for (int i = 0; i < n; i++) free(res[i].out);
    free(res);
    free(ws);
    munmap(sh, sizeof *sh);
    return failed || died ? -1 : 0;
}
