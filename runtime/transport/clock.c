#include "runtime/transport/clock.h"

#include <errno.h>
#include <stdint.h>
#include <time.h>

#include "core/check.h"

static int64_t s_dilation = 1;

static int64_t monotonic_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int64_t clock_now_ns(void) { return monotonic_ns() / s_dilation; }

void clock_set_dilation(int k)
{
    ASSERT(k >= 1, "time dilation %d", k);
    s_dilation = k;
}

int clock_dilation(void) { return (int)s_dilation; }

int clock_host_ms(int ms)
{
    int64_t v = (int64_t)ms * s_dilation;
    return v > INT32_MAX ? INT32_MAX : (int)v;
}

void clock_sleep_until_ns(int64_t deadline_ns)
{
    /* the cluster's deadline d is the host's d x K: clock_now_ns() reads at least d from then */
    int64_t host_ns = deadline_ns * s_dilation;
    struct timespec ts = {host_ns / 1000000000, host_ns % 1000000000};
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR) {}
}
