#include "infile.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

/* Closes f, frees data and says why in err; returns code with errno set to e. */
static int fail(FILE *f, char *data, int code, int e, char *err, size_t errlen,
                const char *path, size_t max_bytes)
{
    if (f) fclose(f);
    free(data);
    if (code == INFILE_OPEN) snprintf(err, errlen, "%s: cannot open: %s", path, strerror(e));
    else if (code == INFILE_IO) snprintf(err, errlen, "%s: read error", path);
    else snprintf(err, errlen, "%s: larger than %zu bytes", path, max_bytes);
    errno = e;
    return code;
}

int infile_read(const char *path, size_t max_bytes, char **buf, size_t *len, char *err,
                size_t errlen)
{
    *buf = NULL;
    *len = 0;
    errno = 0;
    FILE *f = fopen(path, "rb");
    if (!f) return fail(NULL, NULL, INFILE_OPEN, errno, err, errlen, path, max_bytes);
    size_t cap = 1 << 16, n = 0, r;
    char *data = xmalloc(cap);
    while ((r = fread(data + n, 1, cap - n - 1, f)) > 0) { /* one byte kept for the NUL */
        n += r;
        if (n > max_bytes) return fail(f, data, INFILE_BIG, EFBIG, err, errlen, path, max_bytes);
        if (n == cap - 1) data = xrealloc(data, cap *= 2);
    }
    if (ferror(f)) /* the read's errno (EISDIR for a directory), else EIO */
        return fail(f, data, INFILE_IO, errno ? errno : EIO, err, errlen, path, max_bytes);
    fclose(f);
    data[n] = 0;
    *buf = data;
    *len = n;
    return 0;
}
