#include "log.h"

#include <stdarg.h>
#include <stdio.h>
#include <unistd.h>

#ifndef POSEIDON_COMMIT
#define POSEIDON_COMMIT "unknown"
#endif

static log_level_t s_level = LOG_INFO;

void log_set_level(log_level_t level) { s_level = level; }
log_level_t log_get_level(void) { return s_level; }

void log_msg(log_level_t level, const char *fmt, ...)
{
    static const char *const tags[] = {"error: ", "warning: ", "", "debug: "};
    if (level > s_level) return;
    fputs(tags[level], stderr);
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

const char *log_commit(void) { return POSEIDON_COMMIT; }

void log_banner(int argc, char **argv, uint64_t seed)
{
    fprintf(stderr, "# poseidon %s | seed %llu |", POSEIDON_COMMIT, (unsigned long long)seed);
    for (int i = 0; i < argc; i++) fprintf(stderr, " %s", argv[i]);
    fputc('\n', stderr);
}

bool log_is_tty(void) { return isatty(STDERR_FILENO) == 1; }
