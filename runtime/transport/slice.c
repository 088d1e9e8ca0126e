#include "runtime/transport/slice.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>
#include <zmq.h>

#include "core/check.h"
#include "runtime/transport/zmq_check.h"

/* The n-byte little-endian field at p. */
static void put_le(unsigned char *p, int n, uint64_t v)
{
    while (n-- > 0) *p++ = (unsigned char)v, v >>= 8;
}
static uint64_t get_le(const unsigned char *p, int n)
{
    uint64_t v = 0;
    while (n-- > 0) v = v << 8 | p[n];
    return v;
}

/* crc32 of the fields before it. */
static uint32_t header_crc(const unsigned char *b)
{
    return (uint32_t)crc32(crc32(0L, Z_NULL, 0), b, SLICE_HEADER_BYTES - 4);
}

void slice_encode(const slice_info_t *s, unsigned char out[SLICE_HEADER_BYTES])
{
    memset(out, 0, SLICE_HEADER_BYTES);
    put_le(out, 4, SLICE_MAGIC);
    put_le(out + 4, 2, s->type);
    put_le(out + 8, 4, s->seq);
    put_le(out + 12, 8, s->total);
    put_le(out + 20, 8, s->at);
    put_le(out + 28, 4, header_crc(out));
}

#define FAIL(...)                                                                           \
    do {                                                                                    \
        if (why && why_len) snprintf(why, why_len, __VA_ARGS__);                            \
        return -1;                                                                          \
    } while (0)

int slice_decode(const void *buf, size_t bytes, slice_info_t *s, char *why, size_t why_len)
{
    const unsigned char *b = buf;
    if (!b || bytes < SLICE_HEADER_BYTES) FAIL("slice of %zu bytes has no slice header", bytes);
    if (get_le(b, 4) != SLICE_MAGIC) FAIL("bad slice magic");
    if (get_le(b + 28, 4) != header_crc(b)) FAIL("slice header crc mismatch");
    *s = (slice_info_t){.type = (uint16_t)get_le(b + 4, 2), .seq = (uint32_t)get_le(b + 8, 4),
                        .total = get_le(b + 12, 8), .at = get_le(b + 20, 8)};
    return 0;
}

/* ---------------------------------------------------------------- reassembly */

typedef struct part {
    int peer;
    unsigned char rid[32];
    size_t rid_len;
    uint32_t seq;
    msg_header_t hdr;  /* the whole message's: type and length restored */
    uint64_t got;      /* payload bytes in so far */
    zmq_msg_t payload; /* total bytes */
    struct part *next;
} part_t;

struct slice_asm {
    part_t *open;
    size_t max_total; /* the largest whole message taken */
};

slice_asm_t *slice_asm_new(size_t max_total)
{
    slice_asm_t *a = xcalloc(1, sizeof *a);
    a->max_total = max_total;
    return a;
}

/* g's payload, read through ZeroMQ: comm.c keeps its sliced messages here, so this module
 * calls nothing of comm's. */
static size_t g_bytes(const comm_msg_t *g)
{
    return g->has_payload ? zmq_msg_size((zmq_msg_t *)&g->payload) : 0;
}
static const unsigned char *g_data(const comm_msg_t *g)
{
    return g->has_payload ? zmq_msg_data((zmq_msg_t *)&g->payload) : NULL;
}
static void g_close(comm_msg_t *g)
{
    if (g->has_payload) zmq_msg_close(&g->payload);
    g->has_payload = 0;
}

static void part_free(part_t *p)
{
    zmq_msg_close(&p->payload);
    free(p);
}

void slice_asm_destroy(slice_asm_t **ap)
{
    if (!ap || !*ap) return;
    for (part_t *p = (*ap)->open, *next; p; p = next) {
        next = p->next;
        part_free(p);
    }
    free(*ap);
    *ap = NULL;
}

static bool same_conn(const part_t *p, const comm_msg_t *g)
{
    return p->peer == g->peer && p->rid_len == g->rid_len && !memcmp(p->rid, g->rid, g->rid_len);
}

/* The open part of g's connection with seq (unlinked from the list when found); NULL when
 * none. *n_open: the connection's open parts. */
