#include "runtime/transport/reject_log.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "core/log.h"

#define SLOTS 64

typedef struct {
    char source[128];
    int64_t last_ns;    /* when a line was last logged for it */
    uint64_t left_out;  /* refusals since then that were not logged */
} slot_t;

static slot_t s_slots[SLOTS];
static pthread_mutex_t s_lock = PTHREAD_MUTEX_INITIALIZER;

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

void reject_log(const char *source, const char *fmt, ...)
{
    int64_t now = now_ns(), interval = (int64_t)REJECT_LOG_INTERVAL_MS * 1000000;
    pthread_mutex_lock(&s_lock);
    slot_t *s = NULL, *oldest = &s_slots[0];
    for (int i = 0; i < SLOTS && !s; i++) {
        if (s_slots[i].source[0] && !strcmp(s_slots[i].source, source)) s = &s_slots[i];
        else if (s_slots[i].last_ns < oldest->last_ns) oldest = &s_slots[i];
    }
    uint64_t left_out = 0;
    if (s && now - s->last_ns < interval) {
        s->left_out++;
        pthread_mutex_unlock(&s_lock);
        return;
    }
    if (s) left_out = s->left_out;
    else {
        s = oldest;
        snprintf(s->source, sizeof s->source, "%s", source);
    }
    s->last_ns = now;
    s->left_out = 0;
    pthread_mutex_unlock(&s_lock);

    char text[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    if (left_out)
        log_warn("%s (and %llu more from %s in the last %d s, not logged)", text,
                 (unsigned long long)left_out, source, REJECT_LOG_INTERVAL_MS / 1000);
    else
        log_warn("%s", text);
}
