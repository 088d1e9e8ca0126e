/* worker_ckpt: a rank's state on disk. Its checkpoint file's header and contents
 * (runtime/exec/job_checkpoint.h holds the format), the resume from the newest complete
 * checkpoint, the CSV a resumed job continues, the final parameters, and the SIGTERM that
 * asks the job to stop after its next checkpoint. */
#include "runtime/exec/worker_state.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/check.h"
#include "core/log.h"
#include "core/outfile.h"
#include "runtime/exec/job_checkpoint.h"

int worker_write_params(const worker_t *w, const char *prefix)
{
    float *copy = w->staged ? xmalloc((size_t)w->n_params * sizeof(float) + 1) : NULL;
    int rc = 0;
    for (int d = 0; d < w->devices && rc == 0; d++) {
        char path[1100];
        if (d == 0) snprintf(path, sizeof path, "%s.%d", prefix, w->rank);
        else snprintf(path, sizeof path, "%s.%d.%d", prefix, w->rank, d);
        const float *p = w->dev[d].params;
        if (copy) {
            compute_download(w->dev[d].compute, copy, nnet_arena(w->dev[d].net)->params,
                             (size_t)w->n_params * sizeof(float));
            p = copy;
        }
        FILE *f = outfile_open(path, "wb");
        if (!f) rc = -1;
        else if (fwrite(p, sizeof(float), (size_t)w->n_params, f) != (size_t)w->n_params)
            rc = -1, fclose(f);
        else if (fclose(f)) rc = -1;
    }
    free(copy);
    return rc;
}

void worker_params_to_devices(worker_t *w, const job_ckpt_state_t *st)
{
    if (!w->staged) return;
    for (int d = 0; d < w->devices; d++) {
        wk_device_t *dv = &w->dev[d];
        arena_t *a = nnet_arena(dv->net);
        const float *state = d == 0 ? st->state : st->dev_state[d - 1];
        compute_upload(dv->compute, a->params, w->params, (size_t)w->n_params * sizeof(float));
        compute_upload(dv->compute, a->state, state, (size_t)a->state_count * sizeof(float));
        dv->compute->ops->sync(dv->compute->ctx);
    }
}

int worker_csv_keep_rows_to(const char *path, int64_t k)
{
    FILE *in = fopen(path, "r");
    if (!in) return errno == ENOENT ? 0 : -1;
    char tmp[1200];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *out = fopen(tmp, "w");
    if (!out) {
        fclose(in);
        return -1;
    }
    char line[1024];
    bool first = true;
    while (fgets(line, sizeof line, in)) {
        double epoch;
        long long it;
        /* the header, and any line that is not a row, stays */
        bool row = !first && sscanf(line, "%lf,%lld,", &epoch, &it) == 2;
        if (!row || it <= k) fputs(line, out);
        first = false;
    }
    fclose(in);
    if (fclose(out) || rename(tmp, path)) {
        int saved = errno;
        unlink(tmp);
        errno = saved;
        return -1;
    }
    return 0;
}

/* Coordinator broadcast ids of the resume (the endpoints' are 10 + rank) */
#define RESUME_BCAST_ID (1LL << 40)
#define RESUME_STATUS_ID0 ((1LL << 40) + 16)

int64_t worker_ckpt_kept(worker_t *w, int64_t k)
{
    int keep = w->job->train.keep_checkpoints;
    if (w->n_kept == keep) {
        memmove(w->ckpt_kept, w->ckpt_kept + 1, (size_t)(keep - 1) * sizeof *w->ckpt_kept);
        w->n_kept--;
    }
    w->ckpt_kept[w->n_kept++] = k;
    return w->ckpt_kept[0];
}

