/* check: the three kinds of error of STYLE.md.
 *
 *   ASSERT(cond, fmt, ...)  a bug: prints file:line and the message, aborts. Always on.
 *   die(fmt, ...)           an environment failure: prints and exits 1.
 * Bad input is not handled here: a reader returns -1 with "file:line: expected ..." in an
 * error buffer (core/kvfile's kv_error builds one), and the command that called it prints
 * it and exits 2. Expected outcomes (timeouts, a peer gone) also return -1 to the caller.
 *
 * A program may install a context hook (the simulator prints its virtual time) that is
 * appended to every ASSERT message.
 */
#ifndef POSEIDON_CHECK_H
#define POSEIDON_CHECK_H

#include <stddef.h>
#include <stdnoreturn.h>

noreturn void check_fail(const char *file, int line, const char *cond, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
noreturn void die(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Extra context for ASSERT messages: fills buf, returns its length (0: none). */
typedef int (*check_context_fn)(char *buf, size_t len, void *arg);
void check_set_context(check_context_fn fn, void *arg);

#define ASSERT(cond, ...)                                                                   \
    do {                                                                                    \
        if (!(cond)) check_fail(__FILE__, __LINE__, #cond, __VA_ARGS__);                    \
    } while (0)

/* Allocation that cannot fail quietly: dies with the size on exhaustion. */
void *xmalloc(size_t bytes);
void *xcalloc(size_t n, size_t size);
void *xrealloc(void *p, size_t bytes);
char *xstrdup(const char *s);

#endif
