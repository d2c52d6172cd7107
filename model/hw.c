/* hw: the hardware ini schema, presets, overrides, and the GEMM and attention efficiency
 * curves; see hw.h. */
#include "hw.h"

#include <assert.h>
#include <ctype.h>
#include <errno.h>
#include <gsl/gsl_errno.h>
#include <gsl/gsl_interp.h>
#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "inifile.h"
#include "model.h"
#include "presets.h"
#include "regfile.h"

typedef enum KeyKind {
    K_NAME,   /* free text */
    K_NUMBER, /* double in the key's range */
    K_COUNT,  /* integer in the key's range */
    K_CURVE,  /* dim:eff pairs, interpolated (HwCurve) */
    K_HEADS,  /* one eff, or head_size:eff pairs, looked up (HwCurve) */
} KeyKind;

/* Every number has a plausible range, inclusive, checked where it is read so the message names
 * the file:line or the --set argument. The ranges are wide (from a slow VM's disk to hardware
 * well beyond today's) but keep every duration the cost model derives finite and short enough
 * to print: a latency of 1e305 us or a peak of 1e-300 TFLOPS is a typo, not a machine. */
typedef struct HwKey {
    const char *section, *key;
    KeyKind kind;
    size_t offset;
    bool required;
    double lo, hi;     /* curves: their efficiencies' */
    bool above_lo;     /* lo itself excluded (sizes: greater than 0) */
    const char *range; /* says the range in words instead of the numbers */
} HwKey;

/* The ranges, in the keys' units. */
#define GBPS 1e-3, 1e4          /* link and disk bandwidths: 1 MB/s to 10 TB/s */
#define TFLOPS 1e-3, 1e5        /* 1 GFLOP/s to 100 PFLOP/s */
#define MEM_GIB 0, HW_MAX_MEM_GIB /* above 0, up to 1 PiB (tiny budgets are fine: they
                                    overflow) */
#define US_LINK 0, 1e4          /* launch and PCIe latencies: up to 10 ms */
#define USD 0, 1e8              /* above 0 (absent is 0), up to 100 million dollars */

/* NUM and COUNT take the range as lo, hi, above_lo (the macros above expand to lo, hi) */
#define RANGED(sec, k, kind, field, req, lo, hi, above) \
    {sec, k, kind, offsetof(Hardware, field), req, lo, hi, above, NULL}
