/* comm with CURVE: a job's keyring on disk (written, read back, and every way a key file
 * can be wrong), strangers refused (no key, a key of no rank, a rank's key used to speak as
 * another rank), a rank's messages delivered, and frames above the job's size bound cut off. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runtime/transport/comm.h"
#include "runtime/transport/fabric_auth.h"
#include "runtime/transport/keyring.h"
#include "runtime/transport/zap.h"
#include "test.h"

static void write_text(const char *path, const char *text, mode_t mode)
{
    FILE *f = fopen(path, "w");
    REQUIRE(f);
    fputs(text, f);
    fclose(f);
    chmod(path, mode);
}

static char *read_text(const char *path)
{
    static char buf[4096];
    FILE *f = fopen(path, "r");
    REQUIRE(f);
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    return buf;
}

TEST(keyring_written_reads_back_and_bad_files_are_named)
{
    char err[512];
    keyring_t *k = keyring_generate(3, err, sizeof err);
    REQUIRE(k, "%s", err);
    char dir[600];
    snprintf(dir, sizeof dir, "%s/keys", test_tmpdir());
    REQUIRE(keyring_write(k, dir, err, sizeof err) == 0, "%s", err);
    CHECK(keyring_write(k, dir, err, sizeof err) != 0 && strstr(err, "never overwritten"),
          "keys overwritten: %s", err);
    for (int r = 0; r < 3; r++) {
        keyring_t *l = keyring_load(dir, r, 3, err, sizeof err);
        REQUIRE(l, "rank %d: %s", r, err);
        for (int q = 0; q < 3; q++) CHECK(!strcmp(l->pub[q], k->pub[q]));
        CHECK(!strcmp(l->sec[r], k->sec[r]));
        int next = (r + 1) % 3;
        CHECK(!l->sec[next][0], "another rank's secret loaded");
        uint8_t raw[32];
        REQUIRE(keyring_public(k, r, raw) == 0);
        CHECK_EQ_I64(keyring_rank_of(l, raw), r);
        keyring_destroy(&l);
    }
    uint8_t other[32] = {1, 2, 3};
    CHECK_EQ_I64(keyring_rank_of(k, other), -1);

    char path[700];
    keyring_t *l = keyring_load(dir, 0, 4, err, sizeof err);
    CHECK(!l && strstr(err, "public.keys:1") && strstr(err, "3 ranks"), "%s", err);
    snprintf(path, sizeof path, "%s/rank-1.secret", dir);
    chmod(path, 0644);
    l = keyring_load(dir, 1, 3, err, sizeof err);
    CHECK(!l && strstr(err, "rank-1.secret") && strstr(err, "chmod 600"), "%s", err);
    chmod(path, 0600);
    /* rank 1's file under rank 2's name */
    char moved[700];
    snprintf(moved, sizeof moved, "%s/rank-2.secret", dir);
    char saved2[512];
    snprintf(saved2, sizeof saved2, "%s", read_text(moved));
    write_text(moved, read_text(path), 0600);
    l = keyring_load(dir, 2, 3, err, sizeof err);
    CHECK(!l && strstr(err, "rank-2.secret:1") && strstr(err, "rank 1"), "%s", err);
    /* a secret that is not its public key's */
    char forged[512];
    snprintf(forged, sizeof forged, "poseidon-secret 1 rank 2\n%s %s\n", k->pub[2], k->sec[1]);
    write_text(moved, forged, 0600);
    l = keyring_load(dir, 2, 3, err, sizeof err);
    CHECK(!l && strstr(err, "rank-2.secret:2") && strstr(err, "does not belong"), "%s", err);
    /* a key pair of another job */
    keyring_t *other_job = keyring_generate(3, err, sizeof err);
    REQUIRE(other_job);
    snprintf(forged, sizeof forged, "poseidon-secret 1 rank 2\n%s %s\n", other_job->pub[2],
             other_job->sec[2]);
    write_text(moved, forged, 0600);
    l = keyring_load(dir, 2, 3, err, sizeof err);
    CHECK(!l && strstr(err, "another job"), "%s", err);
    write_text(moved, saved2, 0600);
    l = keyring_load(dir, 2, 3, err, sizeof err);
    CHECK(l, "restored: %s", err);
    keyring_destroy(&l);
    /* a malformed public key line, and a truncated list */
    snprintf(path, sizeof path, "%s/public.keys", dir);
    char pub[2048];
    snprintf(pub, sizeof pub, "poseidon-keys 1 ranks 3\n0 %s\n1 %.39s\n2 %s\n", k->pub[0],
             k->pub[1], k->pub[2]);
    write_text(path, pub, 0644);
    l = keyring_load(dir, 0, 3, err, sizeof err);
    CHECK(!l && strstr(err, "public.keys:3"), "%s", err);
    snprintf(pub, sizeof pub, "poseidon-keys 1 ranks 3\n0 %s\n1 %s\n", k->pub[0], k->pub[1]);
    write_text(path, pub, 0644);
    l = keyring_load(dir, 0, 3, err, sizeof err);
    CHECK(!l && strstr(err, "2 keys for 3 ranks"), "%s", err);
    write_text(path, "not keys at all\n", 0644);
    l = keyring_load(dir, 0, 3, err, sizeof err);
    CHECK(!l && strstr(err, "public.keys:1") && strstr(err, "keygen"), "%s", err);
    keyring_destroy(&other_job);
    keyring_destroy(&k);
}