static part_t *unlink_part(slice_asm_t *a, const comm_msg_t *g, uint32_t seq, int *n_open)
{
    *n_open = 0;
    for (part_t **pp = &a->open; *pp; pp = &(*pp)->next) {
        part_t *p = *pp;
        if (!same_conn(p, g)) continue;
        if (p->seq != seq) {
            ++*n_open;
            continue;
        }
        *pp = p->next;
        return p;
    }
    return NULL;
}

/* Whether slice g (decoded as s) continues part p: the same message header. */
static bool continues(const part_t *p, const comm_msg_t *g, const slice_info_t *s)
{
    const msg_header_t *h = &p->hdr, *x = &g->hdr;
    return s->type == h->type && s->total == h->length && s->at == p->got &&
           x->layer == h->layer && x->shard == h->shard && x->iteration == h->iteration &&
           x->offset == h->offset && x->stamp_ns == h->stamp_ns;
}

/* Checks slice g on its own; its piece in *piece, *piece_bytes. 0 or -1 (why). */
static int slice_check(const slice_asm_t *a, comm_msg_t *g, slice_info_t *s,
                       const unsigned char **piece, size_t *piece_bytes, char *why,
                       size_t why_len)
{
    size_t n = g_bytes(g);
    if (slice_decode(g_data(g), n, s, why, why_len)) return -1;
    if (s->type == MSG_SLICE || !strcmp(msg_type_name(s->type), "?"))
        FAIL("slice of a message of type %u", s->type);
    if (s->total == 0 || s->total > a->max_total) /* what a whole one could carry */
        FAIL("slice of a message of %llu bytes", (unsigned long long)s->total);
    *piece = g_data(g) + SLICE_HEADER_BYTES;
    *piece_bytes = n - SLICE_HEADER_BYTES;
    if (*piece_bytes == 0) FAIL("empty slice");
    if (s->at > s->total || *piece_bytes > s->total - s->at)
        FAIL("slice [%llu, +%zu) beyond the message's %llu bytes", (unsigned long long)s->at,
             *piece_bytes, (unsigned long long)s->total);
    return 0;
}

int slice_asm_take(slice_asm_t *a, comm_msg_t *g, comm_msg_t *whole, char *why, size_t why_len)
{
    slice_info_t s;
    const unsigned char *piece;
    size_t piece_bytes;
    int rc = -1, n_open;
    part_t *p = NULL;
    if (slice_check(a, g, &s, &piece, &piece_bytes, why, why_len)) goto out;
    p = unlink_part(a, g, s.seq, &n_open);
    if (s.at == 0 && p) {
        snprintf(why, why_len, "slice opens message %u again", s.seq);
        goto out;
    }
    if (s.at == 0) {
        if (n_open >= SLICE_MAX_OPEN) {
            snprintf(why, why_len, "more than %d sliced messages open", SLICE_MAX_OPEN);
            goto out;
        }
        p = xcalloc(1, sizeof *p);
        *p = (part_t){.peer = g->peer, .rid_len = g->rid_len, .seq = s.seq, .hdr = g->hdr};
        memcpy(p->rid, g->rid, g->rid_len);
        p->hdr.type = s.type;
        p->hdr.length = s.total;
        ZMQ_CHECK(zmq_msg_init_size(&p->payload, (size_t)s.total), "out of memory?");
    } else if (!p || !continues(p, g, &s)) {
        snprintf(why, why_len, "slice at %llu of message %u does not continue it",
                 (unsigned long long)s.at, s.seq);
        goto out;
    }
    memcpy((unsigned char *)zmq_msg_data(&p->payload) + s.at, piece, piece_bytes);
    p->got += piece_bytes;
    if (p->got < s.total) {
        p->next = a->open;
        a->open = p;
        p = NULL;
        rc = 0;
        goto out;
    }
    *whole = (comm_msg_t){.hdr = p->hdr, .peer = p->peer, .recv_ns = g->recv_ns,
                          .has_payload = 1, .rid_len = p->rid_len, .src_fd = g->src_fd};
    memcpy(whole->rid, p->rid, p->rid_len);
    zmq_msg_init(&whole->payload);
    zmq_msg_move(&whole->payload, &p->payload);
    rc = 1;
out:
    if (p) part_free(p); /* completed, or the message a refused slice claimed to continue */
    g_close(g);
    return rc;
}
