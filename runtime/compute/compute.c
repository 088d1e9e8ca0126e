/* compute: the one place that chooses a backend. The CUDA backend is a shared object of its
 * own (build/libposeidon_cuda.so, built when nvcc is found) that this file loads the first
 * time a CUDA backend is asked for, so that a simulation or a CPU run never maps the CUDA
 * and cuBLAS libraries (hundreds of MB). */
#include "runtime/compute/compute.h"

#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/wait.h>

#include "core/check.h"

/* The CUDA backend's entry points, exported as plain C by compute_cuda.cu. */
typedef struct {
    const compute_ops_t *ops;
    const compute_layer_ops_t *layers;
    int (*device_count)(char *why, size_t whylen);
    void *(*ctx_new)(int device);
    char why[PATH_MAX + 512]; /* why it could not be loaded; empty when loaded */
} cuda_backend_t;

static cuda_backend_t s_cuda;
static pthread_once_t s_cuda_once = PTHREAD_ONCE_INIT;

/* POSEIDON_CUDA_LIB, else libposeidon_cuda.so beside the running executable. */
static void cuda_load(void)
{
    char path[PATH_MAX + 32];
    const char *env = getenv("POSEIDON_CUDA_LIB");
    if (env && *env) {
        snprintf(path, sizeof path, "%s", env);
    } else {
        char exe[PATH_MAX];
        ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
        if (n <= 0) {
            snprintf(s_cuda.why, sizeof s_cuda.why, "cannot find the executable's folder");
            return;
        }
        exe[n] = 0;
        char *slash = strrchr(exe, '/');
        if (slash) *slash = 0;
        snprintf(path, sizeof path, "%s/libposeidon_cuda.so", exe);
    }
    if (access(path, F_OK) != 0) {
        snprintf(s_cuda.why, sizeof s_cuda.why,
                 "this build has no CUDA backend (%.*s: not built; nvcc was not found): "
                 "install the CUDA toolkit and rebuild with make CUDA=1, or run with --device cpu",
                 PATH_MAX, path);
        return;
    }
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        snprintf(s_cuda.why, sizeof s_cuda.why, "cannot load the CUDA backend: %s", dlerror());
        return;
    }
    s_cuda.ops = dlsym(h, "compute_cuda_ops");
    s_cuda.layers = dlsym(h, "compute_cuda_layer_ops");
    *(void **)&s_cuda.device_count = dlsym(h, "compute_cuda_device_count");
    *(void **)&s_cuda.ctx_new = dlsym(h, "compute_cuda_ctx_new");
    if (!s_cuda.ops || !s_cuda.layers || !s_cuda.device_count || !s_cuda.ctx_new) {
        snprintf(s_cuda.why, sizeof s_cuda.why, "%.*s: not a CUDA backend of this build",
                 PATH_MAX, path);
        s_cuda.ops = NULL;
    }
}

int compute_kind_parse(const char *s, compute_kind_t *kind)
{
    if (!strcmp(s, "cpu")) *kind = COMPUTE_CPU;
    else if (!strcmp(s, "cuda")) *kind = COMPUTE_CUDA;
    else return -1;
    return 0;
}

const char *compute_kind_name(compute_kind_t kind)
{
    return kind == COMPUTE_CUDA ? "cuda" : "cpu";
}

bool compute_available(compute_kind_t kind, char *why, size_t whylen)
{
    return compute_device_count(kind, why, whylen) > 0;
}

int compute_device_count(compute_kind_t kind, char *why, size_t whylen)
{
    if (why && whylen) why[0] = '\0';
    if (kind == COMPUTE_CPU) return 1;
    pthread_once(&s_cuda_once, cuda_load);
    if (!s_cuda.ops) {
        if (why && whylen) snprintf(why, whylen, "%s", s_cuda.why);
        return 0;
    }
    return s_cuda.device_count(why, whylen);
}

int compute_device_count_apart(compute_kind_t kind, char *why, size_t whylen)
{
    if (why && whylen) why[0] = '\0';
    if (kind == COMPUTE_CPU) return 1;
    int fd[2];
    if (pipe(fd)) {
        if (why && whylen) snprintf(why, whylen, "pipe: %s", strerror(errno));
        return 0;
    }
    pid_t pid = fork();
    if (pid < 0) {
        if (why && whylen) snprintf(why, whylen, "fork: %s", strerror(errno));
        close(fd[0]);
        close(fd[1]);
        return 0;
    }
    if (pid == 0) { /* the child: "COUNT WHY" down the pipe */
        close(fd[0]);
        char msg[PATH_MAX + 600];
        int n = compute_device_count(kind, msg + 16, sizeof msg - 16);
        char head[16];
        snprintf(head, sizeof head, "%-15d", n);
        memcpy(msg, head, 15);
        msg[15] = ' ';
        size_t len = 16 + strlen(msg + 16);
        ssize_t wr = write(fd[1], msg, len);
        _exit(wr == (ssize_t)len ? 0 : 1);
    }
    close(fd[1]);
    char msg[PATH_MAX + 600];
    size_t got = 0;
    ssize_t r;
    while (got < sizeof msg - 1 && ((r = read(fd[0], msg + got, sizeof msg - 1 - got)) > 0 ||
                                    (r < 0 && errno == EINTR)))
        if (r > 0) got += (size_t)r;
    close(fd[0]);
    msg[got] = '\0';
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
    if (got < 16 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        if (why && whylen)
            snprintf(why, whylen, "the process that looked for a GPU failed (status %d)", status);
        return 0;
    }
    if (why && whylen) snprintf(why, whylen, "%s", msg + 16);
    return atoi(msg);
}

compute_t *compute_new(compute_kind_t kind, int threads, char *err, size_t errlen)
{
    return compute_new_on(kind, threads, -1, err, errlen);
}

compute_t *compute_new_on(compute_kind_t kind, int threads, int device, char *err,
                          size_t errlen)
{
    if (!compute_available(kind, err, errlen)) return NULL;
    compute_t *c = xcalloc(1, sizeof *c);
    c->kind = kind;
    if (kind == COMPUTE_CPU) {
        c->ops = &compute_cpu_ops;
        c->layers = &compute_cpu_layer_ops;
        c->ctx = compute_cpu_ctx_new(threads);
    } else {
        c->ops = s_cuda.ops;
        c->layers = s_cuda.layers;
        c->ctx = s_cuda.ctx_new(device);
    }
    return c;
}

void compute_destroy(compute_t **cp)
{
    if (!cp || !*cp) return;
    (*cp)->ops->destroy((*cp)->ctx);
    free(*cp);
    *cp = NULL;
}
