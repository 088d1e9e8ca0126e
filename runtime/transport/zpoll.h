/* zpoll: waiting on many ZeroMQ sockets for the price of one poll(2).
 *
 * zmq_poll asks every socket it is given for ZMQ_EVENTS before it sleeps and again at each
 * wake, and each asking costs a poll(2) and a getpid(2): with a DEALER per peer, a ROUTER per
 * layer and a monitor per connection, that was most of what a 16-rank job's threads spent
 * between messages. A socket's ZMQ_FD turns readable whenever its state may have changed
 * since its pending commands were last read, and any call on the socket may read them; so a
 * socket needs asking only when its descriptor fired or after its owner used it. */
#pragma once

#include <stdbool.h>

typedef struct {
    void *sock;
    int fd;      /* its ZMQ_FD */
    bool maybe;  /* it may hold input not yet seen: ask it (zpoll_readable) before sleeping */
} zpoll_t;

/* Starts watching sock (maybe set: nothing is known of it yet). */
void zpoll_init(zpoll_t *z, void *sock);

/* After a send or receive on z's socket by its owner. */
static inline void zpoll_touch(zpoll_t *z) { z->maybe = true; }

/* 1 when z's socket has a message to read, 0 when it has none (then maybe is cleared, and
 * its descriptor says when that may change), -1 on a ZeroMQ error (zmq_errno). Leaves
 * maybe set when it answers 1: the owner clears it by zpoll_readable answering 0, or by
 * zpoll_drained after a receive found nothing (EAGAIN). */
int zpoll_readable(zpoll_t *z);
static inline void zpoll_drained(zpoll_t *z) { z->maybe = false; }

/* Waits up to timeout_ms (< 0: for ever) until the descriptor of a socket of zs[0..n) or
 * extra_fd (when >= 0) is readable, and marks those sockets maybe; *extra_ready says
 * whether extra_fd was. Returns at once, without a system call, when a socket is already
 * marked. 1 when something is ready, 0 on timeout, -1 on an error (errno; EINTR included). */
int zpoll_wait(zpoll_t *const *zs, int n, int extra_fd, int timeout_ms, bool *extra_ready);
