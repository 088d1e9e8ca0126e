#include "scheme.h"

#include <stdio.h>
#include <string.h>

#include "check.h"

static const char *const s_base_names[SCHEME_BASE_COUNT] = {"ps", "sfb", "allreduce", "hybrid",
                                                             "hybrid3"};

int scheme_parse(const char *s, scheme_t *out)
{
    char buf[64];
    if (snprintf(buf, sizeof buf, "%s", s) >= (int)sizeof buf) return -1;
    char *plus = strchr(buf, '+');
    if (plus) *plus++ = 0;
    for (int b = 0; b < SCHEME_BASE_COUNT; b++) {
        if (strcmp(buf, s_base_names[b])) continue;
        out->base = (scheme_base_t)b;
        out->wfbp = b == SCHEME_HYBRID || b == SCHEME_HYBRID3;
        if (!plus) return 0;
        if (!strcmp(plus, "wfbp")) out->wfbp = true;
        else if (!strcmp(plus, "none")) out->wfbp = false;
        else return -1;
        return 0;
    }
    return -1;
}

const char *scheme_name(scheme_t s, char *buf, size_t len)
{
    ASSERT(s.base < SCHEME_BASE_COUNT, "bad scheme base %d", s.base);
    bool def = s.base == SCHEME_HYBRID || s.base == SCHEME_HYBRID3;
    if (s.wfbp == def) snprintf(buf, len, "%s", s_base_names[s.base]);
    else snprintf(buf, len, "%s+%s", s_base_names[s.base], s.wfbp ? "wfbp" : "none");
    return buf;
}
