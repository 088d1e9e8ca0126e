/* Data tests: Fashion-MNIST loads with the right sizes; a missing, corrupt or truncated file
 * is an error naming the file; partitions tile the set; synthetic data is seeded. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "runtime/exec/data.h"
#include "test.h"

TEST(test_data_fashion_mnist_loads)
{
    if (access(DATA_FASHION_MNIST_DIR "/train-images-idx3-ubyte.gz", R_OK))
        SKIP("%s not installed (make deps)", DATA_FASHION_MNIST_DIR);
    dataset_t tr, te;
    char err[512];
    REQUIRE(data_load_fashion_mnist(NULL, &tr, &te, err, sizeof err) == 0, "%s", err);
    CHECK_EQ_I64(tr.n, 60000);
    CHECK_EQ_I64(te.n, 10000);
    CHECK_EQ_I64(tr.classes, 10);
    CHECK(tr.shape.c == 1 && tr.shape.h == 28 && tr.shape.w == 28);
    double s = 0;
    for (int64_t i = 0; i < (int64_t)tr.n * 784; i++) s += tr.x[i];
    CHECK_NEAR(s / (tr.n * 784.0), 0.0, 1e-3, 0); /* normalised */
    data_fini(&tr);
    data_fini(&te);
}

TEST(test_data_missing_and_corrupt_files)
{
    dataset_t tr, te;
    char err[512];
    CHECK(data_load_fashion_mnist("/nonexistent-dir", &tr, &te, err, sizeof err) == -1);
    CHECK(strstr(err, "/nonexistent-dir/train-images-idx3-ubyte.gz"), "message: %s", err);
    /* garbage that is not gzip: zlib reads it as plain bytes, the magic is wrong */
    char path[512];
    snprintf(path, sizeof path, "%s/train-images-idx3-ubyte.gz", test_tmpdir());
    FILE *f = fopen(path, "wb");
    fputs("this is not an IDX file at all", f);
    fclose(f);
    CHECK(data_load_fashion_mnist(test_tmpdir(), &tr, &te, err, sizeof err) == -1);
    CHECK(strstr(err, path) && strstr(err, "magic"), "message: %s", err);
    /* a valid header promising more images than the file holds */
    gzFile g = gzopen(path, "wb");
    unsigned char hdr[16] = {0, 0, 8, 3, 0, 0, 0, 10, 0, 0, 0, 28, 0, 0, 0, 28};
    gzwrite(g, hdr, sizeof hdr);
    gzwrite(g, "abc", 3);
    gzclose(g);
    CHECK(data_load_fashion_mnist(test_tmpdir(), &tr, &te, err, sizeof err) == -1);
    CHECK(strstr(err, path) && strstr(err, "truncated"), "message: %s", err);
}

TEST(test_data_partition_tiles)
{
    int n = 103, world = 4, next = 0;
    for (int r = 0; r < world; r++) {
        int b, e;
        data_partition(n, r, world, &b, &e);
        CHECK_EQ_I64(b, next);
        CHECK(e - b == 25 || e - b == 26);
        next = e;
    }
    CHECK_EQ_I64(next, n);
}

TEST(test_data_synthetic_and_shuffle_seeded)
{
    dataset_t a, b;
    data_synthetic(&a, (shape_t){3, 4, 5}, 7, 50, 9);
    data_synthetic(&b, (shape_t){3, 4, 5}, 7, 50, 9);
    CHECK(memcmp(a.x, b.x, 50 * 60 * sizeof(float)) == 0);
    CHECK(memcmp(a.y, b.y, 50 * sizeof(int)) == 0);
    for (int i = 0; i < 50; i++) CHECK(a.y[i] >= 0 && a.y[i] < 7);
    int o1[50], o2[50], seen[50] = {0};
    rng_t *r1 = rng_new(1, 1), *r2 = rng_new(1, 1);
    data_order(o1, 0, 50, r1);
    data_order(o2, 0, 50, r2);
    CHECK(memcmp(o1, o2, sizeof o1) == 0);
    for (int i = 0; i < 50; i++) seen[o1[i]]++;
    for (int i = 0; i < 50; i++) CHECK(seen[i] == 1);
    rng_destroy(&r1);
    rng_destroy(&r2);
    data_fini(&a);
    data_fini(&b);
}
