/* msg: the fixed binary header carried as the first frame of every runtime message.
 *
 * Wire layout (56 bytes, little-endian, packed by hand byte by byte so that neither the
 * compiler's struct padding nor the host's byte order reaches the wire):
 *
 *   off size field
 *     0    4 magic      MSG_MAGIC ("PSDN")
 *     4    2 version    MSG_VERSION
 *     6    2 type       msg_type_t
 *     8    4 sender     rank of the sending process
 *    12    4 layer      layer index, or -1
 *    16    4 shard      PS shard, ring step, or peer: meaning depends on type
 *    20    4 crc        zlib crc32 of bytes 0..19 and 24..55 (the header without this field)
 *    24    8 iteration  signed; -1 for messages outside the training loop
 *    32    8 offset     float offset in the parameter arena (or in the reduced buffer)
 *    40    8 length     payload bytes that follow in the next frame (0: no payload frame)
 *    48    8 stamp_ns   signed; PS_VALUES: when the shard answered, on the job's trace clock
 *                       (runtime/sync/ps.h); 0: no stamp (every other type, or no shared clock)
 *
 * Version 2 added stamp_ns; a version 1 peer is refused (the job runs one build).
 *
 * Invariant: msg_decode accepts a buffer only if it is exactly MSG_HEADER_BYTES long, the
 * magic, version and crc match, the type is known, and the fields are self-consistent
 * (offset + length does not overflow; value payload types have an even length, whole values
 * of 2 or 4 bytes: fp32, or bf16 and fp16 on a half wire, core/precision.h; stamp_ns is
 * not negative). Any single corrupted byte is rejected (crc32 detects every burst of up to
 * 32 bits). The payload length is checked against the received frame by the receiver
 * (comm), not here.
 */
#ifndef POSEIDON_MSG_H
#define POSEIDON_MSG_H

#include <stddef.h>
#include <stdint.h>

#define MSG_MAGIC 0x4E445350u /* "PSDN" read as little-endian bytes */
#define MSG_VERSION 2
#define MSG_HEADER_BYTES 56
/* Largest payload accepted in one message: 1 GiB. A KV block is 4 MB by default
 * (Poseidon-TF); this bound only guards against a forged length. */
#define MSG_MAX_PAYLOAD_BYTES (1ull << 30)

typedef enum {
    MSG_NONE = 0,
    /* coordinator */
    MSG_REGISTER = 1, /* payload: text "host\nendpoint..." */
    MSG_PEERS,        /* payload: the table of every rank's registration */
    MSG_BARRIER,      /* iteration field: barrier id */
    MSG_BARRIER_OK,
    MSG_BLOB,         /* payload: opaque bytes from the root */
    MSG_HEARTBEAT,    /* iteration, layer: where the sender stands; payload: what it waits on */
    MSG_HEARTBEAT_ACK,
    MSG_ABORT,        /* payload: text naming the dead node */
    MSG_BYE,
    /* parameter server */
    MSG_PS_PUSH = 16, /* payload: gradient floats of one block */
    MSG_PS_PULL,      /* no payload: ask for a block's values for an iteration */
    MSG_PS_VALUES,    /* payload: parameter floats of one block */
    /* sufficient factors and all-reduce */
    MSG_SFB_U = 24,   /* payload: U (K x M) floats */
    MSG_SFB_V,        /* payload: V (K x N) floats */
    MSG_AR_REDUCE,    /* payload: floats of a reduce-scatter chunk; shard = ring step */
    MSG_AR_GATHER,    /* payload: floats of an all-gather chunk; shard = ring step */
    MSG_LS_VOTE,      /* payload: 1 byte, 1 if the sender's gradients of the iteration hold an
                         inf or a NaN, else 0 (precision = fp16's loss scaling) */
    MSG_TEST = 40,    /* payload: anything (tests, bandwidth probes) */
    MSG_SLICE,        /* payload: a slice header and a piece of a larger message
                         (runtime/transport/slice.h); the other fields are the message's */
} msg_type_t;

typedef struct {
    uint16_t type;      /* msg_type_t */
    uint32_t sender;    /* rank */
    int32_t layer;      /* -1: none */
    uint32_t shard;
    int64_t iteration;  /* -1: none */
    uint64_t offset;    /* floats */
    uint64_t length;    /* payload bytes */
    int64_t stamp_ns;   /* see the wire layout; 0: none */
} msg_header_t;

/* Fills out[MSG_HEADER_BYTES] with the wire form of h (magic, version and crc added). */
void msg_encode(const msg_header_t *h, unsigned char out[MSG_HEADER_BYTES]);

/* Parses and validates buf (bytes long). Returns 0 and fills *h, or -1 and writes the
 * reason into why (why may be NULL). */
int msg_decode(const void *buf, size_t bytes, msg_header_t *h, char *why, size_t why_len);

/* "PS_PUSH" etc.; "?" for an unknown value. */
const char *msg_type_name(int type);

/* true for the types whose payload is an array of values (floats, or halves on a half wire:
 * the receiver checks the exact length against its wire precision). */
int msg_type_is_float(int type);

#endif
