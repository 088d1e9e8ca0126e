/* comm: a thin ZeroMQ layer under every runtime message (PS, SFB, all-reduce, coordinator).
 *
 * Sockets. A comm_t is one endpoint of one thread: an optional bound ROUTER for inbound
 * traffic, plus one DEALER per peer it talks to (comm_connect). Why ROUTER/DEALER and not
 * PUSH/PULL: the ROUTER prefixes every inbound message with the connection's routing id,
 * which is the one sender identity the transport vouches for (the header's sender field is
 * only a claim, checked against it), so a bad message is logged with who sent it; and a
 * ROUTER can answer the peer that asked (a PS shard replies to a pull on the requester's
 * own connection) without a second socket per direction. A single inbound socket per thread
 * lets one zmq_poll wait on every peer with one timeout.
 *
 * Identity: a DEALER's routing id is "<channel>:<rank>" (channel = the comm's name, so two
 * comms of one process connecting to the same ROUTER do not collide). The receiver takes the
 * peer's rank from it; a message whose header claims another sender is dropped. In a secure
 * process (comm_set_keyring) the routing id must also name the rank whose key the
 * connection was admitted with, so no rank can speak for another.
 *
 * Messages: frame 1 is the 56-byte msg header (msg.h), frame 2 (only when length > 0) the
 * payload. Every received message is validated (frame count, header, payload length ==
 * header length, claimed sender == transport sender); a bad one is logged as
 * "dropped bad message from <id> (<address>): <reason>" (at most one line per sender per
 * interval: runtime/transport/reject_log.h), counted, and never returned.
 * Payloads of COMM_ZEROCOPY_MIN_BYTES or more sent with a tracker are handed to ZeroMQ
 * without a copy (zmq_msg_init_data); the caller must not touch the buffer until
 * comm_tracker_wait says ZeroMQ released it; a comm_buf_t is the same for a buffer that is
 * sent many times (reference-counted, copy-on-write by its owner). Received payloads are
 * used where ZeroMQ put them (aligned; see COMM_PAYLOAD_ALIGN) and may be written in place.
 * The process keeps freed message buffers in its heap (comm_context: mallopt), so a stream
 * of large messages does not page-fault on fresh memory for every one.
 *
 * Receive with a match: messages that arrive but do not match what the caller waits for are
 * kept (in arrival order) and returned by a later matching comm_recv, so the PS client, the
 * ring and SFB can share one comm without losing each other's traffic.
 *
 * Threads: a comm_t belongs to one thread at a time (ZeroMQ sockets are not thread-safe).
 * The process's ZeroMQ context is created on first use; fork() only before that (the local
 * launcher forks first); a context inherited over fork is detected and refused.
 * Every wait is bounded: sends by the comm's timeout, receives by the caller's.
 */
#ifndef POSEIDON_COMM_H
#define POSEIDON_COMM_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <zmq.h>

#include "core/check.h"
#include "runtime/transport/keyring.h"
#include "runtime/transport/msg.h"

/* Payloads at least this large go without a copy when a tracker is given: below it the
 * copy is cheaper than the bookkeeping (ZeroMQ itself inlines messages under 33 bytes). */
#define COMM_ZEROCOPY_MIN_BYTES (64 * 1024)
/* comm_buf_new_tracked: above ZeroMQ's own inlining of small messages (33 bytes) */
#define COMM_BUF_TRACKED_MIN_BYTES 64
#define COMM_ANY INT32_MIN
/* A received payload's data is aligned to this many bytes (floats and doubles may be read
 * in place); one that ZeroMQ delivers unaligned is copied once. */
#define COMM_PAYLOAD_ALIGN 8

typedef struct comm comm_t;

/* Counts payloads handed to ZeroMQ without a copy and not yet released by it. */
typedef struct {
    atomic_int pending;
} comm_tracker_t;

typedef struct {
    msg_header_t hdr;
    int peer;          /* rank of the sender according to the transport */
    int64_t recv_ns;   /* clock_now_ns() when it was taken from its socket (a message kept
                        * for a later receive keeps its time) */
    zmq_msg_t payload; /* valid when has_payload */
    int has_payload;
    unsigned char rid[32]; /* routing id of the connection it came on (ROUTER only) */
    size_t rid_len;
    int src_fd;            /* the connection's file descriptor (ROUTER only; -1: unknown),
                            * which comm_closed_connections names when it closes */
} comm_msg_t;

