#include "reports/paths.h"

#include <dirent.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/check.h"

int paths_ends_with(const char *s, const char *suffix)
{
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && !strcmp(s + a - b, suffix);
}

static int path_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The files under top/rel (depth levels down), paths relative to top, appended to v. */
static void list_under(const char *top, const char *rel, int depth, char **v, int *n, int max)
{
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s%s%s", top, *rel ? "/" : "", rel);
    DIR *d = opendir(path);
    if (!d) return;
    struct dirent *e;
    while ((e = readdir(d)) && *n < max) {
        if (e->d_name[0] == '.') continue;
        char sub[PATH_MAX], full[PATH_MAX * 2];
        snprintf(sub, sizeof sub, "%s%s%s", rel, *rel ? "/" : "", e->d_name);
        snprintf(full, sizeof full, "%s/%s", top, sub);
        struct stat st;
        if (stat(full, &st)) continue;
        if (S_ISDIR(st.st_mode)) {
            if (depth > 0) list_under(top, sub, depth - 1, v, n, max);
        } else if (S_ISREG(st.st_mode)) {
            v[*n] = strdup(sub);
            if (!v[*n]) die("report: out of memory");
            (*n)++;
        }
    }
    closedir(d);
}

int paths_list(const char *top, int depth, char **v, int max)
{
    int n = 0;
    list_under(top, "", depth, v, &n, max);
    qsort(v, (size_t)n, sizeof *v, path_cmp);
    return n;
}
