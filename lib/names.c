/* SPDX-License-Identifier: BSD-3-Clause */
/* Names of the enums, as the CLI and the docs spell them. */
#include <stdio.h>
#include <string.h>

#include "internal.h"

static const char *const block_names[] = {"row", "col", "square"};
static const char *const preset_names[] = {"rceil", "ocp", "torchao-rceil", "microxcaling"};
static const char *const layout_names[] = {"compact", "swizzled"};
static const char *const model_names[] = {"ideal", "sm100", "sm90-fp8", "sm90-bf16"};
static const char *const p_scale_names[] = {"const", "dynamic"};

#define COUNT(a) ((int)(sizeof(a) / sizeof((a)[0])))

_Static_assert(COUNT(block_names) == MXFA_BLOCK_COUNT, "a name for every mxfa_block");
_Static_assert(COUNT(preset_names) == MXFA_PRESET_COUNT, "a name for every mxfa_preset");
_Static_assert(COUNT(layout_names) == MXFA_LAYOUT_COUNT, "a name for every mxfa_layout");
_Static_assert(COUNT(model_names) == MXFA_MODEL_COUNT, "a name for every mxfa_model");
_Static_assert(COUNT(p_scale_names) == MXFA_P_SCALE_COUNT, "a name for every mxfa_p_scale");

static const char *name_of(const char *const *names, int n, int v)
{
    return v >= 0 && v < n ? names[v] : "unknown";
}

/* *v = the index of name; out is the caller's output pointer, checked
 * here so that a refusal leaves it alone. */
static mxfa_status parse(const char *const *names, int n, const char *what, const char *name, const void *out,
                         int *v)
{
    mxfa_clear_error(NULL);
    if (!name || !out)
        return mxfa_fail(NULL, MXFA_ERR_NULL, "%s: %s is NULL", what, name ? "the output" : "the name");
    for (int i = 0; i < n; i++)
        if (strcmp(names[i], name) == 0) {
            *v = i;
            return MXFA_OK;
        }
    char list[128] = "";
    size_t len = 0;
    for (int i = 0; i < n; i++)
        len += (size_t)snprintf(list + len, sizeof list - len, "%s%s", i ? ", " : "", names[i]);
    return mxfa_fail(NULL, MXFA_ERR_INVALID, "unknown %s '%s' (one of: %s)", what, name, list);
}

MXFA_API const char *mxfa_block_name(mxfa_block block)
{
    return name_of(block_names, COUNT(block_names), (int)block);
}

MXFA_API const char *mxfa_preset_name(mxfa_preset preset)
{
    return name_of(preset_names, COUNT(preset_names), (int)preset);
}

MXFA_API const char *mxfa_layout_name(mxfa_layout layout)
{
    return name_of(layout_names, COUNT(layout_names), (int)layout);
}

MXFA_API mxfa_status mxfa_block_parse(const char *name, mxfa_block *block)
{
    int v = 0;
    mxfa_status st = parse(block_names, COUNT(block_names), "block shape", name, block, &v);
    if (st == MXFA_OK)
        *block = (mxfa_block)v;
    return st;
}

MXFA_API mxfa_status mxfa_preset_parse(const char *name, mxfa_preset *preset)
{
    int v = 0;
    mxfa_status st = parse(preset_names, COUNT(preset_names), "preset", name, preset, &v);
    if (st == MXFA_OK)
        *preset = (mxfa_preset)v;
    return st;
}

MXFA_API mxfa_status mxfa_layout_parse(const char *name, mxfa_layout *layout)
{
    int v = 0;
    mxfa_status st = parse(layout_names, COUNT(layout_names), "layout", name, layout, &v);
    if (st == MXFA_OK)
        *layout = (mxfa_layout)v;
    return st;
}

MXFA_API mxfa_status mxfa_format_parse(const char *name, mxfa_dtype *format)
{
    static const char *const formats[] = {"e4m3", "e5m2"};
    int v = 0;
    mxfa_status st = parse(formats, 2, "element format", name, format, &v);
    if (st == MXFA_OK)
        *format = v == 0 ? MXFA_E4M3 : MXFA_E5M2;
    return st;
}

MXFA_API const char *mxfa_model_name(mxfa_model model)
{
    return name_of(model_names, COUNT(model_names), (int)model);
}

MXFA_API mxfa_status mxfa_model_parse(const char *name, mxfa_model *model)
{
    int v = 0;
    mxfa_status st = parse(model_names, COUNT(model_names), "model", name, model, &v);
    if (st == MXFA_OK)
        *model = (mxfa_model)v;
    return st;
}

MXFA_API const char *mxfa_p_scale_name(mxfa_p_scale p)
{
    return name_of(p_scale_names, COUNT(p_scale_names), (int)p);
}

MXFA_API mxfa_status mxfa_p_scale_parse(const char *name, mxfa_p_scale *p)
{
    int v = 0;
    mxfa_status st = parse(p_scale_names, COUNT(p_scale_names), "P scaling", name, p, &v);
    if (st == MXFA_OK)
        *p = (mxfa_p_scale)v;
    return st;
}