/* What a receive waits for; COMM_ANY in a field matches anything. */
typedef struct {
    int type, peer;
    int64_t iteration;
    int32_t layer;
    int64_t shard;
    int64_t offset;
} comm_match_t;
#define COMM_MATCH_ANY                                                                      \
    (comm_match_t) { COMM_ANY, COMM_ANY, COMM_ANY, COMM_ANY, COMM_ANY, COMM_ANY }
/* 1 when g is what m waits for (m NULL: anything). */
int comm_match_ok(const comm_match_t *m, const comm_msg_t *g);

/* The process's ZeroMQ context (created on first call). */
void *comm_context(void);

/* Security: with a keyring set, every socket this process makes afterwards speaks CURVE:
 * a comm of rank r serves with r's secret key and admits only connections that hold one of
 * the keyring's keys (runtime/transport/zap.h), connects to peer p only if p's server proves p's key,
 * and drops any message whose connection's key is not that of the rank its routing id
 * names. Set once, before the first comm; k must outlive every comm. Without one, sockets
 * are plain TCP (a job on loopback run --insecure, tests of the transport). */
void comm_set_keyring(const keyring_t *k);
const keyring_t *comm_keyring(void);

/* Trusted fabric (runtime/transport/fabric_auth.h says for which network): with a keyring,
 * the data sockets (comm_new) admit and make connections by the pair's password over
 * ZeroMQ's PLAIN, unencrypted, while the control sockets (comm_new_control: the coordinator,
 * whose port is known in advance, and the rendezvous that hands out the data endpoints) keep
 * CURVE, so that a rank always knows it reached the real coordinator. Set before the first
 * comm. comm_trusted_fabric: whether it is on (and a keyring set). */
void comm_set_trusted_fabric(bool on);
bool comm_trusted_fabric(void);

/* The largest payload a peer of this process may send (default MSG_MAX_PAYLOAD_BYTES): a
 * frame announcing more ends its connection before anything is allocated. For comms made
 * afterwards. */
void comm_set_max_payload(size_t bytes);
size_t comm_max_payload(void);

/* The kernel's send buffer (SO_SNDBUF) of every socket made afterwards, bytes; 0 (the
 * default): the system's (Linux autotunes it up to tcp_wmem's 4 MB). What the kernel holds
 * leaves in the order it was written, so a sender that orders its messages
 * (runtime/transport/sendq.h) bounds it. */
void comm_set_send_buffer(int bytes);

/* Send order across comms (send_order = layer, core/plan.h): q, a shared send queue
 * (runtime/transport/sendq.h, sendq_new_shared), is the one that orders this comm's sends
 * with those of the process's other comms; the sync modules send through it
 * (sendq_send, sendq_post). The comm only keeps it, and from now on puts the sliced messages that
 * arrive back together (runtime/transport/slice.h) before any receive sees them, refusing
 * a bad slice with a logged line naming its sender (counted in comm_n_bad). Call it from
 * the comm's thread before its first receive. comm_order: q, NULL by default. */
struct sendq;
void comm_set_order(comm_t *c, struct sendq *q);
struct sendq *comm_order(const comm_t *c);

/* A comm for `rank` talking to peers 0..n_peers-1. bind: an endpoint for the inbound ROUTER
 * ("tcp://127.0.0.1:*" picks a free port, "ipc:///tmp/x"), or NULL for none. name: the
 * channel in the routing id (<= 15 chars). send_timeout_ms bounds every send and the linger
 * at close. Returns NULL with a logged error when the bind fails. */
comm_t *comm_new(const char *name, int rank, int n_peers, const char *bind, int send_timeout_ms);
/* comm_new for a control channel (the coordinator's, heartbeats): its sockets have a ZeroMQ
 * I/O thread of their own, which the data channels' bulk transfers never occupy. */
comm_t *comm_new_control(const char *name, int rank, int n_peers, const char *bind,
                         int send_timeout_ms);
void comm_destroy(comm_t **cp);

/* The bound endpoint with the real port ("" without a ROUTER). */
const char *comm_endpoint(const comm_t *c);

