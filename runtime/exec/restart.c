#include "runtime/exec/restart.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/log.h"
#include "runtime/exec/job_checkpoint.h"

void restart_last_words_path(char *out, size_t n, const char *dir)
{
    snprintf(out, n, "%s/last-failure", dir);
}

void restart_forget(const char *dir)
{
    char path[4200];
    restart_last_words_path(path, sizeof path, dir);
    unlink(path);
}

/* The line of the lowest rank in DIR/last-failure ("rank R<TAB>line" per rank that saw the
 * end): rank 0's, whose coordinator names the rank that died or went silent, or else the
 * line of the rank that saw rank 0 go. The file is removed: the cause is told once. 1 with
 * the line in out, 0 when no rank left one (killed all at once, or crashed). */
static int last_words_take(const char *dir, char *out, size_t n)
{
    char path[4200], line[2048];
    restart_last_words_path(path, sizeof path, dir);
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    int best = -1, ranks = 0;
    while (fgets(line, sizeof line, f)) {
        char *tab = strchr(line, '\t');
        if (strncmp(line, "rank ", 5) || !tab) continue;
        int r = atoi(line + 5);
        ranks++;
        if (best >= 0 && r >= best) continue;
        best = r;
        tab[strcspn(tab, "\n")] = '\0';
        snprintf(out, n, "%s", tab + 1);
    }
    fclose(f);
    unlink(path);
    if (best >= 0 && ranks > 1) {
        size_t len = strlen(out);
        snprintf(out + len, n - len, " (and %d more ranks' last lines in their logs)", ranks - 1);
    }
    return best >= 0;
}

bool restart_wanted(int rc, int done, int max)
{
    return rc != 0 && rc != 2 && done < max;
}

void restart_prepare(worker_config_t *cfg, int i, int max, const char *launcher_why)
{
    char err[4800], cause[2400];
    int64_t k;
    const char *dir = cfg->checkpoint_dir;
    /* the launcher's exit status names the first rank to exit, which may be a healthy one
     * that aborted; the ranks' own last line says what they saw */
    char why[4800];
    snprintf(why, sizeof why, "%s", launcher_why[0] ? launcher_why : "the job failed");
    if (dir && last_words_take(dir, cause, sizeof cause)) {
        size_t len = strlen(why);
        snprintf(why + len, sizeof why - len, "; the ranks' account: %s", cause);
    }
    if (dir && job_ckpt_newest(dir, &k, err, sizeof err) == 0) {
        cfg->resume_dir = dir;
        log_warn("restart %d of %d: %s; resuming from %s/iter-%lld", i, max,
                 why, dir, (long long)k);
    } else if (cfg->resume_dir) {
        log_warn("restart %d of %d: %s; no newer checkpoint: resuming from %s again", i, max,
                 why, cfg->resume_dir);
    } else {
        log_warn("restart %d of %d: %s; no complete checkpoint yet: starting over from "
                 "iteration 0", i, max, why);
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
    char cause[2400];
    if (cfg->restart_no <= 0) {
        /* a resume by hand: the cause is told, and the file goes, as for a restart */
        if (cfg->resume_dir && last_words_take(cfg->resume_dir, cause, sizeof cause))
            log_warn("resuming from %s/iter-%lld; the run before ended: %s", cfg->resume_dir,
                     iter, cause);
        return;
    }
    if (!last_words_take(cfg->checkpoint_dir, cause, sizeof cause))
        snprintf(cause, sizeof cause, "no rank left a last line (killed all at once, or "
                                      "crashed: their logs say more)");
    log_warn("restart %d of %d: the run before ended: %s; resuming from %s/iter-%lld",
             cfg->restart_no, cfg->job.train.max_restarts, cause, cfg->checkpoint_dir, iter);
    char path[4200];
    restarts_path(path, sizeof path, cfg->checkpoint_dir);
    time_t now = time(NULL);
    char when[64] = "";
    strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
    FILE *f = fopen(path, "a");
    int ok = f && fprintf(f, "restart %d at %s: resumed from iteration %lld after: %s\n",
                          cfg->restart_no, when, iter, cause) > 0;
    if (f && fclose(f)) ok = 0;
    if (!ok) log_warn("%s: cannot record the restart: %s", path, strerror(errno));
}
