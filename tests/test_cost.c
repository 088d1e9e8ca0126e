/* The cost model against POSEIDON.md §2: PS and SFB byte counts equal the table's formulas
 * exactly, BestScheme equals its inequality, and the time-based choice reduces to it when
 * time is bytes (no latency, no server cost, no reconstruction, 1 byte per ns). */
#include <string.h>

#include "core/cost.h"
#include "test.h"

static cost_params_t params(int p1, int p2, int k)
{
    return (cost_params_t){.workers = p1, .shards = p2, .batch = k, .kv_block_bytes = 0,
                           .bw_Bps = 1e9, .lat_ns = 0, .server_Bps = 0, .gemm_flops = 0};
}

TEST(cost_ps_bytes_equal_paper_formulas)
{
    /* M x N FC weights, fp32; P2 divides M*N so every shard holds the same share. */
    const int64_t M = 4096, N = 25088;
    const int ps[][2] = {{2, 2}, {4, 4}, {8, 8}, {16, 16}, {32, 32}, {8, 2}, {16, 4}, {32, 8}};
    for (size_t i = 0; i < sizeof ps / sizeof ps[0]; i++) {
        int P1 = ps[i][0], P2 = ps[i][1];
        cost_params_t p = params(P1, P2, 32);
        cost_t c = cost_ps(&p, M * N * 4, 0);
        /* server: 2 P1 M N / P2; worker: 2 M N; colocated: 2 M N (P1 + P2 - 2) / P2 (x4). */
        CHECK_EQ_I64(c.server_sent + c.server_recv, 2 * P1 * M * N / P2 * 4);
        CHECK_EQ_I64(c.node_sent + c.node_recv, 2 * M * N * (P1 + P2 - 2) / P2 * 4);
        if (P1 > P2) CHECK_EQ_I64(c.worker_sent + c.worker_recv, 2 * M * N * 4);
        else CHECK_EQ_I64(c.worker_sent + c.worker_recv, 0); /* no pure workers */
    }
    /* One worker: nothing moves. */
    cost_params_t p1 = params(1, 1, 32);
    CHECK_EQ_I64(cost_ps(&p1, M * N * 4, 0).node_sent, 0);
}

TEST(cost_sfb_bytes_equal_paper_formula)
{
    const int64_t M = 1000, N = 2048;
    for (int P = 2; P <= 64; P *= 2)
        for (int K = 1; K <= 64; K *= 4) {
            cost_params_t p = params(P, P, K);
            cost_t c = cost_sfb(&p, M, N);
            CHECK_EQ_I64(c.worker_sent + c.worker_recv, 2 * K * (P - 1) * (M + N) * 4);
            CHECK_EQ_I64(cost_sfb_peer_bytes(&p, K, M, N), K * (M + N) * 4);
        }
}

TEST(cost_best_scheme_equals_inequality_and_paper_examples)
{
    /* POSEIDON.md §2: VGG19 fc6 at K = 32 prefers SFB up to P ~ 220; 2048x1000 up to ~42. */
    CHECK(cost_best_scheme_bytes(4096, 25088, 32, 220, 220) == SYNC_SFB, "fc6 at 220");
    CHECK(cost_best_scheme_bytes(4096, 25088, 32, 221, 221) == SYNC_PS, "fc6 at 221");
    CHECK(cost_best_scheme_bytes(1000, 2048, 32, 41, 41) == SYNC_SFB, "2048x1000 at 41");
    CHECK(cost_best_scheme_bytes(1000, 2048, 32, 42, 42) == SYNC_PS, "2048x1000 at 42");
    int checked = 0;
    const int64_t dims[] = {256, 1024, 4096, 25088};
    for (int a = 0; a < 4; a++)
        for (int b = 0; b < 4; b++)
            for (int P = 2; P <= 256; P *= 2)
                for (int K = 8; K <= 256; K *= 2) {
                    int64_t M = dims[a], N = dims[b];
                    /* the inequality, in doubles, written as in the paper */
                    double lhs = 2.0 * K * (P - 1) * (double)(M + N);
                    double rhs = 2.0 * (double)M * (double)N * (P + P - 2) / P;
                    sync_method_t want = lhs <= rhs ? SYNC_SFB : SYNC_PS;
                    CHECK(cost_best_scheme_bytes(M, N, K, P, P) == want, "M %lld N %lld P %d K %d",
                          (long long)M, (long long)N, P, K);
                    /* the time-based choice is the byte rule when time is bytes */
                    cost_params_t p = params(P, P, K);
                    cost_tensor_t t = {.m = M, .n = N, .weight_bytes = M * N * 4};
                    sync_method_t got = cost_choose(&p, &t, 1u << SYNC_PS | 1u << SYNC_SFB);
                    CHECK(got == want, "time choice %s, bytes rule %s (M %lld N %lld P %d K %d)",
                          sync_method_name(got), sync_method_name(want), (long long)M,
                          (long long)N, P, K);
                    checked++;
                }
    CHECK(checked == 4 * 4 * 8 * 6, "grid %d", checked);
}