/* Binds the ROUTER also to an endpoint within this process (inproc; idempotent) and returns
 * it. A comm of this process connected there (comm_connect) reaches the ROUTER without TCP,
 * a handshake or encryption, and its payloads are copied once instead of sent by reference:
 * a rank's traffic with its own PS shard, which over CURVE cost a quarter of a 4-rank PS
 * job's encryption. Only this comm's own rank speaks there: in a secure process a message
 * that came without a key is taken only from a routing id of this rank and with no
 * network address (what ZeroMQ gives an in-process connection). */
#define COMM_LOCAL_PREFIX "inproc://local-"
const char *comm_bind_local(comm_t *c);
int comm_rank(const comm_t *c);
int comm_n_peers(const comm_t *c);

/* Opens the DEALER to peer (idempotent for the same endpoint). 0, or -1 with a logged
 * error for a malformed endpoint. The connection itself completes in the background. */
int comm_connect(comm_t *c, int peer, const char *endpoint);

/* Sends hdr (sender and length filled here) and bytes of data to peer: through the DEALER
 * to peer if connected, else back through the ROUTER to the peer's last inbound connection.
 * With a tracker and bytes >= COMM_ZEROCOPY_MIN_BYTES, data is not copied (see above).
 * Returns 0, or -1 (logged at debug level) if the peer is unknown/unreachable or the send
 * timed out. */
int comm_send(comm_t *c, int peer, msg_header_t hdr, const void *data, size_t bytes,
              comm_tracker_t *tracker);

/* Sends through the ROUTER to the connection with routing id rid (a comm_msg_t's rid):
 * for a server that talks to several channels of one peer. 0 or -1 as comm_send. */
int comm_send_rid(comm_t *c, const unsigned char *rid, size_t rid_len, msg_header_t hdr,
                  const void *data, size_t bytes);

/* A reference-counted payload buffer (data aligned to 64 bytes) for data that is sent many
 * times and rewritten between sends, as a PS shard's block values: comm_send_buf hands it to
 * ZeroMQ without a copy and takes a reference that ZeroMQ drops when it has written the
 * message out. The owner must not write the data while comm_buf_in_flight says it is held
 * (it can copy into a fresh buffer instead: copy-on-write). comm_buf_release drops the
 * owner's reference; the memory goes with the last one. */
typedef struct comm_buf comm_buf_t;
comm_buf_t *comm_buf_new(size_t bytes);
/* A buffer that goes without a copy at any size (COMM_BUF_TRACKED_MIN_BYTES or more), so
 * that ZeroMQ's release of it tells when its bytes have left, however small: a send
 * queue's slices (sendq.h), whose window follows it. */
comm_buf_t *comm_buf_new_tracked(size_t bytes);
/* An eventfd that ZeroMQ's I/O thread writes when it releases a buffer (comm_buf_notify),
 * so that the thread waiting for the buffer to leave wakes then instead of polling. It is
 * reference-counted: ZeroMQ may release a buffer after its sender is gone (a closed
 * socket's messages linger), so the fd stays open until the owner and every buffer that
 * names it have let go. NULL (logged) when no eventfd can be made. */
typedef struct comm_waker comm_waker_t;
comm_waker_t *comm_waker_new(void);
int comm_waker_fd(const comm_waker_t *w);
void comm_waker_release(comm_waker_t **wp);
/* Each release of b by ZeroMQ from now on writes 1 to w's fd; b holds a reference to w
 * (NULL: none). */
void comm_buf_notify(comm_buf_t *b, comm_waker_t *w);
void *comm_buf_data(comm_buf_t *b);
size_t comm_buf_bytes(const comm_buf_t *b);
int comm_buf_in_flight(const comm_buf_t *b);
void comm_buf_release(comm_buf_t **bp);
/* Another reference to b, dropped with comm_buf_release: while it is held b is in flight,
 * so its owner writes a copy instead (a send queue reading b slice by slice). Returns b. */
comm_buf_t *comm_buf_ref(comm_buf_t *b);

/* Sends the whole of buf to peer as comm_send does, or, when rid_len > 0, through the ROUTER
 * to the connection rid as comm_send_rid does. Payloads of COMM_ZEROCOPY_MIN_BYTES or more
 * go without a copy (see comm_buf_t). 0 or -1 as comm_send. */
