/* The connection cap of a listening comm (runtime/transport/conn_cap.h): a host that opens many TCP
 * connections keeps the cap's number open and no more, whatever order they come in; another
 * host's connections are not affected; a closed connection frees its place. The stranger's
 * connections come from 127.0.0.2 (loopback: another host as far as the cap can tell). */
#include <arpa/inet.h>
#include <errno.h>
#include <stdbool.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "runtime/transport/comm.h"
#include "runtime/transport/conn_cap.h"
#include "tests/conn_flood.h"
#include "tests/test.h"

/* The port of "tcp://ADDR:PORT". */
static int port_of(const char *ep)
{
    const char *colon = strrchr(ep, ':');
    return colon ? atoi(colon + 1) : 0;
}

/* Waits up to 10 s until comm c has refused at least n connections. */
static uint64_t wait_refused(const comm_t *c, uint64_t n)
{
    for (int i = 0; i < 1000 && comm_connections_refused(c) < n; i++) usleep(10000);
    return comm_connections_refused(c);
}

/* A client of rank 1 from 127.0.0.1 connects to srv and sends a beat of this iteration:
 * whether srv receives it (within 5 s). The client, to destroy, in *cli. */
static bool rank1_reaches(comm_t *srv, int64_t iteration, comm_t **cli)
{
    *cli = comm_new("cli", 1, 2, NULL, 2000);
    REQUIRE(*cli && comm_connect(*cli, 0, comm_endpoint(srv)) == 0);
    CHECK(comm_send(*cli, 0, (msg_header_t){.type = MSG_HEARTBEAT, .iteration = iteration},
                    NULL, 0, NULL) == 0);
    comm_msg_t m;
    bool got = comm_recv(srv, NULL, &m, 5000) == 1;
    bool ok = got && m.hdr.iteration == iteration && m.peer == 1;
    if (got) comm_msg_close(&m);
    return ok;
}

TEST(conn_cap_bounds_each_host)
{
    enum { CAP = 5, N = 60 };
    comm_t *srv = comm_new("cap", 0, 2, "tcp://127.0.0.1:*", 2000);
    REQUIRE(srv);
    comm_set_connection_cap(srv, CAP);
    int port = port_of(comm_endpoint(srv));
    int fds[N];
    if (conn_flood_open("127.0.0.2", port, fds, N) != N)
        SKIP("cannot connect from 127.0.0.2 to 127.0.0.1 (loopback is not 127.0.0.0/8 here)");
    CHECK_EQ_I64(wait_refused(srv, N - CAP), N - CAP);
    usleep(200000); /* no more than that */
    CHECK_EQ_I64(comm_connections_refused(srv), N - CAP);
    CHECK_EQ_I64(conn_flood_alive(fds, N), CAP);

    /* another host (127.0.0.1, the job's ranks) still gets through */
    comm_t *cli;
    CHECK(rank1_reaches(srv, 7, &cli), "a connection of another host was refused");

    /* closing frees places: as many new ones are let in, and the cap holds again */
    conn_flood_close(fds, N);
    usleep(300000);
    int again[CAP + 3];
    REQUIRE(conn_flood_open("127.0.0.2", port, again, CAP + 3) == CAP + 3);
    CHECK_EQ_I64(wait_refused(srv, N - CAP + 3), N - CAP + 3);
    CHECK_EQ_I64(conn_flood_alive(again, CAP + 3), CAP);
    conn_flood_close(again, CAP + 3);
    comm_destroy(&cli);
    comm_destroy(&srv);
}

TEST(conn_cap_none_counts_without_refusing)
{
    /* the check above can fail: without a cap every connection stays */
    enum { N = 30 };
    comm_t *srv = comm_new("nocap", 0, 2, "tcp://127.0.0.1:*", 2000);
    REQUIRE(srv);
    comm_set_connection_cap(srv, 0);
    int fds[N];
    if (conn_flood_open("127.0.0.2", port_of(comm_endpoint(srv)), fds, N) != N)
        SKIP("cannot connect from 127.0.0.2 to 127.0.0.1");
    usleep(500000);
    CHECK_EQ_I64(comm_connections_refused(srv), 0);
    CHECK_EQ_I64(conn_flood_alive(fds, N), N);
    conn_flood_close(fds, N);
    comm_destroy(&srv);
}

/* The process's budget: a flood spread over many hosts, each under its cap (8 hosts, 4
 * connections each, a cap of 5), is held to the budget (20) in all; what is ended comes from
 * the hosts that hold the most, and a host of the job (trusted), at the budget, still gets
 * through. Without the budget all 32 stay. */
TEST(conn_cap_budget_bounds_a_flood_from_many_hosts)
{
    enum { CAP = 5, HOSTS = 8, EACH = 4, BUDGET = 20 };
    setenv("POSEIDON_CONN_BUDGET", "20", 1);
    comm_t *srv = comm_new("budget", 0, 2, "tcp://127.0.0.1:*", 2000);
    REQUIRE(srv);
    CHECK_EQ_I64(conn_cap_budget(), BUDGET);
    comm_set_connection_cap(srv, CAP);
    conn_cap_trust("127.0.0.1");
    int port = port_of(comm_endpoint(srv));
    int fds[HOSTS][EACH];
    for (int h = 0; h < HOSTS; h++) {
        char from[32];
        snprintf(from, sizeof from, "127.0.0.%d", 2 + h);
        if (conn_flood_open(from, port, fds[h], EACH) != EACH)
            SKIP("cannot connect from %s to 127.0.0.1", from);
    }
    CHECK_EQ_I64(wait_refused(srv, HOSTS * EACH - BUDGET), HOSTS * EACH - BUDGET);
    usleep(300000); /* no more than that */
    CHECK_EQ_I64(comm_connections_refused(srv), HOSTS * EACH - BUDGET);
    int alive = 0, fewest = EACH;
    for (int h = 0; h < HOSTS; h++) {
        int a = conn_flood_alive(fds[h], EACH);
        alive += a;
        if (a < fewest) fewest = a;
    }
    CHECK_EQ_I64(alive, BUDGET);
    CHECK(fewest >= 2, "a host kept %d: the ended ones were not the heaviest hosts'", fewest);

    /* the job's host, trusted, is not held to the budget */
    comm_t *cli;
    CHECK(rank1_reaches(srv, 9, &cli), "the trusted host's connection was ended at the budget");
    for (int h = 0; h < HOSTS; h++) conn_flood_close(fds[h], EACH);
    comm_destroy(&cli);
    comm_destroy(&srv);
}
