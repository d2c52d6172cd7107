/* inifile: ini parsing for fuyou's description files, on top of inih.
 *
 * inih does the parsing; this module adds what our users need from it: the exact line of every
 * key (inih's handler gets none in Debian's build, so our line reader counts them), rejection of
 * unknown sections even when empty, over-long lines reported rather than silently split (and
 * never read whole), NUL bytes refused rather than ending a value early, only regular files
 * read (regfile.h: a FIFO or /dev/zero is refused before it is read), strict number parsing,
 * and `section.key=value` overrides from the command line that go through the same key handler
 * as the file. It is not a schema: callers decide which sections and keys exist. */
#ifndef FUYOU_INIFILE_H
#define FUYOU_INIFILE_H

#include <stdbool.h>

#include "fuyou_err.h"

/* The longest line, in characters without the newline, that every reader of ours takes: inih's
 * line buffer (INI_MAX_LINE, 200 bytes in its default and Debian's build) less the newline and
 * the NUL. A longer line is an error, not split (see the reader in inifile.c). */
enum { INIFILE_LINE_MAX = 198 };

/* Where a key came from: a file and line, or a command-line override (line 0, file "--set"). */
typedef struct IniLoc {
    const char *file;
    int line;
} IniLoc;

/* Called for every key with where it stands. Returns 0, or a negative errno with e filled (the
 * message should not repeat the location: inifile prefixes "file:line: "). */
typedef int (*IniKeyFn)(void *user, const IniLoc *loc, const char *section, const char *key,
                        const char *value, Err *e);
/* Returns whether a section name is known. */
typedef bool (*IniSectionFn)(void *user, const char *section);

typedef struct IniSchema {
    IniSectionFn section_ok;
    IniKeyFn key;
    const char *sections_hint; /* e.g. "[gpu] [pcie] [cpu] [ssd] [memory]", for messages */
} IniSchema;

/* Parses the file at path. Returns 0, -errno if it cannot be read (-EISDIR for a directory,
 * -EINVAL for anything else that is not a regular file), -EINVAL on the first bad line; e gets
 * "path:line: problem". */
int inifile_parse_file(const char *path, const IniSchema *schema, void *user, Err *e);

/* Same for ini text held in memory (presets compiled into the binary); name is used in messages. */
int inifile_parse_text(const char *name, const char *text, const IniSchema *schema, void *user,
                       Err *e);

/* Applies one `section.key=value` override through schema->key. Returns 0 or -EINVAL with e
 * naming the override. */
int inifile_apply_override(const char *arg, const IniSchema *schema, void *user, Err *e);

/* Strict number parsing: the whole value must be one finite number (surrounding blanks allowed);
 * a whole number as units_parse_int reads one (the command lines' parser). Return 0 or
 * -EINVAL. */
int inifile_double(const char *value, double *out);
int inifile_int(const char *value, long *out);
/* true/false, yes/no, on/off, 1/0. */
int inifile_bool(const char *value, bool *out);

#endif