TEST(keyring_refuses_files_and_directories_others_can_write)
{
    char err[512], dir[600], path[700], link[800], elsewhere[700];
    keyring_t *k = keyring_generate(2, err, sizeof err);
    REQUIRE(k, "%s", err);
    snprintf(dir, sizeof dir, "%s/strict", test_tmpdir());
    REQUIRE(keyring_write(k, dir, err, sizeof err) == 0, "%s", err);
    keyring_t *l = keyring_load(dir, 1, 2, err, sizeof err);
    CHECK(l, "keygen's own modes: %s", err);
    keyring_destroy(&l);
    /* a directory anyone can write: someone could swap the keys */
    chmod(dir, 0777);
    l = keyring_load(dir, 1, 2, err, sizeof err);
    CHECK(!l && strstr(err, dir) && strstr(err, "key directory") && strstr(err, "777"), "%s",
          err);
    chmod(dir, 0700);
    /* a world-writable public.keys */
    snprintf(path, sizeof path, "%s/public.keys", dir);
    chmod(path, 0666);
    l = keyring_load(dir, 1, 2, err, sizeof err);
    CHECK(!l && strstr(err, "public.keys") && strstr(err, "others may write"), "%s", err);
    chmod(path, 0644);
    /* a secret key that is a link: followed, and the file it leads to checked */
    snprintf(path, sizeof path, "%s/rank-1.secret", dir);
    snprintf(elsewhere, sizeof elsewhere, "%s/open", test_tmpdir());
    mkdir(elsewhere, 0777);
    chmod(elsewhere, 0777);
    snprintf(link, sizeof link, "%s/rank-1.secret", elsewhere);
    REQUIRE(rename(path, link) == 0);
    REQUIRE(symlink(link, path) == 0);
    l = keyring_load(dir, 1, 2, err, sizeof err);
    CHECK(!l && strstr(err, "rank-1.secret leads") && strstr(err, "key directory"), "%s",
          err);
    chmod(elsewhere, 0700);
    chmod(link, 0640);
    l = keyring_load(dir, 1, 2, err, sizeof err);
    CHECK(!l && strstr(err, "a link to") && strstr(err, "chmod 600"), "%s", err);
    chmod(link, 0600);
    l = keyring_load(dir, 1, 2, err, sizeof err);
    CHECK(l, "a link to a file only its owner can touch: %s", err);
    keyring_destroy(&l);
    /* a link to something that is not a file */
    unlink(path);
    REQUIRE(symlink(elsewhere, path) == 0);
    l = keyring_load(dir, 1, 2, err, sizeof err);
    CHECK(!l && strstr(err, "rank-1.secret") && strstr(err, "not a regular file"), "%s", err);
    keyring_destroy(&k);
}

