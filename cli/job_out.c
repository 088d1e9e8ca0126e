#include "cli/job_out.h"

#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

void job_out_default(const char *model_path, char *out, size_t len)
{
    char stamp[32];
    time_t now = time(NULL);
    strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", localtime(&now));
    const char *base = strrchr(model_path, '/');
    base = base ? base + 1 : model_path;
    int n = (int)strcspn(base, ".");
    snprintf(out, len, "out/runs/%.*s-%s-%d.exp", n, base, stamp, (int)getpid());
}
