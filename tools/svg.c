/* SPDX-License-Identifier: BSD-3-Clause */
/* SVG line charts (svg.h). */
#include <math.h>
#include <string.h>

#include "svg.h"

enum { PANEL_W = 430, PANEL_H = 320, LEFT = 64, RIGHT = 16, TOP = 56, BOTTOM = 52, LEGEND_ROW = 20,
       LEGEND_COLS = 2, LEGEND_W = 180 };

/*
 * The style of series s of a panel. Colors tell series apart on white;
 * where two series coincide exactly, color alone would show only the one
 * drawn last, so each also has its own dash pattern (the first is solid),
 * a line that narrows with s (a later series runs inside an earlier one,
 * which shows in its gaps) and a hollow marker of its own shape and size.
 */
static const char *const palette[SVG_MAX_SERIES] = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd",
                                                    "#ff7f0e", "#8c564b", "#17becf", "#7f7f7f"};
static const char *const dashes[SVG_MAX_SERIES] = {"none", "9 4", "3 3", "12 3 3 3", "6 2", "1.5 3", "14 3 2 3 2 3",
                                                   "5 2 1 2"};

static double line_width(int s)
{
    return s < 4 ? 5 - 1.1 * s : 1.2;
}

/* Series s's marker at (x, y): circle, square, triangle, diamond,
 * triangle pointing down, plus, cross, asterisk; smaller as s grows, so
 * that coinciding markers nest. */
static void marker(FILE *f, int s, double x, double y)
{
    const double r = s < 4 ? 7 - 1.2 * s : 3, h = 0.87 * r * 1.2, v = 0.5 * r * 1.2, d = 0.75 * r;
    fputs("<path d=\"", f);
    switch (s) {
    case 0: fprintf(f, "M%.1f %.1fa%.1f %.1f 0 1 0 %.1f 0a%.1f %.1f 0 1 0 %.1f 0Z", x - r, y, r, r, 2 * r, r, r, -2 * r); break;
    case 1: fprintf(f, "M%.1f %.1fh%.1fv%.1fh%.1fZ", x - d, y - d, 2 * d, 2 * d, -2 * d); break;
    case 2: fprintf(f, "M%.1f %.1fL%.1f %.1fL%.1f %.1fZ", x, y - 1.2 * r, x + h, y + v, x - h, y + v); break;
    case 3: fprintf(f, "M%.1f %.1fL%.1f %.1fL%.1f %.1fL%.1f %.1fZ", x, y - r, x + r, y, x, y + r, x - r, y); break;
    case 4: fprintf(f, "M%.1f %.1fL%.1f %.1fL%.1f %.1fZ", x, y + 1.2 * r, x + h, y - v, x - h, y - v); break;
    case 5: fprintf(f, "M%.1f %.1fH%.1fM%.1f %.1fV%.1f", x - r, y, x + r, x, y - r, y + r); break;
    case 6: fprintf(f, "M%.1f %.1fL%.1f %.1fM%.1f %.1fL%.1f %.1f", x - d, y - d, x + d, y + d, x - d, y + d, x + d, y - d); break;
    default:
        fprintf(f, "M%.1f %.1fH%.1fM%.1f %.1fV%.1fM%.1f %.1fL%.1f %.1fM%.1f %.1fL%.1f %.1f", x - r, y, x + r, x, y - r,
                y + r, x - d, y - d, x + d, y + d, x - d, y + d, x + d, y - d);
    }
    fprintf(f, "\" fill=\"none\" stroke=\"%s\" stroke-width=\"1.6\"/>\n", palette[s]);
}

/* The attributes that draw series s's line. */
static void line_style(FILE *f, int s)
{
    fprintf(f, "fill=\"none\" stroke=\"%s\" stroke-width=\"%.1f\" stroke-dasharray=\"%s\" stroke-linejoin=\"round\"",
            palette[s], line_width(s), dashes[s]);
}