#define NUM(sec, k, field, req, ...) RANGED(sec, k, K_NUMBER, field, req, __VA_ARGS__)
#define COUNT(sec, k, field, req, ...) RANGED(sec, k, K_COUNT, field, req, __VA_ARGS__)
#define NAME(sec, k, field) {sec, k, K_NAME, offsetof(Hardware, field), false, 0, 0, false, NULL}
static const HwKey keys[] = {
    NAME("gpu", "name", gpu_name),
    NUM("gpu", "mem_GiB", gpu_mem_GiB, true, MEM_GIB, true),
    NUM("gpu", "bf16_TFLOPS", gpu_bf16_TFLOPS, true, TFLOPS, false),
    NUM("gpu", "fp32_TFLOPS", gpu_fp32_TFLOPS, true, TFLOPS, false),
    NUM("gpu", "mem_GBps", gpu_mem_GBps, true, 1e-3, 1e6, false),
    NUM("gpu", "launch_us", gpu_launch_us, true, US_LINK, false),
    NUM("gpu", "task_us", gpu_task_us, false, US_LINK, false),
    {"gpu", "attn_efficiency", K_HEADS, offsetof(Hardware, attn), true, 1e-3, 1, false, NULL},
    /* small GEMMs are measured near 0.2% of peak (h200.ini); far below that, every GEMM would
     * last for ages */
    {"gpu", "gemm_efficiency", K_CURVE, offsetof(Hardware, gemm), true, 1e-4, 1.2, false, NULL},
    NUM("gpu", "nvlink_GBps", gpu_nvlink_GBps, false, GBPS, false),
    NUM("pcie", "h2d_GBps", h2d_GBps, true, GBPS, false),
    NUM("pcie", "d2h_GBps", d2h_GBps, true, GBPS, false),
    NUM("pcie", "h2d_bidir_GBps", h2d_bidir_GBps, false, GBPS, false),
    NUM("pcie", "d2h_bidir_GBps", d2h_bidir_GBps, false, GBPS, false),
    NUM("pcie", "latency_us", pcie_latency_us, true, US_LINK, false),
    NAME("cpu", "name", cpu_name),
    COUNT("cpu", "cores", cpu_cores, true, 1, 65536, false),
    NUM("cpu", "mem_GBps", cpu_mem_GBps, true, 1e-3, 1e5, false),
    NUM("cpu", "adam_Gparams_per_s", adam_Gparams_per_s, true, 1e-4, 1e4, false),
    NUM("cpu", "sum_GBps", cpu_sum_GBps, false, GBPS, false),
    NAME("ssd", "name", ssd_name),
    COUNT("ssd", "count", ssd_count, true, 1, 1024, false),
    NUM("ssd", "read_GBps", ssd_read_GBps, true, GBPS, false),
    NUM("ssd", "write_GBps", ssd_write_GBps, true, GBPS, false),
    {"ssd", "duplex_factor", K_NUMBER, offsetof(Hardware, ssd_duplex), true, 1, 2, false,
     "between 1 (reads and writes share the bandwidth) and 2 (full duplex)"},
    NUM("ssd", "host_GBps", ssd_host_GBps, false, GBPS, false),
    /* optional, 0 as absent: an override can go back to duplex_factor's shares */
    NUM("ssd", "read_bidir_GBps", ssd_read_bidir_GBps, false, 0, 1e4, false),
    NUM("ssd", "write_bidir_GBps", ssd_write_bidir_GBps, false, 0, 1e4, false),
    NUM("ssd", "latency_us", ssd_latency_us, true, 0, 1e5, false),
    NUM("ssd", "capacity_GB", ssd_capacity_GB, true, 0, HW_MAX_SSD_GB, true),
    NUM("memory", "cpu_mem_GiB", cpu_mem_GiB, true, MEM_GIB, true),
    NUM("memory", "cpu_reserved_GiB", cpu_reserved_GiB, false, MEM_GIB, false),
    NUM("memory", "gpu_reserved_GiB", gpu_reserved_GiB, false, MEM_GIB, false),
    NUM("price", "gpu_usd", price_gpu_usd, false, USD, true),
    NUM("price", "ssd_usd", price_ssd_usd, false, USD, true),
    NUM("price", "host_usd", price_host_usd, false, USD, true),
};
#undef RANGED
#undef NUM
#undef COUNT
#undef NAME
#undef GBPS
#undef TFLOPS
#undef MEM_GIB
#undef US_LINK
#undef USD
enum { N_KEYS = sizeof keys / sizeof keys[0] };

static const char *const sections[] = {"gpu", "pcie", "cpu", "ssd", "memory", "price"};

/* Keys the cost model no longer reads: the regression showed each moving its errors less than
 * its own runs drift from pass to pass (MEASUREMENTS.md, "Retired keys"). A description that
 * sets one is refused, naming it, rather than read as if its value still mattered. */
static const struct { const char *section, *key; } retired_keys[] = {
    {"pcie", "h2d_adam_GBps"}, {"pcie", "d2h_adam_GBps"}, {"cpu", "adam_io_GBps"},
    {"cpu", "adam_h2d_GBps"},  {"cpu", "adam_d2h_GBps"},  {"cpu", "adam_gpu_share"},
    {"cpu", "sum_first_GBps"},
};

typedef struct HwParse {
    Hardware *hw;
    IniLoc seen[N_KEYS]; /* where each key was set; file NULL if not yet */
} HwParse;

static bool hw_section_ok(void *user, const char *section)
{
    (void)user;
    for (size_t i = 0; i < sizeof sections / sizeof sections[0]; i++)
        if (!strcmp(section, sections[i]))
            return true;
    return false;
}

/* A curve key's dim:eff pairs into c, each efficiency in the key's range: gemm_efficiency's
 * GEMM sizes (K_CURVE) or attn_efficiency's whole head sizes (K_HEADS), increasing. Messages
 * name the key. */
