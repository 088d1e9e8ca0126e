/* sendq: sends in priority order, per connection, cut into slices (send_order = layer,
 * core/plan.h; P3, MLSys'19; ByteScheduler, SOSP'19).
 *
 * Why: ZeroMQ sends a connection's messages in the order they were handed to it, so once a
 * long gradient of a late layer is handed over, the early layer that the next forward pass
 * needs first waits behind it, and which of two concurrent transfers finishes first is left
 * to TCP: PS iterations alternated between two paces. Here the messages wait in a queue per
 * connection, ordered by (priority, arrival), and only a window of slices (each at most
 * slice_bytes of payload, runtime/transport/slice.h) is in ZeroMQ's hands at a time: a
 * message queued later with a smaller priority goes out before the rest of a larger one.
 *
 * In ZeroMQ's hands: a slice whose buffer ZeroMQ has not yet released (comm_buf_t), which
 * it does once the slice is written to the kernel's socket buffer (or encrypted, under
 * CURVE); the kernel's buffer still drains in order, so the priority holds at the window
 * plus that buffer, which SENDQ_SOCKET_BUFFER_BYTES bounds. A message of at most slice_bytes goes whole, as sent without a queue;
 * a larger one as MSG_SLICE messages that the receiver puts back together (slice_asm).
 *
 * Ownership: a queue belongs to one thread (the one that owns the comm it sends on). A
 * message's data is read until its done callback has been called (when its last byte has
 * been handed to ZeroMQ, copied: the caller may then reuse the data), with rc 0, or -1 when
 * the comm refused a send or the connection's window did not move for stall_ms (the peer
 * is gone or stuck): then the message's remaining slices are dropped.
 *
 * Shared (sendq_new_shared): one queue for the comms of several threads, each of which
 * has its own connection to a peer over the same link (a rank's PS mux, its PS shard's
 * answers, SFB's and the ring's comm per unit), so that the order holds per peer across
 * those connections: a connection here is the peer (whatever the routing id), the window
 * is the peer's (SENDQ_WINDOW slices of all its threads together), and a thread hands
 * ZeroMQ only the slices of its own messages, on its own comm (a comm belongs to one
 * thread), when they lead the peer's queue, which it does while it waits in sendq_send,
 * sendq_recv or sendq_wait, or in its own loop's sendq_pump (so a thread with messages
 * queued must come back within a millisecond or so). Under the queue's lock.
 */
#ifndef POSEIDON_SENDQ_H
#define POSEIDON_SENDQ_H

#include <stddef.h>
#include <stdint.h>

#include "runtime/transport/comm.h"

/* Slices in ZeroMQ's hands per connection: two, so that one is on its way while the next
 * is queued behind it, and a higher priority waits at most two slices. */
#define SENDQ_WINDOW 2
/* The kernel's send buffer of the sockets a send queue uses (comm_set_send_buffer): with
 * Linux's default (up to 4 MB) a connection's first megabytes left in arrival order, and
 * GoogLeNet ps+wfbp on 4 emulated nodes at 1 Gbit/s measured 0.48 s per iteration where
 * strict order predicts 0.63 s; with 128 KiB it measured 0.634 s (docs/validation.md, "Send
 * order"). 128 KiB still covers a link's bandwidth-delay product up to 10 Gbit/s x 100 us. */
#define SENDQ_SOCKET_BUFFER_BYTES (128 * 1024)
/* How often a thread with slices in ZeroMQ's hands looks at its window again, in ms: a
 * shared queue's threads every SENDQ_SHARED_POLL_MS of the host's clock, as ZeroMQ's release
 * of a slice wakes none of them (so a slice should take longer on the wire: 1 MiB at up to
 * 8 Gbit/s); a queue of one thread is woken by each release (sendq_notify) and looks again
 * after SENDQ_POLL_MS of the cluster's time only in case (clock_host_ms: K ms on the host
 * under time dilation K: a poll of the host's millisecond by 64 threads of 32 ranks of
 * Inception-V3 at K = 68 kept the host's cores busy). */
#define SENDQ_SHARED_POLL_MS 1
#define SENDQ_POLL_MS 1
/* The smallest slice: the plan's (PLAN_SLICE_BYTES_MIN and up) divided by a tensor scale
 * (runtime/exec/worker_scale.c), so that a slice holds the same share of a message. Every
 * slice and every whole message goes without a copy (comm_buf_new_tracked), so the window
 * sees when it is out at any size. */
#define SENDQ_SLICE_MIN_BYTES 4096

typedef struct {
    int peer;                   /* comm_send's peer */
    const unsigned char *rid;   /* rid_len > 0: through the ROUTER to this connection */
    size_t rid_len;
    msg_header_t hdr;
    const void *data;
    size_t bytes;
    int priority;               /* smaller goes first; ties in the order pushed */
    void *owner;                /* handed back to done */
    comm_t *comm;               /* shared queues: the sender's comm (set by sendq_send) */
} sendq_msg_t;

