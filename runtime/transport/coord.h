/* coord: the coordinator (a thread of rank 0) and its client (every rank, rank 0 too).
 *
 * What it does: rendezvous (each rank registers one line of text, e.g. its endpoints, and
 * gets every rank's line), barriers, broadcast of an opaque blob from a root (the plan and
 * the config travel this way), and health.
 *
 * Health: each client has a heartbeat thread with its own socket ("hb:<rank>"; the main
 * channel is "coord:<rank>") that reports every heartbeat_ms where its rank stands
 * (iteration, layer, and what it waits on, set with coord_client_progress). The coordinator
 * answers each beat. A rank is dead when the connection its beats come on closes and no
 * beat comes on a new one within 2 x heartbeat_ms + 0.5 s (its process ended: the kernel
 * closes its sockets at once), or when it is silent for dead_ms (a host that vanished), or
 * when it never joins within join_ms. The coordinator then sends ABORT naming that node, its
 * rank and the iteration/layer it last reported to every other rank; each prints one line
 * naming its own node, the iteration and layer it was waiting on, and the dead node, and
 * exits with COORD_EXIT_ABORT. A client whose connection to the coordinator closes, or
 * whose beats go unanswered for dead_ms, concludes the coordinator (node of rank 0) is gone
 * and exits the same way. So a process that dies ends the whole job within about a second,
 * a stopped one only after dead_ms, never a hang.
 *
 * Silent is named: every acknowledgement tells a rank which other rank the coordinator has
 * heard nothing from for over 4 beats, and a rank whose own wait times out leads its last
 * line with it (coord_client_fail). A process that did not run for over 1 s (stopped or
 * starved) does not count that time against the others: the coordinator (rank 0) says it
 * was stopped itself, reads the beats that waited meanwhile and moves the ranks' clocks on
 * by the gap; a client does the same with its coordinator's answers.
 *
 * Slow is not dead: a rank that beats is alive however long it waits. When a live rank's
 * reported position (iteration, layer, what it waits on) has not moved for stall_ms, the
 * coordinator logs a stall report naming the rank, its node, what it waits on and since
 * when, and repeats it every stall_ms while the stall lasts; the job goes on.
 *
 * Threads: the client's main-channel calls (rendezvous, barrier, bcast, finish) belong to
 * one thread; coord_client_progress may be called from any thread.
 */
#ifndef POSEIDON_COORD_H
#define POSEIDON_COORD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "runtime/transport/launch.h"

#define COORD_EXIT_ABORT 3

typedef struct {
    int heartbeat_ms; /* interval of beats; default 250 */
    int dead_ms;      /* silence after which a rank counts as dead; default 60000: a
                         stopped or overloaded process is slow, not dead (the longest gap
                         between beats seen on a loaded 2-core machine was under 1 s); a
                         process that ends is found by its closed connection within
                         2 x heartbeat_ms + 0.5 s */
    int join_ms;      /* every rank must have joined by then; default 30000 */
    int stall_ms;     /* a live rank whose position has not moved for this long is reported
                         (once per interval); default 30000 (rank 0 evaluating the test
                         set holds every rank up to ~20 s on a loaded machine, a
                         planned pause, not a stall); 0: no reports */
} coord_config_t;

/* The defaults above; POSEIDON_HEARTBEAT_MS / POSEIDON_DEAD_MS / POSEIDON_STALL_MS override
 * them. */
coord_config_t coord_config_default(void);

typedef struct coord_server coord_server_t;
typedef struct coord_client coord_client_t;

/* Starts the coordinator thread bound on every address at env->master_port. NULL (logged) if the
 * port cannot be bound. */
coord_server_t *coord_server_new(const launch_env_t *env, coord_config_t cfg);
/* Waits (up to dead_ms) for every rank's goodbye, then stops the thread. */
void coord_server_destroy(coord_server_t **sp);

/* Connects to the coordinator at env's master and starts the heartbeat thread. node: how
 * this rank is named in messages (NULL: "hostname/address"). */
coord_client_t *coord_client_new(const launch_env_t *env, coord_config_t cfg, const char *node);
/* Says goodbye (after a final barrier) and stops the heartbeat thread. */
void coord_client_destroy(coord_client_t **cp);

const char *coord_client_node(const coord_client_t *c);

/* Registers line (no newline) and waits up to join_ms for every rank's. Returns an array
 * of world strings owned by the client (valid until destroy), or NULL on timeout (logged). */
char **coord_client_rendezvous(coord_client_t *c, const char *line);

/* Waits until every rank reached barrier id (ids increase by one per barrier). 0 or -1
 * after timeout_ms. */
int coord_client_barrier(coord_client_t *c, int64_t id, int timeout_ms);

/* The root passes (*data, *bytes); the others get a malloc'd copy (theirs to free). id tells
 * broadcasts apart. 0, or -1 after timeout_ms. */
int coord_client_bcast(coord_client_t *c, int root, int64_t id, void **data, size_t *bytes,
                       int timeout_ms);

/* Stop requests (a signal to any rank): the request travels with this rank's heartbeats,
 * the coordinator repeats it in every acknowledgement, so within a beat or two every rank's
 * coord_client_stop_requested() says so. What to do with it is the caller's (the trainer
 * stops after its next checkpoint). */
void coord_client_request_stop(coord_client_t *c);
bool coord_client_stop_requested(coord_client_t *c);

/* Where this rank stands, for heartbeats and for abort messages. what: e.g. "PS pull of
 * layer 3 from shard 2" (copied; NULL for none). */
void coord_client_progress(coord_client_t *c, int64_t iteration, int layer, const char *what);

/* Where this rank's last line (the abort it saw or made, below) is also appended, as "rank
 * R<TAB>line": a restart reads why the run before ended (runtime/exec/restart.h). NULL or
 * "": nowhere. */
void coord_client_last_words(coord_client_t *c, const char *path);

/* Prints "poseidon: node N (rank r): iteration I, layer L, waiting on W: <msg>" and exits
 * with COORD_EXIT_ABORT: for a timeout the caller saw itself. */
_Noreturn void coord_client_fail(coord_client_t *c, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

#endif
