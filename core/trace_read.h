/* trace_read: a trace CSV (core/trace.h) read back into rows — the one loop over a trace
 * file's lines, for every reader: the runtime's merge of its ranks' files
 * (core/trace_merge.c) and the reports (reports/compare.c, reports/timeline.c). */
#ifndef POSEIDON_TRACE_READ_H
#define POSEIDON_TRACE_READ_H

#include <stddef.h>

#include "trace.h"

/* Reads every row of the trace CSV at path into *rows (malloc'ed, the caller frees; NULL
 * when there are none). need_header: the first line must be trace_csv_header (a file the
 * user names); without it an empty file is a trace of no rows. Returns the count; -1 when
 * the file cannot be opened (err: "PATH: cannot read: REASON"); -2 for a missing header or
 * a malformed row (err: "PATH:LINE: expected ..."). */
int trace_file_read(const char *path, int need_header, trace_rec_t **rows, char *err,
                    size_t errlen);

#endif
