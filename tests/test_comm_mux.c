/* comm_mux: many ports share one connection per peer; sends keep the order they were
 * queued in, answers reach the port that expects them (and only it), an answer wakes the
 * waiting port at once, zero-copy payloads are tracked, and a failed send fails its port
 * and no other. With slices (send order layer): a later message of a lower layer overtakes
 * a long one, the receiver puts the slices back together, and a malformed slice is
 * refused, never written out of bounds. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <zmq.h>

#include "runtime/transport/comm_mux.h"
#include "runtime/transport/clock.h"
#include "runtime/transport/sendq.h"
#include "runtime/transport/slice.h"
#include "test.h"

/* A server comm (rank 0, bound) and a mux for rank 1 connected to it; rank 2 is nowhere. */
static void pair_new(comm_t **server, comm_mux_t **mux)
{
    *server = comm_new("mx", 0, 3, "tcp://127.0.0.1:*", 2000);
    REQUIRE(*server);
    const char *eps[3] = {comm_endpoint(*server), NULL, NULL};
    *mux = comm_mux_new("mx", 1, 3, eps, 2000);
    REQUIRE(*mux);
}

static comm_match_t match_layer(int layer)
{
    comm_match_t m = COMM_MATCH_ANY;
    m.layer = layer;
    return m;
}

/* pair_new, and a port of the mux that expects layer, whose first message taught the server
 * the way back. */
static comm_mux_port_t *pair_with_port(comm_t **server, comm_mux_t **mux, int layer)
{
    pair_new(server, mux);
    comm_mux_port_t *a = comm_mux_port_new(*mux);
    comm_match_t m = match_layer(layer);
    comm_mux_expect(a, &m);
    REQUIRE(comm_mux_send(a, 0, (msg_header_t){.type = MSG_TEST}, NULL, 0, NULL) == 0);
    comm_msg_t g;
    REQUIRE(comm_recv(*server, NULL, &g, 5000) == 1);
    comm_msg_close(&g);
    return a;
}

TEST(comm_mux_sends_in_queue_order_across_ports)
{
    comm_t *srv;
    comm_mux_t *mux;
    pair_new(&srv, &mux);
    comm_mux_port_t *p[3] = {comm_mux_port_new(mux), comm_mux_port_new(mux),
                             comm_mux_port_new(mux)};
    const int n = 300;
    for (int i = 0; i < n; i++) {
        int v = i;
        comm_mux_port_t *by = p[i % 3];
        REQUIRE(comm_mux_send(by, 0, (msg_header_t){.type = MSG_TEST, .iteration = i},
                              &v, sizeof v, NULL) == 0);
    }
    for (int i = 0; i < n; i++) {
        comm_msg_t g;
        REQUIRE(comm_recv(srv, NULL, &g, 5000) == 1);
        CHECK_EQ_I64(g.hdr.iteration, i);
        CHECK_EQ_I64(g.peer, 1);
        int v;
        memcpy(&v, comm_msg_data(&g), sizeof v);
        CHECK_EQ_I64(v, i); /* copied when queued: the caller's variable is long gone */
        comm_msg_close(&g);
    }
    for (int k = 0; k < 3; k++) comm_mux_port_destroy(&p[k]);
    comm_mux_destroy(&mux);
    comm_destroy(&srv);
}

