/* clock: the runtime's clock, in the time of the cluster a run stands for.
 *
 * A run under time dilation K (the job key time_dilation; experiments/emucluster.sh -k K runs
 * every link at rate / K with its delay x K) is that cluster made K times slower, so that
 * what the host spends on ZeroMQ, the kernel and copying shrinks K-fold against the
 * cluster's time. This clock reads CLOCK_MONOTONIC / K: every time the runtime measures,
 * reports or waits on through it (trace rows, images/s, the probe's link, heartbeats, stall
 * and death thresholds, dependency timeouts) reads as the cluster's, and a sleep until one
 * of its times (emulated compute) lasts K times as long on the host. With K = 1 it is
 * CLOCK_MONOTONIC itself, one clock for every process of a host.
 *
 * The factor is the one process-wide setting of this module: a process stands for one node
 * of one cluster. It is set once, before any other thread reads the clock.
 */
#ifndef POSEIDON_CLOCK_H
#define POSEIDON_CLOCK_H

#include <stdint.h>

/* The cluster's time now, in ns (CLOCK_MONOTONIC / K). */
int64_t clock_now_ns(void);

/* Sets K (>= 1); before any other thread of the process runs. */
void clock_set_dilation(int k);
int clock_dilation(void);

/* A duration on the host (a socket option, a wait on another clock) for `ms` of the
 * cluster's time: ms x K, saturated at INT32_MAX. */
int clock_host_ms(int ms);

/* Sleeps until clock_now_ns() reads deadline_ns (restarting after signals). */
void clock_sleep_until_ns(int64_t deadline_ns);

#endif
