/* Fuzz the cluster parser (core/cluster.c): the bytes are a .cluster file. A cluster it
 * accepts must keep cluster.h's invariants. */
#include "tests/fuzz/fuzz.h"

#include <math.h>

#include "core/cluster.h"

int fuzz_cluster(const uint8_t *data, size_t size)
{
    char *text = fuzz_text(data, size);
    cluster_t c;
    cluster_init(&c);
    char err[1024] = "";
    int accepted = 0;
    if (cluster_parse(&c, "fuzz.cluster", text, err, sizeof err) != 0) {
        fuzz_check_error(err);
    } else {
        accepted = 1;
        FUZZ_ASSERT(c.nodes >= 1 && c.devices_per_node >= 1, "%d x %d", c.nodes,
                    c.devices_per_node);
        FUZZ_ASSERT(isfinite(c.nic_Bps) && c.nic_Bps > 0, "nic %g", c.nic_Bps);
        FUZZ_ASSERT(c.lat_ns >= 0 && c.intra_lat_ns >= 0, "latency %lld",
                    (long long)c.lat_ns);
        FUZZ_ASSERT(c.ps_shards >= 0 && c.ps_shards <= c.nodes, "%d shards", c.ps_shards);
        FUZZ_ASSERT(c.devices_per_node == 1 || c.intra_Bps > 0, "no interconnect");
        FUZZ_ASSERT(c.device.peak_flops > 0 && c.device.mem_Bps > 0, "device %s",
                    c.device.name);
        FUZZ_ASSERT(c.n_speed >= 0 && c.n_speed <= CLUSTER_MAX_SPEED, "%d speeds", c.n_speed);
        for (int i = 0; i < c.n_speed; i++)
            FUZZ_ASSERT(c.speed_node[i] >= 0 && c.speed_node[i] < c.nodes &&
                            c.speed_factor[i] > 0 && isfinite(c.speed_factor[i]),
                        "speed %d:%g", c.speed_node[i], c.speed_factor[i]);
    }
    free(text);
    return accepted;
}

FUZZ_LIBFUZZER_ENTRY(fuzz_cluster)
