/* A stranger against a real secure job (`poseidon train --workers 2 --keys DIR`, LeNet,
 * hybrid, one PS block per tensor): knowing every public key and every port, it pushes NaN
 * gradients in rank 0's name for the first tensor (conv1's 800 weights, at offset 0) for
 * every iteration, and asks for them, at both PS shards, and sends BYE and heartbeats in
 * rank 1's name to the coordinator, with a CURVE key of its own and with no CURVE at all.
 * Nothing gets through: its pulls are never answered, the ZAP handler logs the refused key,
 * and the job ends with exactly the parameters of the same job undisturbed. (Against the
 * same job run --insecure, the pull is answered and the NaN pushes win: the test fails.) */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "runtime/transport/comm.h"
#include "runtime/transport/keyring.h"
#include "tests/conn_flood.h"
#include "test.h"

#define JOB_FLAGS                                                                           \
    "train --workers 2 --model models/lenet.net --data synthetic --synthetic-n 2048 "     \
    "--no-eval --batch 16 --iterations 160 --scheme hybrid --no-probe --job-out none "        \
    "--timeout-ms 30000 --kv-block-mb tensor"

/* The number after the last `key` on the first line of path that holds marker, or 0 (no such
 * line yet). */
static int number_after(const char *path, const char *marker, const char *key)
{
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    char line[1024];
    int v = 0;
    while (!v && fgets(line, sizeof line, f)) {
        char *m = strstr(line, marker), *at = NULL;
        for (char *k = m; k && (k = strstr(k, key)); k++) at = k;
        if (at) v = atoi(at + strlen(key));
    }
    fclose(f);
    return v;
}

/* The port after `marker` ("...tcp://127.0.0.1:PORT" or "master 127.0.0.1:PORT"), or 0. */
static int port_after(const char *path, const char *marker)
{
    return number_after(path, marker, ":");
}

static void *stranger_socket(int port, const char *server_pub, const keyring_t *own)
{
    void *d = zmq_socket(comm_context(), ZMQ_DEALER);
    REQUIRE(d);
    int linger = 0;
    zmq_setsockopt(d, ZMQ_LINGER, &linger, sizeof linger);
    zmq_setsockopt(d, ZMQ_ROUTING_ID, "ps9:0", 5); /* a channel of rank 0 that is not in use */
    if (own) {
        zmq_setsockopt(d, ZMQ_CURVE_SERVERKEY, server_pub, 40);
        zmq_setsockopt(d, ZMQ_CURVE_PUBLICKEY, own->pub[0], 40);
        zmq_setsockopt(d, ZMQ_CURVE_SECRETKEY, own->sec[0], 40);
    }
    char ep[64];
    snprintf(ep, sizeof ep, "tcp://127.0.0.1:%d", port);
    REQUIRE(zmq_connect(d, ep) == 0);
    return d;
}

/* Without waiting: a handshake the job refuses ends the stranger's session (a protocol
 * error), and a DEALER with no session left would block a send forever. */
static void send_msg(void *d, msg_header_t h, const void *data, size_t bytes)
{
    unsigned char w[MSG_HEADER_BYTES];
    h.length = bytes;
    msg_encode(&h, w);
    int sent = zmq_send(d, w, sizeof w, ZMQ_DONTWAIT | (bytes ? ZMQ_SNDMORE : 0));
    if (bytes && sent == (int)sizeof w) zmq_send(d, data, bytes, ZMQ_DONTWAIT);
}

static int files_equal(const char *a, const char *b)
{
    char out[256];
    return test_run(out, sizeof out, "cmp -s '%s' '%s'", a, b) == 0;
}

