/* exp_fixture: an experiment written from text into the test's temporary folder and loaded
 * with its model — shared by the simulator tests (tests/test_sim.c, tests/test_bucket.c). */
#ifndef POSEIDON_TESTS_EXP_FIXTURE_H
#define POSEIDON_TESTS_EXP_FIXTURE_H

#include "core/experiment.h"
#include "core/model.h"

/* Write text to path (a failure fails the test). */
void fixture_write_file(const char *path, const char *text);

/* An experiment's text: models/NET.net on the 40 GbE Titan X cluster (absolute paths, so
 * the file may live anywhere), then `extra`. A static buffer, valid until the next call. */
const char *fixture_exp_text(const char *net, const char *extra);

/* Write text as an experiment file, load it and the model it names (a failure fails the
 * test). Free the model with model_fini(). */
void fixture_load_exp(experiment_t *e, model_t *m, const char *text);

/* One override of e, "key=value" as after --set, built printf-style (a failure fails the
 * test). */
void fixture_set(experiment_t *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Make e's sweep the single configuration (nodes, gbps, scheme): gbps <= 0 keeps the
 * cluster's bandwidth, a NULL scheme the experiment's. */
void fixture_one_config(experiment_t *e, int nodes, double gbps, const char *scheme);

#endif
