/* worker_scale: tensors S times smaller (the job key tensor_scale = S, emulated compute
 * only), so that a host holds and moves S times fewer bytes for the same cluster.
 *
 * The plan stays the full-size one (the simulator's, hash and all): its ops, their order,
 * the KV blocks and their shards, the buckets and the ring's steps. Only the buffers behind
 * them shrink: each KV block, all-reduce tensor and ring chunk to 1/S of its floats (at least
 * one, so that every message of the plan is still sent), and an SFB layer's outputs m,
 * inputs n and factor rows k each by sqrt(S), so that both its weights (m x n) and its
 * factors (k x (m + n)) shrink S-fold. The links run S times slower
 * (experiments/emucluster.sh -s S, and the probe's result is multiplied back by S), so each
 * message takes the wire time it takes at full size; per-message costs (latency, headers,
 * the host's work per message) stay as they are. The host's own work on the values (the
 * shards' apply, the SFB rebuild) shrinks with them; under emulated compute it lasts the cost
 * model's time for the full size, as FWD and BWD last the profile's, at any S
 * (worker_exec.c: worker_shard_update, the SFB update).
 */
#include "runtime/exec/worker_state.h"

#include <math.h>
#include <stdlib.h>

#include "core/check.h"
#include "runtime/transport/sendq.h"

int64_t worker_value_bytes(const worker_t *w) { return precision_bytes(w->plan.wire_precision); }

int64_t worker_scaled_floats(const worker_t *w, int64_t bytes)
{
    int64_t vb = worker_value_bytes(w);
    if (w->scale <= 1) return bytes / vb;
    int64_t f = (bytes / vb + w->scale - 1) / w->scale;
    return f > 0 ? f : 1;
}

/* bytes / S, a multiple of 4, at least the send queue's smallest slice */
static size_t scaled_queue_bytes(const worker_t *w, int64_t bytes)
{
    int64_t b = bytes / (w->scale > 1 ? w->scale : 1) / 4 * 4;
    return b > SENDQ_SLICE_MIN_BYTES ? (size_t)b : SENDQ_SLICE_MIN_BYTES;
}

size_t worker_slice_bytes(const worker_t *w) { return scaled_queue_bytes(w, w->plan.slice_bytes); }

size_t worker_send_buffer_bytes(const worker_t *w)
{
    return scaled_queue_bytes(w, SENDQ_SOCKET_BUFFER_BYTES);
}

int worker_scaled_dim(const worker_t *w, int64_t x)
{
    if (w->scale <= 1) return (int)x;
    double d = ceil((double)x / sqrt((double)w->scale) - 1e-9);
    return d >= 1 ? (int)d : 1;
}

int64_t worker_scaled_ps_floats(const worker_t *w, int64_t bytes)
{
    const cost_params_t *c = &w->plan.cost;
    int64_t f = 0, nb = cost_ps_blocks(c, bytes);
    for (int64_t i = 0; i < nb; i++) f += worker_scaled_floats(w, cost_ps_block_bytes(c, bytes, i));
    return f;
}

/* count floats of layer l split as its weights and biases are. */
static void layer_split(worker_t *w, int l, int64_t count)
{
    const layer_t *ly = &w->model.layers[l];
    int64_t wt = ly->params ? (int64_t)llround((double)count * ly->weights / ly->params) : 0;
    if (ly->biases > 0 && wt == count && count > 1) wt--; /* the biases keep an entry */
    w->layer_w[l] = wt;
    w->layer_b[l] = count - wt;
}

void worker_scale_layers(worker_t *w)
{
    const plan_t *p = &w->plan;
    const model_t *m = &w->model;
    w->layer_w = xcalloc((size_t)m->n_layers, sizeof *w->layer_w);
    w->layer_b = xcalloc((size_t)m->n_layers, sizeof *w->layer_b);
    for (int l = 0; l < m->n_layers; l++)
        layer_split(w, l, worker_scaled_floats(w, worker_value_bytes(w) * m->layers[l].params));
    for (int u = 0; u < p->n_units; u++) {
        const plan_unit_t *un = &p->units[u];
        int l = un->layer;
        if (l < 0) continue;
        switch (un->method) {
        case SYNC_PS: layer_split(w, l, worker_scaled_ps_floats(w, un->ps_bytes)); break;
        case SYNC_SFB: /* the weights by the factors' dimensions, the biases as PS blocks */
            w->layer_w[l] = (int64_t)worker_scaled_dim(w, un->tensor.m) *
                            worker_scaled_dim(w, un->tensor.n);
            w->layer_b[l] = worker_scaled_ps_floats(w, un->ps_bytes);
            break;
        default: break; /* all-reduce and local updates: the whole layer / S */
        }
    }
    free(w->layer_off);
    free(w->entries);
    w->layer_off = NULL, w->entries = NULL, w->n_entries = 0;
    char err[256];
    ASSERT(worker_entries_build(w, err, sizeof err) == 0, "%s", err);
}
