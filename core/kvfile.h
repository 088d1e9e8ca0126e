/* kvfile: the `key = value` text files of clusters and experiments — one pair per line, '#'
 * starts a comment, blank lines ignored. The reader walks the lines and hands each pair to
 * the file kind's setter with its "file:line" for messages; errors are "file:line: ...".
 */
#ifndef POSEIDON_KVFILE_H
#define POSEIDON_KVFILE_H

#include <stddef.h>

/* Split one line in place: strips a '#' comment and blanks. Returns 0 for an empty line,
 * 1 with *key and *val set, -1 when the line has no '='. */
int kv_split(char *line, char **key, char **val);

/* Strict number parsing: the whole string must be the number. Return 0 or -1. */
int kv_int(const char *s, long long *out);
int kv_double(const char *s, double *out);

/* The shortest decimal text of v that kv_double() reads back as exactly v, in buf (at least
 * 32 bytes). Returns buf. */
const char *kv_format_double(double v, char *buf);

/* Read a whole file into a NUL-terminated heap buffer (core/infile.h); NULL (errno set) on
 * failure: EIO for a read error, EFBIG for a file over KV_FILE_MAX_BYTES (no cluster or
 * experiment is near it). */
#define KV_FILE_MAX_BYTES (16u << 20)
char *kv_read_file(const char *path);

/* Writes "WHERE: message" into err; returns -1, for `return kv_error(...)`. */
int kv_error(char *err, size_t errlen, const char *where, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Receives one pair; `where` is "file:line". Returns 0, or -1 with the message in err. */
typedef int (*kv_setter_t)(void *obj, const char *key, const char *val, int line_no,
                           const char *where, char *err, size_t errlen);

/* Hands every pair of text to set, in order, stopping at the first error. A key may stand
 * once in a file, unless repeat_ok (a NULL-terminated list, may be NULL) names it. Returns 0
 * with the number of lines in *n_lines, or -1 with "path:line: ..." in err. */
int kv_parse_text(const char *path, const char *text, kv_setter_t set, void *obj,
                  const char *const *repeat_ok, int *n_lines, char *err, size_t errlen);

#endif
