/* conn_flood: a stranger's many idle TCP connections, for the tests of the connection cap
 * (tests/test_conn_cap.c, tests/test_stranger.c). */
#ifndef POSEIDON_TESTS_CONN_FLOOD_H
#define POSEIDON_TESTS_CONN_FLOOD_H

/* Opens n TCP connections from address `from` (e.g. "127.0.0.2") to 127.0.0.1:port into
 * fds; returns how many were made (the others are -1). */
int conn_flood_open(const char *from, int port, int *fds, int n);

/* How many of the n connections the other side has not ended (what it sent is read and
 * dropped; an end or a reset counts as ended). */
int conn_flood_alive(const int *fds, int n);

void conn_flood_close(int *fds, int n);

#endif
