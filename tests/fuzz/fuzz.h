/* fuzz: the entry points of the fuzz harnesses, one per input parser.
 *
 * Each tests/fuzz/fuzz_NAME.c defines int fuzz_NAME(const uint8_t *data, size_t size): it hands
 * the bytes to the parser as a file of that kind would reach it, checks what a successful parse
 * promises, and aborts on a broken promise; a rejected input is not a failure. Built with
 * -DPOSEIDON_LIBFUZZER (make fuzz, clang) a harness also defines libFuzzer's entry point;
 * built plainly, build/test_unit replays every file of tests/fuzz/corpus/NAME and
 * tests/fuzz/regress/NAME through the same function (tests/test_fuzz_replay.c).
 *
 * Harnesses read the repository's files (models/lenet.net, experiments/...) by relative
 * path: run them from the repository root.
 */
#ifndef POSEIDON_FUZZ_H
#define POSEIDON_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Each returns 1 when the parser accepted the input, 0 when it refused it. */
int fuzz_model(const uint8_t *data, size_t size);
int fuzz_cluster(const uint8_t *data, size_t size);
int fuzz_experiment(const uint8_t *data, size_t size);
int fuzz_profile(const uint8_t *data, size_t size);
int fuzz_msg(const uint8_t *data, size_t size);
int fuzz_keyring(const uint8_t *data, size_t size);
int fuzz_onnx(const uint8_t *data, size_t size);

#ifdef POSEIDON_LIBFUZZER
#define FUZZ_LIBFUZZER_ENTRY(fn)                                                            \
    int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);                           \
    int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)                            \
    {                                                                                       \
        fn(data, size);                                                                     \
        return 0;                                                                           \
    }
#else
#define FUZZ_LIBFUZZER_ENTRY(fn)
#endif

/* A broken promise: say which and abort, so that libFuzzer keeps the input. */
#define FUZZ_ASSERT(cond, ...)                                                              \
    do {                                                                                    \
        if (!(cond)) {                                                                      \
            fprintf(stderr, "%s:%d: fuzz check failed: %s: ", __FILE__, __LINE__, #cond);   \
            fprintf(stderr, __VA_ARGS__);                                                   \
            fputc('\n', stderr);                                                            \
            abort();                                                                        \
        }                                                                                   \
    } while (0)

/* The bytes as a NUL-terminated heap string (text parsers stop at a NUL as a file reader
 * would hand them the whole file; the copy keeps the terminator out of the input). */
static inline char *fuzz_text(const uint8_t *data, size_t size)
{
    char *s = malloc(size + 1);
    if (!s) abort();
    memcpy(s, data, size);
    s[size] = '\0';
    return s;
}

/* An error message must be one non-empty line. */
static inline void fuzz_check_error(const char *err)
{
    FUZZ_ASSERT(err[0] != '\0', "a rejected input without a message");
}

#endif
