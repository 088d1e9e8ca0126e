#include "runtime/exec/restart.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "core/log.h"
#include "runtime/exec/job_checkpoint.h"

bool restart_wanted(int rc, int done, int max)
{
    return rc != 0 && rc != 2 && done < max;
}

void restart_prepare(worker_config_t *cfg, int i, int max, const char *why)
{
    char err[4800];
    int64_t k;
    const char *dir = cfg->checkpoint_dir;
    if (dir && job_ckpt_newest(dir, &k, err, sizeof err) == 0) {
        cfg->resume_dir = dir;
        log_warn("restart %d of %d: %s; resuming from %s/iter-%lld", i, max,
                 why[0] ? why : "the job failed", dir, (long long)k);
    } else if (cfg->resume_dir) {
        log_warn("restart %d of %d: %s; no newer checkpoint: resuming from %s again", i, max,
                 why[0] ? why : "the job failed", cfg->resume_dir);
    } else {
        log_warn("restart %d of %d: %s; no complete checkpoint yet: starting over from "
                 "iteration 0", i, max, why[0] ? why : "the job failed");
    }
}

/* DIR/restarts */
static void restarts_path(char *out, size_t n, const char *dir)
{
    snprintf(out, n, "%s/restarts", dir);
}

/* The restarts DIR/restarts records (its lines). */
static int restarts_count(const char *dir)
{
    char path[4200], line[512];
    restarts_path(path, sizeof path, dir);
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    int n = 0;
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, "restart ", 8)) n++;
    fclose(f);
    return n;
}

int restart_launched(worker_config_t *cfg, char *err, size_t errlen)
{
    int max = cfg->job.train.max_restarts;
    const char *dir = cfg->checkpoint_dir;
    int64_t k;
    char why[4800];
    if (max <= 0 || !dir || cfg->resume_dir || job_ckpt_newest(dir, &k, why, sizeof why))
        return 0;
    int done = restarts_count(dir);
    char path[4200];
    restarts_path(path, sizeof path, dir);
    if (done >= max) {
        snprintf(err, errlen, "%s holds a checkpoint and %s records %d restarts: the job's "
                              "max_restarts (%d) are spent; resume it with --resume %s, or "
                              "start it anew in another directory", dir, path, done, max, dir);
        return -1;
    }
    cfg->resume_dir = dir;
    cfg->restart_no = done + 1;
    return 0;
}

void restart_record(const worker_config_t *cfg, long long iter)
{
    if (cfg->restart_no <= 0) return;
    char path[4200];
    restarts_path(path, sizeof path, cfg->checkpoint_dir);
    time_t now = time(NULL);
    char when[64] = "";
    strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
    FILE *f = fopen(path, "a");
    int ok = f && fprintf(f, "restart %d at %s: resumed from iteration %lld\n",
                          cfg->restart_no, when, iter) > 0;
    if (f && fclose(f)) ok = 0;
    if (!ok) log_warn("%s: cannot record the restart: %s", path, strerror(errno));
    log_warn("restart %d of %d: the run before ended without finishing (its ranks' logs say "
             "why); resuming from %s/iter-%lld", cfg->restart_no, cfg->job.train.max_restarts,
             cfg->checkpoint_dir, iter);
}