TEST(comm_mux_routes_answers_to_the_port_that_expects_them)
{
    comm_t *srv;
    comm_mux_t *mux;
    pair_new(&srv, &mux);
    comm_mux_port_t *a = comm_mux_port_new(mux), *b = comm_mux_port_new(mux);
    comm_match_t ma = match_layer(1), mb = match_layer(2);
    comm_mux_expect(a, &ma);
    comm_mux_expect(b, &mb);
    /* the server learns the mux's routing id from its first message */
    REQUIRE(comm_mux_send(a, 0, (msg_header_t){.type = MSG_TEST}, NULL, 0, NULL) == 0);
    comm_msg_t g;
    REQUIRE(comm_recv(srv, NULL, &g, 5000) == 1);
    comm_msg_close(&g);
    /* answers in the opposite order, and one that nobody expects */
    REQUIRE(comm_send(srv, 1, (msg_header_t){.type = MSG_TEST, .layer = 3}, "x", 1, NULL) == 0);
    REQUIRE(comm_send(srv, 1, (msg_header_t){.type = MSG_TEST, .layer = 2}, "b", 1, NULL) == 0);
    REQUIRE(comm_send(srv, 1, (msg_header_t){.type = MSG_TEST, .layer = 1}, "a", 1, NULL) == 0);
    REQUIRE(comm_mux_recv(a, &g, 5000) == 1);
    CHECK_EQ_I64(g.hdr.layer, 1);
    CHECK(!memcmp(comm_msg_data(&g), "a", 1));
    comm_msg_close(&g);
    REQUIRE(comm_mux_recv(b, &g, 5000) == 1);
    CHECK_EQ_I64(g.hdr.layer, 2);
    comm_msg_close(&g);
    /* layer 3 was dropped, not handed to either */
    CHECK_EQ_I64(comm_mux_recv(a, &g, 200), 0);
    CHECK_EQ_I64(comm_mux_recv(b, &g, 200), 0);
    comm_mux_port_destroy(&a);
    comm_mux_port_destroy(&b);
    comm_mux_destroy(&mux);
    comm_destroy(&srv);
}

/* An answer that arrives while the mux thread idles on its sockets wakes the port at once,
 * not when the thread's idle wait (1 s) ends. */
TEST(comm_mux_answer_wakes_the_port_without_waiting_for_idle)
{
    comm_t *srv;
    comm_mux_t *mux;
    comm_mux_port_t *a = pair_with_port(&srv, &mux, 7);
    comm_msg_t g;
    int best_ms = 1 << 30;
    for (int i = 0; i < 5; i++) {
        clock_sleep_until_ns(clock_now_ns() + 50000000); /* the mux thread idles again */
        int64_t t0 = clock_now_ns();
        REQUIRE(comm_send(srv, 1, (msg_header_t){.type = MSG_TEST, .layer = 7}, "v", 1, NULL) ==
                0);
        REQUIRE(comm_mux_recv(a, &g, 5000) == 1);
        int ms = (int)((clock_now_ns() - t0) / 1000000);
        if (ms < best_ms) best_ms = ms;
        comm_msg_close(&g);
    }
    /* the least of five under half the idle wait: one slow wake on a busy host is noise, five
     * are the bug */
    CHECK(best_ms < 500, "an answer waited %d ms for the mux thread", best_ms);
    comm_mux_port_destroy(&a);
    comm_mux_destroy(&mux);
    comm_destroy(&srv);
}

TEST(comm_mux_tracks_zero_copy_payloads)
{
    comm_t *srv;
    comm_mux_t *mux;
    pair_new(&srv, &mux);
    comm_mux_port_t *a = comm_mux_port_new(mux);
    size_t n = 1 << 20;
    float *big = malloc(n * sizeof *big);
    for (size_t i = 0; i < n; i++) big[i] = (float)i;
    comm_tracker_t tr;
    comm_tracker_init(&tr);
    REQUIRE(comm_mux_send(a, 0, (msg_header_t){.type = MSG_TEST}, big, n * sizeof *big, &tr) ==
            0);
    comm_msg_t g;
    REQUIRE(comm_recv(srv, NULL, &g, 5000) == 1);
    CHECK(!memcmp(comm_msg_data(&g), big, n * sizeof *big));
    comm_msg_close(&g);
    CHECK(comm_tracker_wait(&tr, 5000) == 0, "payload never released");
    free(big);
    comm_mux_port_destroy(&a);
    comm_mux_destroy(&mux);
    comm_destroy(&srv);
}