/* Runs `sh -c cmd` (a job that writes its log) in the background; its pid. */
static pid_t job_spawn(const char *cmd)
{
    pid_t job = fork();
    REQUIRE(job >= 0);
    if (job == 0) {
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    return job;
}

/* job_spawn, then up to 12 s for the log to name a port after each of the n strings of
 * `after` (ports[i]); the job is killed, and the test stops, if one never shows. */
static pid_t job_start(const char *cmd, const char *log, int n, const char *const *after,
                       int *ports)
{
    pid_t job = job_spawn(cmd);
    int found = 0;
    for (int i = 0; i < 600 && found < n; i++) {
        found = 0;
        for (int k = 0; k < n; k++) found += (ports[k] = port_after(log, after[k])) != 0;
        usleep(20000);
    }
    if (found < n) kill(job, SIGKILL);
    REQUIRE(found == n, "no endpoints in the job's log %s", log);
    return job;
}

TEST(job_refuses_strangers)
{
    const char *tmp = test_tmpdir(), *bin = test_build_dir();
    char err[256], keys[600], out[4096];
    keyring_t *k = keyring_generate(2, err, sizeof err);
    REQUIRE(k, "%s", err);
    snprintf(keys, sizeof keys, "%s/keys", tmp);
    REQUIRE(keyring_write(k, keys, err, sizeof err) == 0, "%s", err);

    int rc = test_run(out, sizeof out, "%s/poseidon " JOB_FLAGS " --keys %s --params-out %s/calm",
                      bin, keys, tmp);
    REQUIRE(rc == 0, "the undisturbed job failed (%d): %s", rc, out);

    char log[700], cmd[4096];
    snprintf(log, sizeof log, "%s/attacked.log", tmp);
    snprintf(cmd, sizeof cmd, "exec %s/poseidon " JOB_FLAGS " --keys %s --params-out %s/attacked >%s 2>&1",
             bin, keys, tmp, log);
    static const char *const after[3] = {"rank 0 endpoint: PS shard",
                                         "rank 1 endpoint: PS shard", "rank 0 of 2"};
    int ports[3];
    pid_t job = job_start(cmd, log, 3, after, ports);
    int shard0 = ports[0], shard1 = ports[1], coord_port = ports[2];

    keyring_t *own = keyring_generate(1, err, sizeof err);
    REQUIRE(own);
    enum { N_SHARD_SOCKS = 4 };
    void *socks[6] = {
        stranger_socket(shard0, k->pub[0], own), stranger_socket(shard0, NULL, NULL),
        stranger_socket(shard1, k->pub[1], own), stranger_socket(shard1, NULL, NULL),
        stranger_socket(coord_port, k->pub[0], own), stranger_socket(coord_port, NULL, NULL)};
    float nans[800];
    for (int i = 0; i < 800; i++) nans[i] = NAN;
    for (int s = 0; s < N_SHARD_SOCKS; s++) {
        send_msg(socks[s], (msg_header_t){.type = MSG_PS_PULL, .sender = 0, .shard = s / 2},
                 NULL, 0);
        for (int t = 0; t < 80; t++)
            send_msg(socks[s], (msg_header_t){.type = MSG_PS_PUSH, .sender = 0, .iteration = t,
                                              .shard = s / 2},
                     nans, sizeof nans);
    }
    for (int s = N_SHARD_SOCKS; s < 6; s++) {
        send_msg(socks[s], (msg_header_t){.type = MSG_HEARTBEAT, .sender = 1, .iteration = 1 << 20},
                 NULL, 0);
        send_msg(socks[s], (msg_header_t){.type = MSG_BYE, .sender = 1}, NULL, 0);
    }
    /* no answer to the pulls */
    zmq_pollitem_t items[N_SHARD_SOCKS];
    for (int s = 0; s < N_SHARD_SOCKS; s++) items[s] = (zmq_pollitem_t){socks[s], 0, ZMQ_POLLIN, 0};
    CHECK(zmq_poll(items, N_SHARD_SOCKS, 1000) == 0, "a stranger's pull was answered");
    int st = 0;
    CHECK(waitpid(job, &st, WNOHANG) == 0, "the job ended before the stranger was done: the "
                                           "attack proved nothing");
    REQUIRE(waitpid(job, &st, 0) == job);
    char tail[4096];
    test_run(tail, sizeof tail, "tail -5 %s", log);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the attacked job failed: %s", tail);
    test_run(out, sizeof out, "grep -c 'refused a connection from 127.0.0.1' %s", log);
    CHECK(atoi(out) >= 1, "the ZAP handler logged no refused key: %s", tail);
    for (int r = 0; r < 2; r++) {
        char a[700], b[700];
        snprintf(a, sizeof a, "%s/calm.%d", tmp, r);
        snprintf(b, sizeof b, "%s/attacked.%d", tmp, r);
        CHECK(files_equal(a, b), "rank %d's parameters differ from the undisturbed job's", r);
    }
    for (int s = 0; s < 6; s++) zmq_close(socks[s]);
    keyring_destroy(&own);
    keyring_destroy(&k);
}

/* Under fp16 the probe's socket takes every worker's loss-scaling votes. A stranger of an
 * --insecure job (which may speak as any rank) sends rank 0 votes in rank 0's own name, bad
 * ones for every iteration, and rank 1 votes in rank 0's name for iterations far ahead, of
 * two bytes, and of a byte that is neither 0 nor 1: each is refused with a log, no step is
 * skipped, and the job ends with the parameters of the same job undisturbed. */
TEST(job_refuses_a_strangers_loss_scaling_votes)
{
    const char *tmp = test_tmpdir(), *bin = test_build_dir();
    char out[4096], log[700], cmd[4096];
#define VOTE_JOB JOB_FLAGS " --insecure --set precision=fp16 --set wire_precision=fp16 " \
                           "--set loss_scale_init=64"
    int rc = test_run(out, sizeof out, "%s/poseidon " VOTE_JOB " --params-out %s/calm", bin,
                      tmp);
    REQUIRE(rc == 0, "the undisturbed job failed (%d): %s", rc, out);
    snprintf(log, sizeof log, "%s/voted.log", tmp);
    snprintf(cmd, sizeof cmd, "exec %s/poseidon " VOTE_JOB " --params-out %s/voted >%s 2>&1",
             bin, tmp, log);
    static const char *const after[2] = {"rank 0 endpoint: loss-scaling votes",
                                         "rank 1 endpoint: loss-scaling votes"};
    int ports[2];
    pid_t job = job_start(cmd, log, 2, after, ports);
    int v0 = ports[0], v1 = ports[1];
    void *to0 = stranger_socket(v0, NULL, NULL), *to1 = stranger_socket(v1, NULL, NULL);
    /* 40 rounds, 20 ms apart, so that the iterations in flight meanwhile get some */
    static const unsigned char bad = 1, two[2] = {0, 0}, seven = 7;
    for (int round = 0; round < 40; round++) {
        for (int t = 0; t < 80; t++) {
            msg_header_t h = {.type = MSG_LS_VOTE, .sender = 0, .layer = -1, .iteration = t};
            send_msg(to0, h, &bad, 1);
            h.iteration = 1000 + t;
            send_msg(to1, h, &bad, 1);
            h.iteration = t;
            send_msg(to1, h, two, 2);
            send_msg(to1, h, &seven, 1);
        }
        usleep(20000);
    }
    int st = 0;
    CHECK(waitpid(job, &st, WNOHANG) == 0, "the job ended before the stranger was done");
    REQUIRE(waitpid(job, &st, 0) == job);
    char tail[4096];
    test_run(tail, sizeof tail, "tail -5 %s", log);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the job failed: %s", tail);
    static const char *const why[] = {"not from another rank of the job",
                                      "iteration not in flight", "malformed"};
    for (int i = 0; i < 3; i++) {
        test_run(out, sizeof out, "grep -c 'refused LS_VOTE.*%s' %s", why[i], log);
        CHECK(atoi(out) >= 1, "no vote refused as '%s': %s", why[i], tail);
    }
    test_run(out, sizeof out, "grep -c 'step skipped' %s", log);
    CHECK(atoi(out) == 0, "a stranger's vote skipped a step");
    for (int r = 0; r < 2; r++) {
        char a[700], b[700];
        snprintf(a, sizeof a, "%s/calm.%d", tmp, r);
        snprintf(b, sizeof b, "%s/voted.%d", tmp, r);
        CHECK(files_equal(a, b), "rank %d's parameters differ from the undisturbed job's", r);
    }
    zmq_close(to0);
    zmq_close(to1);
#undef VOTE_JOB
}

/* The pid after "pid " on the first line of path that holds marker, or 0. */
static int pid_after(const char *path, const char *marker)
{
    return number_after(path, marker, "pid ");
}

/* The n-th integer after marker on its line in path (0: the first), or -1. */
static int int_after(const char *path, const char *marker, int nth)
{
    char out[1024];
    if (test_run(out, sizeof out, "grep -m1 -o '%s.*' '%s'", marker, path) != 0) return -1;
    const char *p = out + strlen(marker);
    for (int i = 0; *p; p++) {
        if (*p < '0' || *p > '9') continue;
        if (i++ == nth) return atoi(p);
        while (p[1] >= '0' && p[1] <= '9') p++;
    }
    return -1;
}

/* Open file descriptors of process pid, or -1. */
static int fd_count(int pid)
{
    char out[64];
    if (test_run(out, sizeof out, "ls /proc/%d/fd 2>/dev/null | wc -l", pid) != 0) return -1;
    return atoi(out);
}

/* VmRSS of pid in kB, or -1. */
static int rss_kb(int pid)
{
    char out[128];
    if (test_run(out, sizeof out, "awk '/^VmRSS/ {print $2}' /proc/%d/status 2>/dev/null", pid))
        return -1;
    return atoi(out);
}

#define FLOOD_FLAGS                                                                         \
    "train --workers 2 --model models/lenet.net --data synthetic --synthetic-n 2048 "     \
    "--no-eval --batch 16 --iterations 160 --report-every 8 --scheme hybrid --no-probe "     \
    "--job-out none --timeout-ms 30000 --kv-block-mb tensor"

TEST(job_caps_a_strangers_connections)
{
    /* a stranger on another host (127.0.0.2) opens 200 TCP connections to the coordinator
     * and 200 to rank 0's PS shard while the job trains: rank 0 keeps at most the cap of
     * each open, so its descriptors grow by no more than the two caps; it logs the refusal;
     * and the job ends with the parameters of the same job undisturbed */
    enum { N = 200 };
    const char *tmp = test_tmpdir(), *bin = test_build_dir();
    char out[4096], log[700], cmd[4096];
    int rc = test_run(out, sizeof out, "%s/poseidon " FLOOD_FLAGS " --params-out %s/calm", bin,
                      tmp);
    REQUIRE(rc == 0, "the undisturbed job failed (%d): %s", rc, out);

    snprintf(log, sizeof log, "%s/flooded.log", tmp);
    snprintf(cmd, sizeof cmd, "exec %s/poseidon " FLOOD_FLAGS " --params-out %s/flooded >%s 2>&1",
             bin, tmp, log);
    pid_t job = job_spawn(cmd);
    /* rank 0's pid and ports, once it trains (its first row: every connection of the job
     * is made) */
    int shard0 = 0, coord_port = 0, rank0 = 0, trains = 0;
    for (int i = 0; i < 1500 && !trains; i++) {
        shard0 = port_after(log, "rank 0 endpoint: PS shard");
        coord_port = port_after(log, "rank 0 of 2");
        rank0 = pid_after(log, "rank 0 of 2");
        trains = shard0 && coord_port && rank0 &&
                 test_run(out, sizeof out, "grep -q '^[0-9.]*,8,' '%s'", log) == 0;
        usleep(20000);
    }
    if (!trains) kill(job, SIGKILL);
    REQUIRE(trains, "the job did not start training");
    int cap_coord = int_after(log, "per host at most ", 0);
    int cap_shard = int_after(log, "per host at most ", 1);
    REQUIRE(cap_coord > 0 && cap_shard > 0 && cap_coord + cap_shard < N,
            "caps %d and %d in the log", cap_coord, cap_shard);
    int fds0 = fd_count(rank0), rss0 = rss_kb(rank0);
    int at_coord[N], at_shard[N];
    int made = conn_flood_open("127.0.0.2", coord_port, at_coord, N);
    made += conn_flood_open("127.0.0.2", shard0, at_shard, N);
    if (made != 2 * N) {
        conn_flood_close(at_coord, N);
        conn_flood_close(at_shard, N);
        REQUIRE(waitpid(job, NULL, 0) == job);
        SKIP("cannot connect from 127.0.0.2 to 127.0.0.1 (%d of %d connections)", made, 2 * N);
    }
    /* until the refusals are done: each connection is ended once its acceptance is seen,
     * and its descriptor closed once ZeroMQ has seen the end (on a busy host, a while
     * later); the job's own descriptors may move a little meanwhile (files, reconnections) */
    int bound = fds0 + cap_coord + cap_shard + 16;
    int alive_coord = N, alive_shard = N, fds = fd_count(rank0), peak = fds, rss_max = 0;
    for (int i = 0; i < 500 && (alive_coord > cap_coord || alive_shard > cap_shard ||
                                fds > bound); i++) {
        usleep(20000);
        alive_coord = conn_flood_alive(at_coord, N);
        alive_shard = conn_flood_alive(at_shard, N);
        fds = fd_count(rank0);
        if (fds > peak) peak = fds;
    }
    int steady = 0; /* and a while after: the bound holds */
    for (int i = 0; i < 10; i++) {
        int f = fd_count(rank0), r = rss_kb(rank0);
        if (f > steady) steady = f;
        if (r > rss_max) rss_max = r;
        usleep(50000);
    }
    alive_coord = conn_flood_alive(at_coord, N);
    alive_shard = conn_flood_alive(at_shard, N);
    int st = 0;
    CHECK(waitpid(job, &st, WNOHANG) == 0, "the job ended before the stranger was done: the "
                                           "attack proved nothing");
    printf("rank 0: %d descriptors before, %d at the peak, at most %d after the refusals; VmRSS "
           "%d kB before, at most %d kB after; the stranger's open connections: %d of %d to "
           "the coordinator (cap %d), %d of %d to the shard (cap %d)\n", fds0, peak, steady,
           rss0, rss_max, alive_coord, N, cap_coord, alive_shard, N, cap_shard);
    CHECK(alive_coord <= cap_coord && alive_shard <= cap_shard,
          "%d and %d connections stay open, the caps are %d and %d", alive_coord, alive_shard,
          cap_coord, cap_shard);
    CHECK(steady <= bound, "rank 0 went from %d to %d descriptors (bound %d)", fds0, steady,
          bound);
    conn_flood_close(at_coord, N);
    conn_flood_close(at_shard, N);
    REQUIRE(waitpid(job, &st, 0) == job);
    char tail[4096];
    test_run(tail, sizeof tail, "tail -5 %s", log);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the flooded job failed: %s", tail);
    test_run(out, sizeof out, "grep -c 'refused a connection from 127.0.0.2: .* at most' %s",
             log);
    /* one line per host per interval (runtime/transport/reject_log.h), whichever socket it was */
    CHECK(atoi(out) >= 1, "no refusal logged: %s", tail);
    for (int r = 0; r < 2; r++) {
        char a[700], b[700];
        snprintf(a, sizeof a, "%s/calm.%d", tmp, r);
        snprintf(b, sizeof b, "%s/flooded.%d", tmp, r);
        CHECK(files_equal(a, b), "rank %d's parameters differ from the undisturbed job's", r);
    }
}

/* The same job run --insecure (no keys, loopback) says at start that any local process can
 * join it; a local process that floods a PS shard and the coordinator with messages they
 * refuse (pushes of blocks that do not exist, messages the coordinator does not take) gets a
 * few lines in the log (reject_log: one per source per 10 s, the next one counting those
 * left out), not one line per message. */
TEST(insecure_job_warns_and_rate_limits_its_refusals)
{
    const char *tmp = test_tmpdir(), *bin = test_build_dir();
    char log[700], cmd[4096], out[4096];
    snprintf(log, sizeof log, "%s/insecure.log", tmp);
    snprintf(cmd, sizeof cmd, "exec %s/poseidon " JOB_FLAGS " --insecure --iterations 1500 "
             "--model models/mlp.net >%s 2>&1", bin, log);
    static const char *const after[2] = {"rank 0 endpoint: PS shard", "rank 0 of 2"};
    int ports[2];
    pid_t job = job_start(cmd, log, 2, after, ports);
    int shard0 = ports[0], coord_port = ports[1];
    void *shard = stranger_socket(shard0, NULL, NULL), *coord = stranger_socket(coord_port, NULL, NULL);
    float junk[4] = {0};
    enum { N = 300 };
    for (int i = 0; i < N; i++) {
        send_msg(shard, (msg_header_t){.type = MSG_PS_PUSH, .sender = 0, .iteration = 1,
                                       .offset = 1ULL << 40},
                 junk, sizeof junk);
        send_msg(coord, (msg_header_t){.type = MSG_PS_PUSH, .sender = 0}, junk, sizeof junk);
    }
    /* the job must still be running once both have logged a refusal and a while after, so
     * that the whole flood was read; 1,500 iterations last seconds even where training is
     * fast (200 took 0.3 s) */
    int st = 0, seen = 0;
    for (int i = 0; i < 200 && !seen && waitpid(job, &st, WNOHANG) == 0; i++) {
        usleep(50000);
        test_run(out, sizeof out, "grep -c 'ps shard 0: rejected\\|coordinator: unexpected' %s",
                 log);
        seen = atoi(out) >= 2;
    }
    usleep(300000);
    CHECK(waitpid(job, &st, WNOHANG) == 0, "the job ended before the flood was read");
    REQUIRE(waitpid(job, &st, 0) == job);
    char tail[4096];
    test_run(tail, sizeof tail, "tail -5 %s", log);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the job failed: %s", tail);
    test_run(out, sizeof out, "grep -c 'any local process can join' %s", log);
    CHECK(atoi(out) == 1, "no warning that any local process can join: %s", out);
    test_run(out, sizeof out, "grep -c 'ps shard 0: rejected' %s", log);
    CHECK(atoi(out) >= 1 && atoi(out) <= 3, "%d lines of the shard's refusals", atoi(out));
    test_run(out, sizeof out, "grep -c 'coordinator: unexpected' %s", log);
    CHECK(atoi(out) >= 1 && atoi(out) <= 3, "%d lines of the coordinator's refusals", atoi(out));
    zmq_close(shard);
    zmq_close(coord);
}
