/* zmq_check: the one reporter of ZeroMQ environment failures (a socket that cannot be made,
 * an option the library refuses): file:line, the library's message and a hint, then exit 1.
 * Expected outcomes (a timeout, a peer gone) are not failures and never come here. */
#pragma once

#define ZMQ_CHECK(expr, hint)                                                               \
    do {                                                                                    \
        if ((expr) == -1) zmq_check_fail(__FILE__, __LINE__, #expr, (hint));                \
    } while (0)
_Noreturn void zmq_check_fail(const char *file, int line, const char *expr, const char *hint);