TEST(comm_mux_failed_send_fails_its_port_only)
{
    comm_t *srv;
    comm_mux_t *mux;
    pair_new(&srv, &mux);
    comm_mux_port_t *a = comm_mux_port_new(mux), *b = comm_mux_port_new(mux);
    /* no route to rank 2: the comm refuses the send */
    REQUIRE(comm_mux_send(a, 2, (msg_header_t){.type = MSG_TEST}, "x", 1, NULL) == 0);
    comm_msg_t g;
    CHECK_EQ_I64(comm_mux_recv(a, &g, 5000), -1);
    CHECK_EQ_I64(comm_mux_failed(a), -1);
    CHECK_EQ_I64(comm_mux_send(a, 0, (msg_header_t){.type = MSG_TEST}, NULL, 0, NULL), -1);
    /* the other port still works */
    CHECK_EQ_I64(comm_mux_failed(b), 0);
    REQUIRE(comm_mux_send(b, 0, (msg_header_t){.type = MSG_TEST, .layer = 4}, NULL, 0, NULL) ==
            0);
    REQUIRE(comm_recv(srv, NULL, &g, 5000) == 1);
    CHECK_EQ_I64(g.hdr.layer, 4);
    comm_msg_close(&g);
    comm_mux_port_destroy(&a);
    comm_mux_port_destroy(&b);
    comm_mux_destroy(&mux);
    comm_destroy(&srv);
}

/* ---------------------------------------------------------------- send order = layer */

/* Receives from srv until two whole messages are in (slices put back together): their
 * layers in the order they completed, and the slices of the first layer seen before the
 * second completed. */
static void recv_two(comm_t *srv, int layers[2], comm_msg_t whole[2], int *first_slices_before)
{
    slice_asm_t *sa = slice_asm_new(comm_max_payload());
    int n = 0;
    *first_slices_before = 0;
    while (n < 2) {
        comm_msg_t g, w;
        REQUIRE(comm_recv(srv, NULL, &g, 5000) == 1);
        if (g.hdr.type != MSG_SLICE) {
            layers[n] = g.hdr.layer;
            comm_msg_move(&whole[n++], &g);
            continue;
        }
        if (n == 0 && g.hdr.layer == 5) ++*first_slices_before;
        char why[160];
        int rc = slice_asm_take(sa, &g, &w, why, sizeof why);
        REQUIRE(rc >= 0, "%s", why);
        if (rc == 1) {
            layers[n] = w.hdr.layer;
            comm_msg_move(&whole[n++], &w);
        }
    }
    slice_asm_destroy(&sa);
}

/* A free loopback port below the kernel's ephemeral range, for a shard that binds late.
 * A DEALER connecting to a free ephemeral port retries until, now and then, the kernel picks
 * that very port as the connection's source and TCP connects it to itself; what the mux
 * sent on that connection is lost when it drops, and a later slice arrived without the
 * ones before it. */
static void late_endpoint(char *ep, size_t cap)
{
    for (int i = 0; i < 2000; i++) {
        int port = 20000 + (int)((getpid() + i * 7919) % 12000);
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        REQUIRE(fd >= 0);
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        int ok = bind(fd, (struct sockaddr *)&a, sizeof a) == 0;
        close(fd);
        if (ok) {
            snprintf(ep, cap, "tcp://127.0.0.1:%d", port);
            return;
        }
    }
    REQUIRE(0, "no free port in 20000-31999");
}

/* Two messages to a shard that binds only after both are queued, on a mux with slices of
 * `slice` (by layer, or in turns): first n_first floats of layer 5 (offset 7), then, 50 ms
 * later, n_second floats of second_layer (offset 9). Deterministic: the first message's
 * window (two slices) cannot move before the second is in the queue. Checks that both
 * arrive whole, headers and payloads byte for byte; returns the layers in the order they
 * completed and the first's slices seen before the second completed. */
