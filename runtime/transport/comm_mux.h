/* comm_mux: one comm shared by many threads of a process, so that a rank keeps one
 * connection per peer however many of its threads talk to that peer.
 *
 * Why: a rank's PS traffic comes from a PUSH and a PULL thread per layer. With a comm (and
 * so a DEALER per shard) per thread, a GoogLeNet job of 12 ranks opened about 17,000
 * connections, each with its own CURVE handshake, and its first iteration outlasted a 20 s
 * timeout; through a mux it opens ranks x shards of them.
 *
 * How: a thread of the mux owns the comm (ZeroMQ sockets are not thread-safe). Each user
 * thread has a port: comm_mux_send queues a message for the mux thread, which hands the
 * queued messages to the comm in the order they were queued; messages that arrive go to the
 * port whose expectation (comm_mux_expect) matches them, and wait there for comm_mux_recv.
 * A message that no port expects is logged and dropped. A send the comm refuses (a peer
 * gone, a timeout) is logged by the mux thread and fails the port's next call.
 *
 * Payloads: with a tracker, the payload is read by the mux thread after comm_mux_send has
 * returned, and the tracker counts the message until ZeroMQ released it (as comm_send's
 * zero-copy sends): leave the buffer untouched until comm_tracker_wait says so. Without a
 * tracker the payload is copied when queued.
 *
 * Send order (comm_mux_set_slices; send_order = layer in core/plan.h): the queued messages
 * go through a send queue per peer (runtime/transport/sendq.h), ordered by (the header's
 * layer, queue order): the layer the next forward pass needs first, the lowest, goes first,
 * cut into slices that overtake the rest of a message of a later layer; or in turns, a
 * slice of each (send_order = fair); or through the
 * rank's shared send queue (comm_mux_set_order), in one order per peer with the rank's
 * other threads' sends (the shard's answers, SFB's factors, the rings' chunks). Either way,
 * sliced messages that arrive are put back together before they reach a port.
 */
#ifndef POSEIDON_COMM_MUX_H
#define POSEIDON_COMM_MUX_H

#include <stdbool.h>

#include "runtime/transport/comm.h"

typedef struct comm_mux comm_mux_t;
typedef struct comm_mux_port comm_mux_port_t;

/* A mux with a comm named name for rank, connected to every peer p with endpoints[p] !=
 * NULL (comm_new / comm_connect), and its thread. NULL (logged) if a connect fails. */
comm_mux_t *comm_mux_new(const char *name, int rank, int n_peers, const char *const *endpoints,
                         int send_timeout_ms);
/* Sends what is still queued, stops the thread, closes the comm. Every port must be gone. */
void comm_mux_destroy(comm_mux_t **mp);

/* From now on, sends go by layer in slices of slice_bytes (>= SENDQ_SLICE_MIN_BYTES), or
 * with turns, a slice of each queued message in turn (send_order = fair, sendq_take_turns);
 * slice_bytes 0: in queue order. Set before the first send. */
void comm_mux_set_slices(comm_mux_t *m, size_t slice_bytes, bool turns);

/* From now on, sends go through q, a shared send queue (sendq_new_shared, which outlives
 * the mux), by layer in q's slices, in one order per peer with every other thread's
 * messages in q. Set before the first send. */
struct sendq;
void comm_mux_set_order(comm_mux_t *m, struct sendq *q);

comm_mux_port_t *comm_mux_port_new(comm_mux_t *m);
/* Waits until the port's queued sends are handed to the comm (or failed). */
void comm_mux_port_destroy(comm_mux_port_t **pp);

/* Queues hdr and bytes of data for peer. 0, or -1 when an earlier send of this port failed. */
int comm_mux_send(comm_mux_port_t *p, int peer, msg_header_t hdr, const void *data, size_t bytes,
                  comm_tracker_t *tracker);
/* From now on, messages matching m are this port's (a port expects one thing at a time). */
void comm_mux_expect(comm_mux_port_t *p, const comm_match_t *m);
/* Waits up to timeout_ms for the port's next message: 1 (out filled; comm_msg_close it), 0 on
 * timeout, -1 when a send of this port failed. */
int comm_mux_recv(comm_mux_port_t *p, comm_msg_t *out, int timeout_ms);
/* -1 when a send of this port failed, else 0. */
int comm_mux_failed(const comm_mux_port_t *p);

#endif
