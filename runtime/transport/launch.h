/* launch: who am I in the job (rank, world size, master address) and the local launcher.
 *
 * Sources, tried in this order; the first whose rank variable is set wins, and any other
 * source that is also set must agree with it (mpirun inside a Slurm allocation sets both):
 *   manual / torchrun  RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT
 *   Open MPI           OMPI_COMM_WORLD_RANK, OMPI_COMM_WORLD_SIZE, OMPI_COMM_WORLD_LOCAL_RANK
 *                      (OMPI_COMM_WORLD_LOCAL_SIZE == SIZE means one host: master 127.0.0.1)
 *   Slurm              SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID, master from MASTER_ADDR
 *                      or SLURM_LAUNCH_NODE_IPADDR
 *   none               a single process: rank 0 of 1 on 127.0.0.1
 * MASTER_ADDR is needed whenever the ranks span hosts; MASTER_PORT defaults to 29500
 * (torch.distributed's default, so an existing habit carries over).
 *
 * The local launcher forks N copies of this process with RANK etc. set (the default of
 * `poseidon train --workers N`). It must run before anything touches ZeroMQ (comm.h).
 * Each child prefixes its log lines with "[rank R] " (they share one terminal). Children
 * die with the launcher (PR_SET_PDEATHSIG); when one child fails, the others get
 * a grace period to report what they were waiting on, then are killed: it never hangs.
 */
#ifndef POSEIDON_LAUNCH_H
#define POSEIDON_LAUNCH_H

#include <stddef.h>

#define LAUNCH_DEFAULT_PORT 29500

typedef enum { LAUNCH_NONE, LAUNCH_MANUAL, LAUNCH_OMPI, LAUNCH_SLURM } launch_source_t;

typedef struct {
    int rank, world, local_rank;
    char master_addr[256];
    int master_port;
    launch_source_t source;
} launch_env_t;

/* Looks up a variable (getenv, or a table in tests); NULL if unset. */
typedef const char *(*launch_getenv_fn)(const char *name, void *arg);

/* Fills env from the variables get returns. 0, or -1 with the reason in err (naming the
 * variables that disagree or are malformed). */
int launch_env_read(launch_getenv_fn get, void *arg, launch_env_t *env, char *err,
                    size_t err_len);
/* The same from the process environment. */
int launch_env_detect(launch_env_t *env, char *err, size_t err_len);
const char *launch_source_name(launch_source_t s);

/* The address of this host that peers reach it by: the local address of the route to
 * master_addr ("127.0.0.1" for a loopback master). 0, or -1 if there is no route. */
int launch_local_addr(const char *master_addr, char *out, size_t out_len);

/* A TCP port free on every address right now, below the ephemeral range when the kernel
 * leaves room (outgoing connections cannot take it before it is bound), for a local job's
 * MASTER_PORT. */
int launch_free_port(void);

typedef int (*launch_child_fn)(int rank, void *arg);

/* Forks n children; child r gets RANK=r, WORLD_SIZE=n, LOCAL_RANK=r, MASTER_ADDR=127.0.0.1,
 * MASTER_PORT=port and runs fn(r, arg), exiting with its return value. Waits for all; if
 * one fails, the rest get grace_ms to finish, then SIGKILL. Returns 0 if every child
 * exited 0, else the first failing child's status (a signal as 128+sig), and logs which. */
int launch_local(int n, int port, int grace_ms, launch_child_fn fn, void *arg);
/* The same, with the first failure in words ("worker 1 killed by signal 9 (Killed)") in why
 * (empty when every child exited 0). */
int launch_local_why(int n, int port, int grace_ms, launch_child_fn fn, void *arg, char *why,
                     size_t why_len);

#endif
