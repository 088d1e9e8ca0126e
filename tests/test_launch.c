/* launch: rank discovery from each launcher's environment, inconsistent environments
 * rejected with a clear reason, and the local launcher's exit status. */
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "runtime/transport/launch.h"
#include "test.h"

/* A fake environment: "NAME=value" strings, NULL-terminated. */
static const char *fake_get(const char *name, void *arg)
{
    size_t n = strlen(name);
    for (const char *const *e = arg; *e; e++)
        if (!strncmp(*e, name, n) && (*e)[n] == '=') return *e + n + 1;
    return NULL;
}

static int read_env(const char *const *vars, launch_env_t *env, char *err)
{
    return launch_env_read(fake_get, (void *)vars, env, err, 256);
}

TEST(launch_env_sources)
{
    launch_env_t e;
    char err[256] = "";
    const char *manual[] = {"RANK=3", "WORLD_SIZE=8", "LOCAL_RANK=1", "MASTER_ADDR=10.1.2.3",
                            "MASTER_PORT=1234", NULL};
    REQUIRE(read_env(manual, &e, err) == 0, "%s", err);
    CHECK(e.rank == 3 && e.world == 8 && e.local_rank == 1 && e.master_port == 1234);
    CHECK(!strcmp(e.master_addr, "10.1.2.3") && e.source == LAUNCH_MANUAL);
    const char *ompi[] = {"OMPI_COMM_WORLD_RANK=2", "OMPI_COMM_WORLD_SIZE=4",
                          "OMPI_COMM_WORLD_LOCAL_RANK=2", "OMPI_COMM_WORLD_LOCAL_SIZE=4", NULL};
    REQUIRE(read_env(ompi, &e, err) == 0, "%s", err);
    CHECK(e.rank == 2 && e.world == 4 && e.source == LAUNCH_OMPI);
    CHECK(!strcmp(e.master_addr, "127.0.0.1") && e.master_port == LAUNCH_DEFAULT_PORT);
    const char *slurm[] = {"SLURM_PROCID=5", "SLURM_NTASKS=6", "SLURM_LOCALID=1",
                           "SLURM_LAUNCH_NODE_IPADDR=192.168.7.1", NULL};
    REQUIRE(read_env(slurm, &e, err) == 0, "%s", err);
    CHECK(e.rank == 5 && e.world == 6 && e.local_rank == 1 && e.source == LAUNCH_SLURM);
    CHECK(!strcmp(e.master_addr, "192.168.7.1"));
    /* mpirun inside a Slurm allocation: both set, agreeing */
    const char *both[] = {"OMPI_COMM_WORLD_RANK=1", "OMPI_COMM_WORLD_SIZE=2",
                          "SLURM_PROCID=1", "SLURM_NTASKS=2", "MASTER_ADDR=h0", NULL};
    REQUIRE(read_env(both, &e, err) == 0, "%s", err);
    CHECK(e.source == LAUNCH_OMPI && !strcmp(e.master_addr, "h0"));
    const char *none[] = {NULL};
    REQUIRE(read_env(none, &e, err) == 0, "%s", err);
    CHECK(e.rank == 0 && e.world == 1 && e.source == LAUNCH_NONE);
}

TEST(launch_env_inconsistent_rejected)
{
    static const struct {
        const char *vars[6];
        const char *reason;
    } bad[] = {
        {{"RANK=4", "WORLD_SIZE=4", "MASTER_ADDR=a", NULL}, "RANK=4 is not below WORLD_SIZE=4"},
        {{"RANK=1", "MASTER_ADDR=a", NULL}, "WORLD_SIZE is not"},
        {{"WORLD_SIZE=2", NULL}, "RANK is not"},
        {{"RANK=x", "WORLD_SIZE=2", NULL}, "not a rank"},
        {{"RANK=0", "WORLD_SIZE=0", NULL}, "not a world size"},
        {{"RANK=1", "WORLD_SIZE=2", NULL}, "without MASTER_ADDR"},
        {{"RANK=1", "WORLD_SIZE=2", "MASTER_ADDR=a", "MASTER_PORT=70000", NULL}, "not a TCP port"},
        {{"RANK=1", "WORLD_SIZE=4", "OMPI_COMM_WORLD_RANK=2", "OMPI_COMM_WORLD_SIZE=4", "MASTER_ADDR=a", NULL}, "inconsistent"},
        {{"OMPI_COMM_WORLD_RANK=0", "OMPI_COMM_WORLD_SIZE=4", "OMPI_COMM_WORLD_LOCAL_SIZE=2", NULL}, "span hosts"},
        {{"SLURM_PROCID=0", "SLURM_NTASKS=2", NULL}, "without MASTER_ADDR"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        launch_env_t e;
        char err[256] = "";
        CHECK(read_env(bad[i].vars, &e, err) == -1, "case %zu accepted", i);
        CHECK(strstr(err, bad[i].reason) != NULL, "case %zu: '%s' lacks '%s'", i, err, bad[i].reason);
    }
}

static int child_ok(int rank, void *arg)
{
    (void)arg;
    launch_env_t e;
    char err[256];
    if (launch_env_detect(&e, err, sizeof err) != 0) return 10;
    return e.rank == rank && e.world == 3 && e.source == LAUNCH_MANUAL ? 0 : 11;
}

static int child_one_fails(int rank, void *arg)
{
    (void)arg;
    if (rank == 1) return 7;
    if (rank == 2) raise(SIGKILL);
    return 0;
}

static int child_hangs(int rank, void *arg)
{
    (void)arg;
    if (rank == 0) return 5;
    pause(); /* never returns: the launcher must kill it after the grace period */
    return 0;
}

TEST(launch_local_status)
{
    CHECK_EQ_I64(launch_local(3, launch_free_port(), 1000, child_ok, NULL), 0);
    int rc = launch_local(3, launch_free_port(), 1000, child_one_fails, NULL);
    CHECK(rc == 7 || rc == 128 + SIGKILL, "rc %d", rc);
    rc = launch_local(3, launch_free_port(), 300, child_hangs, NULL);
    CHECK_EQ_I64(rc, 5);
    char addr[64];
    REQUIRE(launch_local_addr("127.0.0.1", addr, sizeof addr) == 0);
    CHECK(!strcmp(addr, "127.0.0.1"), "%s", addr);
}
