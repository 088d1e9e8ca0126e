/* rates: the rates and remaining bytes of the network's entities (sim/net.c), held per level
 * of the rate computation instead of per entity.
 *
 * Max-min sharing couples every flow of a bottleneck: when one flow ends, all the others that
 * saturated at the same resource (and those above it) get a new rate. Kept per entity, each
 * new rate costs a drain of the entity's bytes, a division and a move in a heap of finish
 * times, and at thousands of nodes thousands of entities change rate at every event. Here
 * the entities that froze at one level of a computation form a group with one rate and one
 * clock: the bytes each of its flows moved since the group began. A member keeps the clock
 * at which it joined and its bytes then; its bytes now follow from the clock. A new rate for
 * the level is one change to the group, whatever its size, and each group keeps its members
 * in a heap by the clock at which they finish, so the earliest finish is the earliest of the
 * groups' first members.
 *
 * A computation notes the level each entity froze at (rates_note), then rates_apply gives
 * each level a group: the group most of whose noted members froze at that level, given the
 * level's rate, or a new one; an entity noted at another level than its group's moves
 * (its bytes drained to now, into the level's group). Where levels keep their members, as
 * between most events, a computation changes one rate per level and moves no entity.
 *
 * Finish times are whole nanoseconds: a member that joined at t with b bytes at rate x ends
 * at t + llround(b / x * 1e9) unless the group's rate changes first; after changes it ends
 * within half a nanosecond (plus floating-point rounding) of the instant its bytes drain at
 * the rates it had. A group whose rate stays as it was is not touched. Members are slots
 * (0 .. capacity), the caller's indices.
 */
#ifndef POSEIDON_RATES_H
#define POSEIDON_RATES_H

#include <stddef.h>
#include <stdint.h>

typedef struct rates rates_t;

rates_t *rates_new(void);
void rates_destroy(rates_t **rp);

/* Room for members 0 .. cap-1. */
void rates_reserve(rates_t *r, int64_t cap);

/* Member i starts with bytes to move and no rate yet. */
void rates_start(rates_t *r, int64_t i, double bytes);

/* Member j (new) takes i's remaining bytes and rate: it joins i's group where i has one. */
void rates_copy(rates_t *r, int64_t j, int64_t i);

/* Member i is gone (finished). */
void rates_drop(rates_t *r, int64_t i);

/* Member i's rate (0: none yet), its bytes left at now, its finish time (INT64_MAX: none). */
double rates_rate(const rates_t *r, int64_t i);
double rates_left(const rates_t *r, int64_t i, int64_t now_ns);
int64_t rates_fin(const rates_t *r, int64_t i);

/* The earliest finish time of any member, INT64_MAX when none. */
int64_t rates_next(const rates_t *r);

/* A member whose finish time is at or before now, taken out of its group (it has no rate
 * after); -1 when none. */
int64_t rates_due(rates_t *r, int64_t now_ns);

/* One computation: level L's rate is x (levels of earlier computations that it keeps are
 * not given again); member i froze at level L; then rates_apply at the computation's time. */
void rates_level(rates_t *r, int32_t level, double x);
void rates_note(rates_t *r, int64_t i, int32_t level);
/* rates_note of ms[0..k) at level L, in that order (one call for a level's members). */
void rates_note_many(rates_t *r, const int64_t *ms, int64_t k, int32_t level);
void rates_apply(rates_t *r, int64_t now_ns);

/* Test aid: every group's heap, every member's place and finish time, the heap of groups.
 * live[i] != 0 for the members in use, of n; rated[i] != 0 for those that must have a rate.
 * Returns 0, or -1 with the first fault in err. */
int rates_check(const rates_t *r, const char *live, const char *rated, int64_t n, char *err,
                size_t errlen);

/* Groups in use, and members moved from one group to another so far (for tests). */
int64_t rates_groups(const rates_t *r);
int64_t rates_moves(const rates_t *r);

#endif
