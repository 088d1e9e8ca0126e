/* log: leveled messages to stderr, and the banner every program prints first (seed, inputs,
 * git commit), so that any output can be traced back to what produced it.
 *
 * The level and the line prefix are the global mutable state the project allows.
 */
#ifndef POSEIDON_LOG_H
#define POSEIDON_LOG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum { LOG_ERROR, LOG_WARN, LOG_INFO, LOG_DEBUG } log_level_t;

void log_set_level(log_level_t level);
/* Text put before every line (not the banner): "[rank 2] " in the ranks of a local job, which
 * share one terminal. Set once, early. */
void log_set_prefix(const char *prefix);
log_level_t log_get_level(void);
void log_msg(log_level_t level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define log_error(...) log_msg(LOG_ERROR, __VA_ARGS__)
#define log_warn(...) log_msg(LOG_WARN, __VA_ARGS__)
#define log_info(...) log_msg(LOG_INFO, __VA_ARGS__)
#define log_debug(...) log_msg(LOG_DEBUG, __VA_ARGS__)

/* The git commit the binary was built from ("unknown" outside a checkout). */
const char *log_commit(void);

/* A block of whole lines (a table) to stderr in one write(2), so that another process's lines
 * do not cut into it (on a pipe, whole up to PIPE_BUF bytes). */
void log_block(const char *text, size_t len);

/* First line of every program, on stderr:
 *   "# poseidon <commit> | seed 42 | <argv...>" */
void log_banner(int argc, char **argv, uint64_t seed);

/* true when stderr is a terminal: progress lines are shown only then. */
bool log_is_tty(void);

/* A progress line on a terminal (nothing otherwise): it replaces the previous one in place,
 * and the next log line (of any process on the terminal) or log_progress_end() erases it. */
void log_progress(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void log_progress_end(void);

#endif
