/* msg: header round trip, and every single-byte corruption of a valid header rejected. */
#include <string.h>

#include "runtime/transport/msg.h"
#include "test.h"

static msg_header_t sample(void)
{
    return (msg_header_t){.type = MSG_PS_PUSH, .sender = 3, .layer = 7, .shard = 2,
                          .iteration = 123456789012LL, .offset = 1ull << 33,
                          .length = 4u << 20, .stamp_ns = 5000000123LL};
}

TEST(msg_round_trip)
{
    msg_header_t h = sample(), g;
    unsigned char w[MSG_HEADER_BYTES];
    msg_encode(&h, w);
    char why[128];
    REQUIRE(msg_decode(w, sizeof w, &g, why, sizeof why) == 0, "%s", why);
    CHECK_EQ_I64(g.type, h.type);
    CHECK_EQ_I64(g.sender, h.sender);
    CHECK_EQ_I64(g.layer, h.layer);
    CHECK_EQ_I64(g.shard, h.shard);
    CHECK_EQ_I64(g.iteration, h.iteration);
    CHECK_EQ_I64(g.offset, h.offset);
    CHECK_EQ_I64(g.length, h.length);
    CHECK_EQ_I64(g.stamp_ns, h.stamp_ns);
    /* little-endian on the wire whatever the host: magic bytes spell PSDN */
    CHECK(!memcmp(w, "PSDN", 4));
    CHECK(w[24] == (unsigned char)(h.iteration & 0xff));
    CHECK(w[48] == (unsigned char)(h.stamp_ns & 0xff));
    CHECK(w[4] == 2 && w[5] == 0, "version %u", w[4] | w[5] << 8);
    /* -1 fields survive */
    h.layer = -1;
    h.iteration = -1;
    msg_encode(&h, w);
    REQUIRE(msg_decode(w, sizeof w, &g, why, sizeof why) == 0, "%s", why);
    CHECK_EQ_I64(g.layer, -1);
    CHECK_EQ_I64(g.iteration, -1);
}

TEST(msg_every_corruption_rejected)
{
    msg_header_t h = sample(), g;
    unsigned char w[MSG_HEADER_BYTES], bad[MSG_HEADER_BYTES];
    msg_encode(&h, w);
    int accepted = 0;
    for (int i = 0; i < MSG_HEADER_BYTES; i++)
        for (int bit = 0; bit < 8; bit++) {
            memcpy(bad, w, sizeof w);
            bad[i] ^= (unsigned char)(1u << bit);
            if (msg_decode(bad, sizeof bad, &g, NULL, 0) == 0) {
                accepted++;
                test_fail(__FILE__, __LINE__, "flip of byte %d bit %d accepted", i, bit);
            }
        }
    CHECK_EQ_I64(accepted, 0);
    /* wrong sizes */
    CHECK(msg_decode(w, sizeof w - 1, &g, NULL, 0) == -1);
    unsigned char big[MSG_HEADER_BYTES + 1] = {0};
    memcpy(big, w, sizeof w);
    CHECK(msg_decode(big, sizeof big, &g, NULL, 0) == -1);
    /* garbage */
    unsigned char junk[MSG_HEADER_BYTES];
    for (int i = 0; i < MSG_HEADER_BYTES; i++) junk[i] = (unsigned char)(i * 37 + 11);
    CHECK(msg_decode(junk, sizeof junk, &g, NULL, 0) == -1);
}

TEST(msg_semantic_checks)
{
    char why[128];
    msg_header_t g, h = sample();
    unsigned char w[MSG_HEADER_BYTES];
    h.type = 999; /* valid crc, unknown type */
    msg_encode(&h, w);
    CHECK(msg_decode(w, sizeof w, &g, why, sizeof why) == -1);
    CHECK(strstr(why, "type") != NULL, "reason: %s", why);
    h = sample();
    h.length = 7; /* not whole values, of 2 bytes (bf16, fp16) or 4 (fp32) */
    msg_encode(&h, w);
    CHECK(msg_decode(w, sizeof w, &g, why, sizeof why) == -1);
    h.length = 6; /* three halves */
    msg_encode(&h, w);
    CHECK(msg_decode(w, sizeof w, &g, why, sizeof why) == 0, "%s", why);
    h = sample();
    h.length = MSG_MAX_PAYLOAD_BYTES + 1;
    msg_encode(&h, w);
    CHECK(msg_decode(w, sizeof w, &g, why, sizeof why) == -1);
    h = sample();
    h.offset = UINT64_MAX - 2;
    msg_encode(&h, w);
    CHECK(msg_decode(w, sizeof w, &g, why, sizeof why) == -1);
    h = sample();
    h.iteration = -5;
    msg_encode(&h, w);
    CHECK(msg_decode(w, sizeof w, &g, why, sizeof why) == -1);
    h = sample();
    h.stamp_ns = -1;
    msg_encode(&h, w);
    CHECK(msg_decode(w, sizeof w, &g, why, sizeof why) == -1);
    CHECK(strstr(why, "stamp") != NULL, "reason: %s", why);
}
