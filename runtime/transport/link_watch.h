/* link_watch: what goes wrong on a comm's outgoing connections, said in the log.
 *
 * A connection that cannot complete its handshake (the peer refuses its keys, a protocol
 * error, a handshake that outlasts HANDSHAKE_IVL on a loaded host) or that drops is retried
 * by ZeroMQ in silence, and the messages queued for it wait: a rank then waits on a push or a
 * pull that never leaves, and its stall report names the wait but not why. link_watch puts a
 * ZeroMQ socket monitor on each outgoing (DEALER) socket for those events only, and its owner
 * thread reports them: one line per peer when it first happens, then at most one per peer per
 * LINK_WATCH_INTERVAL_MS of the cluster's time (runtime/transport/clock.h) with the count of
 * events since, naming the peer's rank and endpoint.
 * Routine events (connecting, a retried connect before the peer has bound) are not watched.
 */
#ifndef POSEIDON_LINK_WATCH_H
#define POSEIDON_LINK_WATCH_H

#define LINK_WATCH_INTERVAL_MS 10000

typedef struct link_watch link_watch_t;

/* what: how the owner is named in the lines, e.g. "comm ps rank 3". */
link_watch_t *link_watch_new(const char *what);
void link_watch_destroy(link_watch_t **lwp);

/* Watches sock, the connection to rank peer, through a monitor made in ctx. */
void link_watch_add(link_watch_t *lw, void *ctx, void *sock, int peer);

/* Reads the events that arrived (never blocks) and logs them as above; the same thread as
 * the sockets'. Returns the events read. */
int link_watch_report(link_watch_t *lw);

#endif