/* Called once per message, on the queue's thread (shared queues: sendq_push_from): rc 0
 * sent, -1 failed. */
typedef void (*sendq_done_fn)(void *arg, const sendq_msg_t *m, int rc);

typedef struct sendq sendq_t;

/* A queue cutting at slice_bytes (>= SENDQ_SLICE_MIN_BYTES) with a window of SENDQ_WINDOW
 * slices per connection. */
sendq_t *sendq_new(size_t slice_bytes, int stall_ms, sendq_done_fn done, void *arg);
/* Every message still queued is done with -1. */
void sendq_destroy(sendq_t **qp);

/* From now on, a queue of one thread orders by turns, not by priority (send_order = fair,
 * core/plan.h): each connection's queued messages take turns, a slice each, in the order
 * they were pushed, so a short message queued behind a long one goes out after one slice
 * of it, and messages in flight together share the connection equally. Set before the
 * first push. */
void sendq_take_turns(sendq_t *q);

/* A queue of one thread: each slice's release by ZeroMQ writes to w's eventfd, which the
 * thread waits on (comm_buf_notify), so the thread hands over the next slice as soon as
 * the window moves, not at its next poll. The queue does not own w. */
void sendq_notify(sendq_t *q, comm_waker_t *w);

/* A queue of one thread (shared ones: sendq_post, sendq_push_from). */
void sendq_push(sendq_t *q, const sendq_msg_t *m);

/* A queue shared by threads (above), cutting at slice_bytes. Destroy it after the last
 * sendq_send or sendq_wait has returned. */
sendq_t *sendq_new_shared(size_t slice_bytes, int stall_ms);
/* Sends the n messages (peer, hdr, data, bytes, priority; rid and owner unused) through
 * the shared queue q on c, in q's order among every thread's: returns once each one's last
 * byte is in ZeroMQ's hands (data may then be reused), 0, or -1 when one of them failed
 * (the comm refused it, or its peer's window did not move for stall_ms). */
int sendq_send(sendq_t *q, comm_t *c, const sendq_msg_t *msgs, int n);

/* sendq_send in three parts, for a thread with other work while its messages wait (the
 * ring receives a step while it sends one): sendq_post queues them (their data read until
 * the ticket's wait returns), counted in the ticket (zeroed before the first post);
 * sendq_progress hands ZeroMQ what of the thread's messages may go now, without waiting,
 * and returns 1 while some of t's are not out (call it again within a millisecond or so:
 * only this thread sends them); sendq_wait waits for all of t's, 0 or -1 as sendq_send. */
typedef struct {
    int left; /* messages not yet out */
    int rc;   /* -1 once one failed */
} sendq_ticket_t;
void sendq_post(sendq_t *q, comm_t *c, const sendq_msg_t *msgs, int n, sendq_ticket_t *t);
int sendq_progress(sendq_t *q, comm_t *c, const sendq_ticket_t *t);
int sendq_wait(sendq_t *q, comm_t *c, sendq_ticket_t *t);
/* comm_recv on c (1, 0 or -1 as it) that meanwhile keeps handing ZeroMQ t's messages
 * (sendq_progress); q NULL: comm_recv itself. */
int sendq_recv(sendq_t *q, comm_t *c, const sendq_ticket_t *t, const comm_match_t *m,
               comm_msg_t *out, int timeout_ms);

/* A shared queue, from a thread with a loop of its own (the PS mux's, the shard's): queues
 * m (peer, rid, hdr, data, bytes, priority, owner) to go on c, handed to ZeroMQ by c's
 * thread's sendq_pump; done(arg, m, rc) is called once, with q's lock held (it must not
 * use q), on the thread that finishes m: c's, or another one's when m's peer's window
 * stalls (so done must be safe from any thread). */
void sendq_push_from(sendq_t *q, comm_t *c, const sendq_msg_t *m, sendq_done_fn done,
                     void *arg);
/* A shared queue: c's messages still queued fail (done -1); call it before c is
 * destroyed, once c's thread has stopped. */
void sendq_drop(sendq_t *q, comm_t *c);

/* Messages queued, not yet wholly in ZeroMQ's hands (any thread's). */
int sendq_n_queued(sendq_t *q);

/* Hands c what the windows allow. Returns 1 while a message is queued or a slice is in
 * ZeroMQ's hands (call again soon: ZeroMQ's release wakes no one), 0 when all is out; a
 * shared queue's: 1 while one of c's messages is queued. */
int sendq_pump(sendq_t *q, comm_t *c);

#endif
