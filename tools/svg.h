/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Line charts as standalone SVG 1.1 files, for the plots of `mxfa study`:
 * one or more panels side by side, each with its axes, ticks, title,
 * series (polylines with point markers, or steps for histograms) and
 * legend. Every series of a panel has its own color, dash pattern, line
 * width and marker shape, so that one that coincides with another stays
 * visible. Written to a stdio stream; nothing is kept once a chart is
 * freed.
 */
#ifndef MXFA_SVG_H
#define MXFA_SVG_H

#include <stdio.h>

#define SVG_MAX_PANELS 4
#define SVG_MAX_SERIES 8

typedef struct svg_series {
    const char *name;   /* legend label (series of the same index share a style) */
    int n;
    const double *x, *y; /* n points; non-finite y values are left out */
    int steps;          /* draw as a histogram outline (x: bin edges, n + 1 of them; y: n counts) */
} svg_series;

typedef struct svg_panel {
    const char *title, *xlabel, *ylabel;
    int xlog2;          /* x axis in powers of two */
    int nseries;
    svg_series series[SVG_MAX_SERIES];
    const char *const *xcat; /* or categories: x = 0 .. ncat - 1 labelled xcat[x] (NULL: numbers) */
    int ncat;
} svg_panel;

typedef struct svg_chart {
    const char *title;
    int npanels;
    svg_panel panel[SVG_MAX_PANELS];
} svg_chart;

/* Write the chart; returns 0 on success, -1 on a write error. */
int svg_write(FILE *f, const svg_chart *c);

#endif