static int parse_curve(const HwKey *k, const char *value, HwCurve *c, Err *e)
{
    const bool heads = k->kind == K_HEADS;
    const char *dim_name = heads ? "head_size" : "dim", *dims = heads ? "head sizes" : "dims";
    const double dim_max = heads ? MODEL_MAX_HIDDEN : 1e9;
    const char *p = value;
    int n = 0;
    while (*p) {
        double dim, eff;
        int used = 0;
        if (sscanf(p, " %lf : %lf %n", &dim, &eff, &used) != 2 || used == 0)
            return err_set(e, -EINVAL, "%s: expected %s:efficiency pairs such as %s, got '%s'",
                           k->key, dim_name, heads ? "'64:0.12 128:0.15' (or one efficiency "
                           "for every head size)" : "'1024:0.6 4096:0.9'", value);
        if (n == HW_CURVE_MAX)
            return err_set(e, -EINVAL, "%s: at most %d points", k->key, HW_CURVE_MAX);
        if (!(dim >= 1 && dim <= dim_max) || !(eff >= k->lo && eff <= k->hi))
            return err_set(e, -EINVAL, "%s: point %d (%g:%g) needs 1 <= %s <= %g and %g <= "
                           "efficiency <= %g", k->key, n + 1, dim, eff, dim_name, dim_max, k->lo,
                           k->hi);
        if (heads && dim != floor(dim))
            return err_set(e, -EINVAL, "%s: point %d's head size %.17g is not a whole number",
                           k->key, n + 1, dim);
        if (n > 0 && dim <= c->dim[n - 1])
            return err_set(e, -EINVAL, "%s: %s must increase (%g after %g)", k->key, dims, dim,
                           c->dim[n - 1]);
        /* the GEMM curve is interpolated in log2 of the size, where GSL needs the points
         * strictly increasing too (else its error handler aborts the process); whole head
         * sizes that increase always do */
        if (!heads && n > 0 && !(log2(dim) > log2(c->dim[n - 1])))
            return err_set(e, -EINVAL, "%s: %s %.17g and %.17g are too close to interpolate "
                           "between; drop one", k->key, dims, c->dim[n - 1], dim);
        c->dim[n] = dim;
        c->eff[n] = eff;
        n++;
        p += used;
        if (*p == ',')
            p++;
    }
    if (n == 0)
        return err_set(e, -EINVAL, "%s: no points given", k->key);
    c->n = n;
    return 0;
}

/* Whether hw_write can write name so that it reads back the same: inih takes a `;` first in a
 * value, or after a blank anywhere in it, as the start of a comment, and strips blanks at both
 * ends. */
static bool name_writable(const char *name)
{
    size_t n = strlen(name);
    if (n && (name[0] == ';' || isspace((unsigned char)name[0]) ||
              isspace((unsigned char)name[n - 1])))
        return false;
    for (size_t i = 0; i < n; i++)
        if (iscntrl((unsigned char)name[i]) || (i && name[i] == ';' &&
                                                isspace((unsigned char)name[i - 1])))
            return false;
    return true;
}

static int set_value(Hardware *hw, const HwKey *k, const char *value, Err *e)
{
    void *field = (char *)hw + k->offset;
    if (k->kind == K_NAME) {
        if (strlen(value) >= 64)
            return err_set(e, -EINVAL, "%s: at most 63 characters", k->key);
        if (!name_writable(value))
            return err_set(e, -EINVAL, "%s '%s': a name is printable text that does not begin "
                           "with ';', hold a ';' after a blank (an ini reads those as "
                           "comments), or begin or end with blanks", k->key, value);
        strcpy(field, value);
        return 0;
    }
    /* attn_efficiency is pairs, or one number as the other number keys */
    if (k->kind == K_CURVE || (k->kind == K_HEADS && strchr(value, ':')))
        return parse_curve(k, value, field, e);
    if (k->kind == K_COUNT) {
        long v;
        if (inifile_int(value, &v) || v < k->lo || v > k->hi)
            return err_set(e, -EINVAL, "%s: expected a whole number from %.10g to %.10g, got '%s'",
                           k->key, k->lo, k->hi, value);
        *(int *)field = (int)v;
        return 0;
    }
    double v;
    if (inifile_double(value, &v))
        return err_set(e, -EINVAL, "%s: expected %s, got '%s'", k->key, k->kind == K_HEADS ?
                       "one efficiency, or head_size:efficiency pairs such as '64:0.12 128:0.15'"
                       : "a number", value);
    if (!(k->above_lo ? v > k->lo : v >= k->lo) || v > k->hi) {
        if (k->range)
            return err_set(e, -EINVAL, "%s must be %s (got %s)", k->key, k->range, value);
        return err_set(e, -EINVAL, k->above_lo ? "%s must be greater than %.10g and at most "
                       "%.10g (got %s)" : "%s must be from %.10g to %.10g (got %s)", k->key, k->lo,
                       k->hi, value);
    }
    if (k->kind == K_HEADS)
        *(HwCurve *)field = (HwCurve){.n = 1, .eff = {v}}; /* dim 0: every head size */
    else
        *(double *)field = v;
    return 0;
}

