#include "outfile.h"

#include <errno.h>
#include <string.h>
#include <sys/stat.h>

int outfile_make_parents(const char *path)
{
    char dir[4096];
    size_t n = strlen(path);
    if (n >= sizeof dir) {
        errno = ENAMETOOLONG;
        return -1;
    }
    memcpy(dir, path, n + 1);
    char *slash = strrchr(dir, '/');
    if (!slash || slash == dir) return 0;
    *slash = '\0';
    for (char *p = dir + 1; ; p++) {
        if (*p == '/' || *p == '\0') {
            char c = *p;
            *p = '\0';
            if (mkdir(dir, 0777) != 0 && errno != EEXIST) return -1;
            if (c == '\0') break;
            *p = c;
        }
    }
    return 0;
}

FILE *outfile_open(const char *path, const char *mode)
{
    if (outfile_make_parents(path) != 0) return NULL;
    return fopen(path, mode);
}