/* A DEALER of the test's own making: CURVE client with the given key pair (NULL: no CURVE)
 * towards a server whose public key is server_pub, with routing id rid. */
static void *stranger(const char *endpoint, const char *rid, const keyring_t *keys, int key_rank,
                      const char *server_pub)
{
    void *d = zmq_socket(comm_context(), ZMQ_DEALER);
    REQUIRE(d);
    int linger = 0;
    zmq_setsockopt(d, ZMQ_LINGER, &linger, sizeof linger);
    zmq_setsockopt(d, ZMQ_ROUTING_ID, rid, strlen(rid));
    if (keys) {
        REQUIRE(zmq_setsockopt(d, ZMQ_CURVE_SERVERKEY, server_pub, 40) == 0);
        REQUIRE(zmq_setsockopt(d, ZMQ_CURVE_PUBLICKEY, keys->pub[key_rank], 40) == 0);
        REQUIRE(zmq_setsockopt(d, ZMQ_CURVE_SECRETKEY, keys->sec[key_rank], 40) == 0);
    }
    REQUIRE(zmq_connect(d, endpoint) == 0);
    return d;
}

/* Without waiting: a connection refused in its handshake ends the stranger's session (a
 * protocol error), and a DEALER with no session left would block a send forever. */
static void send_as(void *d, unsigned sender, const char *payload)
{
    unsigned char w[MSG_HEADER_BYTES];
    msg_header_t h = {.type = MSG_PS_PUSH, .sender = sender, .length = strlen(payload)};
    msg_encode(&h, w);
    if (zmq_send(d, w, sizeof w, ZMQ_SNDMORE | ZMQ_DONTWAIT) == (int)sizeof w)
        zmq_send(d, payload, strlen(payload), ZMQ_DONTWAIT);
}

/* Rank 0 (a, bound) and rank 1 (b, connected to it) of the process's security, each way one
 * message: the peer rank 1's key (or password) admitted, the reply back over the connection. */
static void rank1_talks_to_rank0(comm_t **ap, comm_t **bp)
{
    comm_t *a = comm_new("t", 0, 3, "tcp://127.0.0.1:*", 2000);
    comm_t *b = comm_new("t", 1, 3, NULL, 2000);
    REQUIRE(a && b);
    REQUIRE(comm_connect(b, 0, comm_endpoint(a)) == 0);
    REQUIRE(comm_send(b, 0, (msg_header_t){.type = MSG_TEST, .layer = 7}, "rank1", 5, NULL) == 0);
    comm_msg_t g;
    REQUIRE(comm_recv(a, NULL, &g, 5000) == 1);
    CHECK_EQ_I64(g.peer, 1);
    CHECK(!memcmp(comm_msg_data(&g), "rank1", 5));
    comm_msg_close(&g);
    REQUIRE(comm_send(a, 1, (msg_header_t){.type = MSG_TEST, .layer = 8}, "ok", 2, NULL) == 0);
    REQUIRE(comm_recv(b, NULL, &g, 5000) == 1);
    CHECK_EQ_I64(g.hdr.layer, 8);
    comm_msg_close(&g);
    *ap = a, *bp = b;
}