static int hw_key(void *user, const IniLoc *loc, const char *section, const char *key,
                  const char *value, Err *e)
{
    HwParse *hp = user;
    int i = 0;
    while (i < N_KEYS && (strcmp(keys[i].section, section) || strcmp(keys[i].key, key)))
        i++;
    for (size_t r = 0; i == N_KEYS && r < sizeof retired_keys / sizeof retired_keys[0]; r++)
        if (!strcmp(retired_keys[r].section, section) && !strcmp(retired_keys[r].key, key))
            return err_set(e, -EINVAL, "key '%s' in [%s] is retired: the cost model no longer "
                           "reads it (MEASUREMENTS.md, \"Retired keys\"); delete its line", key,
                           section);
    if (i == N_KEYS) {
        char known[512] = "";
        for (int j = 0; j < N_KEYS; j++)
            if (!strcmp(keys[j].section, section))
                err_append(known, sizeof known, "%s%s", known[0] ? ", " : "", keys[j].key);
        return err_set(e, -EINVAL, "unknown key '%s' in [%s]; the keys there are %s", key,
                       section, known);
    }
    /* A file may set a key once; a command-line override replaces whatever the file said. */
    if (hp->seen[i].file && loc->line > 0 && hp->seen[i].line > 0)
        return err_set(e, -EINVAL, "key '%s' in [%s] given twice (first on line %d)", key,
                       section, hp->seen[i].line);
    int rc = set_value(hp->hw, &keys[i], value, e);
    if (rc == 0)
        hp->seen[i] = *loc;
    return rc;
}

static const IniSchema hw_schema = {hw_section_ok, hw_key,
                                    "[gpu] [pcie] [cpu] [ssd] [memory] [price]"};

const char *hw_preset_name(int i)
{
    return i >= 0 && i < hw_preset_files_count ? hw_preset_files[i].name : NULL;
}

static const EmbeddedText *find_preset(const char *name)
{
    for (int i = 0; i < hw_preset_files_count; i++) {
        const char *p = hw_preset_files[i].name;
        size_t n = strlen(name);
        if (!strcmp(p, name) || (!strncmp(p, name, n) && !strcmp(p + n, ".ini")))
            return &hw_preset_files[i];
    }
    return NULL;
}

static int build_interp(HwCurve *c, Err *e)
{
    if (c->n < 2)
        return 0; /* constant */
    for (int i = 0; i < c->n; i++)
        c->logdim[i] = log2(c->dim[i]);
    const gsl_interp_type *t = c->n >= 3 ? gsl_interp_steffen : gsl_interp_linear;
    gsl_interp *in = gsl_interp_alloc(t, (size_t)c->n);
    if (!in)
        return err_set(e, -ENOMEM, "out of memory for the GEMM efficiency curve");
    if (gsl_interp_init(in, c->logdim, c->eff, (size_t)c->n) != GSL_SUCCESS) {
        gsl_interp_free(in);
        return err_set(e, -EINVAL, "gemm_efficiency: GSL could not interpolate the points");
    }
    c->interp = in;
    return 0;
}

static int key_index(const char *section, const char *key)
{
    for (int i = 0; i < N_KEYS; i++)
        if (!strcmp(keys[i].section, section) && !strcmp(keys[i].key, key))
            return i;
    assert(!"no such hardware key");
    return 0;
}

