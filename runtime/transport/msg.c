#include "runtime/transport/msg.h"

#include <stdio.h>
#include <string.h>
#include <zlib.h>

static void put_u16(unsigned char *p, uint16_t v)
{
    p[0] = (unsigned char)v;
    p[1] = (unsigned char)(v >> 8);
}

static void put_u32(unsigned char *p, uint32_t v)
{
    for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i));
}

static void put_u64(unsigned char *p, uint64_t v)
{
    for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i));
}

static uint16_t get_u16(const unsigned char *p) { return (uint16_t)(p[0] | (p[1] << 8)); }

static uint32_t get_u32(const unsigned char *p)
{
    uint32_t v = 0;
    for (int i = 3; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}

static uint64_t get_u64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}

/* crc32 of the header without its crc field (bytes 20..23). */
static uint32_t header_crc(const unsigned char *b)
{
    uLong c = crc32(0L, Z_NULL, 0);
    c = crc32(c, b, 20);
    c = crc32(c, b + 24, MSG_HEADER_BYTES - 24);
    return (uint32_t)c;
}

void msg_encode(const msg_header_t *h, unsigned char out[MSG_HEADER_BYTES])
{
    put_u32(out + 0, MSG_MAGIC);
    put_u16(out + 4, MSG_VERSION);
    put_u16(out + 6, h->type);
    put_u32(out + 8, h->sender);
    put_u32(out + 12, (uint32_t)h->layer);
    put_u32(out + 16, h->shard);
    put_u32(out + 20, 0);
    put_u64(out + 24, (uint64_t)h->iteration);
    put_u64(out + 32, h->offset);
    put_u64(out + 40, h->length);
    put_u64(out + 48, (uint64_t)h->stamp_ns);
    put_u32(out + 20, header_crc(out));
}

const char *msg_type_name(int type)
{
    switch (type) {
    case MSG_REGISTER: return "REGISTER";
    case MSG_PEERS: return "PEERS";
    case MSG_BARRIER: return "BARRIER";
    case MSG_BARRIER_OK: return "BARRIER_OK";
    case MSG_BLOB: return "BLOB";
    case MSG_HEARTBEAT: return "HEARTBEAT";
    case MSG_HEARTBEAT_ACK: return "HEARTBEAT_ACK";
    case MSG_ABORT: return "ABORT";
    case MSG_BYE: return "BYE";
    case MSG_PS_PUSH: return "PS_PUSH";
    case MSG_PS_PULL: return "PS_PULL";
    case MSG_PS_VALUES: return "PS_VALUES";
    case MSG_SFB_U: return "SFB_U";
    case MSG_SFB_V: return "SFB_V";
    case MSG_AR_REDUCE: return "AR_REDUCE";
    case MSG_AR_GATHER: return "AR_GATHER";
    case MSG_LS_VOTE: return "LS_VOTE";
    case MSG_TEST: return "TEST";
    case MSG_SLICE: return "SLICE";
    default: return "?";
    }
}

int msg_type_is_float(int type)
{
    return type == MSG_PS_PUSH || type == MSG_PS_VALUES || type == MSG_SFB_U ||
           type == MSG_SFB_V || type == MSG_AR_REDUCE || type == MSG_AR_GATHER;
}

#define FAIL(...)                                                                           \
    do {                                                                                    \
        if (why && why_len) snprintf(why, why_len, __VA_ARGS__);                            \
        return -1;                                                                          \
    } while (0)

int msg_decode(const void *buf, size_t bytes, msg_header_t *h, char *why, size_t why_len)
{
    const unsigned char *b = buf;
    if (bytes != MSG_HEADER_BYTES)
        FAIL("header frame of %zu bytes (expected %d)", bytes, MSG_HEADER_BYTES);
    uint32_t magic = get_u32(b);
    if (magic != MSG_MAGIC) FAIL("bad magic 0x%08x", magic);
    uint16_t version = get_u16(b + 4);
    if (version != MSG_VERSION) FAIL("version %u (this build speaks %d)", version, MSG_VERSION);
    uint32_t crc = get_u32(b + 20);
    if (crc != header_crc(b)) FAIL("header checksum mismatch");
    msg_header_t m = {
        .type = get_u16(b + 6),
        .sender = get_u32(b + 8),
        .layer = (int32_t)get_u32(b + 12),
        .shard = get_u32(b + 16),
        .iteration = (int64_t)get_u64(b + 24),
        .offset = get_u64(b + 32),
        .length = get_u64(b + 40),
        .stamp_ns = (int64_t)get_u64(b + 48),
    };
    if (!strcmp(msg_type_name(m.type), "?")) FAIL("unknown message type %u", m.type);
    if (m.length > MSG_MAX_PAYLOAD_BYTES)
        FAIL("payload length %llu over the limit", (unsigned long long)m.length);
    if (m.offset > UINT64_MAX / 4 - m.length)
        FAIL("offset %llu + length overflows", (unsigned long long)m.offset);
    if (msg_type_is_float(m.type) && m.length % 2 != 0)
        FAIL("%s payload of %llu bytes is not whole values", msg_type_name(m.type),
             (unsigned long long)m.length);
    if (m.layer < -1) FAIL("layer %d", m.layer);
    if (m.iteration < -1) FAIL("iteration %lld", (long long)m.iteration);
    if (m.stamp_ns < 0) FAIL("stamp %lld ns", (long long)m.stamp_ns);
    *h = m;
    return 0;
}
