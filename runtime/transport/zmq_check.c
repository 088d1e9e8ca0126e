#include "runtime/transport/zmq_check.h"

#include <stdio.h>
#include <stdlib.h>
#include <zmq.h>

void zmq_check_fail(const char *file, int line, const char *expr, const char *hint)
{
    int e = zmq_errno();
    fprintf(stderr, "poseidon: %s:%d: ZeroMQ: %s: %s\n  hint: %s\n", file, line, expr,
            zmq_strerror(e), hint ? hint : "-");
    fflush(stderr);
    exit(1);
}
