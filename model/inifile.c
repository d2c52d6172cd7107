/* inifile: inih with line numbers, section checks and command-line overrides; see inifile.h. */
#include "inifile.h"

#include <assert.h>
#include <ctype.h>
#include <errno.h>
#include <ini.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "regfile.h"
#include "units.h"

/* One parse: the line source (a FILE or a string), the current line number, the first error. */
typedef struct IniRun {
    FILE *fp;
    const char *text;
    IniLoc loc;
    const IniSchema *schema;
    void *user;
    Err *e;
    int rc;       /* first error found by us (key handler, section check, long line) */
    int rc_line;  /* its line */
    char *line;
    size_t line_cap;
} IniRun;

static char *skip_blank(char *s)
{
    while (isspace((unsigned char)*s))
        s++;
    return s;
}

static int run_fail(IniRun *run, int code, const char *msg)
{
    if (run->rc == 0) {
        run->rc = err_set(run->e, code, "%s:%d: %s", run->loc.file, run->loc.line, msg);
        run->rc_line = run->loc.line;
    }
    return run->rc;
}

/* Reads the next line (with its newline) from the run's source into run->line, at most max + 1
 * bytes: returns its length, which is max + 1 when the line is longer than max (the caller
 * refuses it; a file with no newline in sight, such as a sparse file of zeros, is never read
 * whole), or -1 at the end. The length counts NUL bytes, which the caller looks for. */
static ssize_t next_line(IniRun *run, size_t max)
{
    if (run->line_cap < max + 2) {
        char *p = realloc(run->line, max + 2);
        if (!p)
            return -1;
        run->line = p;
        run->line_cap = max + 2;
    }
    size_t len = 0;
    if (run->fp) {
        int c = 0;
        while (len <= max && c != '\n' && (c = getc(run->fp)) != EOF)
            run->line[len++] = (char)c;
        if (len == 0)
            return -1;
    } else {
        if (!run->text || !*run->text)
            return -1;
        size_t n = strcspn(run->text, "\n");
        size_t whole = n + (run->text[n] == '\n');
        len = whole <= max ? whole : max + 1;
        memcpy(run->line, run->text, len);
        run->text += whole;
    }
    run->line[len] = '\0';
    return (ssize_t)len;
}

/* Checks a section header line against the schema, so that unknown sections are reported even
 * when they hold no key (inih calls the key handler only). */
static void check_section(IniRun *run, char *s)
{
    if (*s != '[')
        return;
    char *end = strchr(s, ']');
    if (!end)
        return; /* inih reports the syntax error */
    char name[128];
    size_t n = (size_t)(end - s - 1);
    if (n >= sizeof name)
        n = sizeof name - 1;
    memcpy(name, s + 1, n);
    name[n] = '\0';
    if (!run->schema->section_ok(run->user, name)) {
        char msg[256];
        snprintf(msg, sizeof msg, "unknown section [%s]; the sections are %s", name,
                 run->schema->sections_hint);
        run_fail(run, -EINVAL, msg);
    }
}

/* inih's line reader. Counting lines here is what gives every key its line number. After the
 * first error it reports end of input, so parsing stops there. */
static char *reader(char *str, int num, void *stream)
{
    IniRun *run = stream;
    if (run->rc)
        return NULL;
    ssize_t len = next_line(run, (size_t)num - 1);
    if (len < 0)
        return NULL;
    run->loc.line++;
    if (len > num - 1) {
        char msg[128];
        snprintf(msg, sizeof msg, "line longer than %d characters; shorten it", num - 2);
        run_fail(run, -EINVAL, msg);
        return NULL;
    }
    /* inih sees a C string: a NUL byte would end the value there, silently */
    if (memchr(run->line, '\0', (size_t)len)) {
        run_fail(run, -EINVAL, "NUL byte in the line (is this a binary file?); an ini file "
                 "is text");
        return NULL;
    }
    memcpy(str, run->line, (size_t)len + 1);
    check_section(run, skip_blank(str));
    return run->rc ? NULL : str;
}

static int handler(void *user, const char *section, const char *key, const char *value)
{
    IniRun *run = user;
    if (run->rc)
        return 0;
    Err local;
    int rc = run->schema->key(run->user, &run->loc, section, key, value, &local);
    if (rc < 0) {
        run_fail(run, rc, local.msg);
        return 0;
    }
    return 1;
}