TEST(comm_curve_admits_the_job_and_no_one_else)
{
    char err[256];
    keyring_t *k = keyring_generate(3, err, sizeof err);
    REQUIRE(k, "%s", err);
    comm_set_keyring(k);
    comm_t *a, *b;
    rank1_talks_to_rank0(&a, &b);
    comm_msg_t g;

    /* strangers: no CURVE at all; CURVE with a key of another job; rank 2's key speaking
     * as rank 1 (routing id and header both say 1; each on a channel of its own, as a
     * routing id already connected is refused by the ROUTER anyway) */
    keyring_t *other = keyring_generate(1, err, sizeof err);
    REQUIRE(other);
    void *plain = stranger(comm_endpoint(a), "p:1", NULL, 0, NULL);
    void *foreign = stranger(comm_endpoint(a), "f:1", other, 0, k->pub[0]);
    void *impostor = stranger(comm_endpoint(a), "i:1", k, 2, k->pub[0]);
    for (int i = 0; i < 3; i++) {
        send_as(plain, 1, "plain!!!");
        send_as(foreign, 1, "foreign!");
        send_as(impostor, 1, "impostor");
    }
    CHECK(comm_recv(a, NULL, &g, 1500) == 0, "a stranger's message was delivered: '%.*s'",
          (int)comm_msg_bytes(&g), (const char *)comm_msg_data(&g));
    CHECK(zap_refused() >= 1, "the foreign key was not refused by the ZAP handler");
    CHECK(comm_n_bad(a) >= 1, "the impostor's messages were not counted as bad");

    /* the job goes on: the real rank 2 gets through */
    comm_t *c = comm_new("t", 2, 3, NULL, 2000);
    REQUIRE(c && comm_connect(c, 0, comm_endpoint(a)) == 0);
    REQUIRE(comm_send(c, 0, (msg_header_t){.type = MSG_TEST}, "rank2", 5, NULL) == 0);
    REQUIRE(comm_recv(a, NULL, &g, 5000) == 1);
    CHECK_EQ_I64(g.peer, 2);
    comm_msg_close(&g);

    /* a client that expects another server key does not talk to this server */
    void *wrong_server = stranger(comm_endpoint(a), "t:2", k, 2, k->pub[1]);
    send_as(wrong_server, 2, "misdirected");
    CHECK(comm_recv(a, NULL, &g, 800) == 0, "a connection to the wrong key's server carried data");

    zmq_close(plain);
    zmq_close(foreign);
    zmq_close(impostor);
    zmq_close(wrong_server);
    comm_destroy(&a);
    comm_destroy(&b);
    comm_destroy(&c);
    keyring_destroy(&other);
}

/* A frame larger than the job's bound ends its connection before it is buffered; the peer's
 * next, legitimate message arrives over a new one. */
TEST(comm_frames_above_the_bound_are_cut_off)
{
    comm_set_max_payload(4096);
    comm_t *a = comm_new("t", 0, 2, "tcp://127.0.0.1:*", 2000);
    comm_t *b = comm_new("t", 1, 2, NULL, 2000);
    REQUIRE(a && b && comm_connect(b, 0, comm_endpoint(a)) == 0);
    size_t big = 1 << 20;
    char *data = calloc(1, big);
    REQUIRE(comm_send(b, 0, (msg_header_t){.type = MSG_TEST}, data, big, NULL) == 0);
    comm_msg_t g;
    CHECK(comm_recv(a, NULL, &g, 800) == 0, "a frame above the bound was delivered");
    comm_destroy(&b);
    /* a channel of its own: the ROUTER may not have let go of the cut connection's routing
     * id yet, and refuses a second connection with the same one */
    b = comm_new("t2", 1, 2, NULL, 2000);
    REQUIRE(b && comm_connect(b, 0, comm_endpoint(a)) == 0);
    REQUIRE(comm_send(b, 0, (msg_header_t){.type = MSG_TEST}, data, 4096, NULL) == 0);
    REQUIRE(comm_recv(a, NULL, &g, 5000) == 1);
    CHECK_EQ_I64(comm_msg_bytes(&g), 4096);
    comm_msg_close(&g);
    free(data);
    comm_destroy(&a);
    comm_destroy(&b);
}

/* A DEALER of the test's own making speaking PLAIN as user `user` with `password`. */
static void *plain_stranger(const char *endpoint, const char *rid, const char *user,
                            const char *password)
{
    void *d = zmq_socket(comm_context(), ZMQ_DEALER);
    REQUIRE(d);
    int linger = 0;
    zmq_setsockopt(d, ZMQ_LINGER, &linger, sizeof linger);
    zmq_setsockopt(d, ZMQ_ROUTING_ID, rid, strlen(rid));
    REQUIRE(zmq_setsockopt(d, ZMQ_PLAIN_USERNAME, user, strlen(user)) == 0);
    REQUIRE(zmq_setsockopt(d, ZMQ_PLAIN_PASSWORD, password, strlen(password)) == 0);
    REQUIRE(zmq_connect(d, endpoint) == 0);
    return d;
}

