#include "runtime/transport/zap.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include <zmq.h>

#include "core/check.h"
#include "core/log.h"
#include "runtime/transport/fabric_auth.h"
#include "runtime/transport/reject_log.h"

#define ZAP_ENDPOINT "inproc://zeromq.zap.01"
/* version, request id, domain, address, routing id, mechanism, credentials (CURVE: the
 * key; PLAIN: user name and password) */
#define ZAP_REQUEST_FRAMES 7
#define ZAP_REQUEST_FRAMES_PLAIN 8

static pthread_mutex_t s_lock = PTHREAD_MUTEX_INITIALIZER;
static void *s_sock;
static const keyring_t *s_keyring;
static bool s_plain; /* trusted fabric: PLAIN with the pair's password is admitted too */
static atomic_ulong s_refused;

unsigned long zap_refused(void) { return atomic_load(&s_refused); }

typedef struct {
    char data[ZAP_REQUEST_FRAMES_PLAIN][256];
    size_t len[ZAP_REQUEST_FRAMES_PLAIN];
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
        if (rq->n < ZAP_REQUEST_FRAMES_PLAIN) {
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

/* A CURVE request: the key must be one of the job's ranks'. NULL (rank set) or why not. */
static const char *curve_check(const request_t *rq, int *rank)
{
    if (rq->n != ZAP_REQUEST_FRAMES) return "malformed ZAP request";
    if (rq->len[6] != 32) return "no CURVE key";
    if ((*rank = keyring_rank_of(s_keyring, (const uint8_t *)rq->data[6])) < 0)
        return "its key is not one of this job's ranks";
    return NULL;
}

/* A rank number of at most 7 decimal digits in frame i: the rank, or -1. */
static int frame_rank(const request_t *rq, int i, size_t skip)
{
    size_t len = rq->len[i];
    if (len <= skip || len - skip > 7) return -1;
    int r = 0;
    for (size_t j = skip; j < len; j++) {
        char ch = rq->data[i][j];
        if (ch < '0' || ch > '9') return -1;
        r = r * 10 + (ch - '0');
    }
    return r < s_keyring->world ? r : -1;
}

/* A PLAIN request (trusted fabric): the domain "poseidon/<server rank>" names a rank whose
 * secret this process holds, the user name a rank of the job, and the password is the
 * pair's (fabric_auth.h). NULL (rank set) or why not. */
static const char *plain_check(const request_t *rq, int *rank)
{
    if (rq->n != ZAP_REQUEST_FRAMES_PLAIN) return "malformed ZAP request";
    int server = rq->len[2] > 9 && !memcmp(rq->data[2], "poseidon/", 9) ? frame_rank(rq, 2, 9)
                                                                         : -1;
    int client = frame_rank(rq, 6, 0);
    if (server < 0) return "a PLAIN connection to a socket of no rank";
    if (client < 0) return "its user name is not a rank of this job";
    if (!fabric_password_ok(s_keyring, client, server, rq->data[7], rq->len[7]))
        return "wrong password for its rank";
    *rank = client;
    return NULL;
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
        if (rq.n < 6 || rq.len[0] != 3 || memcmp(rq.data[0], "1.0", 3))
            why = "malformed ZAP request";
        else if (!strcmp(mechanism, "CURVE"))
            why = curve_check(&rq, &rank);
        else if (!strcmp(mechanism, "PLAIN") && s_plain)
            why = plain_check(&rq, &rank);
        else
            why = s_plain ? "neither CURVE nor PLAIN" : "not CURVE";
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

int zap_start(void *ctx, const keyring_t *k, bool plain)
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
            s_plain = plain;
            s_sock = sock;
            pthread_t t;
            if (pthread_create(&t, NULL, zap_main, sock) != 0) die("pthread_create");
            pthread_detach(t);
        }
    }
    pthread_mutex_unlock(&s_lock);
    return rc;
}
