/* sfb: sufficient-factor broadcasting of one FC layer (Xie et al., UAI 2016; Poseidon).
 *
 * The gradient of an M x N FC layer over a batch of K is U^T V with U (K x M) the errors at
 * the layer's output and V (K x N) its inputs. Each rank sends its U and V to every other
 * rank and receives theirs; the caller rebuilds each rank's gradient with one GEMM in the
 * callback. The callback is invoked for every rank 0..W-1, the caller's own included, in
 * rank order, so every replica sums the same terms in the same order and stays
 * bit-identical. K may differ per rank (a short last batch); M and N may not.
 *
 * comm: peers are the ranks 0..W-1, each with a DEALER connected (to their ROUTERs).
 */
#ifndef POSEIDON_SFB_H
#define POSEIDON_SFB_H

#include <stddef.h>
#include <stdint.h>

#include "core/precision.h"
#include "runtime/transport/comm.h"

/* U: (k, m) row-major, V: (k, n) row-major, of rank `rank`. */
typedef void (*sfb_factor_fn)(void *arg, int rank, const float *u, const float *v, size_t k,
                              size_t m, size_t n);

/* Exchanges this rank's factors (k x m and k x n) for layer at iteration and calls fn for
 * every rank in rank order. arrived_ns (optional, W entries): for every other rank, when
 * the later of its two factor messages was taken from the socket (comm_msg_t.recv_ns,
 * possibly before the call when the caller kept them with comm_stash_until); 0 for this
 * rank. 0, or -1 after timeout_ms (logged naming the missing rank). */
int sfb_exchange(comm_t *c, int64_t iteration, int layer, const float *u, const float *v,
                 size_t k, size_t m, size_t n, sfb_factor_fn fn, void *arg,
                 int64_t *arrived_ns, int timeout_ms);

/* sfb_exchange with the factors sent at the wire precision (runtime/sync/wire.h): fn gets
 * every rank's factors decoded to fp32, this rank's own rounded as the peers decode them, so
 * that every replica rebuilds the same sum (in fp32). At fp32 it is sfb_exchange. */
int sfb_exchange_at(comm_t *c, precision_t wire, int64_t iteration, int layer, const float *u,
                    const float *v, size_t k, size_t m, size_t n, sfb_factor_fn fn, void *arg,
                    int64_t *arrived_ns, int timeout_ms);

#endif