TEST(fabric_passwords_bind_the_pair_and_the_direction)
{
    char err[256], p01[FABRIC_PASSWORD_LEN + 1], p01s[FABRIC_PASSWORD_LEN + 1],
        p10[FABRIC_PASSWORD_LEN + 1], p02[FABRIC_PASSWORD_LEN + 1];
    keyring_t *k = keyring_generate(3, err, sizeof err);
    REQUIRE(k, "%s", err);
    /* the client computes it from its secret, the server from its own: the same */
    REQUIRE(fabric_password(k, 0, 0, 1, p01) == 0 && fabric_password(k, 1, 0, 1, p01s) == 0);
    CHECK(!strcmp(p01, p01s), "client and server disagree");
    CHECK(fabric_password_ok(k, 0, 1, p01, strlen(p01)));
    REQUIRE(fabric_password(k, 1, 1, 0, p10) == 0 && fabric_password(k, 0, 0, 2, p02) == 0);
    CHECK(strcmp(p01, p10) && strcmp(p01, p02), "a password serves another direction or pair");
    CHECK(!fabric_password_ok(k, 1, 0, p01, strlen(p01)), "the reverse direction admitted");
    CHECK(!fabric_password_ok(k, 0, 2, p01, strlen(p01)), "another pair admitted");
    CHECK(!fabric_password_ok(k, 0, 1, p01, strlen(p01) - 1), "a prefix admitted");
    CHECK(fabric_password(k, 2, 0, 1, p01) != 0, "a third rank computed the pair's password");
    /* a rank that holds only its own secret (keys from files) computes its pairs only */
    char dir[600];
    snprintf(dir, sizeof dir, "%s/keys", test_tmpdir());
    REQUIRE(keyring_write(k, dir, err, sizeof err) == 0, "%s", err);
    keyring_t *one = keyring_load(dir, 1, 3, err, sizeof err);
    REQUIRE(one, "%s", err);
    REQUIRE(fabric_password(one, 1, 0, 1, p01s) == 0);
    CHECK(!strcmp(p01, p01s), "rank 1 from its key file computes another password");
    CHECK(fabric_password(one, 0, 0, 1, p10) != 0, "rank 0's password without rank 0's secret");
    keyring_destroy(&one);
    keyring_destroy(&k);
}

