/* sendorder: the simulator's model of send_order = layer (core/plan.h), as the runtime
 * does it (runtime/transport/sendq.h): the messages of one connection (a source and a
 * destination node) go one slice at a time, the message of the smallest priority first
 * (ties: the earliest), and a message that becomes ready preempts a queued one of a larger
 * priority at the next slice boundary: a started slice finishes. Connections still share
 * their NICs max-min (sim/net.h), as TCP connections do.
 *
 * The ring connections (v -> v + 1 mod nodes, every ring all-reduce's) can be held as one
 * queue, the ring queue, while they are alike (sendorder_ring_join): then every connection
 * would pick the same message at each slice boundary, so one queue and one slice stand for
 * the nodes' (the simulator moves that slice as one network entity, sim/sim.c).
 *
 * Ownership: the simulator holds one; it starts each slice as a flow of the network and
 * tells the queue when it ended. Memory: a pointer per connection (nodes^2), a queue only
 * for connections that carried a message. A queue is kept in send order (priority, then
 * age), so the next slice is its first message's.
 */
#ifndef POSEIDON_SENDORDER_H
#define POSEIDON_SENDORDER_H

#include <stdint.h>

typedef struct sendorder sendorder_t;

sendorder_t *sendorder_new(int nodes, int64_t slice_bytes);
void sendorder_destroy(sendorder_t **qp);

/* Queues a message of instance (op, t) from src to dst (src != dst) with priority prio.
 * Returns 1 when the connection was idle: start its next slice (sendorder_next). */
int sendorder_push(sendorder_t *q, int src, int dst, int op, int t, int prio, int64_t bytes);

/* The slice to put on connection src -> dst now: 1 with *op, *t and *bytes of its message
 * and slice (the connection is busy until sendorder_slice_done), 0 when none is queued or
 * a slice is in flight. */
int sendorder_next(sendorder_t *q, int src, int dst, int *op, int *t, int64_t *bytes);

/* The slice in flight on src -> dst ended: 1 when it was its message's last, with *op and *t
 * of that message (deliver it); 0 otherwise. The connection is idle again either way. */
int sendorder_slice_done(sendorder_t *q, int src, int dst, int *op, int *t);

/* The ring connections alike: each is idle and holds the same messages (instance, priority,
 * bytes left, in send order), and no other connection holds any. Returns how many messages
 * each holds, 0 when they are not alike (or hold none). */
int sendorder_ring_alike(sendorder_t *q);

/* Instance (*op, *t) of message i of connection 0 -> 1, in send order. */
void sendorder_ring_msg(sendorder_t *q, int i, int *op, int *t);

/* The ring connections, alike (sendorder_ring_alike), give their messages to the ring queue
 * and are empty after. */
void sendorder_ring_join(sendorder_t *q);

/* The ring queue goes back to every ring connection, its slice in flight (if any) in flight
 * on each; it is empty after. */
void sendorder_ring_split(sendorder_t *q);

/* The ring queue's sendorder_push, sendorder_next and sendorder_slice_done: a message on
 * every ring connection at once. */
int sendorder_ring_push(sendorder_t *q, int op, int t, int prio, int64_t bytes);
int sendorder_ring_next(sendorder_t *q, int *op, int *t, int64_t *bytes);
int sendorder_ring_slice_done(sendorder_t *q, int *op, int *t);

#endif