TEST(cost_kv_blocks_split_tensors_over_shards)
{
    cost_params_t p = params(8, 8, 32);
    p.kv_block_bytes = 4 << 20;
    /* A tensor below one block lives on one shard; the shard follows block0. */
    int shard[8];
    int64_t piece[8];
    CHECK_EQ_I64(cost_ps_pieces(&p, 1000, 13, shard, piece), 1);
    CHECK_EQ_I64(shard[0], 13 % 8);
    CHECK_EQ_I64(piece[0], 1000);
    CHECK_EQ_I64(cost_ps_shard_bytes(&p, 1000, 13, 13 % 8), 1000);
    CHECK_EQ_I64(cost_ps_shard_bytes(&p, 1000, 13, 0), 0);
    /* 10 blocks + a tail over 8 shards: shards of positions 0..2 hold two pieces. */
    int64_t bytes = 10 * (4 << 20) + 12345, sum = 0;
    CHECK_EQ_I64(cost_ps_blocks(&p, bytes), 11);
    CHECK_EQ_I64(cost_ps_pieces(&p, bytes, 5, shard, piece), 8);
    for (int s = 0; s < 8; s++) CHECK_EQ_I64(shard[s], s); /* listed ascending */
    for (int s = 0; s < 8; s++) sum += cost_ps_shard_bytes(&p, bytes, 5, s);
    CHECK_EQ_I64(sum, bytes);
    CHECK_EQ_I64(cost_ps_shard_bytes(&p, bytes, 5, 5), 2 * (4 << 20));
    CHECK_EQ_I64(cost_ps_shard_bytes(&p, bytes, 5, 7), (4 << 20) + 12345);
    CHECK_EQ_I64(cost_ps_shard_bytes(&p, bytes, 5, 0), 4 << 20);
    /* Even split: remainders spread one element at a time. */
    p.kv_block_bytes = 0;
    sum = 0;
    for (int s = 0; s < 8; s++) sum += cost_ps_shard_bytes(&p, 4 * 1001, 0, s);
    CHECK_EQ_I64(sum, 4 * 1001);
    CHECK_EQ_I64(cost_ps_shard_bytes(&p, 4 * 1001, 0, 0), 4 * 126);
    CHECK_EQ_I64(cost_ps_shard_bytes(&p, 4 * 1001, 0, 7), 4 * 125);
    /* A rotation that wraps: 3 elements from shard 6 sit on 6, 7 and 0. */
    CHECK_EQ_I64(cost_ps_pieces(&p, 12, 6, shard, piece), 3);
    CHECK(shard[0] == 0 && shard[1] == 6 && shard[2] == 7, "%d %d %d", shard[0], shard[1],
          shard[2]);
    CHECK(piece[0] == 4 && piece[1] == 4 && piece[2] == 4, "pieces");
}

TEST(cost_kv_table_places_blocks_where_it_says)
{
    /* Least-loaded picks the emptiest shard, the lowest on a tie; round-robin b mod P2. */
    int64_t load[4] = {30, 10, 10, 20};
    CHECK_EQ_I64(cost_kv_next_shard(KV_PLACE_LEAST_LOADED, load, 4, 7), 1);
    CHECK_EQ_I64(cost_kv_next_shard(KV_PLACE_ROUND_ROBIN, load, 4, 7), 3);
    kv_place_t k;
    CHECK(kv_place_parse("round_robin", &k) == 0 && k == KV_PLACE_ROUND_ROBIN, "parse");
    CHECK(kv_place_parse("least_loaded", &k) == 0 && k == KV_PLACE_LEAST_LOADED, "parse");
    CHECK(kv_place_parse("random", &k) == -1, "unknown name accepted");
    /* With a table, a tensor's bytes per shard follow the table, not the rotation. */
    cost_params_t p = params(4, 4, 32);
    p.kv_block_bytes = 100;
    const int table[] = {1, 1, 2, 2, 2, 0, 2}; /* blocks 0..1 belong to another tensor */
    p.block_shard = table;
    int64_t bytes = 450; /* blocks 2..6: 100 on 2, 100 on 2, 100 on 2, 100 on 0, 50 on 2 */
    CHECK_EQ_I64(cost_ps_shard_bytes(&p, bytes, 2, 2), 350);
    CHECK_EQ_I64(cost_ps_shard_bytes(&p, bytes, 2, 0), 100);
    CHECK_EQ_I64(cost_ps_shard_bytes(&p, bytes, 2, 1), 0);
    CHECK_EQ_I64(cost_ps_block_shard(&p, bytes, 2, 3), 0);
    CHECK_EQ_I64(cost_ps_block_bytes(&p, bytes, 4), 50);
    int shard[4];
    int64_t piece[4];
    CHECK_EQ_I64(cost_ps_pieces(&p, bytes, 2, shard, piece), 2);
    CHECK(shard[0] == 0 && piece[0] == 100 && shard[1] == 2 && piece[1] == 350, "pieces");
    /* The PS time is set by the busiest shard: 350 of 450 bytes on one of 4 nodes, so it
     * receives 3 x 350 and sends 100 of its own gradient elsewhere. */
    cost_t c = cost_ps(&p, bytes, 2);
    CHECK_EQ_I64(c.server_recv, 4 * 350);
    CHECK_EQ_I64(c.node_recv, 3 * 350 + 100);
}

