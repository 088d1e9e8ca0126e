/* The test runner: see test.h. Usage: test_unit [--list] [--no-fork] [NAME-SUBSTRING...] */
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "test.h"

enum { EXIT_PASS = 0, EXIT_FAIL = 2, EXIT_SKIP = 3 };

typedef struct {
    const char *name, *file;
    test_fn_t fn;
} test_case_t;

static test_case_t s_tests[1024];
static int s_n_tests;
static int s_failures;        /* in the running test */
static char s_tmpdir[256];
static char s_build_dir[256] = "build";

void test_register(const char *name, const char *file, test_fn_t fn)
{
    if (s_n_tests == (int)(sizeof s_tests / sizeof s_tests[0])) {
        fprintf(stderr, "too many tests\n");
        exit(1);
    }
    s_tests[s_n_tests++] = (test_case_t){name, file, fn};
}

void test_fail(const char *file, int line, const char *fmt, ...)
{
    s_failures++;
    fprintf(stderr, "    %s:%d: ", file, line);
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

void test_end_failed(void)
{
    fflush(NULL);
    _exit(EXIT_FAIL);
}

void test_skip(const char *fmt, ...)
{
    fprintf(stdout, "SKIP ");
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stdout, fmt, ap);
    va_end(ap);
    fputc('\n', stdout);
    fflush(NULL);
    _exit(EXIT_SKIP);
}

const char *test_build_dir(void) { return s_build_dir; }
const char *test_tmpdir(void) { return s_tmpdir; }

int test_run(char *out, size_t outlen, const char *fmt, ...)
{
    char cmd[8192];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    char full[8300];
    snprintf(full, sizeof full, "( %s ) 2>&1", cmd);
    FILE *p = popen(full, "r");
    if (!p) return -1;
    size_t n = 0;
    if (out && outlen) {
        size_t r;
        while (n + 1 < outlen && (r = fread(out + n, 1, outlen - 1 - n, p)) > 0) n += r;
        out[n] = '\0';
    }
    char sink[4096];
    while (fread(sink, 1, sizeof sink, p) > 0) {
    }
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static bool selected(const char *name, int argc, char **argv, int first)
{
    if (first >= argc) return true;
    for (int i = first; i < argc; i++)
        if (strstr(name, argv[i])) return true;
    return false;
}

static int run_one(const test_case_t *t, bool fork_tests, int timeout_s)
{
    snprintf(s_tmpdir, sizeof s_tmpdir, "/tmp/poseidon-test-XXXXXX");
    if (!mkdtemp(s_tmpdir)) {
        perror("mkdtemp");
        return EXIT_FAIL;
    }
    int code;
    if (!fork_tests) {
        s_failures = 0;
        t->fn();
        code = s_failures ? EXIT_FAIL : EXIT_PASS;
    } else {
        fflush(NULL);
        pid_t pid = fork();
        if (pid < 0) {
            perror("fork");
            return EXIT_FAIL;
        }
        if (pid == 0) {
            setpgid(0, 0);
            alarm((unsigned)timeout_s);
            s_failures = 0;
            t->fn();
            fflush(NULL);
            _exit(s_failures ? EXIT_FAIL : EXIT_PASS);
        }
        int st;
        waitpid(pid, &st, 0);
        kill(-pid, SIGKILL); /* anything the test left running */
        if (WIFEXITED(st)) {
            code = WEXITSTATUS(st);
            if (code != EXIT_PASS && code != EXIT_SKIP) code = EXIT_FAIL;
        } else {
            int sig = WTERMSIG(st);
            fprintf(stderr, "    %s: %s%s\n", t->file, strsignal(sig),
                    sig == SIGALRM ? " (time limit)" : "");
            code = EXIT_FAIL;
        }
    }
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", s_tmpdir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", s_tmpdir);
    return code;
}

int main(int argc, char **argv)
{
    bool fork_tests = true, list = false;
    int first = 1;
    for (; first < argc && argv[first][0] == '-'; first++) {
        if (!strcmp(argv[first], "--no-fork")) fork_tests = false;
        else if (!strcmp(argv[first], "--list")) list = true;
        else {
            fprintf(stderr, "usage: %s [--list] [--no-fork] [NAME-SUBSTRING...]\n", argv[0]);
            return 2;
        }
    }
    const char *b = getenv("POSEIDON_BUILD");
    if (b && *b) snprintf(s_build_dir, sizeof s_build_dir, "%s", b);
    const char *to = getenv("TEST_TIMEOUT");
    int timeout_s = to ? atoi(to) : 300;
    if (timeout_s <= 0) timeout_s = 300;

    int passed = 0, failed = 0, skipped = 0;
    for (int i = 0; i < s_n_tests; i++) {
        const test_case_t *t = &s_tests[i];
        if (!selected(t->name, argc, argv, first)) continue;
        if (list) {
            printf("%s\n", t->name);
            continue;
        }
        double t0 = now_s();
        printf("RUN  %s\n", t->name);
        fflush(stdout);
        int code = run_one(t, fork_tests, timeout_s);
        double dt = now_s() - t0;
        if (code == EXIT_PASS) {
            passed++;
            printf("PASS %s (%.2fs)\n", t->name, dt);
        } else if (code == EXIT_SKIP) {
            skipped++;
        } else {
            failed++;
            printf("FAIL %s (%.2fs)\n", t->name, dt);
        }
        fflush(stdout);
    }
    if (!list) printf("%d passed, %d failed, %d skipped\n", passed, failed, skipped);
    return failed ? 1 : 0;
}
