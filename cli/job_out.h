/* job_out: where a real run writes the experiment it executed (`--job-out FILE`; by default
 * out/runs/MODEL-DATE-TIME-PID.exp; `none`: nowhere), so that `poseidon sim` on that file
 * predicts the run. Shared by the single-worker and the distributed `poseidon train`. */
#ifndef POSEIDON_CLI_JOB_OUT_H
#define POSEIDON_CLI_JOB_OUT_H

#include <stddef.h>

/* The default path for a run of model_path into out. */
void job_out_default(const char *model_path, char *out, size_t len);

#endif
