/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * `mxfa study` run as a user would: the quick demo writes a CSV that
 * parses (every row complete, every number a number, the metrics in their
 * ranges) and SVG files that are well-formed XML; the float64 truth and
 * the metrics agree with a slow attention computed here; the causal-leak
 * finding holds (leak-free causal moves nothing); and bad input gives a
 * message, a non-zero exit and no files, leaving earlier results alone.
 */
#include <ctype.h>
#include <dirent.h>
#include <fcntl.h>
#include <math.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "mxfa.h"
#include "npy.h"
#include "tap.h"

static char mxfa_bin[1024], dir[1024], errtext[1 << 15], outtext[1 << 17];

/* Run mxfa with args (NULL-terminated): exit status; stderr in errtext,
 * stdout in outtext. */
static int run(const char *const *args)
{
    char errpath[1100], outpath[1100];
    snprintf(errpath, sizeof errpath, "%s/stderr.txt", dir);
    snprintf(outpath, sizeof outpath, "%s/stdout.txt", dir);
    pid_t pid = fork();
    if (pid == 0) {
        const char *argv[40];
        int n = 0;
        argv[n++] = mxfa_bin;
        for (int i = 0; args[i] && n < 39; i++)
            argv[n++] = args[i];
        argv[n] = NULL;
        int fe = open(errpath, O_WRONLY | O_CREAT | O_TRUNC, 0644), fo = open(outpath, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        dup2(fe, 2);
        dup2(fo, 1);
        execv(mxfa_bin, (char *const *)argv);
        _exit(127);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    FILE *f = fopen(errpath, "r");
    size_t n = f ? fread(errtext, 1, sizeof errtext - 1, f) : 0;
    errtext[n] = '\0';
    if (f)
        fclose(f);
    f = fopen(outpath, "r");
    n = f ? fread(outtext, 1, sizeof outtext - 1, f) : 0;
    outtext[n] = '\0';
    if (f)
        fclose(f);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

static const char *path(const char *name)
{
    static char buf[64][1100];
    static int k;
    k = (k + 1) % 64;
    snprintf(buf[k], sizeof buf[k], "%s/%s", dir, name);
    return buf[k];
}

static char *slurp(const char *p, size_t *len)
{
    FILE *f = fopen(p, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = malloc((size_t)n + 1);
    if (s && fread(s, 1, (size_t)n, f) != (size_t)n) {
        free(s);
        s = NULL;
    }
    if (s)
        s[n] = '\0';
    fclose(f);
    if (len)
        *len = (size_t)n;
    return s;
}

/* The number of entries of a directory (not . and ..), -1 if missing. */
static int entries(const char *d)
{
    DIR *h = opendir(d);
    if (!h)
        return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(h)))
        n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
    closedir(h);
    return n;
}

/* ---- XML well-formedness (the subset SVG files use: no DTD, no CDATA) ---- */

static int is_name_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_' ||
           c == ':' || c == '.';
}

/* An entity reference at s ('&'): its length, or 0 if malformed. */
static size_t entity(const char *s)
{
    static const char *const named[] = {"&amp;", "&lt;", "&gt;", "&quot;", "&apos;"};
    for (int i = 0; i < 5; i++)
        if (!strncmp(s, named[i], strlen(named[i])))
            return strlen(named[i]);
    if (s[1] == '#') {
        size_t i = 2;
        int hex = s[2] == 'x';
        i += (size_t)hex;
        size_t start = i;
        while (hex ? isxdigit((unsigned char)s[i]) : isdigit((unsigned char)s[i]))
            i++;
        return i > start && s[i] == ';' ? i + 1 : 0;
    }
    return 0;
}

/* 1 if s is a well-formed document whose root is <svg> in the SVG
 * namespace; else 0 with the reason in why. */
static int xml_well_formed(const char *s, char *why, size_t whylen)
{
    char stack[64][32];
    int depth = 0, roots = 0, svg_ns = 0;
    const char *p = s;
    if (!strncmp(p, "<?xml", 5)) {
        const char *e = strstr(p, "?>");
        if (!e)
            return snprintf(why, whylen, "unterminated declaration"), 0;
        p = e + 2;
    }
    while (*p) {
        if (*p != '<') {
            if (*p == '&') {
                size_t n = entity(p);
                if (!n)
                    return snprintf(why, whylen, "bad entity at offset %ld", (long)(p - s)), 0;
                p += n;
                continue;
            }
            if (depth == 0 && !isspace((unsigned char)*p))
                return snprintf(why, whylen, "text outside the root at offset %ld", (long)(p - s)), 0;
            p++;
            continue;
        }
        if (!strncmp(p, "<!--", 4)) {
            const char *e = strstr(p, "-->");
            if (!e)
                return snprintf(why, whylen, "unterminated comment"), 0;
            p = e + 3;
            continue;
        }
        int closing = p[1] == '/';
        p += closing ? 2 : 1;
        char name[32];
        size_t n = 0;
        while (is_name_char(*p) && n < sizeof name - 1)
            name[n++] = *p++;
        name[n] = '\0';
        if (!n || is_name_char(*p))
            return snprintf(why, whylen, "bad tag name at offset %ld", (long)(p - s)), 0;
        if (closing) {
            while (isspace((unsigned char)*p))
                p++;
            if (*p != '>' || depth == 0 || strcmp(stack[depth - 1], name))
                return snprintf(why, whylen, "</%s> does not close the open element", name), 0;
            depth--;
            p++;
            continue;
        }
        if (depth == 0 && (roots++ || strcmp(name, "svg")))
            return snprintf(why, whylen, "the root is <%s>, or there are two roots", name), 0;
        /* attributes: name="value", each name once per element (not checked) */
        for (;;) {
            int space = 0;
            while (isspace((unsigned char)*p))
                p++, space = 1;
            if (*p == '>' || !strncmp(p, "/>", 2))
                break;
            char an[32];
            size_t k = 0;
            while (is_name_char(*p) && k < sizeof an - 1)
                an[k++] = *p++;
            an[k] = '\0';
            if (!space || !k || *p++ != '=' || (*p != '"' && *p != '\''))
                return snprintf(why, whylen, "bad attribute in <%s> at offset %ld", name, (long)(p - s)), 0;
            char q = *p++;
            const char *v0 = p;
            while (*p && *p != q) {
                if (*p == '<')
                    return snprintf(why, whylen, "'<' in an attribute of <%s>", name), 0;
                if (*p == '&') {
                    size_t en = entity(p);
                    if (!en)
                        return snprintf(why, whylen, "bad entity in an attribute of <%s>", name), 0;
                    p += en;
                } else {
                    p++;
                }
            }
            if (!*p)
                return snprintf(why, whylen, "unterminated attribute in <%s>", name), 0;
            if (depth == 0 && !strcmp(an, "xmlns") && !strncmp(v0, "http://www.w3.org/2000/svg\"", 27))
                svg_ns = 1;
            p++;
        }
        if (*p == '/') {
            p += 2;
        } else {
            if (depth == 64)
                return snprintf(why, whylen, "nested too deep"), 0;
            snprintf(stack[depth++], sizeof stack[0], "%s", name);
            p++;
        }
    }
    if (depth)
        return snprintf(why, whylen, "<%s> is not closed", stack[depth - 1]), 0;
    if (!roots || !svg_ns)
        return snprintf(why, whylen, "no <svg> root in the SVG namespace"), 0;
    return 1;
}

/* ---- the CSV ---- */

/* The columns of results.csv, as docs/STUDY.md lists them. */
enum { C_SECTION, C_DATA, C_BATCH, C_SEQLEN, C_HEADS, C_DIM, C_OUTLIER, C_MODEL, C_PRESET, C_PSCALE, C_CAUSAL,
       C_TENSOR, C_REL, C_COS, C_SQNR, C_MAXABS, C_COUNT, C_NONFINITE, C_VI_REL, C_VI_SQNR, C_VI_MAXABS, NCOLS };
static const char csv_header[] = "section,data,batch,seqlen,heads,dim,outlier,model,preset,p_scale,causal,tensor,"
                                 "rel_l2,cosine,sqnr_db,max_abs,count,nonfinite,vs_ideal_rel_l2,vs_ideal_sqnr_db,"
                                 "vs_ideal_max_abs";

typedef struct csv_row {
    char f[NCOLS][48];
} csv_row;

/* Split the CSV into rows; -1 (with why) if a row is malformed. */
static int csv_parse(char *s, csv_row **rows, char *why, size_t whylen)
{
    char *line = strtok(s, "\n");
    if (!line || strcmp(line, csv_header))
        return snprintf(why, whylen, "header '%s'", line ? line : "(none)"), -1;
    int n = 0, cap = 0;
    *rows = NULL;
    while ((line = strtok(NULL, "\n"))) {
        if (n == cap)
            *rows = realloc(*rows, (size_t)(cap = cap ? 2 * cap : 256) * sizeof **rows);
        csv_row *r = &(*rows)[n];
        int k = 0;
        for (char *p = line;; k++) {
            char *c = strchr(p, ',');
            size_t len = c ? (size_t)(c - p) : strlen(p);
            if (k >= NCOLS || len >= sizeof r->f[0])
                return snprintf(why, whylen, "row %d has too many or too long fields", n + 1), -1;
            memcpy(r->f[k], p, len);
            r->f[k][len] = '\0';
            if (!c)
                break;
            p = c + 1;
        }
        if (k != NCOLS - 1)
            return snprintf(why, whylen, "row %d has %d fields", n + 1, k + 1), -1;
        /* numbers where numbers belong; the vs_ideal columns may be empty */
        for (int c = 0; c < NCOLS; c++) {
            if (!((c >= C_BATCH && c <= C_OUTLIER) || c >= C_REL))
                continue;
            if (c >= C_VI_REL && !r->f[c][0])
                continue;
            char *end;
            strtod(r->f[c], &end);
            if (!r->f[c][0] || *end)
                return snprintf(why, whylen, "row %d column %d '%s' is not a number", n + 1, c + 1, r->f[c]), -1;
        }
        n++;
    }
    return n;
}

static void write_npy(const char *p, int ndim, const int64_t *shape, const float *data)
{
    char tmp[1200], err[256];
    if (npy_write_temp(p, NPY_F32, ndim, shape, data, tmp, sizeof tmp, err, sizeof err) != MXFA_OK ||
        npy_commit(tmp, p, err, sizeof err) != MXFA_OK)
        printf("Bail out! %s\n", err);
}

/* Slow attention in float64, one head: O [s, d] of q, k, v [s, d] (row
 * stride ld floats). */
static void slow_attention(const float *q, const float *k, const float *v, int64_t s, int64_t d, int64_t ld, double *o)
{
    double *w = malloc((size_t)s * sizeof *w), scale = 1.0 / sqrt((double)d);
    for (int64_t i = 0; i < s; i++) {
        double m = -INFINITY, l = 0;
        for (int64_t j = 0; j < s; j++) {
            double x = 0;
            for (int64_t e = 0; e < d; e++)
                x += (double)q[i * ld + e] * k[j * ld + e];
            w[j] = x * scale;
            m = w[j] > m ? w[j] : m;
        }
        for (int64_t j = 0; j < s; j++)
            l += (w[j] = exp(w[j] - m));
        for (int64_t e = 0; e < d; e++) {
            double acc = 0;
            for (int64_t j = 0; j < s; j++)
                acc += w[j] * v[j * ld + e];
            o[i * d + e] = acc / l;
        }
    }
    free(w);
}

/* Slow causal attention in float64, one head, one sequence of sq queries
 * and sk keys, bottom-right aligned (query i sees keys up to i + sk - sq;
 * a query that sees none gives 0). Row stride ld floats. */
static void slow_causal(const float *q, const float *k, const float *v, int64_t sq, int64_t sk, int64_t d,
                        int64_t ld, double *o)
{
    double *w = malloc((size_t)sk * sizeof *w), scale = 1.0 / sqrt((double)d);
    for (int64_t i = 0; i < sq; i++) {
        int64_t seen = i + sk - sq + 1;
        seen = seen < 0 ? 0 : seen > sk ? sk : seen;
        double m = -INFINITY, l = 0;
        for (int64_t j = 0; j < seen; j++) {
            double x = 0;
            for (int64_t e = 0; e < d; e++)
                x += (double)q[i * ld + e] * k[j * ld + e];
            w[j] = x * scale;
            m = w[j] > m ? w[j] : m;
        }
        for (int64_t j = 0; j < seen; j++)
            l += (w[j] = exp(w[j] - m));
        for (int64_t e = 0; e < d; e++) {
            double acc = 0;
            for (int64_t j = 0; j < seen; j++)
                acc += w[j] * v[j * ld + e];
            o[i * d + e] = seen ? acc / l : 0;
        }
    }
    free(w);
}

static float *gaussian(int64_t n, uint64_t seed)
{
    float *x = malloc((size_t)n * sizeof *x);
    rng_state = seed;
    for (int64_t i = 0; i < n; i++) {
        double u = ((double)(rng_next() >> 11) + 0.5) / 9007199254740992.0;
        double w = ((double)(rng_next() >> 11) + 0.5) / 9007199254740992.0;
        x[i] = (float)(sqrt(-2 * log(u)) * cos(6.283185307179586 * w));
    }
    return x;
}

/* ---- the progress counter and the plots ---- */

/* The quick demo's progress on stderr (not a terminal: one line a step,
 * "[n/N ...] label"): N is what the demo runs (counted here from its
 * design: 2 lengths x 4 models, 4 outlier sizes x 4 models, 3 kinds of
 * data x 2 models x 2 P scalings, 4 presets, 2 causal-leak checks), n
 * counts 1 to N, and every step on K outliers names the magnitude. */
static void check_progress(const char *err)
{
    const int want = 2 * 4 + 4 * 4 + 3 * 2 * 2 + 4 + 2;
    int steps = 0, total_ok = 1, labels_ok = 1, outlier_steps = 0;
    for (const char *line = err; *line; line += strcspn(line, "\n") + (line[strcspn(line, "\n")] != 0)) {
        int n, total, len = 0;
        if (sscanf(line, "[%d/%d %*[^]]]%n", &n, &total, &len) != 2 || len == 0)
            continue;
        total_ok &= n == ++steps && total == want;
        const char *k = strstr(line, "k-outliers");
        if (k && k < line + strcspn(line, "\n")) {
            double x = 0;
            outlier_steps++;
            labels_ok &= sscanf(k, "k-outliers x%lf ", &x) == 1 && (x == 1 || x == 4 || x == 16 || x == 64);
        }
    }
    char summary[64];
    snprintf(summary, sizeof summary, "%d steps in ", want);
    if (!ok(steps == want && total_ok && strstr(err, summary),
            "progress: [n/%d] counts every one of the %d steps the demo runs (%d lines), and so does the summary",
            want, want, steps))
        diag("%s", err);
    ok(labels_ok && outlier_steps == 4 * 4 + 2 * 2,
       "progress: each of the %d steps on K outliers names its magnitude (x1, x4, x16 or x64)", outlier_steps);
}

/* The value of attribute `name` in the element at e, in buf ("" if none). */
static const char *attr(const char *e, const char *name, char *buf, size_t len)
{
    const char *end = strchr(e, '>');
    char key[32];
    snprintf(key, sizeof key, " %s=\"", name);
    const char *a = strstr(e, key);
    buf[0] = '\0';
    if (a && end && a < end) {
        a += strlen(key);
        snprintf(buf, len, "%.*s", (int)strcspn(a, "\""), a);
    }
    return buf;
}

/* In every panel (a <g> element) of an SVG, no two series of different
 * colors share a dash pattern, so that a series that coincides with
 * another still shows; -1 if one does, else the number of panels. */
static int panels_with_own_dashes(const char *svg)
{
    int panels = 0;
    for (const char *g = strstr(svg, "<g "); g; g = strstr(g + 1, "<g ")) {
        const char *end = strstr(g, "</g>");
        char color[16][32], dash[16][32];
        int n = 0;
        for (const char *l = strstr(g, "<polyline"); l && l < end && n < 16; l = strstr(l + 1, "<polyline")) {
            char c[32], d[32];
            attr(l, "stroke", c, sizeof c);
            attr(l, "stroke-dasharray", d, sizeof d);
            int seen = 0;
            for (int i = 0; i < n; i++) {
                if (!strcmp(color[i], c) && strcmp(dash[i], d))
                    return -1; /* one series drawn two ways */
                if (strcmp(color[i], c) && !strcmp(dash[i], d))
                    return -1;
                seen |= !strcmp(color[i], c);
            }
            if (!seen) {
                snprintf(color[n], sizeof color[n], "%s", c);
                snprintf(dash[n++], sizeof dash[0], "%s", d);
            }
        }
        panels++;
    }
    return panels;
}

/* The demo's plots: every series keeps its own dash pattern, and in the
 * sweep charts LSE, some 30 dB more accurate than the rest, has its own
 * panel, away from O, dQ, dK and dV. */
static void check_styles(const char *out)
{
    static const char *const svgs[] = {"error_vs_seqlen.svg", "error_vs_outlier.svg", "error_histogram.svg"};
    static const int want_panels[] = {3, 3, 1};
    for (int i = 0; i < 3; i++) {
        char p[1200];
        snprintf(p, sizeof p, "%s/%s", out, svgs[i]);
        char *s = slurp(p, NULL);
        int panels = s ? panels_with_own_dashes(s) : -1;
        ok(panels == want_panels[i], "%s: panels %d, in each every series with a dash pattern of its own", svgs[i],
           panels);
        if (i < 2) {
            const char *second = s ? strstr(strstr(s, "<g ") + 1, "<g ") : NULL;
            size_t first_len = second ? (size_t)(second - strstr(s, "<g ")) : 0;
            char *first = first_len ? strndup(strstr(s, "<g "), first_len) : NULL;
            ok(first && strstr(first, ">O</text>") && strstr(first, ">dQ</text>") && strstr(first, ">dV</text>") &&
                   !strstr(first, "LSE") && strstr(second, ">LSE against float64</text>"),
               "%s: O, dQ, dK and dV share the first panel, LSE has the next", svgs[i]);
            free(first);
        }
        free(s);
    }
}

static void check_demo(void)
{
    const char *out = path("demo");
    const char *args[] = {"study", "--demo", "--quick", "--out", out, NULL};
    int rc = run(args);
    if (!ok(rc == 0, "study --demo --quick: exit 0"))
        diag("exit %d, stderr: %s", rc, errtext);
    ok(entries(out) == 4, "the demo wrote exactly results.csv and three SVG files (%d entries, no temporaries)",
       entries(out));
    static const char *const svgs[] = {"error_vs_seqlen.svg", "error_vs_outlier.svg", "error_histogram.svg"};
    for (int i = 0; i < 3; i++) {
        char p[1200], why[200] = "missing";
        snprintf(p, sizeof p, "%s/%s", out, svgs[i]);
        char *s = slurp(p, NULL);
        int good = s && xml_well_formed(s, why, sizeof why);
        if (good && (strstr(s, "nan") || strstr(s, "inf")))
            good = 0, snprintf(why, sizeof why, "a coordinate is not finite");
        if (!ok(good && strstr(s, "<polyline"), "%s is well-formed SVG with lines", svgs[i]))
            diag("%s", why);
        free(s);
    }
    check_progress(errtext);
    check_styles(out);
    /* the checker itself rejects what it must */
    char why[200];
    static const char *const bad_xml[] = {
        "<svg xmlns=\"http://www.w3.org/2000/svg\"><g></svg>",
        "<svg xmlns=\"http://www.w3.org/2000/svg\"><text>a & b</text></svg>",
        "<svg xmlns=\"http://www.w3.org/2000/svg\"><line x1=0/></svg>",
        "<svg xmlns=\"http://www.w3.org/2000/svg\"></svg><svg xmlns=\"http://www.w3.org/2000/svg\"></svg>",
        "<html></html>",
    };
    int rejected = 0;
    for (int i = 0; i < 5; i++)
        rejected += !xml_well_formed(bad_xml[i], why, sizeof why);
    ok(rejected == 5 && xml_well_formed("<?xml version=\"1.0\"?>\n<svg xmlns=\"http://www.w3.org/2000/svg\">"
                                        "<text x='1'>a &amp; b &#60;</text><g/></svg>\n", why, sizeof why),
       "the XML checker rejects 5 malformed documents (%d) and accepts a good one", rejected);

    char p[1200];
    snprintf(p, sizeof p, "%s/results.csv", out);
    char *csv = slurp(p, NULL), why2[200] = "missing";
    csv_row *rows = NULL;
    int n = csv ? csv_parse(csv, &rows, why2, sizeof why2) : -1;
    /* 2 lengths x 4 models, 4 outlier sizes x 4 models, 3 data x 2 models x 2 P, 4 presets: 40, 5 outputs each */
    if (!ok(n == 200, "results.csv parses: %d rows of %d fields, numbers where numbers belong", n, NCOLS))
        diag("%s", why2);
    int ranges = 1, ideal_cols = 1;
    for (int i = 0; i < n; i++) {
        const csv_row *r = &rows[i];
        double rel = atof(r->f[C_REL]), cosine = atof(r->f[C_COS]), sqnr = atof(r->f[C_SQNR]);
        ranges &= rel >= 0 && cosine >= -1 && cosine <= 1 && atof(r->f[C_MAXABS]) >= 0 && atoll(r->f[C_COUNT]) > 0;
        /* SQNR and relative L2 are two views of one number */
        ranges &= fabs(sqnr + 20 * log10(rel)) < 1e-3 * (fabs(sqnr) + 1);
        /* finite data: every value measured */
        ranges &= !strcmp(r->f[C_NONFINITE], "0") && !strcmp(r->f[C_BATCH], "1");
        int is_ideal = !strcmp(r->f[C_MODEL], "ideal"), has = r->f[C_VI_REL][0] != '\0';
        if (!strcmp(r->f[C_SECTION], "seqlen") || !strcmp(r->f[C_SECTION], "outlier"))
            ideal_cols &= is_ideal ? !has : has;
    }
    ok(ranges, "every metric in range: rel_l2 >= 0, |cosine| <= 1, max_abs >= 0, SQNR = -20 log10(rel_l2), "
               "no NaN/Inf value, batch 1");
    ok(ideal_cols, "the sweeps give every model but ideal its difference from ideal, and ideal none");
    free(rows);
    free(csv);
    /* the causal leak: leak-free moves no row, plain moves some */
    const char *leak = strstr(outtext, "causal leak");
    long plain_moved = -1, free_moved = -1;
    const char *a = leak ? strstr(leak, "plain causal moved O at ") : NULL, *b = leak ? strstr(leak, "leak-free causal moved ") : NULL;
    if (a)
        plain_moved = atol(a + strlen("plain causal moved O at "));
    if (b)
        free_moved = atol(b + strlen("leak-free causal moved "));
    ok(free_moved == 0 && plain_moved > 0 && plain_moved <= 32,
       "causal leak: V changed at later keys moves %ld earlier rows under plain causal (one 32-key block at most), "
       "%ld under leak-free causal", plain_moved, free_moved);
}

/* User tensors: the truth and the metric against a slow attention here. */
static void check_user(void)
{
    const int64_t s = 64, h = 1, d = 64, shape[3] = {s, h, d};
    float *q = gaussian(s * h * d, 11), *k = gaussian(s * h * d, 12), *v = gaussian(s * h * d, 13);
    write_npy(path("q.npy"), 3, shape, q);
    write_npy(path("k.npy"), 3, shape, k);
    write_npy(path("v.npy"), 3, shape, v);
    const char *out = path("user");
    const char *args[] = {"study", "--q", path("q.npy"), "--k", path("k.npy"), "--v", path("v.npy"), "--models",
                          "sm100", "--out", out, NULL};
    int rc = run(args);
    if (!ok(rc == 0 && entries(out) == 3, "study on user tensors: exit 0, results.csv and two plots"))
        diag("exit %d, stderr: %s", rc, errtext);
    /* sm100's O from `mxfa attn`, measured here against float64 */
    const char *attn[] = {"attn", "--q", path("q.npy"), "--k", path("k.npy"), "--v", path("v.npy"), "--out",
                          path("o.npy"), "--model", "sm100", NULL};
    rc = run(attn);
    npy_array o = {0};
    char err[256];
    double rel = NAN;
    if (rc == 0 && npy_read(path("o.npy"), &o, err, sizeof err) == MXFA_OK) {
        double *truth = malloc((size_t)(s * d) * sizeof *truth), num = 0, den = 0;
        slow_attention(q, k, v, s, d, h * d, truth);
        for (int64_t i = 0; i < s * d; i++) {
            double e = ((float *)o.data)[i] - truth[i];
            num += e * e;
            den += truth[i] * truth[i];
        }
        rel = sqrt(num / den);
        free(truth);
        npy_free(&o);
    }
    char p[1200];
    snprintf(p, sizeof p, "%s/results.csv", out);
    char *csv = slurp(p, NULL), why[200] = "missing";
    csv_row *rows = NULL;
    int n = csv ? csv_parse(csv, &rows, why, sizeof why) : -1;
    double got = NAN;
    for (int i = 0; i < n; i++)
        if (!strcmp(rows[i].f[C_MODEL], "sm100") && !strcmp(rows[i].f[C_PSCALE], "const") &&
            !strcmp(rows[i].f[C_TENSOR], "O"))
            got = atof(rows[i].f[C_REL]);
    if (!ok(n == 10 && fabs(got - rel) <= 1e-6 * rel,
            "the study's O error (rel L2 %.9g) is the one measured here against a slow float64 attention (%.9g)",
            got, rel))
        diag("%d rows (%s)", n, why);
    free(rows), free(csv), free(q), free(k), free(v);
}

/* The number in the column of `name` (O, LSE, dQ, dK, dV) of the findings
 * table row that starts with preset and model, within the text from `from`;
 * NAN if there is none. */
static double findings_cell(const char *from, const char *preset, const char *model, const char *name)
{
    static const char *const names[5] = {"O", "LSE", "dQ", "dK", "dV"};
    char row[64];
    snprintf(row, sizeof row, "\n  %-13s %-9s", preset, model);
    const char *r = from ? strstr(from, row) : NULL;
    double v[5];
    if (!r || sscanf(r + strlen(row), "%lf %lf %lf %lf %lf", &v[0], &v[1], &v[2], &v[3], &v[4]) != 5)
        return NAN;
    for (int i = 0; i < 5; i++)
        if (!strcmp(names[i], name))
            return v[i];
    return NAN;
}

/* A packed batch of two causal sequences (Q 37 and 63 tokens, K and V 60
 * and 70), two presets and two models: the offsets as a list and as a
 * .npy, a row per preset, P scaling, model and output, O's error equal to
 * the one measured here against a slow causal attention per sequence, the
 * findings' numbers those of the CSV, and the causal leak found in the
 * second sequence (the first has no query that sees no changed key). */
static void check_user_batch(void)
{
    enum { TQ = 100, TK = 130, D = 64 };
    const int64_t qshape[3] = {TQ, 1, D}, kshape[3] = {TK, 1, D}, cq[3] = {0, 37, 100}, ck[3] = {0, 60, 130};
    float *q = gaussian(TQ * D, 21), *k = gaussian(TK * D, 22), *v = gaussian(TK * D, 23);
    write_npy(path("bq.npy"), 3, qshape, q);
    write_npy(path("bk.npy"), 3, kshape, k);
    write_npy(path("bv.npy"), 3, kshape, v);
    char tmp[1200], err[256];
    int64_t three = 3;
    if (npy_write_temp(path("cuk.npy"), NPY_I64, 1, &three, ck, tmp, sizeof tmp, err, sizeof err) != MXFA_OK ||
        npy_commit(tmp, path("cuk.npy"), err, sizeof err) != MXFA_OK)
        printf("Bail out! %s\n", err);
    const char *out = path("batch");
    const char *args[] = {"study", "--q", path("bq.npy"), "--k", path("bk.npy"), "--v", path("bv.npy"),
                          "--cu-seqlens-q", "0,37,100", "--cu-seqlens-k", path("cuk.npy"), "--presets", "ocp,rceil",
                          "--models", "sm100,ideal", "--causal", "--out", out, NULL};
    int rc = run(args);
    if (!ok(rc == 0 && entries(out) == 3, "study on a packed causal batch, two presets, two models: exit 0, 3 files"))
        diag("exit %d, stderr: %s", rc, errtext);
    /* sm100's O under ocp from `mxfa attn`, measured here */
    const char *attn[] = {"attn", "--q", path("bq.npy"), "--k", path("bk.npy"), "--v", path("bv.npy"), "--out",
                          path("bo.npy"), "--model", "sm100", "--preset", "ocp", "--causal", "--cu-seqlens-q",
                          "0,37,100", "--cu-seqlens-k", "0,60,130", NULL};
    char *findings = strdup(outtext);
    npy_array o = {0};
    double rel = NAN;
    if (run(attn) == 0 && npy_read(path("bo.npy"), &o, err, sizeof err) == MXFA_OK) {
        double *truth = malloc((size_t)(TQ * D) * sizeof *truth), num = 0, den = 0;
        for (int b = 0; b < 2; b++)
            slow_causal(q + cq[b] * D, k + ck[b] * D, v + ck[b] * D, cq[b + 1] - cq[b], ck[b + 1] - ck[b], D, D,
                        truth + cq[b] * D);
        for (int64_t i = 0; i < TQ * D; i++) {
            double e = ((float *)o.data)[i] - truth[i];
            num += e * e;
            den += truth[i] * truth[i];
        }
        rel = sqrt(num / den);
        free(truth);
        npy_free(&o);
    }
    char p[1200];
    snprintf(p, sizeof p, "%s/results.csv", out);
    char *csv = slurp(p, NULL), why[200] = "missing";
    csv_row *rows = NULL;
    int n = csv ? csv_parse(csv, &rows, why, sizeof why) : -1, shape = n == 2 * 2 * 2 * 5;
    double got = NAN, sqnr = NAN;
    for (int i = 0; i < n; i++) {
        const csv_row *r = &rows[i];
        shape &= !strcmp(r->f[C_BATCH], "2") && !strcmp(r->f[C_SEQLEN], "100") && !strcmp(r->f[C_CAUSAL], "causal");
        if (!strcmp(r->f[C_MODEL], "sm100") && !strcmp(r->f[C_PRESET], "ocp") && !strcmp(r->f[C_PSCALE], "const") &&
            !strcmp(r->f[C_TENSOR], "O"))
            got = atof(r->f[C_REL]), sqnr = atof(r->f[C_SQNR]);
    }
    if (!ok(shape, "results.csv: 40 rows (2 presets x 2 P x 2 models x 5 outputs), batch 2, 100 tokens, causal"))
        diag("%d rows (%s)", n, why);
    ok(fabs(got - rel) <= 1e-6 * rel,
       "the study's O error under ocp (rel L2 %.9g) is the one measured here against a slow causal attention per "
       "sequence (%.9g)", got, rel);
    const char *f = strstr(findings, "== findings");
    double cell = findings_cell(f, "ocp", "sm100", "O");
    ok(fabs(cell - sqnr) < 0.006 && !isnan(findings_cell(f, "rceil", "ideal", "dV")),
       "findings: the SQNR table has every preset and model, O under ocp and sm100 %.2f dB as in the CSV (%.4f)",
       cell, sqnr);
    const char *arith = f ? strstr(f, "each model's arithmetic alone") : NULL;
    ok(arith && !isnan(findings_cell(arith, "rceil", "sm100", "dQ")) && isnan(findings_cell(arith, "rceil", "ideal", "dQ")),
       "findings: each model's arithmetic against ideal, per preset (sm100; ideal not against itself)");
    ok(f && strstr(f, "P scaling, const -> dynamic") && strstr(f, "\n  ocp           ideal "),
       "findings: const against dynamic P for every preset and model");
    const char *leak = f ? strstr(f, "causal leak (V x1024 from mid-sequence on in each of the 2 sequences") : NULL;
    long plain = -1, rows_before = -1, leak_free = -1;
    if (leak)
        sscanf(strstr(leak, "plain causal moved O at "), "plain causal moved O at %ld of the %ld", &plain,
               &rows_before);
    if (leak && strstr(leak, "leak-free causal moved "))
        leak_free = atol(strstr(leak, "leak-free causal moved ") + strlen("leak-free causal moved "));
    /* sequence 2: 63 queries, 70 keys, V changed from key 48: queries 0-40 see none, 25-40 share its block */
    ok(plain == 16 && rows_before == 41 && leak_free == 0,
       "findings: the causal leak of the packed batch: plain moves %ld of %ld earlier rows (16 of 41), leak-free %ld",
       plain, rows_before, leak_free);
    free(findings), free(rows), free(csv), free(q), free(k), free(v);
}

/* Results that cannot be measured: Q, K and V times 1e30 overflow the
 * float32 scores (outputs NaN where the float64 truth is finite), an
 * all-NaN Q makes everything NaN. The study reports (exit 0) but never a
 * score: nan in the CSV with the count in its nonfinite column, the
 * configuration flagged in the findings, and a warning. */
static void check_user_nonfinite(void)
{
    enum { S = 64, D = 64, N = S * D };
    const int64_t shape[3] = {S, 1, D};
    float *x[3];
    for (int i = 0; i < 3; i++) {
        x[i] = gaussian(N, 31 + i);
        for (int j = 0; j < N; j++)
            x[i][j] *= 1e30f;
    }
    write_npy(path("hq.npy"), 3, shape, x[0]);
    write_npy(path("hk.npy"), 3, shape, x[1]);
    write_npy(path("hv.npy"), 3, shape, x[2]);
    const char *out = path("huge");
    const char *args[] = {"study", "--q", path("hq.npy"), "--k", path("hk.npy"), "--v", path("hv.npy"), "--models",
                          "sm100", "--out", out, NULL};
    int rc = run(args);
    /* the NaN/Inf of sm100's O, counted here where the truth is finite */
    const char *attn[] = {"attn", "--q", path("hq.npy"), "--k", path("hk.npy"), "--v", path("hv.npy"), "--out",
                          path("ho.npy"), "--model", "sm100", NULL};
    char *findings = strdup(outtext), *warn = strdup(errtext), err[256];
    long long want = -1;
    npy_array o = {0};
    if (run(attn) == 0 && npy_read(path("ho.npy"), &o, err, sizeof err) == MXFA_OK) {
        double *truth = malloc((size_t)N * sizeof *truth);
        slow_attention(x[0], x[1], x[2], S, D, D, truth);
        want = 0;
        for (int i = 0; i < N; i++)
            want += !isfinite(((float *)o.data)[i]) && isfinite(truth[i]);
        free(truth);
        npy_free(&o);
    }
    char p[1200];
    snprintf(p, sizeof p, "%s/results.csv", out);
    char *csv = slurp(p, NULL), why[200] = "missing";
    csv_row *rows = NULL;
    int n = csv ? csv_parse(csv, &rows, why, sizeof why) : -1, nan_rows = 0;
    long long got = -1;
    for (int i = 0; i < n; i++) {
        const csv_row *r = &rows[i];
        nan_rows += isnan(atof(r->f[C_REL])) && isnan(atof(r->f[C_SQNR])) && atoll(r->f[C_NONFINITE]) > 0;
        if (!strcmp(r->f[C_PSCALE], "const") && !strcmp(r->f[C_TENSOR], "O") &&
            atoll(r->f[C_COUNT]) + atoll(r->f[C_NONFINITE]) == N)
            got = atoll(r->f[C_NONFINITE]);
    }
    if (!ok(rc == 0 && n == 10 && nan_rows == 10 && want > 0 && got == want,
            "inputs x1e30: exit 0, every CSV row nan with its nonfinite count, O's %lld NaN/Inf values (counted "
            "here: %lld)", got, want))
        diag("exit %d, %d rows (%s), %d nan rows", rc, n, why, nan_rows);
    ok(strstr(findings, "NO SCORE") && strstr(findings, "P const: O ") && strstr(warn, "warning: 2 of 2 configurations"),
       "inputs x1e30: the findings flag both configurations (NO SCORE) and a warning says so");
    free(findings), free(warn), free(rows), free(csv);

    for (int j = 0; j < N; j++)
        x[0][j] = NAN;
    write_npy(path("nq.npy"), 3, shape, x[0]);
    const char *nargs[] = {"study", "--q", path("nq.npy"), "--k", path("hk.npy"), "--v", path("hv.npy"), "--models",
                           "sm100", "--out", path("nan"), NULL};
    rc = run(nargs);
    char msg[96];
    snprintf(msg, sizeof msg, "NaN/Inf input: Q holds %d NaN/Inf values of %d", N, N);
    ok(rc == 0 && strstr(outtext, msg) && strstr(outtext, "(nothing finite)") && strstr(errtext, "warning: Q holds"),
       "an all-NaN Q: exit 0, the findings and a warning say that Q holds %d NaN/Inf values, nothing finite to "
       "measure", N);
    for (int i = 0; i < 3; i++)
        free(x[i]);
}

static void expect_fail(const char *what, int want, const char *const *args, const char *outdir, int want_entries)
{
    int rc = run(args);
    int clean = entries(outdir) == want_entries;
    if (!ok(rc == want && errtext[0] != '\0' && clean, "%s: exit %d, a message, no file written", what, want))
        diag("exit %d, stderr '%s', %d entries in %s", rc, errtext, entries(outdir), outdir);
    else
        diag("  stderr: %.*s", (int)strcspn(errtext, "\n"), errtext);
}

static void check_bad_input(void)
{
    const int64_t good[3] = {64, 2, 64}, d48[3] = {64, 2, 48}, h3[3] = {64, 3, 64}, kd[3] = {64, 2, 128};
    float *x = gaussian(64 * 3 * 128, 5);
    write_npy(path("g.npy"), 3, good, x);
    write_npy(path("d48.npy"), 3, d48, x);
    write_npy(path("h3.npy"), 3, h3, x);
    write_npy(path("kd.npy"), 3, kd, x);
    int64_t flat[2] = {64, 128};
    write_npy(path("flat.npy"), 2, flat, x);
    /* a truncated file: the header of g.npy and half its data */
    size_t len;
    char *g = slurp(path("g.npy"), &len);
    FILE *f = fopen(path("trunc.npy"), "wb");
    fwrite(g, 1, len / 2, f);
    fclose(f);
    free(g);
    free(x);
    /* an earlier result that a failed run must leave alone */
    const char *keep = path("keep");
    mkdir(keep, 0777);
    f = fopen(path("keep/results.csv"), "w");
    fputs("earlier\n", f);
    fclose(f);
    const char *q = path("g.npy");
    const char *a1[] = {"study", "--q", path("d48.npy"), "--k", path("d48.npy"), "--v", path("d48.npy"), "--out", keep, NULL};
    expect_fail("head dimension 48", 1, a1, keep, 1);
    const char *a2[] = {"study", "--q", q, "--k", path("kd.npy"), "--v", path("kd.npy"), "--out", keep, NULL};
    expect_fail("K's head dimension differs from Q's", 1, a2, keep, 1);
    const char *a3[] = {"study", "--q", path("h3.npy"), "--k", q, "--v", q, "--out", keep, NULL};
    expect_fail("3 query heads over 2 key/value heads", 1, a3, keep, 1);
    const char *a4[] = {"study", "--q", q, "--k", q, "--v", path("trunc.npy"), "--out", keep, NULL};
    expect_fail("a truncated .npy", 1, a4, keep, 1);
    const char *a5[] = {"study", "--q", path("flat.npy"), "--k", q, "--v", q, "--out", keep, NULL};
    expect_fail("a 2-D Q", 1, a5, keep, 1);
    const char *a6[] = {"study", "--q", q, "--k", q, "--v", q, "--do", path("kd.npy"), "--out", keep, NULL};
    expect_fail("dO shaped unlike Q", 1, a6, keep, 1);
    const char *a7[] = {"study", "--q", q, "--k", q, "--out", keep, NULL};
    expect_fail("no --v", 2, a7, keep, 1);
    const char *a8[] = {"study", "--demo", "--q", q, "--k", q, "--v", q, "--out", keep, NULL};
    expect_fail("--demo with tensors", 2, a8, keep, 1);
    const char *a9[] = {"study", "--demo", NULL};
    expect_fail("no --out", 2, a9, keep, 1);
    const char *a10[] = {"study", "--demo", "--quick", "--out", path("keep/results.csv"), NULL};
    expect_fail("--out names a file", 1, a10, keep, 1);
    const char *a11[] = {"study", "--demo", "--models", "sm100,sm99", "--out", keep, NULL};
    expect_fail("an unknown model", 2, a11, keep, 1);
    const char *a12[] = {"study", "--q", q, "--k", q, "--v", q, "--presets", "rceil,sm100", "--out", keep, NULL};
    expect_fail("an unknown preset", 2, a12, keep, 1);
    const char *a13[] = {"study", "--q", q, "--k", q, "--v", q, "--cu-seqlens-q", "0,64", "--out", keep, NULL};
    expect_fail("--cu-seqlens-q without --cu-seqlens-k", 2, a13, keep, 1);
    const char *a14[] = {"study", "--q", q, "--k", q, "--v", q, "--cu-seqlens-q", "0,30,64", "--cu-seqlens-k", "0,64",
                         "--out", keep, NULL};
    expect_fail("offsets of two sequences for Q and one for K", 1, a14, keep, 1);
    const char *a15[] = {"study", "--q", q, "--k", q, "--v", q, "--cu-seqlens-q", "0,30,65", "--cu-seqlens-k",
                         "0,30,64", "--out", keep, NULL};
    expect_fail("offsets past Q's 64 tokens", 1, a15, keep, 1);
    const char *a16[] = {"study", "--q", q, "--k", q, "--v", q, "--cu-seqlens-q", "0,x", "--cu-seqlens-k", "0,64",
                         "--out", keep, NULL};
    expect_fail("a malformed offset list", 2, a16, keep, 1);
    const char *a17[] = {"study", "--demo", "--quick", "--presets", "ocp", "--out", keep, NULL};
    expect_fail("--presets with --demo", 2, a17, keep, 1);
    char *kept = slurp(path("keep/results.csv"), NULL);
    ok(kept && !strcmp(kept, "earlier\n"), "the earlier results.csv is untouched by the failed runs");
    free(kept);
}

int main(void)
{
    const char *bdir = getenv("MXFA_BUILDDIR");
    snprintf(mxfa_bin, sizeof mxfa_bin, "%s/tools/mxfa", bdir && *bdir ? bdir : "..");
    if (access(mxfa_bin, X_OK) != 0)
        skip_all("the mxfa program is not built");
    snprintf(dir, sizeof dir, "t-study.dir.XXXXXX");
    if (!mkdtemp(dir)) {
        printf("Bail out! cannot make a temporary directory\n");
        return 1;
    }
    check_demo();
    check_user();
    check_user_batch();
    check_user_nonfinite();
    check_bad_input();
    char cmdline[1200];
    snprintf(cmdline, sizeof cmdline, "rm -rf '%s'", dir);
    if (system(cmdline) != 0)
        diag("could not remove %s", dir);
    return done_testing();
}