static double key_number(const Hardware *hw, int i)
{
    return *(const double *)((const char *)hw + keys[i].offset);
}

/* Where key i's value came from: "--set section.key", "file:line", or "the default". */
static void key_origin(const HwParse *hp, int i, char *buf, size_t n)
{
    const IniLoc *l = &hp->seen[i];
    if (!l->file)
        snprintf(buf, n, "the default");
    else if (l->line == 0)
        snprintf(buf, n, "--set %s.%s", keys[i].section, keys[i].key);
    else
        snprintf(buf, n, "%s:%d", l->file, l->line);
}

/* Checks required keys, fills optional ones, cross-checks, builds the curve. */
static int finish(HwParse *hp, Err *e)
{
    Hardware *hw = hp->hw;
    for (int i = 0; i < N_KEYS; i++)
        if (keys[i].required && !hp->seen[i].file)
            return err_set(e, -EINVAL, "%s: [%s] lacks required key '%s'; see the presets in "
                           "model/presets/ for its meaning and unit", hw->source,
                           keys[i].section, keys[i].key);
    if (hw->h2d_bidir_GBps == 0)
        hw->h2d_bidir_GBps = hw->h2d_GBps;
    if (hw->d2h_bidir_GBps == 0)
        hw->d2h_bidir_GBps = hw->d2h_GBps;
    static const char *const dirs[2] = {"h2d", "d2h"};
    for (int d = 0; d < 2; d++) {
        char one[32], both[32], w1[96], w2[96];
        snprintf(one, sizeof one, "%s_GBps", dirs[d]);
        snprintf(both, sizeof both, "%s_bidir_GBps", dirs[d]);
        int i1 = key_index("pcie", one), i2 = key_index("pcie", both);
        double v1 = key_number(hw, i1), v2 = key_number(hw, i2);
        if (v2 <= v1)
            continue;
        /* name where each value came from: an override is usually what broke the pair */
        key_origin(hp, i1, w1, sizeof w1);
        key_origin(hp, i2, w2, sizeof w2);
        return err_set(e, -EINVAL, "[pcie] %s %g (%s) is above %s %g (%s): a copy both ways "
                       "at once is not faster than one way; set both, e.g. --set pcie.%s=%g",
                       both, v2, w2, one, v1, w1, both, v1);
    }
    if ((hw->ssd_read_bidir_GBps > 0) != (hw->ssd_write_bidir_GBps > 0))
        return err_set(e, -EINVAL, "%s: [ssd] read_bidir_GBps and write_bidir_GBps come "
                       "together (each direction while the other runs); give both or neither",
                       hw->source);
    if (hw->ssd_read_bidir_GBps > hw->ssd_read_GBps ||
        hw->ssd_write_bidir_GBps > hw->ssd_write_GBps)
        return err_set(e, -EINVAL, "%s: [ssd] read_bidir_GBps %g / write_bidir_GBps %g above "
                       "read_GBps %g / write_GBps %g: a direction is not faster while the other "
                       "runs; lower them too, or set both to 0 for duplex_factor's shares (e.g. "
                       "--set ssd.read_bidir_GBps=0 --set ssd.write_bidir_GBps=0)", hw->source,
                       hw->ssd_read_bidir_GBps, hw->ssd_write_bidir_GBps, hw->ssd_read_GBps,
                       hw->ssd_write_GBps);
    if (hw->gpu_reserved_GiB >= hw->gpu_mem_GiB)
        return err_set(e, -EINVAL, "%s: [memory] gpu_reserved_GiB (%g) leaves no GPU memory "
                       "of [gpu] mem_GiB (%g)", hw->source, hw->gpu_reserved_GiB,
                       hw->gpu_mem_GiB);
    if (hw->cpu_reserved_GiB >= hw->cpu_mem_GiB)
        return err_set(e, -EINVAL, "%s: [memory] cpu_reserved_GiB (%g) leaves no host memory "
                       "of cpu_mem_GiB (%g)", hw->source, hw->cpu_reserved_GiB,
                       hw->cpu_mem_GiB);
    if (!hw->gpu_name[0])
        strcpy(hw->gpu_name, "unnamed GPU");
    if (!hw->cpu_name[0])
        strcpy(hw->cpu_name, "unnamed CPU");
    if (!hw->ssd_name[0])
        strcpy(hw->ssd_name, "unnamed SSD");
    return build_interp(&hw->gemm, e);
}

