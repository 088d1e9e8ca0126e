/* Rates held per level (sim/rates.h) against rates held per member: random computations that
 * keep the levels below a random one and redo the rest (as sim/net.c does), members starting
 * and finishing, every finish time compared with a per-member reference that drains each
 * member's bytes whenever its rate changes. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "core/rng.h"
#include "sim/rates.h"
#include "test.h"

#define MAXM 400
#define MAXL 8

/* The reference: one member's rate, its bytes left at t0, its finish time. */
typedef struct {
    int live, level; /* level -1: no rate yet */
    double rate, rem;
    int64_t t0, fin;
} ref_t;

static void ref_rate(ref_t *m, double x, int64_t now)
{
    if (x == m->rate) return;
    if (m->rate > 0) m->rem -= m->rate * ((double)(now - m->t0) * 1e-9);
    if (m->rem < 0) m->rem = 0;
    m->t0 = now;
    m->rate = x;
    m->fin = now + llround(m->rem / x * 1e9);
}

TEST(rates_a_member_alone_takes_its_bytes_over_its_rate_exactly)
{
    rates_t *r = rates_new();
    rates_reserve(r, 4);
    rates_start(r, 0, 1234567.0);
    rates_level(r, 0, 1.25e9);
    rates_note(r, 0, 0);
    rates_apply(r, 1000);
    CHECK_EQ_I64(rates_fin(r, 0), 1000 + llround(1234567.0 / 1.25e9 * 1e9));
    /* a member that joins the group later is timed from its own start, not the group's */
    rates_start(r, 1, 777.0);
    rates_level(r, 0, 1.25e9);
    rates_note(r, 0, 0);
    rates_note(r, 1, 0);
    rates_apply(r, 5003);
    CHECK_EQ_I64(rates_groups(r), 1);
    CHECK_EQ_I64(rates_fin(r, 1), 5003 + llround(777.0 / 1.25e9 * 1e9));
    CHECK_EQ_I64(rates_fin(r, 0), 1000 + llround(1234567.0 / 1.25e9 * 1e9));
    int64_t fin1 = rates_fin(r, 1);
    CHECK_EQ_I64(rates_next(r), fin1);
    CHECK_EQ_I64(rates_due(r, fin1 - 1), -1);
    CHECK_EQ_I64(rates_due(r, fin1), 1);
    CHECK_EQ_I64(rates_due(r, fin1), -1);
    CHECK_EQ_I64(rates_next(r), rates_fin(r, 0));
    rates_destroy(&r);
}

TEST(rates_per_level_match_rates_per_member)
{
    int64_t compared = 0, off = 0, moves_kept = 0;
    for (uint64_t seed = 1; seed <= 40; seed++) {
        rng_t *g = rng_new(seed, 17);
        rates_t *r = rates_new();
        rates_reserve(r, MAXM);
        ref_t ref[MAXM] = {{0}};
        char live[MAXM] = {0}, rated[MAXM] = {0};
        int64_t now = 0;
        int nlv = 0;
        double lv_x[MAXL];
        for (int step = 0; step < 300; step++) {
            /* a few members start */
            for (int k = (int)rng_uint(g, 4); k > 0; k--) {
                int i = (int)rng_uint(g, MAXM);
                if (ref[i].live) continue;
                double bytes = 1 + floor(rng_uniform(g) * 4e6);
                ref[i] = (ref_t){1, -1, 0, bytes, now, INT64_MAX};
                live[i] = 1;
                rates_start(r, i, bytes);
            }
            /* a computation: levels below k stand, the rest get new rates; members at them
             * (and those without a rate) freeze at random levels from k on */
            int k = (int)rng_uint(g, (uint64_t)(nlv < MAXL ? nlv + 1 : MAXL));
            int top = k + 1 + (int)rng_uint(g, (uint64_t)(MAXL - k));
            int keep_members = rng_uniform(g) < 0.3; /* every level keeps its members */
            for (int L = k; L < top; L++) {
                /* a rate that often stays as it was */
                lv_x[L] = L < nlv && rng_uniform(g) < 0.3 ? lv_x[L] : 1e8 * (1 + rng_uint(g, 40));
                rates_level(r, L, lv_x[L]);
            }
            int64_t moves0 = rates_moves(r);
            int all_had = 1;
            for (int i = 0; i < MAXM; i++) {
                if (!ref[i].live || (ref[i].level >= 0 && ref[i].level < k)) continue;
                all_had &= ref[i].level >= 0 && ref[i].level < top;
                int L = keep_members && ref[i].level >= 0 && ref[i].level < top
                            ? ref[i].level
                            : k + (int)rng_uint(g, (uint64_t)(top - k));
                ref[i].level = L;
                rates_note(r, i, L);
                ref_rate(&ref[i], lv_x[L], now);
            }
            rates_apply(r, now);
            if (keep_members && all_had) {
                CHECK_EQ_I64(rates_moves(r), moves0);
                moves_kept++;
            }
            nlv = top;
            for (int i = 0; i < MAXM; i++) rated[i] = ref[i].live;
            char err[256];
            int rc = rates_check(r, live, rated, MAXM, err, sizeof err);
            REQUIRE(rc == 0, "seed %llu step %d: %s", (unsigned long long)seed, step, err);
            for (int i = 0; i < MAXM; i++) {
                if (!ref[i].live) continue;
                int64_t d = llabs(rates_fin(r, i) - ref[i].fin);
                compared++;
                off += d > 0;
                CHECK(d <= 1, "seed %llu step %d member %d: finishes at %lld, reference %lld",
                      (unsigned long long)seed, step, i, (long long)rates_fin(r, i),
                      (long long)ref[i].fin);
                CHECK(fabs(rates_rate(r, i) - ref[i].rate) == 0, "member %d: rate", i);
            }
            /* time moves to the next finish or a little less; the members due finish */
            int64_t next = rates_next(r);
            if (next == INT64_MAX) continue; /* none live */
            int64_t to = rng_uniform(g) < 0.5 ? next : now + (next - now) / 2;
            now = to > now ? to : now;
            for (int64_t i; (i = rates_due(r, now)) >= 0;) {
                CHECK(ref[i].live, "member %lld finished twice", (long long)i);
                CHECK(llabs(ref[i].fin - now) <= 1, "member %lld due at %lld, reference %lld",
                      (long long)i, (long long)now, (long long)ref[i].fin);
                ref[i].live = 0;
                live[i] = 0;
            }
            for (int i = 0; i < MAXM; i++)
                CHECK(!ref[i].live || rates_fin(r, i) > now, "member %d due at %lld, still live",
                      i, (long long)rates_fin(r, i));
        }
        rates_destroy(&r);
        rng_destroy(&g);
    }
    fprintf(stderr, "%lld finish times compared, %lld off by 1 ns; %lld computations whose "
                    "levels kept their members moved none\n",
            (long long)compared, (long long)off, (long long)moves_kept);
    CHECK(moves_kept > 100, "too few computations kept their members: %lld",
          (long long)moves_kept);
}
