/* infile: reading a whole file the program loads (model, ONNX graph, cluster, experiment)
 * into memory in one go, the counterpart of outfile. It owns nothing once it returns: the
 * buffer is the caller's. The caller chooses the size bound, since a device such as
 * /dev/zero never ends, and may word the failures its own way from the returned code. */
#ifndef POSEIDON_INFILE_H
#define POSEIDON_INFILE_H

#include <stddef.h>

enum {
    INFILE_OPEN = -1, /* fopen failed; errno is its */
    INFILE_IO = -2,   /* a read error; errno the read's (EISDIR, ...), else EIO */
    INFILE_BIG = -3,  /* more than max_bytes; errno EFBIG */
};

/* Reads path into *buf, a heap buffer with a NUL after its *len bytes (the caller frees it).
 * Returns 0, or one of the codes above with *buf NULL, errno set and "PATH: cannot open:
 * REASON", "PATH: read error" or "PATH: larger than N bytes" in err (which may be NULL when
 * errlen is 0). */
int infile_read(const char *path, size_t max_bytes, char **buf, size_t *len, char *err,
                size_t errlen);

#endif