static void text(FILE *f, const char *s)
{
    for (; s && *s; s++)
        switch (*s) {
        case '&': fputs("&amp;", f); break;
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '"': fputs("&quot;", f); break;
        default: fputc(*s, f);
        }
}

typedef struct range {
    double lo, hi;
} range;

static double xval(const svg_panel *p, double x)
{
    return p->xlog2 && p->ncat == 0 ? log2(x) : x;
}

/* The data range of a panel's x or y values (x through xval). */
static range data_range(const svg_panel *p, int want_y)
{
    range r = {INFINITY, -INFINITY};
    for (int s = 0; s < p->nseries; s++) {
        const svg_series *se = &p->series[s];
        int n = want_y ? se->n : se->n + (se->steps ? 1 : 0);
        for (int i = 0; i < n; i++) {
            double v = want_y ? se->y[i] : xval(p, se->x[i]);
            if (!isfinite(v) || (!want_y && !se->steps && !isfinite(se->y[i])))
                continue;
            r.lo = v < r.lo ? v : r.lo;
            r.hi = v > r.hi ? v : r.hi;
        }
        if (want_y && se->steps) /* histograms stand on zero */
            r.lo = r.lo < 0 ? r.lo : 0;
    }
    if (!(r.lo <= r.hi))
        r.lo = 0, r.hi = 1;
    if (r.hi - r.lo < 1e-12 * (fabs(r.hi) + 1)) {
        r.lo -= 0.5;
        r.hi += 0.5;
    }
    return r;
}

/* A tick step of 1, 2 or 5 times a power of ten giving about five ticks. */
static double nice_step(range r)
{
    double raw = (r.hi - r.lo) / 5, p = pow(10, floor(log10(raw))), m = raw / p;
    return (m < 1.5 ? 1 : m < 3.5 ? 2 : m < 7.5 ? 5 : 10) * p;
}

