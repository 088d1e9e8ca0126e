#include "tests/conn_flood.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

int conn_flood_open(const char *from, int port, int *fds, int n)
{
    int made = 0;
    for (int i = 0; i < n; i++) {
        fds[i] = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        struct sockaddr_in src = {.sin_family = AF_INET}, dst = {.sin_family = AF_INET};
        inet_pton(AF_INET, from, &src.sin_addr);
        inet_pton(AF_INET, "127.0.0.1", &dst.sin_addr);
        dst.sin_port = htons((uint16_t)port);
        if (fds[i] < 0 || bind(fds[i], (struct sockaddr *)&src, sizeof src) ||
            connect(fds[i], (struct sockaddr *)&dst, sizeof dst)) {
            if (fds[i] >= 0) close(fds[i]);
            fds[i] = -1;
            continue;
        }
        made++;
    }
    return made;
}

int conn_flood_alive(const int *fds, int n)
{
    int alive = 0;
    for (int i = 0; i < n; i++) {
        if (fds[i] < 0) continue;
        char buf[256];
        ssize_t got;
        while ((got = recv(fds[i], buf, sizeof buf, MSG_DONTWAIT)) > 0) {
        }
        alive += got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
    }
    return alive;
}

void conn_flood_close(int *fds, int n)
{
    for (int i = 0; i < n; i++)
        if (fds[i] >= 0) close(fds[i]), fds[i] = -1;
}