job_ckpt_header_t worker_ckpt_header(const worker_t *w, int64_t iter)
{
    job_ckpt_header_t h;
    memset(&h, 0, sizeof h);
    snprintf(h.model, sizeof h.model, "%s", w->model.name);
    h.n_params = w->n_params;
    h.state_count = w->net ? nnet_arena(w->net)->state_count : 0;
    h.rng_bytes = w->net ? (int64_t)nnet_rng_state_bytes(w->net) : 0;
    h.world = w->world;
    h.devices = w->devices;
    h.rank = w->rank;
    h.plan_hash = plan_hash(&w->plan);
    h.seed = w->job->seed;
    h.iter = iter;
    return h;
}

job_ckpt_state_t worker_ckpt_state(worker_t *w, const job_ckpt_header_t *h)
{
    job_ckpt_state_t st = {.params = w->params, .hist_local = w->hist_local,
                           .hist_server = w->hist_server, .shard_values = w->shard_snapshot};
    st.rng = xcalloc((size_t)h->rng_bytes + 1, 1);
    st.state = w->net ? nnet_arena(w->net)->state : NULL;
    if (w->devices > 1) {
        st.dev_state = xcalloc((size_t)w->devices - 1, sizeof *st.dev_state);
        st.dev_rng = xcalloc((size_t)w->devices - 1, sizeof *st.dev_rng);
    }
    for (int d = 1; d < w->devices; d++) {
        nnet_t *net = w->dev[d].net;
        st.dev_state[d - 1] = net ? nnet_arena(net)->state : NULL;
        st.dev_rng[d - 1] = xcalloc((size_t)h->rng_bytes + 1, 1);
    }
    for (int d = 0; w->staged && d < w->devices; d++) { /* a GPU's state, copied to the host */
        const arena_t *a = nnet_arena(w->dev[d].net);
        float *host = xcalloc((size_t)a->state_count + 1, sizeof(float));
        compute_download(w->dev[d].compute, host, a->state, (size_t)a->state_count * sizeof(float));
        if (d == 0) st.state = host;
        else st.dev_state[d - 1] = host;
    }
    return st;
}

void worker_ckpt_state_free(const worker_t *w, job_ckpt_state_t *st)
{
    for (int d = 0; w->staged && d < w->devices; d++)
        free(d == 0 ? st->state : st->dev_state[d - 1]);
    free(st->rng);
    for (int d = 1; d < w->devices; d++) free(st->dev_rng[d - 1]);
    free(st->dev_rng);
    free(st->dev_state);
    memset(st, 0, sizeof *st);
}

/* Rank 0: the newest complete checkpoint in dir as its COMPLETE text, after checking that it
 * is of this job; NULL with one line in err. */
static char *resume_choose(const worker_t *w, const char *dir, char *err, size_t errlen)
{
    int64_t k;
    if (job_ckpt_newest(dir, &k, err, errlen)) return NULL;
    char path[4200];
    job_ckpt_complete_path(path, sizeof path, dir, k);
    job_ckpt_complete_t c;
    char *text = NULL;
    if (job_ckpt_read_complete(path, &c, &text, err, errlen)) return NULL;
    job_ckpt_header_t h = worker_ckpt_header(w, k);
    if (c.iter != k)
        snprintf(err, errlen, "%s: says iteration %lld, its directory %lld", path,
                 (long long)c.iter, (long long)k);
    else if (job_ckpt_check_complete(&c, path, h.model, w->world, w->devices, h.seed,
                                     h.plan_hash, w->iterations, err, errlen) == 0) {
        char *keys = job_ckpt_job_keys(w->job);
        int rc = job_ckpt_keys_check(path, c.keys, keys, w->cfg->resume_changed, err, errlen);
        free(keys);
        job_ckpt_complete_free(&c);
        if (rc == 0) return text;
        free(text);
        return NULL;
    }
    job_ckpt_complete_free(&c);
    free(text);
    return NULL;
}