int hw_load(const char *name_or_path, const char *const *overrides, int n_overrides,
            Hardware *hw, Err *e)
{
    memset(hw, 0, sizeof *hw);
    snprintf(hw->source, sizeof hw->source, "%s", name_or_path);
    HwParse hp = {.hw = hw};
    struct stat st;
    const EmbeddedText *preset = strchr(name_or_path, '/') ? NULL : find_preset(name_or_path);
    int rc;
    if (preset) {
        snprintf(hw->source, sizeof hw->source, "%s", preset->name);
        rc = inifile_parse_text(preset->name, preset->text, &hw_schema, &hp, e);
    } else if (strchr(name_or_path, '/') || stat(name_or_path, &st) == 0) {
        rc = inifile_parse_file(name_or_path, &hw_schema, &hp, e);
    } else {
        char names[256] = "";
        for (int i = 0; hw_preset_name(i); i++)
            err_append(names, sizeof names, "%s%s", i ? ", " : "", hw_preset_name(i));
        return err_set(e, -ENOENT, "unknown hardware '%s': no such preset (%s) or file; "
                       "`fuyou-profile` writes one for this machine", name_or_path, names);
    }
    for (int i = 0; rc == 0 && i < n_overrides; i++)
        rc = inifile_apply_override(overrides[i], &hw_schema, &hp, e);
    if (rc == 0)
        rc = finish(&hp, e);
    if (rc)
        hw_free(hw);
    return rc;
}

enum { DESCRIPTION_MAX = 1 << 20 }; /* a hardware ini is a few KiB */

int hw_description_text(const char *name_or_path, const char **text, char **owned)
{
    *owned = NULL;
    *text = NULL;
    const EmbeddedText *preset = strchr(name_or_path, '/') ? NULL : find_preset(name_or_path);
    if (preset) {
        *text = preset->text;
        return 0;
    }
    FILE *f;
    Err e;
    int rc = regfile_fopen(name_or_path, &f, &e);
    if (rc)
        return rc;
    *owned = malloc(DESCRIPTION_MAX + 1);
    size_t len = *owned ? fread(*owned, 1, DESCRIPTION_MAX + 1, f) : 0;
    rc = !*owned ? -ENOMEM : ferror(f) ? -EIO : len > DESCRIPTION_MAX ? -EFBIG : 0;
    fclose(f);
    if (rc) {
        free(*owned);
        *owned = NULL;
        return rc;
    }
    (*owned)[len] = 0;
    *text = *owned;
    return 0;
}

/* The text of a line's [lo, hi) with the blanks at both ends dropped. */
static void trim(const char **lo, const char **hi)
{
    while (*lo < *hi && isspace((unsigned char)**lo))
        (*lo)++;
    while (*hi > *lo && isspace((unsigned char)(*hi)[-1]))
        (*hi)--;
}

int hw_comment(const char *name_or_path, const char *section, const char *key, char *out,
               size_t n)
{
    const char *text;
    char *owned;
    int rc = hw_description_text(name_or_path, &text, &owned);
    if (!rc)
        rc = hw_comment_in(text, section, key, out, n);
    free(owned);
    return rc;
}

