#include "runtime/transport/zap.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include <zmq.h>

#include "core/check.h"
#include "core/log.h"
#include "runtime/transport/reject_log.h"

#define ZAP_ENDPOINT "inproc://zeromq.zap.01"
/* version, request id, domain, address, routing id, mechanism, credentials */
#define ZAP_REQUEST_FRAMES 7

static pthread_mutex_t s_lock = PTHREAD_MUTEX_INITIALIZER;
static void *s_sock;
static const keyring_t *s_keyring;
static atomic_ulong s_refused;

unsigned long zap_refused(void) { return atomic_load(&s_refused); }

typedef struct {
    char data[ZAP_REQUEST_FRAMES][256];
    size_t len[ZAP_REQUEST_FRAMES];
    int n;
} request_t;

/* Reads one request (every frame of it, whatever its length); -1 on a socket error. */
static int read_request(void *sock, request_t *rq)
{
    rq->n = 0;
    int more = 1;
    while (more) {
        zmq_msg_t f;
        zmq_msg_init(&f);
        if (zmq_msg_recv(&f, sock, 0) < 0) {
            zmq_msg_close(&f);
            return -1;
        }
        if (rq->n < ZAP_REQUEST_FRAMES) {
            size_t len = zmq_msg_size(&f);
            if (len > sizeof rq->data[0]) len = sizeof rq->data[0];
            memcpy(rq->data[rq->n], zmq_msg_data(&f), len);
            rq->len[rq->n] = zmq_msg_size(&f);
        }
        rq->n++;
        more = zmq_msg_more(&f);
        zmq_msg_close(&f);
    }
    return 0;
}

static void send_frame(void *sock, const void *data, size_t len, int more)
{
    if (zmq_send(sock, data, len, more ? ZMQ_SNDMORE : 0) < 0)
        log_error("zap: reply not sent: %s", zmq_strerror(zmq_errno()));
}

static void reply(void *sock, const request_t *rq, const char *code, const char *text,
                  const char *user)
{
    send_frame(sock, "1.0", 3, 1);
    send_frame(sock, rq->n > 1 ? rq->data[1] : "", rq->n > 1 ? rq->len[1] : 0, 1);
    send_frame(sock, code, strlen(code), 1);
    send_frame(sock, text, strlen(text), 1);
    send_frame(sock, user, strlen(user), 1);
    send_frame(sock, "", 0, 0);
}

/* Printable, NUL-terminated copy of a frame. */
static void frame_text(const request_t *rq, int i, char *out, size_t outlen)
{
    size_t len = i < rq->n ? rq->len[i] : 0;
    if (len > sizeof rq->data[0]) len = sizeof rq->data[0];
    size_t o = 0;
    for (size_t j = 0; j < len && o + 1 < outlen; j++) {
        unsigned char ch = (unsigned char)rq->data[i][j];
        out[o++] = ch >= 32 && ch < 127 ? (char)ch : '?';
    }
    out[o] = '\0';
}

static void *zap_main(void *arg)
{
    void *sock = arg;
    for (;;) {
        request_t rq;
        if (read_request(sock, &rq) != 0) {
            if (zmq_errno() == ETERM) break;
            continue;
        }
        char address[64], mechanism[32];
        frame_text(&rq, 3, address, sizeof address);
        frame_text(&rq, 5, mechanism, sizeof mechanism);
        int rank = -1;
        const char *why = NULL;
        if (rq.n != ZAP_REQUEST_FRAMES || rq.len[0] != 3 || memcmp(rq.data[0], "1.0", 3))
            why = "malformed ZAP request";
        else if (strcmp(mechanism, "CURVE") != 0)
            why = "not CURVE";
        else if (rq.len[6] != 32)
            why = "no CURVE key";
        else if ((rank = keyring_rank_of(s_keyring, (const uint8_t *)rq.data[6])) < 0)
            why = "its key is not one of this job's ranks";
        if (why) {
            atomic_fetch_add(&s_refused, 1);
            reject_log(address, "refused a connection from %s: %s", address[0] ? address : "?",
                       why);
            reply(sock, &rq, "400", why, "");
            continue;
        }
        char user[16];
        snprintf(user, sizeof user, "%d", rank);
        reply(sock, &rq, "200", "OK", user);
    }
    return NULL;
}

int zap_start(void *ctx, const keyring_t *k)
{
    pthread_mutex_lock(&s_lock);
    int rc = 0;
    if (!s_sock) {
        void *sock = zmq_socket(ctx, ZMQ_REP);
        if (!sock || zmq_bind(sock, ZAP_ENDPOINT) != 0) {
            log_error("zap: cannot bind %s: %s", ZAP_ENDPOINT, zmq_strerror(zmq_errno()));
            if (sock) zmq_close(sock);
            rc = -1;
        } else {
            s_keyring = k;
            s_sock = sock;
            pthread_t t;
            if (pthread_create(&t, NULL, zap_main, sock) != 0) die("pthread_create");
            pthread_detach(t);
        }
    }
    pthread_mutex_unlock(&s_lock);
    return rc;
}
