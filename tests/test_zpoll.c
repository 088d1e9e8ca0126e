/* zpoll: a socket is asked for its state only while it may hold input; its descriptor marks
 * it when a message arrives, a wait on quiet sockets sleeps until its timeout, and a wait
 * with a socket already marked returns at once. */
#include <errno.h>
#include <stdbool.h>
#include <unistd.h>
#include <zmq.h>

#include "runtime/transport/clock.h"
#include "runtime/transport/zpoll.h"
#include "test.h"

/* Two connected PAIR sockets over inproc; a and b their zpoll states. */
static void pair_up(void *ctx, void **a, void **b, const char *ep)
{
    *a = zmq_socket(ctx, ZMQ_PAIR);
    *b = zmq_socket(ctx, ZMQ_PAIR);
    REQUIRE(*a && *b);
    REQUIRE(zmq_bind(*a, ep) == 0);
    REQUIRE(zmq_connect(*b, ep) == 0);
}

TEST(zpoll_marks_only_the_socket_a_message_reached)
{
    void *ctx = zmq_ctx_new();
    void *a1, *b1, *a2, *b2;
    pair_up(ctx, &a1, &b1, "inproc://zp1");
    pair_up(ctx, &a2, &b2, "inproc://zp2");
    zpoll_t z[2];
    zpoll_init(&z[0], a1);
    zpoll_init(&z[1], a2);
    zpoll_t *zs[2] = {&z[0], &z[1]};
    bool extra;
    /* nothing known yet: the wait returns at once for the caller to ask */
    CHECK_EQ_I64(zpoll_wait(zs, 2, -1, 1000, &extra), 1);
    CHECK_EQ_I64(zpoll_readable(&z[0]), 0);
    CHECK_EQ_I64(zpoll_readable(&z[1]), 0);
    CHECK(!z[0].maybe && !z[1].maybe);
    /* quiet sockets: the wait sleeps out its timeout */
    int64_t t0 = clock_now_ns();
    CHECK_EQ_I64(zpoll_wait(zs, 2, -1, 60, &extra), 0);
    CHECK(clock_now_ns() - t0 >= 50000000, "returned after %lld ns",
          (long long)(clock_now_ns() - t0));
    /* a message to the second: its descriptor wakes the wait and marks it alone */
    REQUIRE(zmq_send(b2, "hi", 2, 0) == 2);
    int rc = 0;
    for (int i = 0; i < 5 && !z[1].maybe; i++) rc = zpoll_wait(zs, 2, -1, 1000, &extra);
    CHECK_EQ_I64(rc, 1);
    CHECK(z[1].maybe && !z[0].maybe, "marked: %d %d", z[0].maybe, z[1].maybe);
    CHECK_EQ_I64(zpoll_readable(&z[1]), 1);
    char buf[4];
    CHECK_EQ_I64(zmq_recv(a2, buf, sizeof buf, ZMQ_DONTWAIT), 2);
    CHECK(zmq_recv(a2, buf, sizeof buf, ZMQ_DONTWAIT) < 0 && zmq_errno() == EAGAIN);
    zpoll_drained(&z[1]);
    /* a touched socket is asked again before any sleep */
    zpoll_touch(&z[0]);
    t0 = clock_now_ns();
    CHECK_EQ_I64(zpoll_wait(zs, 2, -1, 1000, &extra), 1);
    CHECK(clock_now_ns() - t0 < 500000000, "a marked socket waited");
    CHECK_EQ_I64(zpoll_readable(&z[0]), 0);
    zmq_close(a1);
    zmq_close(b1);
    zmq_close(a2);
    zmq_close(b2);
    zmq_ctx_term(ctx);
}

TEST(zpoll_extra_descriptor_wakes_the_wait)
{
    void *ctx = zmq_ctx_new();
    void *a, *b;
    pair_up(ctx, &a, &b, "inproc://zp3");
    zpoll_t z;
    zpoll_init(&z, a);
    CHECK_EQ_I64(zpoll_readable(&z), 0);
    zpoll_t *zs[1] = {&z};
    int fds[2];
    REQUIRE(pipe(fds) == 0);
    REQUIRE(write(fds[1], "x", 1) == 1);
    bool extra = false;
    CHECK_EQ_I64(zpoll_wait(zs, 1, fds[0], 1000, &extra), 1);
    CHECK(extra && !z.maybe);
    close(fds[0]);
    close(fds[1]);
    zmq_close(a);
    zmq_close(b);
    zmq_ctx_term(ctx);
}