int hw_comment_in(const char *text, const char *section, const char *key, char *out, size_t n)
{
    if (!strncmp(text, "\xEF\xBB\xBF", 3)) /* a UTF-8 byte order mark, as inih allows */
        text += 3;
    /* the lines as inih reads them (inifile.c): `;` or `#` starts a comment line, `[name]`
     * a section (the rest of its line ignored), `key = value` or `key: value` a key, whose
     * value may end in an inline comment, `;` after a blank */
    char here[64] = "";
    out[0] = 0;
    bool found = false;
    for (const char *line = text, *end; *line && !found; line = *end ? end + 1 : end) {
        end = line + strcspn(line, "\n");
        const char *p = line, *q = end;
        trim(&p, &q);
        if (p < q && (*p == '#' || *p == ';')) {
            p++;
            trim(&p, &q);
            if (p < q)
                err_append(out, n, "%s%.*s", out[0] ? " " : "", (int)(q - p), p);
            continue;
        }
        const char *sep = p + strcspn(p, "=:\n");
        if (p < q && *p == '[' && memchr(p, ']', (size_t)(q - p))) {
            const char *close = memchr(p, ']', (size_t)(q - p));
            snprintf(here, sizeof here, "%.*s", (int)(close - p - 1), p + 1);
        } else if (sep < q && !strcmp(here, section)) {
            const char *k = p, *kend = sep;
            trim(&k, &kend);
            if ((size_t)(kend - k) == strlen(key) && !strncmp(k, key, (size_t)(kend - k))) {
                for (const char *c = sep + 1; c < q; c++)
                    if (*c == ';' && isspace((unsigned char)c[-1])) {
                        const char *lo = c + 1, *hi = q;
                        trim(&lo, &hi);
                        if (lo < hi)
                            err_append(out, n, "%s%.*s", out[0] ? " " : "", (int)(hi - lo), lo);
                        break;
                    }
                found = true;
                continue;
            }
        }
        out[0] = 0;
    }
    return found && out[0] ? 1 : 0;
}

/* A note as comment lines of at most about 100 columns, broken between words, so that a long
 * note never makes a line the reader refuses. */
static void write_comment(FILE *f, const char *text)
{
    enum { WIDTH = 96 };
    while (*text) {
        size_t n = strlen(text);
        if (n > WIDTH) {
            n = WIDTH;
            while (n > 0 && text[n] != ' ')
                n--;
            if (n == 0)
                n = WIDTH;
        }
        fprintf(f, "; %.*s\n", (int)n, text);
        text += n;
        while (*text == ' ')
            text++;
    }
}

/* The fewest significant digits, from `digits` up to 17 (which read back exactly), with which
 * v[0..n) read back strictly increasing, in log2 when in_log2: what hw_write writes must pass
 * hw_load's strict checks (GEMM dims increase in log2, a reserve below its memory), which two
 * values that round to the same text would fail. */
static int ordered_digits(const double *v, int n, int digits, bool in_log2)
{
    for (; digits < 17; digits++) {
        double prev = 0;
        bool ordered = true;
        for (int i = 0; i < n && ordered; i++) {
            char text[64];
            snprintf(text, sizeof text, "%.*g", digits, v[i]);
            double x = strtod(text, NULL);
            x = in_log2 ? log2(x) : x;
            ordered = i == 0 || x > prev;
            prev = x;
        }
        if (ordered)
            break;
    }
    return digits;
}

/* The digits hw_write gives a number key: 6, or more when a strict check pairs it with
 * another key (a memory and its reserve). */
static int key_digits(const Hardware *hw, const HwKey *k)
{
    if (!strcmp(k->key, "mem_GiB") || !strcmp(k->key, "gpu_reserved_GiB"))
        return ordered_digits((const double[]){hw->gpu_reserved_GiB, hw->gpu_mem_GiB}, 2, 6,
                              false);
    if (!strcmp(k->key, "cpu_mem_GiB") || !strcmp(k->key, "cpu_reserved_GiB"))
        return ordered_digits((const double[]){hw->cpu_reserved_GiB, hw->cpu_mem_GiB}, 2, 6,
                              false);
    return 6;
}

