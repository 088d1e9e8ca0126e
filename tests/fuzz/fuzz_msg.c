/* Fuzz the message header decoder (runtime/transport/msg.c). The checksum would stop almost every
 * mutation at the first check, so each input is decoded twice: as it came, and with its
 * crc field rewritten to match (what a forger who knows the format sends). A header the
 * decoder accepts must satisfy msg.h's invariant and encode back to the same bytes. */
#include "tests/fuzz/fuzz.h"

#include <zlib.h>

#include "runtime/transport/msg.h"

static void check_accepted(const uint8_t *wire, const msg_header_t *h)
{
    FUZZ_ASSERT(h->length <= MSG_MAX_PAYLOAD_BYTES, "length %llu",
                (unsigned long long)h->length);
    FUZZ_ASSERT(h->offset <= UINT64_MAX / 4 - h->length, "offset %llu",
                (unsigned long long)h->offset);
    FUZZ_ASSERT(!msg_type_is_float(h->type) || h->length % 2 == 0, "length %llu",
                (unsigned long long)h->length);
    FUZZ_ASSERT(h->layer >= -1 && h->iteration >= -1 && h->stamp_ns >= 0, "fields");
    FUZZ_ASSERT(strcmp(msg_type_name(h->type), "?") != 0, "type %u", h->type);
    unsigned char again[MSG_HEADER_BYTES];
    msg_encode(h, again);
    FUZZ_ASSERT(memcmp(again, wire, MSG_HEADER_BYTES) == 0, "encode(decode(x)) != x");
}

static int decode_one(const uint8_t *wire, size_t size)
{
    msg_header_t h;
    char why[256] = "";
    if (msg_decode(wire, size, &h, why, sizeof why) != 0) {
        FUZZ_ASSERT(why[0] != '\0', "rejected without a reason");
        return 0;
    }
    check_accepted(wire, &h);
    return 1;
}

int fuzz_msg(const uint8_t *data, size_t size)
{
    /* A copy of exactly size bytes, so that ASan sees any read past the frame. */
    uint8_t *wire = malloc(size ? size : 1);
    if (!wire) abort();
    memcpy(wire, data, size);
    int accepted = decode_one(wire, size);
    if (size == MSG_HEADER_BYTES) {
        uLong c = crc32(0L, Z_NULL, 0);
        c = crc32(c, wire, 20);
        c = crc32(c, wire + 24, MSG_HEADER_BYTES - 24);
        for (int i = 0; i < 4; i++) wire[20 + i] = (uint8_t)(c >> (8 * i));
        decode_one(wire, size);
    }
    free(wire);
    return accepted;
}

FUZZ_LIBFUZZER_ENTRY(fuzz_msg)
