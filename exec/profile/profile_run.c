/* profile_run: what fuyou-profile's measurements share; see profile_run.h. */
#include "profile_run.h"

#include <stdarg.h>
#include <stdio.h>

void profile_note(ProfileNotes *ns, const char *section, const char *key, const char *fmt, ...)
{
    if (ns->count == PROFILE_MAX_NOTES)
        return;
    ns->n[ns->count].section = section;
    ns->n[ns->count].key = key;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(ns->n[ns->count].text, sizeof ns->n[0].text, fmt, ap);
    va_end(ap);
    ns->count++;
}
