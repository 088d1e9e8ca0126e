/* Fuzz the experiment parser (core/experiment.c): the bytes are an .exp file read as
 * experiments/fuzz.exp, so that `cluster = clusters/NAME.cluster` lines open the
 * repository's clusters, as the real files do. An experiment it accepts must keep
 * experiment.h's invariants. */
#include "tests/fuzz/fuzz.h"

#include "core/experiment.h"

int fuzz_experiment(const uint8_t *data, size_t size)
{
    char *text = fuzz_text(data, size);
    experiment_t e;
    char err[1024] = "";
    int accepted = 0;
    if (experiment_parse(&e, "experiments/fuzz.exp", text, err, sizeof err) != 0) {
        fuzz_check_error(err);
    } else {
        accepted = 1;
        FUZZ_ASSERT(e.batch >= 1 && e.iterations >= 1 && e.staleness >= 0,
                    "batch %d, %d iterations, staleness %d", e.batch, e.iterations,
                    e.staleness);
        FUZZ_ASSERT(e.n_nodes >= 1 && e.n_nodes <= EXPERIMENT_MAX_SWEEP && e.n_gbps >= 1 &&
                        e.n_gbps <= EXPERIMENT_MAX_SWEEP && e.n_schemes >= 1 &&
                        e.n_schemes <= EXPERIMENT_MAX_SWEEP,
                    "sweeps %d/%d/%d", e.n_nodes, e.n_gbps, e.n_schemes);
        /* The first configurations and the last: up to 64^3 of them otherwise. */
        int n = experiment_config_count(&e);
        for (int i = 0; i < n; i = (i == 63 && n > 65) ? n - 1 : i + 1) {
            cluster_t c;
            scheme_t s;
            experiment_config(&e, i, &c, &s);
            FUZZ_ASSERT(c.nodes >= 1 && c.nic_Bps > 0, "config %d: %d nodes, %g B/s", i,
                        c.nodes, c.nic_Bps);
        }
    }
    free(text);
    return accepted;
}

FUZZ_LIBFUZZER_ENTRY(fuzz_experiment)
