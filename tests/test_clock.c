/* The runtime's clock under time dilation (runtime/transport/clock.h): it reads the host's
 * monotonic clock divided by K, a sleep until one of its times lasts K times as long on the
 * host, and host waits are the cluster's ms x K. */
#include <stdint.h>
#include <time.h>

#include "runtime/transport/clock.h"
#include "test.h"

static int64_t host_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

TEST(clock_dilation_divides_the_host_clock)
{
    CHECK(clock_dilation() == 1, "a process starts undilated, got %d", clock_dilation());
    int64_t a = host_ns(), c = clock_now_ns(), b = host_ns();
    CHECK(a <= c && c <= b, "undilated, the clock is CLOCK_MONOTONIC: %lld not in [%lld, %lld]",
          (long long)c, (long long)a, (long long)b);
    clock_set_dilation(4);
    a = host_ns(), c = clock_now_ns(), b = host_ns();
    CHECK(a / 4 <= c && c <= b / 4, "dilated 4 times: %lld not in [%lld, %lld]", (long long)c,
          (long long)(a / 4), (long long)(b / 4));
    CHECK(clock_host_ms(1000) == 4000, "1 s of the cluster is %d ms of the host", clock_host_ms(1000));
    CHECK(clock_host_ms(1 << 30) == INT32_MAX, "saturates: %d", clock_host_ms(1 << 30));
    /* 25 ms of the cluster's time: at least 100 ms of the host's */
    int64_t t0 = clock_now_ns(), h0 = host_ns();
    clock_sleep_until_ns(t0 + 25000000);
    int64_t t1 = clock_now_ns(), h1 = host_ns();
    CHECK(t1 - t0 >= 25000000, "slept %.3f ms of the cluster's time, 25 asked", (t1 - t0) * 1e-6);
    CHECK(h1 - h0 >= 4 * 25000000 - 4, "slept %.3f ms of the host's time, at least 100 expected",
          (h1 - h0) * 1e-6);
    clock_set_dilation(1);
}