int comm_send_buf(comm_t *c, int peer, const unsigned char *rid, size_t rid_len,
                  msg_header_t hdr, comm_buf_t *buf);

/* Waits up to timeout_ms for a valid message matching m. Returns 1 (out filled; close it
 * with comm_msg_close), 0 on timeout, -1 on an error (logged). */
int comm_recv(comm_t *c, const comm_match_t *m, comm_msg_t *out, int timeout_ms);

/* Takes every message that arrives off the sockets into the kept messages (a later
 * comm_recv returns it, with its recv_ns) until the file descriptor fd (an eventfd, a
 * pipe) is readable or timeout_ms passes: a thread that waits for something else can so
 * note when its messages arrive. Returns 1 when fd is readable (it is not read here), 0 on
 * timeout, -1 on an error (logged). */
int comm_stash_until(comm_t *c, int fd, int timeout_ms);
/* As comm_stash_until, but returns as soon as a message was kept: 1 then, 2 when fd is
 * readable (not read here), 0 on timeout, -1 on an error (logged). */
int comm_wait_in(comm_t *c, int fd, int timeout_ms);

const void *comm_msg_data(const comm_msg_t *msg);
/* The payload belongs to the receiver alone (ZeroMQ has no further use for it): it may be
 * written in place, e.g. to sum other messages into it without a buffer of one's own. */
void *comm_msg_data_writable(comm_msg_t *msg);
size_t comm_msg_bytes(const comm_msg_t *msg);
/* Moves src into dst (dst's previous contents are not closed); src is left empty. */
void comm_msg_move(comm_msg_t *dst, comm_msg_t *src);
/* Frees the payload; closing an empty or already closed message does nothing. */
void comm_msg_close(comm_msg_t *msg);

void comm_tracker_init(comm_tracker_t *t);
/* Counts one more use of the tracked buffers (a send handed to another thread, which calls
 * comm_tracker_drop once it no longer reads them), so that comm_tracker_wait waits for it. */
void comm_tracker_hold(comm_tracker_t *t);
void comm_tracker_drop(comm_tracker_t *t);
/* 0 once every payload sent with t was released, -1 after timeout_ms. */
int comm_tracker_wait(comm_tracker_t *t, int timeout_ms);

/* Liveness: a process that exits (or is killed) has its TCP connections closed by its
 * kernel at once; one that is stopped or slow keeps them. comm_watch_connections makes the
 * comm note when its connections close: its ROUTER's (each named by the file descriptor its
 * messages carry in comm_msg_t.src_fd) and those of DEALERs opened afterwards (fd -1). Call
 * it before comm_connect. comm_closed_connections takes up to max of the closes noted since
 * the last call (without waiting) and returns how many. */
void comm_watch_connections(comm_t *c);
int comm_closed_connections(comm_t *c, int *fds, int max);
/* The connections its watched DEALERs have made so far, reconnections included, and in
 * *at_last_close (may be NULL) the count when the last close was read: a message received
 * once the count has passed that came over a new connection, not the closed one. */
uint64_t comm_dealer_connects(comm_t *c, uint64_t *at_last_close);

/* The outgoing connections' troubles (a failed handshake, a drop), logged with the peer's
 * rank and endpoint (runtime/transport/link_watch.h): comm_watch_links before comm_connect;
 * comm_report_link_trouble from the comm's thread, as often as it likes (it never blocks);
 * the events it read. */
void comm_watch_links(comm_t *c);
int comm_report_link_trouble(comm_t *c);

/* Connections per host: at most per_host TCP connections from one remote IP may be open to
 * the comm's ROUTER at once; one beyond is ended as soon as it is accepted and logged
 * (runtime/transport/conn_cap.h; 0: no cap). Call it right after comm_new, before the endpoint is
 * published: connections accepted earlier are not counted. comm_connections_refused says
 * how many were ended so far. */
void comm_set_connection_cap(comm_t *c, int per_host);
uint64_t comm_connections_refused(const comm_t *c);

/* Counters: messages dropped as bad, payload bytes sent and received. */
uint64_t comm_n_bad(const comm_t *c);
uint64_t comm_bytes_sent(const comm_t *c);
uint64_t comm_bytes_received(const comm_t *c);


#endif
