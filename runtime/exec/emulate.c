#include "runtime/exec/emulate.h"

#include <errno.h>
#include <time.h>

void emulate_sleep_ns(int64_t ns)
{
    if (ns <= 0) return;
    struct timespec ts = {ns / 1000000000, ns % 1000000000};
    while (nanosleep(&ts, &ts) == -1 && errno == EINTR) {}
}

void emulate_sleep_until_ns(int64_t deadline_ns)
{
    struct timespec ts = {deadline_ns / 1000000000, deadline_ns % 1000000000};
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR) {}
}