/* The pipelined ring: a step goes on once the previous step's first piece is in, so its
 * latency shows only where the rest of the chunk is shorter than it. */
TEST(cost_allreduce_hides_what_latency_its_pieces_can)
{
    cost_params_t p = params(4, 4, 32);
    p.lat_ns = 1000;
    p.bw_Bps = 2e9; /* 2 bytes per ns */
    /* chunks of 17,584 bytes: pieces of the least, 4,096 values (16,384 bytes, 8,192 ns);
     * the other 1,200 bytes take 600 ns, so 400 ns of each latency show but the last's */
    CHECK_EQ_I64(cost_allreduce_piece_bytes(&p, 17584), 16384);
    CHECK_EQ_I64(cost_allreduce_step_gap_ns(&p, 17584, 0), 400);
    CHECK_EQ_I64(cost_allreduce_step_gap_ns(&p, 17584, 1), 1000);
    CHECK_EQ_I64(cost_allreduce(&p, 4 * 17584).time_ns, 6 * 8792 + 5 * 400 + 1000);
    /* a quarter of a long chunk, at most 4 MB at fp32, 2 MB at bf16 */
    CHECK_EQ_I64(cost_allreduce_piece_bytes(&p, 1 << 20), 1 << 18);
    CHECK_EQ_I64(cost_allreduce_piece_bytes(&p, 64 << 20), 4 << 20);
    p.wire_bytes = 2;
    CHECK_EQ_I64(cost_allreduce_piece_bytes(&p, 64 << 20), 2 << 20);
    CHECK_EQ_I64(cost_allreduce_step_gap_ns(&p, 1 << 20, 0), 0);
}

TEST(cost_times_are_latency_plus_bytes_over_bandwidth)
{
    cost_params_t p = params(4, 4, 32);
    p.lat_ns = 1000;
    p.bw_Bps = 2e9; /* 2 bytes per ns */
    /* PS, even split of 4 MB over 4 shards: each phase moves 3/4 of it on the busiest NIC. */
    int64_t b = 4 << 20;
    CHECK_EQ_I64(cost_ps(&p, b, 0).time_ns, 2 * (1000 + b * 3 / 4 / 2));
    /* server throughput adds P1 x shard bytes / rate */
    p.server_Bps = 1e9;
    CHECK_EQ_I64(cost_ps(&p, b, 0).time_ns, 2 * (1000 + b * 3 / 4 / 2) + 4 * (b / 4));
    p.server_Bps = 0;
    /* ring all-reduce: 2(P-1)/P of the bytes, and one latency: the ring is pipelined and
     * 1 MB chunks (pieces of 256 KB) hide the others */
    CHECK_EQ_I64(cost_allreduce_bytes(4, b), 2 * 3 * (b / 4));
    CHECK_EQ_I64(cost_allreduce(&p, b).time_ns, 1000 + 6 * (b / 4) / 2);
    /* 2(P-1) steps of ceil(bytes/P): 4 MB + 2 bytes on 4 nodes is 6 steps of 1 MB + 1 byte
     * (rounded up), i.e. 524288.5 ns rounded each */
    CHECK_EQ_I64(cost_allreduce_steps(4), 6);
    CHECK_EQ_I64(cost_allreduce_steps(1), 0);
    CHECK_EQ_I64(cost_allreduce_chunk_bytes(4, b + 2), b / 4 + 1);
    CHECK_EQ_I64(cost_allreduce_bytes(4, b + 2), 6 * (b / 4 + 1));
    CHECK_EQ_I64(cost_allreduce(&p, b + 2).time_ns, 1000 + 6 * ((b / 4 + 1 + 1) / 2));
    /* a tiny tensor goes in one piece a step: every step pays its latency, 2(P-1) in all */
    CHECK_EQ_I64(cost_allreduce(&p, 16).time_ns, 6 * (1000 + 2));
    /* SFB: one latency + (P-1) K (M+N) 4 bytes, + reconstruction when a GEMM rate is given */
    CHECK_EQ_I64(cost_sfb(&p, 1000, 2048).time_ns, 1000 + 3 * 32 * 3048 * 4 / 2);
    p.gemm_flops = 1e12;
    CHECK_EQ_I64(cost_sfb(&p, 1000, 2048).time_ns,
                 1000 + 3 * 32 * 3048 * 4 / 2 + (int64_t)(2.0 * 32 * 1000 * 2048 * 3 / 1e3));
    /* more bandwidth is never slower */
    int64_t prev = INT64_MAX;
    for (double bw = 1e8; bw <= 1e11; bw *= 2) {
        p.bw_Bps = bw;
        int64_t t = cost_ps(&p, b, 0).time_ns;
        CHECK(t <= prev, "PS time grew with bandwidth %g", bw);
        prev = t;
    }
}