static int parse(IniRun *run)
{
    int r = ini_parse_stream(reader, run, handler, run);
    free(run->line);
    /* inih reports the first line it found wrong (syntax, or a key we refused); a syntax error
     * on an earlier line than ours is the one to tell. */
    if (run->rc && !(r > 0 && r < run->rc_line))
        return run->rc;
    if (r > 0)
        return err_set(run->e, -EINVAL,
                       "%s:%d: syntax error; expected [section], key = value, or a comment "
                       "starting with # or ;", run->loc.file, r);
    if (r < 0)
        return err_set(run->e, -ENOMEM, "%s: out of memory while parsing", run->loc.file);
    return 0;
}

int inifile_parse_file(const char *path, const IniSchema *schema, void *user, Err *e)
{
    FILE *fp;
    int rc = regfile_fopen(path, &fp, e);
    if (rc)
        return rc;
    IniRun run = {.fp = fp, .loc = {path, 0}, .schema = schema, .user = user, .e = e};
    rc = parse(&run);
    if (rc == 0 && ferror(fp))
        rc = err_set(e, -EIO, "%s: read error", path);
    fclose(fp);
    return rc;
}

int inifile_parse_text(const char *name, const char *text, const IniSchema *schema, void *user,
                       Err *e)
{
    IniRun run = {.text = text, .loc = {name, 0}, .schema = schema, .user = user, .e = e};
    return parse(&run);
}

static void trim(char *s)
{
    char *b = skip_blank(s);
    size_t n = strlen(b);
    while (n > 0 && isspace((unsigned char)b[n - 1]))
        n--;
    memmove(s, b, n);
    s[n] = '\0';
}

int inifile_apply_override(const char *arg, const IniSchema *schema, void *user, Err *e)
{
    char buf[256];
    if (strlen(arg) >= sizeof buf)
        return err_set(e, -EINVAL, "--set %.40s...: too long", arg);
    strcpy(buf, arg);
    char *eq = strchr(buf, '=');
    char *dot = eq ? memchr(buf, '.', (size_t)(eq - buf)) : NULL;
    if (!eq || !dot)
        return err_set(e, -EINVAL,
                       "--set %s: expected section.key=value, e.g. --set ssd.count=3", arg);
    *dot = '\0';
    *eq = '\0';
    char *section = buf, *key = dot + 1, *value = eq + 1;
    trim(section);
    trim(key);
    trim(value);
    if (!schema->section_ok(user, section))
        return err_set(e, -EINVAL, "--set %s: unknown section [%s]; the sections are %s", arg,
                       section, schema->sections_hint);
    IniLoc loc = {"--set", 0};
    Err local;
    int rc = schema->key(user, &loc, section, key, value, &local);
    if (rc < 0)
        return err_set(e, rc, "--set %s: %s", arg, local.msg);
    return 0;
}

int inifile_double(const char *value, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(value, &end);
    if (end == value || errno == ERANGE || !isfinite(v))
        return -EINVAL;
    while (isspace((unsigned char)*end))
        end++;
    if (*end)
        return -EINVAL;
    *out = v;
    return 0;
}

int inifile_int(const char *value, long *out)
{
    /* the command lines' parser (units_parse_int), with the blanks around the value allowed */
    char buf[64];
    const char *b = value;
    while (isspace((unsigned char)*b))
        b++;
    size_t n = strlen(b);
    while (n > 0 && isspace((unsigned char)b[n - 1]))
        n--;
    if (n >= sizeof buf)
        return -EINVAL;
    memcpy(buf, b, n);
    buf[n] = '\0';
    int64_t v;
    if (units_parse_int(buf, LONG_MIN, LONG_MAX, &v))
        return -EINVAL;
    *out = (long)v;
    return 0;
}

int inifile_bool(const char *value, bool *out)
{
    static const char *yes[] = {"true", "yes", "on", "1"}, *no[] = {"false", "no", "off", "0"};
    for (size_t i = 0; i < sizeof yes / sizeof yes[0]; i++) {
        if (!strcasecmp(value, yes[i]))
            return *out = true, 0;
        if (!strcasecmp(value, no[i]))
            return *out = false, 0;
    }
    return -EINVAL;
}