int worker_resume(worker_t *w, char *msg, size_t msglen)
{
    const char *dir = w->cfg->resume_dir;
    char err[8800] = "";
    char *text = NULL;
    if (w->rank == 0 && !(text = resume_choose(w, dir, err, sizeof err))) {
        size_t n = strlen(err) + 2;
        text = xmalloc(n);
        snprintf(text, n, "!%s", err);
    }
    void *blob = text;
    size_t n = text ? strlen(text) + 1 : 0;
    if (coord_client_bcast(w->cl, 0, RESUME_BCAST_ID, &blob, &n, w->cfg->timeout_ms))
        coord_client_fail(w->cl, "no checkpoint choice from rank 0");
    if (w->rank != 0) {
        text = blob;
        if (n == 0 || text[n - 1] != '\0') coord_client_fail(w->cl, "malformed checkpoint choice");
    }
    if (text[0] == '!') {
        if (w->rank == 0) snprintf(msg, msglen, "--resume: %s", text + 1);
        free(text);
        return 2;
    }
    job_ckpt_complete_t c;
    if (job_ckpt_complete_parse(text, "rank 0's checkpoint choice", &c, err, sizeof err))
        coord_client_fail(w->cl, "%s", err);
    free(text);
    free(c.keys);
    int64_t k = c.iter;
    job_ckpt_header_t want = worker_ckpt_header(w, k), got;
    job_ckpt_state_t st = worker_ckpt_state(w, &want);
    char path[4200];
    job_ckpt_rank_path(path, sizeof path, dir, k, w->rank);
    err[0] = '\0';
    if (c.world != w->world)
        snprintf(err, sizeof err, "COMPLETE lists %d ranks, the job has %d", c.world, w->world);
    else
        job_ckpt_read_rank(path, &want, &c.files[w->rank], &st, &got, err, sizeof err);
    free(c.files);
    /* every rank's verdict, so that all go on or all stop */
    char **tab = worker_allgather(w, RESUME_STATUS_ID0, err, w->cfg->timeout_ms);
    int bad = -1;
    for (int r = 0; r < w->world && bad < 0; r++)
        if (tab[r][0]) bad = r;
    if (bad >= 0 && w->rank == 0)
        snprintf(msg, msglen, "--resume: rank %d: %s", bad, tab[bad]);
    worker_allgather_free(w, tab);
    if (bad >= 0) {
        worker_ckpt_state_free(w, &st);
        return 2;
    }
    /* every replica: the node's parameters (the checkpoint's LBCAST of K - 1 had made them
     * equal), its own dropout state; GPUs: what was read is in host memory, and goes to
     * every device from there with each one's layer state */
    worker_params_to_devices(w, &st);
    for (int d = 0; d < w->devices; d++) {
        wk_device_t *dv = &w->dev[d];
        if (d > 0 && !w->staged) memcpy(dv->params, w->params, (size_t)w->n_params * sizeof(float));
        if (dv->net) nnet_rng_state_restore(dv->net, d == 0 ? st.rng : st.dev_rng[d - 1]);
    }
    worker_ckpt_state_free(w, &st);
    w->loss_sum = got.loss_sum;
    w->loss_n = got.loss_n;
    w->correct = got.correct;
    w->report_iter0 = got.report_iter0;
    w->ls_scale = (float)got.loss_scale;
    w->ls_good = got.loss_scale_good;
    w->ls_ruled = k;
    w->t_start = w->ckpt_last = k;
    worker_ckpt_kept(w, k);
    for (int op = 0; op < w->plan.n_ops; op++) w->done[op] = k;
    if (w->rank == 0) {
        log_info("resumed from %s/iter-%lld: every rank starts at iteration %lld", dir,
                 (long long)k, (long long)k);
        job_ckpt_prune(dir, -1, k); /* checkpoints the killed run left unfinished */
        job_ckpt_prune_resumed(dir, k, w->job->train.keep_checkpoints);
    }
    return 0;
}

static volatile sig_atomic_t s_stop_signal;
static void on_stop_signal(int sig)
{
    (void)sig;
    s_stop_signal = 1;
}

void worker_stop_signal_install(void)
{
    struct sigaction sa = {.sa_handler = on_stop_signal};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
}

bool worker_stop_signalled(void) { return s_stop_signal != 0; }
