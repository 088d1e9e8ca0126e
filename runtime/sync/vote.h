/* vote: precision = fp16's loss-scaling votes (core/plan.h, "Loss scaling"): each worker tells
 * every other whether its own gradients of an iteration hold an inf or a NaN, in one
 * MSG_LS_VOTE (runtime/transport/msg.h) whose payload is one byte, 0 or 1. What arrives from
 * the network is judged here before it counts.
 */
#ifndef POSEIDON_VOTE_H
#define POSEIDON_VOTE_H

#include <stddef.h>
#include <stdint.h>

#include "runtime/transport/msg.h"

/* A vote with header h from `peer` (the transport's rank of the sender) and `bytes` of
 * payload at data (NULL: none), received by `rank` of `world` while it collects the votes of
 * iteration t: 0 a vote of t, 1 one of t + 1 (a peer may be one iteration ahead, never more),
 * -1 refused with the reason in *why (not from another rank of the job, malformed, or of an
 * iteration not in flight). *vote: 0 or 1 when not refused. */
int vote_judge(int world, int rank, int64_t t, const msg_header_t *h, int peer,
               const void *data, size_t bytes, int *vote, const char **why);

#endif