TEST(comm_trusted_fabric_admits_the_job_and_no_one_else)
{
    char err[256];
    keyring_t *k = keyring_generate(3, err, sizeof err);
    REQUIRE(k, "%s", err);
    comm_set_keyring(k);
    comm_set_trusted_fabric(true);
    CHECK(comm_trusted_fabric());
    comm_t *a, *b;
    rank1_talks_to_rank0(&a, &b);
    comm_msg_t g;

    /* strangers: no mechanism; CURVE; rank 1's name with a wrong password; rank 1's password
     * for another server (rank 2); another job's; rank 2's own credentials speaking as rank 1 */
    char p12[FABRIC_PASSWORD_LEN + 1], p20[FABRIC_PASSWORD_LEN + 1], pother[FABRIC_PASSWORD_LEN + 1];
    REQUIRE(fabric_password(k, 1, 1, 2, p12) == 0 && fabric_password(k, 2, 2, 0, p20) == 0);
    keyring_t *other = keyring_generate(3, err, sizeof err);
    REQUIRE(other && fabric_password(other, 1, 1, 0, pother) == 0);
    unsigned long refused0 = zap_refused();
    void *s[6] = {
        stranger(comm_endpoint(a), "n:1", NULL, 0, NULL),
        stranger(comm_endpoint(a), "c:1", k, 1, k->pub[0]),
        plain_stranger(comm_endpoint(a), "w:1", "1", "0000000000000000000000000000000000000000000000000000000000000000"),
        plain_stranger(comm_endpoint(a), "r:1", "1", p12),
        plain_stranger(comm_endpoint(a), "o:1", "1", pother),
        plain_stranger(comm_endpoint(a), "i:1", "2", p20),
    };
    for (int round = 0; round < 3; round++)
        for (int i = 0; i < 6; i++) send_as(s[i], 1, "stranger");
    CHECK(comm_recv(a, NULL, &g, 1500) == 0, "a stranger's message was delivered: '%.*s'",
          (int)comm_msg_bytes(&g), (const char *)comm_msg_data(&g));
    CHECK(zap_refused() >= refused0 + 3, "wrong passwords were not refused by the ZAP handler "
          "(%lu refusals)", zap_refused() - refused0);
    CHECK(comm_n_bad(a) >= 1, "rank 2 speaking as rank 1 was not counted as bad");

    /* the control channels keep CURVE: the right PLAIN credentials do not open them */
    comm_t *ctl = comm_new_control("k", 0, 3, "tcp://127.0.0.1:*", 2000);
    REQUIRE(ctl);
    char p10[FABRIC_PASSWORD_LEN + 1];
    REQUIRE(fabric_password(k, 1, 1, 0, p10) == 0);
    void *to_ctl = plain_stranger(comm_endpoint(ctl), "k:1", "1", p10);
    send_as(to_ctl, 1, "plain to control");
    CHECK(comm_recv(ctl, NULL, &g, 800) == 0, "a PLAIN connection reached a control socket");
    comm_t *ctl1 = comm_new_control("k", 1, 3, NULL, 2000);
    REQUIRE(ctl1 && comm_connect(ctl1, 0, comm_endpoint(ctl)) == 0);
    REQUIRE(comm_send(ctl1, 0, (msg_header_t){.type = MSG_TEST}, "ctl", 3, NULL) == 0);
    REQUIRE(comm_recv(ctl, NULL, &g, 5000) == 1, "rank 1's control message (CURVE) was lost");
    CHECK_EQ_I64(g.peer, 1);
    comm_msg_close(&g);

    zmq_close(to_ctl);
    for (int i = 0; i < 6; i++) zmq_close(s[i]);
    comm_destroy(&ctl);
    comm_destroy(&ctl1);
    comm_destroy(&a);
    comm_destroy(&b);
    keyring_destroy(&other);
}

/* A connection whose handshake fails (the server holds another key than the one this rank
 * expects) is retried by ZeroMQ in silence; the comm's link watch reports it. */
TEST(comm_link_watch_reports_a_failed_handshake)
{
    char err[256];
    keyring_t *k = keyring_generate(2, err, sizeof err), *other = keyring_generate(1, err, sizeof err);
    REQUIRE(k && other, "%s", err);
    comm_set_keyring(k);
    /* a CURVE server that is not rank 0: another key pair */
    void *server = zmq_socket(comm_context(), ZMQ_ROUTER);
    REQUIRE(server);
    int one = 1, linger = 0;
    zmq_setsockopt(server, ZMQ_CURVE_SERVER, &one, sizeof one);
    zmq_setsockopt(server, ZMQ_LINGER, &linger, sizeof linger);
    REQUIRE(zmq_setsockopt(server, ZMQ_CURVE_SECRETKEY, other->sec[0], 40) == 0);
    REQUIRE(zmq_bind(server, "tcp://127.0.0.1:*") == 0);
    char ep[128];
    size_t len = sizeof ep;
    REQUIRE(zmq_getsockopt(server, ZMQ_LAST_ENDPOINT, ep, &len) == 0);
    comm_t *b = comm_new("t", 1, 2, NULL, 2000);
    REQUIRE(b);
    comm_watch_links(b);
    REQUIRE(comm_connect(b, 0, ep) == 0);
    comm_send(b, 0, (msg_header_t){.type = MSG_TEST}, "x", 1, NULL);
    int events = 0;
    for (int i = 0; i < 100 && events == 0; i++) {
        events += comm_report_link_trouble(b);
        usleep(50000);
    }
    CHECK(events > 0, "no event reported for a connection whose handshake cannot succeed");
    zmq_close(server);
    comm_destroy(&b);
    keyring_destroy(&other);
    keyring_destroy(&k);
}

