/* fuzz replay: every seed (tests/fuzz/corpus/NAME) and every regression input
 * (tests/fuzz/regress/NAME: what the fuzzers found, and inputs worth keeping) fed to the
 * harness's entry point, built with the plain compiler. A crash, a sanitizer report (make
 * asan) or a broken promise (FUZZ_ASSERT aborts) fails the test. */
#include <dirent.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/cluster.h"
#include "core/model.h"
#include "core/plan.h"
#include "core/unit_times.h"
#include "runtime/transport/keyring.h"
#include "test.h"
#include "tests/fuzz/fuzz.h"

/* Feeds each file of dir to fn; returns how many, or -1 when dir cannot be read. With
 * must_accept, a file the parser refuses is a failure (the seeds are valid inputs: a harness
 * that refused them would fuzz nothing but the first check). */
static int replay_dir(const char *dir, int (*fn)(const uint8_t *, size_t), int must_accept)
{
    DIR *d = opendir(dir);
    if (!d) return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        FILE *f = fopen(path, "rb");
        REQUIRE(f, "%s: cannot open", path);
        size_t cap = 1 << 16, len = 0, r;
        uint8_t *buf = malloc(cap);
        REQUIRE(buf);
        while ((r = fread(buf + len, 1, cap - len, f)) > 0)
            if ((len += r) == cap) REQUIRE((buf = realloc(buf, cap *= 2)));
        fclose(f);
        /* Exactly len bytes, so that a read past the input is one past the allocation. */
        uint8_t *exact = malloc(len ? len : 1);
        REQUIRE(exact);
        memcpy(exact, buf, len);
        free(buf);
        fprintf(stderr, "    %s (%zu bytes)\n", path, len);
        int accepted = fn(exact, len);
        CHECK(accepted || !must_accept, "%s: a seed the parser refuses", path);
        free(exact);
        n++;
    }
    closedir(d);
    return n;
}

static void replay(const char *name, int (*fn)(const uint8_t *, size_t))
{
    char dir[256];
    snprintf(dir, sizeof dir, "tests/fuzz/corpus/%s", name);
    int seeds = replay_dir(dir, fn, 1);
    REQUIRE(seeds > 0, "%s: no seed inputs (run from the repository root)", dir);
    snprintf(dir, sizeof dir, "tests/fuzz/regress/%s", name);
    int regress = replay_dir(dir, fn, 0);
    REQUIRE(regress >= 0, "%s: missing", dir);
    printf("    %s: %d seeds, %d regression inputs\n", name, seeds, regress);
}

TEST(fuzz_replay_model) { replay("model", fuzz_model); }
TEST(fuzz_replay_cluster) { replay("cluster", fuzz_cluster); }
TEST(fuzz_replay_experiment) { replay("experiment", fuzz_experiment); }
TEST(fuzz_replay_profile) { replay("profile", fuzz_profile); }
TEST(fuzz_replay_msg) { replay("msg", fuzz_msg); }
TEST(fuzz_replay_keyring) { replay("keyring", fuzz_keyring); }
TEST(fuzz_replay_onnx) { replay("onnx", fuzz_onnx); }

/* Found by fuzz_model: a layer whose sizes multiply past int64 got negative costs (signed
 * overflow). Each product is now bounded: past 2^50 per sample the layer is refused by name,
 * and a large but representable layer still parses with exact costs. */
