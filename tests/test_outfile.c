/* outfile: output files get their missing folders; a folder that cannot exist is an error. */
#include <errno.h>
#include <stdio.h>
#include <sys/stat.h>

#include "core/outfile.h"
#include "test.h"

TEST(outfile_creates_missing_folders)
{
    char path[512];
    snprintf(path, sizeof path, "%s/a/b/c/x.csv", test_tmpdir());
    FILE *f = outfile_open(path, "w");
    REQUIRE(f != NULL, "could not open %s", path);
    fputs("x\n", f);
    fclose(f);
    struct stat st;
    CHECK(stat(path, &st) == 0 && S_ISREG(st.st_mode), "%s not written", path);
    /* again: the folders exist now */
    CHECK(outfile_make_parents(path) == 0);
    /* a bare file name has no folder to make */
    CHECK(outfile_make_parents("x.csv") == 0);
}

TEST(outfile_fails_when_a_folder_is_a_file)
{
    char file[512], path[600];
    snprintf(file, sizeof file, "%s/plain", test_tmpdir());
    FILE *f = fopen(file, "w");
    REQUIRE(f);
    fclose(f);
    snprintf(path, sizeof path, "%s/sub/x.csv", file);
    errno = 0;
    CHECK(outfile_open(path, "w") == NULL, "opened %s under a plain file", path);
    CHECK(errno == ENOTDIR, "errno %d", errno);
}
