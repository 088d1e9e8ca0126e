/* coord: rendezvous, barriers and blob broadcast across 3 forked processes; a rank that
 * never joins is reported (with its rank) and every process exits non-zero, bounded. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "runtime/transport/coord.h"
#include "runtime/transport/launch.h"
#include "test.h"

static int rank_main(int rank, void *arg)
{
    int absent = arg ? *(int *)arg : -1;
    if (rank == absent) {
        sleep(30); /* never joins; the launcher kills it */
        return 0;
    }
    launch_env_t env;
    char err[256];
    if (launch_env_detect(&env, err, sizeof err)) return 10;
    coord_config_t cfg = {.heartbeat_ms = 100, .dead_ms = 1000, .join_ms = 1500};
    coord_server_t *s = NULL;
    if (rank == 0 && !(s = coord_server_new(&env, cfg))) return 11;
    coord_client_t *c = coord_client_new(&env, cfg, NULL);
    if (!c) return 12;
    char line[64];
    snprintf(line, sizeof line, "endpoint-of-%d", rank);
    char **t = coord_client_rendezvous(c, line);
    if (!t) return 13;
    for (int q = 0; q < env.world; q++) {
        snprintf(line, sizeof line, "endpoint-of-%d", q);
        if (strcmp(t[q], line)) return 14;
    }
    for (int b = 0; b < 3; b++)
        if (coord_client_barrier(c, b, 2000)) return 15;
    char plan[] = "a plan, as bytes\0with a zero inside";
    void *data = plan;
    size_t n = sizeof plan;
    if (coord_client_bcast(c, 0, 7, &data, &n, 2000)) return 16;
    if (n != sizeof plan || memcmp(data, plan, n)) return 17;
    if (rank) free(data);
    coord_client_destroy(&c);
    coord_server_destroy(&s);
    return 0;
}

TEST(coord_rendezvous_barrier_bcast)
{
    CHECK_EQ_I64(launch_local(3, launch_free_port(), 2000, rank_main, NULL), 0);
}

TEST(coord_missing_rank_aborts_everyone)
{
    int absent = 2;
    int64_t t0 = (int64_t)time(NULL);
    int rc = launch_local(3, launch_free_port(), 2000, rank_main, &absent);
    CHECK(rc == COORD_EXIT_ABORT || rc == 13, "rc %d", rc);
    CHECK((int64_t)time(NULL) - t0 < 10);
}