static void write_panel(FILE *f, const svg_panel *p, double ox, double oy)
{
    const double w = PANEL_W - LEFT - RIGHT, h = PANEL_H - TOP - BOTTOM;
    range rx = data_range(p, 0), ry = data_range(p, 1);
    double sy = nice_step(ry);
    ry.lo = floor(ry.lo / sy) * sy;
    ry.hi = ceil(ry.hi / sy) * sy;
    if (p->ncat > 0) {
        rx.lo = -0.5;
        rx.hi = p->ncat - 0.5;
    } else if (!p->xlog2) {
        double sx = nice_step(rx);
        rx.lo = floor(rx.lo / sx) * sx;
        rx.hi = ceil(rx.hi / sx) * sx;
    } else {
        rx.lo = floor(rx.lo) - 0.25;
        rx.hi = ceil(rx.hi) + 0.25;
    }
#define PX(v) (ox + LEFT + ((v) - rx.lo) / (rx.hi - rx.lo) * w)
#define PY(v) (oy + TOP + h - ((v) - ry.lo) / (ry.hi - ry.lo) * h)
    fprintf(f, "<g font-family=\"sans-serif\" font-size=\"12\">\n");
    fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"14\" text-anchor=\"middle\">", ox + LEFT + w / 2, oy + 36);
    text(f, p->title);
    fputs("</text>\n", f);
    fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"none\" stroke=\"#444\"/>\n",
            ox + LEFT, oy + TOP, w, h);
    /* y ticks and grid */
    double sy2 = nice_step(ry);
    for (double v = ceil(ry.lo / sy2 - 1e-9) * sy2; v <= ry.hi + sy2 * 1e-9; v += sy2) {
        double y = PY(v);
        fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>\n", ox + LEFT, y,
                ox + LEFT + w, y);
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">%g</text>\n", ox + LEFT - 6, y + 4,
                fabs(v) < sy2 * 1e-9 ? 0.0 : v);
    }
    /* x ticks: categories, powers of two, or a nice step */
    if (p->ncat > 0) {
        for (int i = 0; i < p->ncat; i++) {
            double x = PX(i);
            fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>\n", x, oy + TOP, x,
                    oy + TOP + h);
            fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">", x, oy + TOP + h + 16);
            text(f, p->xcat[i]);
            fputs("</text>\n", f);
        }
    } else if (p->xlog2) {
        for (double e = ceil(rx.lo); e <= rx.hi; e++) {
            double x = PX(e);
            fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>\n", x, oy + TOP, x,
                    oy + TOP + h);
            fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%g</text>\n", x, oy + TOP + h + 16,
                    exp2(e));
        }
    } else {
        double sx = nice_step(rx);
        for (double v = rx.lo; v <= rx.hi + sx * 1e-9; v += sx)
            fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%g</text>\n", PX(v), oy + TOP + h + 16,
                    fabs(v) < sx * 1e-9 ? 0.0 : v);
    }
    fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">", ox + LEFT + w / 2, oy + TOP + h + 38);
    text(f, p->xlabel);
    fputs("</text>\n", f);
    fprintf(f, "<text transform=\"translate(%.1f %.1f) rotate(-90)\" text-anchor=\"middle\">", ox + 16, oy + TOP + h / 2);
    text(f, p->ylabel);
    fputs("</text>\n", f);
    /* the series, the first at the bottom */
    for (int s = 0; s < p->nseries; s++) {
        const svg_series *se = &p->series[s];
        fputs("<polyline ", f);
        line_style(f, s);
        fputs(" points=\"", f);
        for (int i = 0; i < se->n; i++) {
            if (!isfinite(se->y[i]))
                continue;
            if (se->steps)
                fprintf(f, "%.1f,%.1f %.1f,%.1f ", PX(xval(p, se->x[i])), PY(se->y[i]), PX(xval(p, se->x[i + 1])),
                        PY(se->y[i]));
            else
                fprintf(f, "%.1f,%.1f ", PX(xval(p, se->x[i])), PY(se->y[i]));
        }
        fputs("\"/>\n", f);
        for (int i = 0; !se->steps && i < se->n; i++)
            if (isfinite(se->y[i]))
                marker(f, s, PX(xval(p, se->x[i])), PY(se->y[i]));
    }
    /* the panel's legend, LEGEND_COLS entries to a row */
    for (int s = 0; s < p->nseries; s++) {
        double x = ox + LEFT + (s % LEGEND_COLS) * LEGEND_W, y = oy + PANEL_H + 10 + (s / LEGEND_COLS) * LEGEND_ROW;
        fprintf(f, "<polyline points=\"%.1f,%.1f %.1f,%.1f\" ", x, y, x + 36, y);
        line_style(f, s);
        fputs("/>\n", f);
        if (!p->series[s].steps)
            marker(f, s, x + 18, y);
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\">", x + 42, y + 4);
        text(f, p->series[s].name);
        fputs("</text>\n", f);
    }
    fputs("</g>\n", f);
#undef PX
#undef PY
}

int svg_write(FILE *f, const svg_chart *c)
{
    int rows = 1;
    for (int p = 0; p < c->npanels; p++) {
        int r = (c->panel[p].nseries + LEGEND_COLS - 1) / LEGEND_COLS;
        rows = r > rows ? r : rows;
    }
    int width = PANEL_W * (c->npanels > 0 ? c->npanels : 1), height = PANEL_H + LEGEND_ROW * rows + 10;
    fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" width=\"%d\" height=\"%d\" "
               "viewBox=\"0 0 %d %d\">\n", width, height, width, height);
    fprintf(f, "<rect width=\"%d\" height=\"%d\" fill=\"white\"/>\n", width, height);
    fprintf(f, "<text x=\"%d\" y=\"20\" font-family=\"sans-serif\" font-size=\"16\" text-anchor=\"middle\">",
            width / 2);
    text(f, c->title);
    fputs("</text>\n", f);
    for (int p = 0; p < c->npanels; p++)
        write_panel(f, &c->panel[p], p * PANEL_W, 0);
    fputs("</svg>\n", f);
    return ferror(f) ? -1 : 0;
}