typedef struct {
    int layers[2];
    int before;
} two_sent_t;

static two_sent_t send_two_then_bind(size_t slice, bool turns, size_t n_first, int second_layer,
                                     size_t n_second)
{
    char ep[256];
    late_endpoint(ep, sizeof ep);
    const char *eps[3] = {ep, NULL, NULL};
    comm_mux_t *mux = comm_mux_new("mx", 1, 3, eps, 5000);
    REQUIRE(mux);
    comm_mux_set_slices(mux, slice, turns);
    comm_mux_port_t *a = comm_mux_port_new(mux);
    size_t n[2] = {n_first, n_second};
    float *v[2];
    for (int k = 0; k < 2; k++) {
        v[k] = malloc(n[k] * sizeof(float));
        for (size_t i = 0; i < n[k]; i++) v[k][i] = k ? -(float)i : (float)i;
    }
    REQUIRE(comm_mux_send(a, 0, (msg_header_t){.type = MSG_PS_PUSH, .layer = 5, .offset = 7},
                          v[0], n[0] * sizeof(float), NULL) == 0);
    clock_sleep_until_ns(clock_now_ns() + 50000000);
    REQUIRE(comm_mux_send(a, 0,
                          (msg_header_t){.type = MSG_PS_PUSH, .layer = second_layer, .offset = 9},
                          v[1], n[1] * sizeof(float), NULL) == 0);
    clock_sleep_until_ns(clock_now_ns() + 20000000);
    comm_t *srv = comm_new("mx", 0, 3, ep, 2000);
    REQUIRE(srv, "could not bind %s again", ep);
    two_sent_t out;
    comm_msg_t w[2];
    recv_two(srv, out.layers, w, &out.before);
    for (int i = 0; i < 2; i++) {
        int k = w[i].hdr.layer == 5 ? 0 : 1;
        CHECK(w[i].hdr.type == MSG_PS_PUSH && w[i].hdr.offset == (k ? 9u : 7u) && w[i].peer == 1,
              "headers restored: type %d offset %llu peer %d", w[i].hdr.type,
              (unsigned long long)w[i].hdr.offset, w[i].peer);
        CHECK(comm_msg_bytes(&w[i]) == n[k] * sizeof(float) &&
                  !memcmp(comm_msg_data(&w[i]), v[k], n[k] * sizeof(float)),
              "payload of the %s message", k ? "second" : "first");
        comm_msg_close(&w[i]);
    }
    free(v[0]);
    free(v[1]);
    comm_mux_port_destroy(&a);
    comm_mux_destroy(&mux);
    comm_destroy(&srv);
    return out;
}

/* A message queued later with a lower layer overtakes the queued slices of a long message
 * of a later layer. */
TEST(comm_mux_sliced_later_high_priority_overtakes_queued_low)
{
    two_sent_t t = send_two_then_bind(64 * 1024, false, (4u << 20) / sizeof(float), 1,
                                      (192u << 10) / sizeof(float));
    CHECK_EQ_I64(t.layers[0], 1);
    CHECK_EQ_I64(t.layers[1], 5);
    CHECK(t.before <= 2, "%d slices of the low layer went before the high one", t.before);
}

/* send_order = fair: a short message queued behind a long one takes turns with it, a slice
 * each, and completes after a few of the long one's slices, though its layer is later (by
 * layer it would wait for all 64: the check can fail). slice: the slice bytes; the long
 * message is 64 of them, the short one 3. */
static void check_turns(size_t slice)
{
    two_sent_t t = send_two_then_bind(slice, true, 64 * slice / sizeof(float), 8,
                                      3 * slice / sizeof(float));
    CHECK_EQ_I64(t.layers[0], 8);
    CHECK_EQ_I64(t.layers[1], 5);
    /* the window's two slices, then one of the long message per turn of the short one's 3 */
    CHECK(t.before <= 5, "%d slices of the long message went before the short one was in",
          t.before);
}