TEST(cost_racks_closed_form)
{
    /* 8 workers and shards in 2 racks of 4, NICs of 1 byte/ns, uplinks of 1 byte/ns
     * (oversubscription 4), no latency. */
    cost_params_t p = params(8, 8, 1);
    p.nodes_per_rack = 4;
    p.rack_Bps = 1e9;
    CHECK_EQ_I64(cost_racks(&p), 2);
    const int64_t B = 8000000; /* 1e6 per shard, 4e6 per rack */

    /* PS: a rack's 4 workers push the 4e6 held by the other rack (16e6 up), its shards serve
     * 4e6 to the 4 workers outside (16e6 down in the push, up in the pull): 16 ms a phase
     * against 7 ms on the busiest NIC ((P-1) x 1e6), 32e6 bytes up over both. */
    cost_t c = cost_ps(&p, B, 0);
    CHECK_EQ_I64(c.time_ns, 2 * 16000000);
    CHECK_EQ_I64(c.rack_sent, 32000000);
    CHECK_EQ_I64(c.node_sent, 14000000); /* (B - 1e6) pushed + 7 x 1e6 served */

    /* SFB, K = 1, 1000 x 1500: 10,000 bytes to each peer; a rack's 4 senders reach 4 peers
     * outside: 160,000 bytes up (160 us) against 70,000 on a NIC (70 us). */
    c = cost_sfb(&p, 1000, 1500);
    CHECK_EQ_I64(c.rack_sent, 160000);
    CHECK_EQ_I64(c.time_ns, 160000);
    CHECK_EQ_I64(c.node_sent, 70000);

    /* Ring all-reduce: one 1e6 chunk per step leaves each rack, as each NIC sends one: 14
     * steps of 1 ms; with uplinks at half a NIC, 2 ms each. */
    c = cost_allreduce(&p, B);
    CHECK_EQ_I64(c.time_ns, 14000000);
    CHECK_EQ_I64(c.rack_sent, 14000000);
    p.rack_Bps = 0.5e9;
    CHECK_EQ_I64(cost_allreduce(&p, B).time_ns, 28000000);
    p.rack_Bps = 1e9;

    /* The choice moves: a conv layer of B bytes is PS (ties go to PS: 14 ms each) on one
     * switch, all-reduce (14 ms against PS's 32) behind the oversubscribed uplinks. */
    cost_tensor_t conv = {.weight_bytes = B};
    unsigned mask = 1u << SYNC_PS | 1u << SYNC_ALLREDUCE;
    cost_params_t flat = params(8, 8, 1);
    CHECK_EQ_I64(cost_choose(&flat, &conv, mask), SYNC_PS);
    CHECK_EQ_I64(cost_choose(&p, &conv, mask), SYNC_ALLREDUCE);
    /* uplinks as fast as a rack's NICs together: no rack term decides */
    p.rack_Bps = 4e9;
    CHECK_EQ_I64(cost_ps(&p, B, 0).time_ns, cost_ps(&flat, B, 0).time_ns);
    CHECK_EQ_I64(cost_choose(&p, &conv, mask), SYNC_PS);
}
