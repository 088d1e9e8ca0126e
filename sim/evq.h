/* evq: the simulator's event queue — a binary min-heap ordered by (time, priority, sequence).
 * The sequence number is assigned at push, so the order of events is total and reproducible:
 * two runs with the same inputs pop the same events in the same order.
 *
 * Times are int64 nanoseconds of virtual time. The payload is four ints the caller defines.
 */
#ifndef POSEIDON_EVQ_H
#define POSEIDON_EVQ_H

#include <stdint.h>

typedef struct {
    int64_t t_ns;
    uint64_t seq;
    int32_t prio;   /* smaller first at equal time */
    int32_t type;
    int32_t a, b, c, d;
} event_t;

typedef struct evq evq_t;

evq_t *evq_new(void);
void evq_destroy(evq_t **qp);

/* Push an event; its seq is set here. */
void evq_push(evq_t *q, int64_t t_ns, int32_t prio, int32_t type, int32_t a, int32_t b, int32_t c,
              int32_t d);

/* Pop the first event into *e; returns 0 when the queue is empty. */
int evq_pop(evq_t *q, event_t *e);

/* Time of the first event, or INT64_MAX when empty. */
int64_t evq_peek_time(const evq_t *q);

int64_t evq_size(const evq_t *q);
uint64_t evq_pushed(const evq_t *q); /* events pushed so far */

#endif