TEST(comm_mux_turns_let_a_short_message_past_a_long_one) { check_turns(64 * 1024); }

/* Slices of a tensor scale's size (4 KiB: 64 KiB at S = 16) are held in the window as the
 * large ones are: ZeroMQ takes them without a copy, so the window sees them leave (copied,
 * all 64 would be out before the short message is queued). */
TEST(comm_mux_turns_hold_small_slices_in_the_window) { check_turns(SENDQ_SLICE_MIN_BYTES); }

/* A slice as a peer would send it: header h (type MSG_SLICE), slice header s, piece bytes. */
static void slice_msg(comm_msg_t *g, int peer, msg_header_t h, slice_info_t s, size_t piece)
{
    memset(g, 0, sizeof *g);
    h.type = MSG_SLICE;
    h.length = SLICE_HEADER_BYTES + piece;
    g->hdr = h;
    g->peer = peer;
    g->has_payload = 1;
    REQUIRE(zmq_msg_init_size(&g->payload, SLICE_HEADER_BYTES + piece) == 0);
    slice_encode(&s, zmq_msg_data(&g->payload));
    memset((unsigned char *)zmq_msg_data(&g->payload) + SLICE_HEADER_BYTES, 0xab, piece);
}

/* Every malformed slice is refused with its reason, none is written out of bounds, and a
 * refused slice drops the message it claimed to continue. */
