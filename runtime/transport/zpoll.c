#include "runtime/transport/zpoll.h"

#include <poll.h>
#include <stddef.h>

#include <zmq.h>

#include "runtime/transport/zmq_check.h"

void zpoll_init(zpoll_t *z, void *sock)
{
    size_t len = sizeof z->fd;
    z->sock = sock;
    ZMQ_CHECK(zmq_getsockopt(sock, ZMQ_FD, &z->fd, &len), "ZMQ_FD");
    z->maybe = true;
}

int zpoll_readable(zpoll_t *z)
{
    int events = 0;
    size_t len = sizeof events;
    if (zmq_getsockopt(z->sock, ZMQ_EVENTS, &events, &len) != 0) return -1;
    if (events & ZMQ_POLLIN) return 1;
    z->maybe = false;
    return 0;
}

int zpoll_wait(zpoll_t *const *zs, int n, int extra_fd, int timeout_ms, bool *extra_ready)
{
    *extra_ready = false;
    for (int i = 0; i < n; i++)
        if (zs[i]->maybe) return 1;
    struct pollfd pfd[n + 1];
    int np = 0;
    for (int i = 0; i < n; i++) pfd[np++] = (struct pollfd){.fd = zs[i]->fd, .events = POLLIN};
    if (extra_fd >= 0) pfd[np++] = (struct pollfd){.fd = extra_fd, .events = POLLIN};
    int rc = poll(pfd, (nfds_t)np, timeout_ms < 0 ? -1 : timeout_ms);
    if (rc <= 0) return rc;
    for (int i = 0; i < n; i++)
        if (pfd[i].revents) zs[i]->maybe = true;
    if (extra_fd >= 0 && pfd[n].revents) *extra_ready = true;
    return 1;
}
