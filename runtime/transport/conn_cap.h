/* conn_cap: a bound on the TCP connections one host may hold open to a listening socket.
 *
 * ZeroMQ accepts every TCP connection that reaches a bound socket and has no option to
 * refuse one; each costs the process a file descriptor and a session (buffers) until the
 * peer closes it or, under CURVE, its handshake times out. A stranger who reaches a port
 * could so exhaust a rank's descriptors. A watched socket gets a socket monitor whose
 * ACCEPTED events carry the accepted descriptor: the process's guard thread (one, started
 * with the first watch) records each connection's peer address (getpeername) and counts the
 * live ones per remote IP; a connection beyond the socket's cap for its host is ended with
 * shutdown(SHUT_RDWR) (not close: the descriptor is ZeroMQ's, which then sees the connection
 * end and drops it), after checking that the descriptor still is that connection (peer
 * address and port, local port: descriptors are reused). DISCONNECTED events end a record;
 * every second the records are checked against their descriptors, so a lost event cannot
 * leak a count. Refusals are logged through reject_log (one line per host per interval).
 *
 * The cap is per host, so that a host's connections cannot crowd out another's: a job's own
 * ranks on one host open at most a known number (the caller derives the cap from the job);
 * connections from that host beyond it are refused, whoever opens them. Non-TCP peers (ipc)
 * are never capped.
 *
 * The process has a budget too: the per-host cap does not stop a flood spread over many
 * hosts (150 loopback addresses with 20 connections each pinned a rank at its descriptor
 * limit). When the live connections of every watch together exceed the budget (half the
 * descriptor limit, or POSEIDON_CONN_BUDGET), the newest connection of the host that holds
 * the most is ended, the job's own hosts (conn_cap_trust) excepted, and a rate-limited line
 * names the flood.
 *
 * Ownership: the caller owns the listening socket and must unwatch before closing it; the
 * guard thread owns the monitor's receiving socket. Thread-safe.
 */
#ifndef POSEIDON_CONN_CAP_H
#define POSEIDON_CONN_CAP_H

#include <stdint.h>

typedef struct conn_cap conn_cap_t;

/* Watches listener (a bound ZeroMQ socket of ctx; its one socket monitor from now on) and
 * caps each host at per_host live connections (0: no cap, count only). what names the
 * socket in log lines. Returns the watch; the listener's earlier connections are not
 * counted. */
conn_cap_t *conn_cap_watch(void *ctx, void *listener, const char *what, int per_host);

/* Changes the cap (0: none). */
void conn_cap_set(conn_cap_t *w, int per_host);

/* From now on the watch keeps the descriptors of the connections that close (the last 1024
 * at most); conn_cap_closed takes up to max of them (without waiting) and returns how many. */
void conn_cap_keep_closed(conn_cap_t *w);
int conn_cap_closed(conn_cap_t *w, int *fds, int max);

/* Connections refused so far, and live connections counted now (for tests and logs). */
uint64_t conn_cap_refused(const conn_cap_t *w);
int conn_cap_live(const conn_cap_t *w);

/* Ends the watch (the guard thread lets the monitor go); accepts NULL, NULLs *wp. Call it
 * before closing the listener. */
void conn_cap_unwatch(conn_cap_t **wp);

/* The cap of a socket to which at most `legit` connections of a job's ranks on one host may
 * be open at once: legit plus a margin for reconnections (a new connection may be accepted
 * before the old one's end is seen), or the value of the environment variable
 * POSEIDON_CONN_CAP when it is set (0: no cap). */
int conn_cap_for(int legit);

/* A host (numeric address, as getnameinfo gives it) whose connections the process's budget
 * never ends: one of the job's ranks. */
void conn_cap_trust(const char *host);

/* The process's budget of live connections (0: none). */
int conn_cap_budget(void);

#endif
