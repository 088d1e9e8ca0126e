/* test: a small test runner. Each TEST registers itself; build/test_unit runs them all (or
 * those whose name contains an argument), each in its own process with a time limit, and
 * ends with "N passed, N failed, N skipped".
 *
 *   CHECK(cond, ...)          records a failure with file:line and goes on
 *   REQUIRE(cond, ...)        records a failure and ends the test
 *   CHECK_EQ_I64(a, b)        integers, printing both
 *   CHECK_NEAR(a, b, atol, rtol)   |a-b| <= atol + rtol*|b|
 *   SKIP(...)                 ends the test as skipped, with the reason
 */
#ifndef POSEIDON_TEST_H
#define POSEIDON_TEST_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>

typedef void (*test_fn_t)(void);
void test_register(const char *name, const char *file, test_fn_t fn);
void test_fail(const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
_Noreturn void test_end_failed(void);
_Noreturn void test_skip(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Path to the poseidon binary and the build folder, for tests that run the CLI. */
const char *test_build_dir(void);

/* A fresh temporary directory for this test (removed by the runner afterwards). */
const char *test_tmpdir(void);

/* Run a shell command, capture stdout+stderr (up to outlen-1 bytes) in out; returns the
 * exit status (or -1 if it could not run). */
int test_run(char *out, size_t outlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

#define TEST(fn)                                                                            \
    static void fn(void);                                                                   \
    __attribute__((constructor)) static void fn##_register(void)                            \
    {                                                                                       \
        test_register(#fn, __FILE__, fn);                                                   \
    }                                                                                       \
    static void fn(void)

#define CHECK(cond, ...)                                                                    \
    do {                                                                                    \
        if (!(cond)) test_fail(__FILE__, __LINE__, "CHECK(" #cond ") " __VA_ARGS__);        \
    } while (0)

#define REQUIRE(cond, ...)                                                                  \
    do {                                                                                    \
        if (!(cond)) {                                                                      \
            test_fail(__FILE__, __LINE__, "REQUIRE(" #cond ") " __VA_ARGS__);               \
            test_end_failed();                                                              \
        }                                                                                   \
    } while (0)

#define CHECK_EQ_I64(a, b)                                                                  \
    do {                                                                                    \
        long long a_ = (long long)(a), b_ = (long long)(b);                                 \
        if (a_ != b_) test_fail(__FILE__, __LINE__, "%s == %s: %lld != %lld", #a, #b, a_, b_); \
    } while (0)

#define CHECK_NEAR(a, b, atol, rtol)                                                        \
    do {                                                                                    \
        double a_ = (double)(a), b_ = (double)(b);                                          \
        if (!(fabs(a_ - b_) <= (atol) + (rtol) * fabs(b_)))                                 \
            test_fail(__FILE__, __LINE__, "%s ~= %s: %.9g vs %.9g", #a, #b, a_, b_);        \
    } while (0)

#define SKIP(...) test_skip(__VA_ARGS__)

#endif
