/* data: labelled image sets in memory, as float NCHW samples and int labels.
 *
 * Sources: Fashion-MNIST IDX files (gzip, read with zlib) from the Debian package
 * dataset-fashion-mnist, normalised to zero mean and unit variance with the training set's
 * own statistics; or synthetic data of any shape (Gaussian samples, uniform labels) for
 * throughput runs. A worker's partition of a set is a contiguous range of it.
 */
#ifndef POSEIDON_DATA_H
#define POSEIDON_DATA_H

#include <stdint.h>

#include "core/model.h"
#include "core/rng.h"

#define DATA_FASHION_MNIST_DIR "/usr/share/datasets/fashion-mnist"
#define DATA_FORTUNES_DIR "/usr/share/games/fortunes"
#define DATA_TEXT_VOCAB 96 /* newline and the 95 printable ASCII characters */

typedef struct {
    int n;           /* samples */
    shape_t shape;   /* per sample */
    int classes;
    int labels;      /* labels per sample: 0 or 1 (one class), S for text (the next chars) */
    float *x;        /* n x shape_count(shape), owned */
    int *y;          /* n x labels, owned */
} dataset_t;

/* Load the Fashion-MNIST training and test sets from dir (NULL: DATA_FASHION_MNIST_DIR).
 * Returns 0, or -1 with "FILE: what is wrong" in err (missing, not gzip, truncated, bad
 * magic, count mismatch between images and labels). */
int data_load_fashion_mnist(const char *dir, dataset_t *train, dataset_t *test, char *err,
                            size_t errlen);

/* Read one IDX file (gzip or plain, as zlib reads both): images (magic 0x803) become floats
 * in [0, 255], labels (magic 0x801) ints. Exposed for tests. */
int data_read_idx_images(const char *path, dataset_t *d, char *err, size_t errlen);
int data_read_idx_labels(const char *path, dataset_t *d, char *err, size_t errlen);

/* Character-level text: every regular file of dir (NULL: DATA_FORTUNES_DIR, the Debian
 * package fortunes-min) except the .dat indexes, in name order, as one stream of ids
 * (newline 0, ' '..'~' 1..95; a tab reads as a space, other bytes are dropped), cut into
 * windows of seq + 1 characters every seq: a sample is the first seq ids (as floats, shape
 * 1x1xseq) and its labels the next character at each position. The last tenth of the
 * windows is the test set. 0, or -1 with the reason in err. */
int data_load_text(const char *dir, int seq, dataset_t *train, dataset_t *test, char *err,
                   size_t errlen);

/* The entropy, in nats, of the characters of d's labels (their unigram distribution): the
 * loss of a model that knows character frequencies and nothing else. */
double data_unigram_entropy(const dataset_t *d);

/* n synthetic samples of this shape: x ~ N(0, 1), y uniform in [0, classes). */
void data_synthetic(dataset_t *d, shape_t shape, int classes, int n, uint64_t seed);

/* Keep only the first n samples (n <= d->n). */
void data_truncate(dataset_t *d, int n);

/* The partition of rank among world workers: samples [*begin, *end). */
void data_partition(int n, int rank, int world, int *begin, int *end);

/* order[i] = begin + i for i < end - begin, then shuffled with r (NULL: no shuffle). */
void data_order(int *order, int begin, int end, rng_t *r);

/* Copy the samples order[0..k) into x (k x count) and y (k x labels). */
void data_gather(const dataset_t *d, const int *order, int k, float *x, int *y);

void data_fini(dataset_t *d);

#endif