TEST(comm_mux_slice_reassembly_refuses_corrupt_slices)
{
    comm_set_max_payload(1 << 20); /* a job's largest message */
    slice_asm_t *sa = slice_asm_new(comm_max_payload());
    msg_header_t h = {.type = MSG_SLICE, .layer = 3, .offset = 16, .iteration = 2};
    comm_msg_t g, w;
    char why[160];
    const slice_info_t ok = {.type = MSG_PS_PUSH, .seq = 1, .total = 8192, .at = 0};
    static const struct {
        slice_info_t s;
        size_t piece;
        const char *want;
    } bad[] = {
        {{MSG_SLICE, 1, 8192, 0}, 4096, "slice of a message of type"},
        {{99, 1, 8192, 0}, 4096, "slice of a message of type"},
        {{MSG_PS_PUSH, 1, 0, 0}, 4096, "of 0 bytes"},
        {{MSG_PS_PUSH, 1, MSG_MAX_PAYLOAD_BYTES + 1, 0}, 4096, "bytes"},
        {{MSG_PS_PUSH, 1, (1 << 20) + 4, 0}, 4096, "bytes"}, /* over the cap set below */
        {{MSG_PS_PUSH, 1, 8192, 0}, 0, "empty slice"},
        {{MSG_PS_PUSH, 1, 8192, 6000}, 4096, "beyond the message"},
        {{MSG_PS_PUSH, 1, 8192, ~0ull}, 4096, "beyond the message"},
        {{MSG_PS_PUSH, 2, 8192, 4096}, 4096, "does not continue"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        slice_msg(&g, 1, h, bad[i].s, bad[i].piece);
        CHECK_EQ_I64(slice_asm_take(sa, &g, &w, why, sizeof why), -1);
        CHECK(strstr(why, bad[i].want), "case %zu: %s", i, why);
    }
    /* a corrupt header: one byte of the slice header flipped */
    slice_msg(&g, 1, h, ok, 4096);
    ((unsigned char *)zmq_msg_data(&g.payload))[17] ^= 1;
    CHECK_EQ_I64(slice_asm_take(sa, &g, &w, why, sizeof why), -1);
    CHECK(strstr(why, "crc"), "%s", why);
    /* a piece of a message whose header changed midway drops that message */
    slice_msg(&g, 1, h, ok, 4096);
    CHECK_EQ_I64(slice_asm_take(sa, &g, &w, why, sizeof why), 0);
    msg_header_t other = h;
    other.iteration = 3;
    slice_msg(&g, 1, other, (slice_info_t){MSG_PS_PUSH, 1, 8192, 4096}, 4096);
    CHECK_EQ_I64(slice_asm_take(sa, &g, &w, why, sizeof why), -1);
    slice_msg(&g, 1, h, (slice_info_t){MSG_PS_PUSH, 1, 8192, 4096}, 4096);
    CHECK_EQ_I64(slice_asm_take(sa, &g, &w, why, sizeof why), -1); /* it was dropped */
    /* the same seq from another peer is another message; a whole one completes */
    slice_msg(&g, 2, h, ok, 4096);
    CHECK_EQ_I64(slice_asm_take(sa, &g, &w, why, sizeof why), 0);
    slice_msg(&g, 2, h, (slice_info_t){MSG_PS_PUSH, 1, 8192, 4096}, 4096);
    REQUIRE(slice_asm_take(sa, &g, &w, why, sizeof why) == 1, "%s", why);
    CHECK(w.hdr.type == MSG_PS_PUSH && w.hdr.length == 8192 && w.peer == 2 &&
              w.hdr.iteration == 2 && comm_msg_bytes(&w) == 8192,
          "restored type %d length %llu", w.hdr.type, (unsigned long long)w.hdr.length);
    comm_msg_close(&w);
    /* a peer may not hold more than SLICE_MAX_OPEN messages open */
    for (int i = 0; i < SLICE_MAX_OPEN; i++) {
        slice_msg(&g, 3, h, (slice_info_t){MSG_PS_PUSH, (uint32_t)(100 + i), 8192, 0}, 4096);
        REQUIRE(slice_asm_take(sa, &g, &w, why, sizeof why) == 0, "%s", why);
    }
    slice_msg(&g, 3, h, (slice_info_t){MSG_PS_PUSH, 999, 8192, 0}, 4096);
    CHECK_EQ_I64(slice_asm_take(sa, &g, &w, why, sizeof why), -1);
    CHECK(strstr(why, "open"), "%s", why);
    slice_asm_destroy(&sa);
    comm_set_max_payload(MSG_MAX_PAYLOAD_BYTES);
}

/* Through the mux: a corrupt slice from the shard is refused (logged, naming the rank) and
 * dropped, and the port still gets the good sliced message after it. */
TEST(comm_mux_drops_a_corrupt_slice_and_keeps_going)
{
    comm_t *srv;
    comm_mux_t *mux;
    comm_mux_port_t *a = pair_with_port(&srv, &mux, 4);
    comm_msg_t g;
    unsigned char buf[SLICE_HEADER_BYTES + 64];
    memset(buf, 0x5a, sizeof buf);
    slice_encode(&(slice_info_t){MSG_TEST, 7, 64, 32}, buf); /* continues nothing */
    msg_header_t h = {.type = MSG_SLICE, .layer = 4};
    REQUIRE(comm_send(srv, 1, h, buf, sizeof buf, NULL) == 0);
    buf[3] ^= 0xff; /* bad magic */
    REQUIRE(comm_send(srv, 1, h, buf, sizeof buf, NULL) == 0);
    for (int at = 0; at < 128; at += 64) {
        slice_encode(&(slice_info_t){MSG_TEST, 8, 128, (uint64_t)at}, buf);
        REQUIRE(comm_send(srv, 1, h, buf, sizeof buf, NULL) == 0);
    }
    REQUIRE(comm_mux_recv(a, &g, 5000) == 1);
    CHECK(g.hdr.type == MSG_TEST && comm_msg_bytes(&g) == 128, "type %d, %zu bytes",
          g.hdr.type, comm_msg_bytes(&g));
    comm_msg_close(&g);
    CHECK_EQ_I64(comm_mux_recv(a, &g, 200), 0);
    comm_mux_port_destroy(&a);
    comm_mux_destroy(&mux);
    comm_destroy(&srv);
}
