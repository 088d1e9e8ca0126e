#include "log.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#ifndef POSEIDON_COMMIT
#define POSEIDON_COMMIT "unknown"
#endif

static log_level_t s_level = LOG_INFO;
static char s_prefix[32];

void log_set_level(log_level_t level) { s_level = level; }
void log_set_prefix(const char *prefix) { snprintf(s_prefix, sizeof s_prefix, "%s", prefix); }
log_level_t log_get_level(void) { return s_level; }

/* One line, one write(2): lines of processes that share a terminal or a pipe (the ranks of
 * a local job) then never break into each other (a pipe keeps writes of up to PIPE_BUF =
 * 4096 bytes whole). A longer line is cut, marked with "...". */
static void write_line(char *buf, size_t cap, size_t n)
{
    if (n >= cap - 1) {
        n = cap - 2;
        memcpy(buf + n - 3, "...", 3);
    }
    buf[n++] = '\n';
    fflush(stderr); /* whatever stdio still holds goes first */
    for (size_t off = 0; off < n;) {
        ssize_t w = write(STDERR_FILENO, buf + off, n - off);
        if (w <= 0) break;
        off += (size_t)w;
    }
}

void log_msg(log_level_t level, const char *fmt, ...)
{
    static const char *const tags[] = {"error: ", "warning: ", "", "debug: "};
    if (level > s_level) return;
    char buf[4096];
    /* on a terminal, a line first erases whatever progress line stands there */
    int n = snprintf(buf, sizeof buf, "%s%s%s", log_is_tty() ? "\r\033[K" : "", s_prefix,
                     tags[level]);
    va_list ap;
    va_start(ap, fmt);
    int m = vsnprintf(buf + n, sizeof buf - (size_t)n, fmt, ap);
    va_end(ap);
    size_t len = (size_t)n + (m > 0 ? (size_t)m : 0);
    write_line(buf, sizeof buf, len < sizeof buf ? len : sizeof buf);
}

const char *log_commit(void) { return POSEIDON_COMMIT; }

void log_block(const char *text, size_t len)
{
    fflush(stderr);
    for (size_t off = 0; off < len;) {
        ssize_t w = write(STDERR_FILENO, text + off, len - off);
        if (w <= 0) break;
        off += (size_t)w;
    }
}

void log_banner(int argc, char **argv, uint64_t seed)
{
    char buf[4096];
    size_t n = (size_t)snprintf(buf, sizeof buf, "# poseidon %s | seed %llu |", POSEIDON_COMMIT,
                                (unsigned long long)seed);
    for (int i = 0; i < argc && n < sizeof buf; i++)
        n += (size_t)snprintf(buf + n, sizeof buf - n, " %s", argv[i]);
    write_line(buf, sizeof buf, n < sizeof buf ? n : sizeof buf);
}

bool log_is_tty(void) { return isatty(STDERR_FILENO) == 1; }

void log_progress(const char *fmt, ...)
{
    if (!log_is_tty()) return;
    char buf[512] = "\r";
    va_list ap;
    va_start(ap, fmt);
    int m = vsnprintf(buf + 1, sizeof buf - 8, fmt, ap);
    va_end(ap);
    size_t n = 1 + (m > 0 ? ((size_t)m < sizeof buf - 8 ? (size_t)m : sizeof buf - 9) : 0);
    memcpy(buf + n, "\033[K", 3);
    n += 3;
    fflush(stderr);
    if (write(STDERR_FILENO, buf, n) < 0) return;
}

void log_progress_end(void)
{
    if (log_is_tty() && write(STDERR_FILENO, "\r\033[K", 4) < 0) return;
}
