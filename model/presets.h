/* presets: the hardware ini presets compiled into the binary (generated from the .ini files in model/presets
 * by tools/embed_text.py). Internal to model/: use hw_load() with a bare name. */
#ifndef FUYOU_PRESETS_H
#define FUYOU_PRESETS_H

typedef struct EmbeddedText {
    const char *name; /* file name, e.g. "4090.ini" */
    const char *text;
} EmbeddedText;

extern const EmbeddedText hw_preset_files[];
extern const int hw_preset_files_count;

#endif
