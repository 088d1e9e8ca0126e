/* reject_log: a warning about refused traffic, at most one line per source per interval.
 *
 * A stranger or a broken peer can send thousands of bad messages a second; logging each
 * would bury the job's own lines (and cost the disk). The first refusal from a source is
 * logged at once; further ones within REJECT_LOG_INTERVAL_MS are counted, and the next line
 * for that source says how many were left out. Thread-safe; sources beyond the table's size
 * share the least recently logged slot.
 */
#ifndef POSEIDON_REJECT_LOG_H
#define POSEIDON_REJECT_LOG_H

#define REJECT_LOG_INTERVAL_MS 10000

/* source: what identifies the sender (an address, a routing id), the key of the limit. */
void reject_log(const char *source, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