TEST(model_costs_past_2_50_are_refused)
{
    static const char *huge[] = {
        "input d shape=3x65535x65535\nconv c out=65535 kernel=65535 pad=65535\n",
        "input d shape=1x1x1\nconv c out=8 kernel=3 pad=2147483647\n",
        "input d shape=1x4096x4096\nfc f out=2147483647\n",
        "input d shape=2147483647x2147483647x2147483647\nrelu r\n",
        "input d shape=1x1x1\npool p kernel=2147483647 pad=2147483646 stride=1\n",
        ("tokens t seq=2147483647 vocab=8\nembed e vocab=8 dim=4096\nposembed p\n"
         "attention a heads=1 in=p,p,p\n"), /* one model of several lines */
        "input d shape=1x4096x4096\nlrn n size=2147483647\n",
    };
    for (size_t i = 0; i < sizeof huge / sizeof huge[0]; i++) {
        model_t m;
        char err[512] = "";
        int rc = model_parse(&m, "huge.net", huge[i], strlen(huge[i]), err, sizeof err);
        CHECK(rc == -1, "case %zu accepted", i);
        if (rc == 0) model_fini(&m);
        CHECK(strncmp(err, "huge.net:", 9) == 0, "case %zu: '%s'", i, err);
        CHECK(fuzz_model((const uint8_t *)huge[i], strlen(huge[i])) == 0, "case %zu", i);
    }
    const char *big = "input d shape=1x1x1\nfc f out=100000000\nfc g out=1000000\n";
    model_t m;
    char err[512] = "";
    REQUIRE(model_parse(&m, "big.net", big, strlen(big), err, sizeof err) == 0, "%s", err);
    CHECK_EQ_I64(m.layers[2].weights, 100000000000000LL);
    CHECK_EQ_I64(m.layers[2].fwd_flops, 200000000000000LL + 1000000);
    model_fini(&m);
}

/* Found by fuzz_keyring: a public.keys with more lines than ranks had its extra key copied
 * one entry past the table (heap overflow) before the count was checked. */
TEST(keyring_more_keys_than_ranks_is_refused)
{
    FILE *f = fopen("tests/fuzz/regress/keyring/more-keys-than-ranks", "rb");
    REQUIRE(f);
    uint8_t buf[1024];
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    REQUIRE(n > 2 && buf[0] == 1, "expected an input for 2 ranks");
    CHECK(fuzz_keyring(buf, n) == 0, "accepted");
    char dir[512], path[600], err[512] = "";
    snprintf(dir, sizeof dir, "%s", test_tmpdir());
    snprintf(path, sizeof path, "%s/public.keys", dir);
    f = fopen(path, "wb");
    REQUIRE(f);
    const uint8_t *nul = memchr(buf + 2, 0, n - 2);
    REQUIRE(nul);
    fwrite(buf + 2, 1, (size_t)(nul - buf - 2), f);
    fclose(f);
    keyring_t *k = keyring_load(dir, 0, 2, err, sizeof err);
    CHECK(k == NULL);
    keyring_destroy(&k);
    CHECK(strstr(err, "public.keys:4: more keys than the 2 ranks") != NULL, "'%s'", err);
}

/* Found by fuzz_experiment: `cluster = /dev/full` read without end until memory ran out. */
TEST(kv_files_past_16_mb_are_refused)
{
    cluster_t c;
    cluster_init(&c);
    char err[512] = "";
    CHECK(cluster_load(&c, "/dev/zero", err, sizeof err) == -1);
    CHECK(strstr(err, "/dev/zero") && strstr(err, "too large"), "'%s'", err);
}

/* A profile line longer than the reader's buffer was read as two lines: a long comment
 * became a bad row, named by the wrong line. */
TEST(profile_lines_past_the_buffer_are_named)
{
    const char *path = "tests/fuzz/regress/profile/comment-over-1024-bytes.csv";
    model_t m;
    char err[512] = "";
    REQUIRE(model_load(&m, "models/lenet.net", err, sizeof err) == 0, "%s", err);
    cluster_t c;
    cluster_init(&c);
    plan_t p;
    REQUIRE(plan_build(&p, &m, &c, (scheme_t){SCHEME_PS, true}, 0, 32, 0, err, sizeof err) == 0);
    unit_times_t t;
    CHECK(unit_times_profile(&t, &p, path, err, sizeof err) == -1);
    CHECK(strstr(err, "comment-over-1024-bytes.csv:2: expected a line shorter than 1024 bytes"),
          "'%s'", err);
    plan_fini(&p);
    model_fini(&m);
}