/* A rank's own traffic to its ROUTER within the process (comm_bind_local: its PS shard):
 * delivered as from that rank with no key, the payload copied so that the receiver may
 * write it, the answer back on the same connection; an in-process connection naming
 * another rank is refused, and the job's TCP connections are checked as before. */
TEST(comm_local_endpoint_carries_only_its_own_rank)
{
    char err[256];
    keyring_t *k = keyring_generate(3, err, sizeof err);
    REQUIRE(k, "%s", err);
    comm_set_keyring(k);
    comm_t *a = comm_new("ps", 0, 3, "tcp://127.0.0.1:*", 2000);
    REQUIRE(a);
    const char *ep = comm_bind_local(a);
    CHECK(!strncmp(ep, COMM_LOCAL_PREFIX, strlen(COMM_LOCAL_PREFIX)), "%s", ep);
    CHECK(!strcmp(comm_bind_local(a), ep), "a second bind moved the endpoint");

    comm_t *own = comm_new("mux", 0, 3, NULL, 2000);
    REQUIRE(own && comm_connect(own, 0, ep) == 0);
    size_t n = 256 * 1024; /* above COMM_ZEROCOPY_MIN_BYTES: would go by reference on TCP */
    unsigned char *grad = malloc(n);
    REQUIRE(grad);
    memset(grad, 0x5a, n);
    comm_tracker_t tr;
    comm_tracker_init(&tr);
    REQUIRE(comm_send(own, 0, (msg_header_t){.type = MSG_TEST, .layer = 3}, grad, n, &tr) == 0);
    CHECK_EQ_I64(atomic_load(&tr.pending), 0);
    memset(grad, 0, n); /* the sender's buffer is its own again at once */
    comm_msg_t g;
    REQUIRE(comm_recv(a, NULL, &g, 5000) == 1);
    CHECK_EQ_I64(g.peer, 0);
    CHECK_EQ_I64(g.hdr.layer, 3);
    CHECK_EQ_I64(comm_msg_bytes(&g), (int64_t)n);
    const unsigned char *got = comm_msg_data(&g);
    CHECK(got[0] == 0x5a && got[n - 1] == 0x5a, "the payload changed with the sender's buffer");
    ((unsigned char *)comm_msg_data_writable(&g))[0] = 1; /* a shard sums into it */
    CHECK(grad[0] == 0, "the receiver wrote into the sender's buffer");
    comm_msg_close(&g);
    REQUIRE(comm_send(a, 0, (msg_header_t){.type = MSG_TEST, .layer = 4}, "back", 4, NULL) == 0);
    REQUIRE(comm_recv(own, NULL, &g, 5000) == 1);
    CHECK_EQ_I64(g.hdr.layer, 4);
    comm_msg_close(&g);

    /* another rank's comm on the in-process endpoint: no key vouches for it */
    comm_t *other = comm_new("mux", 1, 3, NULL, 2000);
    REQUIRE(other && comm_connect(other, 0, ep) == 0);
    uint64_t bad = comm_n_bad(a);
    REQUIRE(comm_send(other, 0, (msg_header_t){.type = MSG_TEST}, "rank1?", 6, NULL) == 0);
    CHECK(comm_recv(a, NULL, &g, 800) == 0, "a message naming rank 1 came in without its key");
    CHECK(comm_n_bad(a) > bad, "the refused message was not counted");
    /* rank 1 over TCP, with its key, is admitted as before */
    comm_t *tcp = comm_new("mux", 1, 3, NULL, 2000);
    REQUIRE(tcp && comm_connect(tcp, 0, comm_endpoint(a)) == 0);
    REQUIRE(comm_send(tcp, 0, (msg_header_t){.type = MSG_TEST, .layer = 5}, "r1", 2, NULL) == 0);
    REQUIRE(comm_recv(a, NULL, &g, 5000) == 1);
    CHECK_EQ_I64(g.peer, 1);
    CHECK_EQ_I64(g.hdr.layer, 5);
    comm_msg_close(&g);

    free(grad);
    comm_destroy(&tcp);
    comm_destroy(&other);
    comm_destroy(&own);
    comm_destroy(&a);
    keyring_destroy(&k);
}
