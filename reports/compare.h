/* compare: a simulated and a real trace (core/trace.h) joined on (node, iteration, op,
 * layer), iterations from a given one on; per op kind the rows joined, the mean predicted
 * and measured durations, their relative error (of the sums) and the rows found on one side
 * only. Several rows of one key (APPLY per KV block) are summed. */
#ifndef POSEIDON_REPORTS_COMPARE_H
#define POSEIDON_REPORTS_COMPARE_H

/* Prints the table on stdout and, when csv_out is not NULL, writes it as CSV there. Returns
 * 0, or 1 (the CSV could not be written whole) or 2 (bad input) after saying why on
 * stderr. */
int report_compare(const char *sim_path, const char *real_path, int from, const char *csv_out);

#endif
