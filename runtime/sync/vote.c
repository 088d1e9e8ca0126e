#include "runtime/sync/vote.h"

int vote_judge(int world, int rank, int64_t t, const msg_header_t *h, int peer,
               const void *data, size_t bytes, int *vote, const char **why)
{
    const unsigned char *b = data;
    *why = NULL;
    if (h->type != MSG_LS_VOTE) *why = "not a vote";
    else if (peer < 0 || peer >= world || peer == rank) *why = "not from another rank of the job";
    else if (h->length != 1 || bytes != 1 || !b || b[0] > 1)
        *why = "malformed (one byte, 0 or 1, expected)";
    else if (h->iteration != t && h->iteration != t + 1) *why = "iteration not in flight";
    if (*why) return -1;
    *vote = b[0];
    return h->iteration == t ? 0 : 1;
}
