/* slice: a message too large to go in one piece, cut into slices that travel as MSG_SLICE
 * messages and are put back together by the receiver, so that a sender can put the slices
 * of a more urgent message between those of a long one (runtime/transport/sendq.h).
 *
 * A slice is a message whose header is the whole message's (layer, shard, iteration,
 * offset, stamp) with type MSG_SLICE and length = SLICE_HEADER_BYTES + its piece; its
 * payload starts with the slice header (little-endian, packed by hand as msg.h's):
 *
 *   off size field
 *     0    4 magic    SLICE_MAGIC ("SLC1")
 *     4    2 type     the whole message's msg_type_t
 *     6    2 zero
 *     8    4 seq      the message's number among its sender's messages on the connection
 *    12    8 total    the whole payload's bytes
 *    20    8 at       where this piece starts in the whole payload
 *    28    4 crc      zlib crc32 of bytes 0..27
 *
 * then the piece. A connection delivers in order, so the pieces of one message arrive in
 * order (at = the bytes received so far), though the pieces of several messages may
 * interleave.
 *
 * Invariant of the reassembly: a slice is taken only if its header decodes, its type is a
 * known one other than MSG_SLICE, 0 < total <= max_total (slice_asm_new), its piece is not empty
 * and ends within total, and it continues exactly where its message stands (a first piece
 * at 0 opens a message; any other continues an open message of that connection and seq
 * with the same header). Anything else is refused, with the reason, and the message it
 * claimed to continue is dropped: a peer cannot make the receiver write out of bounds or
 * hold more than SLICE_MAX_OPEN partial messages per connection.
 */
#ifndef POSEIDON_SLICE_H
#define POSEIDON_SLICE_H

#include <stddef.h>
#include <stdint.h>

#include "runtime/transport/comm.h"

#define SLICE_MAGIC 0x31434C53u /* "SLC1" read as little-endian bytes */
#define SLICE_HEADER_BYTES 32
/* Partial messages one connection may have open at once: a sender interleaves a few
 * (one per priority it preempts with), never this many. */
#define SLICE_MAX_OPEN 64

typedef struct {
    uint16_t type;  /* the whole message's */
    uint32_t seq;
    uint64_t total; /* payload bytes of the whole message */
    uint64_t at;    /* this piece's start in it */
} slice_info_t;

void slice_encode(const slice_info_t *s, unsigned char out[SLICE_HEADER_BYTES]);
/* 0 and *s filled, or -1 with the reason in why: too short, bad magic or crc. */
int slice_decode(const void *buf, size_t bytes, slice_info_t *s, char *why, size_t why_len);

/* The messages being put back together, per connection (peer and routing id): whole
 * messages of at most max_total payload bytes (comm_max_payload()). It calls nothing of
 * comm's (comm.c keeps one for the comms that take slices, comm_set_order). */
typedef struct slice_asm slice_asm_t;
slice_asm_t *slice_asm_new(size_t max_total);
void slice_asm_destroy(slice_asm_t **ap);

/* Takes the MSG_SLICE message g (closes it). Returns 1 when it completed a message: whole
 * holds it, as it was sent (close it with comm_msg_close); 0 when the piece was kept; -1
 * when it was refused (why says why). */
int slice_asm_take(slice_asm_t *a, comm_msg_t *g, comm_msg_t *whole, char *why, size_t why_len);

#endif