int hw_write(FILE *f, const Hardware *hw, HwNoteFn note, void *ctx)
{
    const char *section = NULL; /* the last section header written */
    for (int i = 0; i < N_KEYS; i++) {
        const HwKey *k = &keys[i];
        const char *field = (const char *)hw + k->offset;
        char value[512];
        switch (k->kind) {
        case K_NAME:
            if (!*field)
                continue; /* optional, unset */
            snprintf(value, sizeof value, "%s", field);
            break;
        case K_COUNT:
            snprintf(value, sizeof value, "%d", *(const int *)field);
            break;
        case K_CURVE:
        case K_HEADS: {
            const HwCurve *c = (const HwCurve *)field;
            if (c->n == 1 && c->dim[0] == 0) { /* one number, every head size */
                snprintf(value, sizeof value, "%.6g", c->eff[0]);
                break;
            }
            int digits = ordered_digits(c->dim, c->n, 6, true);
            size_t n = 0;
            value[0] = 0;
            for (int j = 0; j < c->n && n < sizeof value; j++)
                n += (size_t)snprintf(value + n, sizeof value - n, "%s%.*g:%.6g", j ? " " : "",
                                      digits, c->dim[j], c->eff[j]);
            break;
        }
        default:
            if (!k->required && *(const double *)field == 0)
                continue; /* optional, unset */
            snprintf(value, sizeof value, "%.*g", key_digits(hw, k), *(const double *)field);
        }
        if (strlen(k->key) + 3 + strlen(value) > INIFILE_LINE_MAX)
            return -E2BIG;
        /* a section's header comes with its first key: one of optional keys all unset
         * ([price]) is left out */
        if (!section || strcmp(section, k->section)) {
            fprintf(f, "%s[%s]\n", section ? "\n" : "", k->section);
            section = k->section;
        }
        const char *why = note ? note(ctx, k->section, k->key) : NULL;
        if (why)
            write_comment(f, why);
        fprintf(f, "%s = %s\n", k->key, value);
    }
    return ferror(f) ? -EIO : 0;
}

void hw_free(Hardware *hw)
{
    if (hw->gemm.interp)
        gsl_interp_free(hw->gemm.interp);
    hw->gemm.interp = NULL;
}

double hw_gemm_efficiency(const Hardware *hw, int64_t m, int64_t n, int64_t k)
{
    assert(m > 0 && n > 0 && k > 0);
    const HwCurve *c = &hw->gemm;
    assert(c->n >= 1);
    double size = 3.0 / (1.0 / (double)m + 1.0 / (double)n + 1.0 / (double)k);
    if (c->n == 1 || size <= c->dim[0])
        return c->eff[0];
    if (size >= c->dim[c->n - 1])
        return c->eff[c->n - 1];
    return gsl_interp_eval(c->interp, c->logdim, c->eff, log2(size), NULL);
}

double hw_attn_efficiency(const Hardware *hw, int64_t head_size)
{
    assert(head_size >= 1);
    const HwCurve *c = &hw->attn;
    assert(c->n >= 1);
    /* b, the first point at or above the head size h, is h itself; or, with a the point below
     * it, the one of a and b nearer h in log2 is a when h / a <= b / h, h^2 <= a * b (a tie
     * too; exact in doubles below 2^26) */
    int i = 0;
    while (i < c->n && c->dim[i] < (double)head_size)
        i++;
    if (i == 0)
        return c->eff[0];
    if (i == c->n)
        return c->eff[c->n - 1];
    double h = (double)head_size, a = c->dim[i - 1], b = c->dim[i];
    return h * h > a * b ? c->eff[i] : c->eff[i - 1];
}

double hw_gpu_bytes(const Hardware *hw)
{
    return (hw->gpu_mem_GiB - hw->gpu_reserved_GiB) * 0x1p30;
}

double hw_cpu_bytes(const Hardware *hw)
{
    return (hw->cpu_mem_GiB - hw->cpu_reserved_GiB) * 0x1p30;
}

double hw_ssd_bytes(const Hardware *hw)
{
    return hw->ssd_capacity_GB * 1e9 * hw->ssd_count;
}

void hw_set_ssd_bytes(Hardware *hw, double bytes)
{
    assert(bytes > 0 && bytes <= HW_MAX_SSD_GB * 1e9);
    hw->ssd_capacity_GB = bytes / 1e9 / hw->ssd_count;
}

void hw_set_budgets(Hardware *hw, double gpu_bytes, double cpu_bytes)
{
    assert(gpu_bytes >= 0 && cpu_bytes >= 0);
    if (gpu_bytes > 0)
        hw->gpu_mem_GiB = gpu_bytes / 0x1p30, hw->gpu_reserved_GiB = 0;
    if (cpu_bytes > 0)
        hw->cpu_mem_GiB = cpu_bytes / 0x1p30, hw->cpu_reserved_GiB = 0;
}
