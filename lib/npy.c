/* SPDX-License-Identifier: BSD-3-Clause */
/* .npy reading (strict) and atomic writing. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "npy.h"

static const struct {
    npy_dtype dtype;
    const char *descr;
    size_t size;
} npy_types[] = {
    {NPY_F32, "<f4", 4}, {NPY_F64, "<f8", 8}, {NPY_U8, "|u1", 1},
    {NPY_I32, "<i4", 4}, {NPY_I64, "<i8", 8}, {NPY_F16, "<f2", 2},
};

#define NTYPES (sizeof npy_types / sizeof npy_types[0])

size_t npy_itemsize(npy_dtype dtype)
{
    for (size_t i = 0; i < NTYPES; i++)
        if (npy_types[i].dtype == dtype)
            return npy_types[i].size;
    return 0;
}

const char *npy_descr(npy_dtype dtype)
{
    for (size_t i = 0; i < NTYPES; i++)
        if (npy_types[i].dtype == dtype)
            return npy_types[i].descr;
    return "?";
}

static mxfa_status fail(mxfa_status st, char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static mxfa_status fail(mxfa_status st, char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    if (err && errlen)
        vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    return st;
}

/* A tiny cursor over the header dict: {'descr': '<f4', 'fortran_order':
 * False, 'shape': (3, 4), } in any key order, with optional spaces. */
typedef struct cursor {
    const char *p, *end;
} cursor;

static void skip_space(cursor *c)
{
    while (c->p < c->end && (*c->p == ' ' || *c->p == '\t'))
        c->p++;
}

static int eat(cursor *c, char ch)
{
    skip_space(c);
    if (c->p < c->end && *c->p == ch) {
        c->p++;
        return 1;
    }
    return 0;
}

/* A quoted string (single or double quotes, no escapes) into out. */
static int read_string(cursor *c, char *out, size_t outlen)
{
    skip_space(c);
    if (c->p >= c->end || (*c->p != '\'' && *c->p != '"'))
        return 0;
    char q = *c->p++;
    size_t n = 0;
    while (c->p < c->end && *c->p != q) {
        if (n + 1 >= outlen)
            return 0;
        out[n++] = *c->p++;
    }
    if (c->p >= c->end)
        return 0;
    c->p++;
    out[n] = '\0';
    return 1;
}

static int read_word(cursor *c, const char *w)
{
    skip_space(c);
    size_t n = strlen(w);
    if ((size_t)(c->end - c->p) >= n && memcmp(c->p, w, n) == 0) {
        c->p += n;
        return 1;
    }
    return 0;
}

/* A non-negative decimal integer that fits in int64. */
static int read_dim(cursor *c, int64_t *v)
{
    skip_space(c);
    if (c->p >= c->end || *c->p < '0' || *c->p > '9')
        return 0;
    int64_t x = 0;
    while (c->p < c->end && *c->p >= '0' && *c->p <= '9') {
        if (x > (INT64_MAX - (*c->p - '0')) / 10)
            return -1;
        x = x * 10 + (*c->p - '0');
        c->p++;
    }
    if (c->p < c->end && (*c->p == 'L' || *c->p == 'l'))
        c->p++; /* Python 2 longs */
    *v = x;
    return 1;
}

mxfa_status npy_parse(const uint8_t *buf, size_t len, npy_array *a, char *err, size_t errlen)
{
    static const uint8_t magic[6] = {0x93, 'N', 'U', 'M', 'P', 'Y'};
    if (len < 10 || memcmp(buf, magic, 6) != 0)
        return fail(MXFA_ERR_FORMAT, err, errlen, "not a .npy file (bad magic or too short)");
    unsigned major = buf[6];
    size_t hlen, hstart;
    if (major == 1) {
        hlen = (size_t)buf[8] | (size_t)buf[9] << 8;
        hstart = 10;
    } else if (major == 2 || major == 3) {
        if (len < 12)
            return fail(MXFA_ERR_FORMAT, err, errlen, "truncated .npy header");
        hlen = (size_t)buf[8] | (size_t)buf[9] << 8 | (size_t)buf[10] << 16 | (size_t)buf[11] << 24;
        hstart = 12;
    } else {
        return fail(MXFA_ERR_FORMAT, err, errlen, "unsupported .npy format version %u.%u", major, buf[7]);
    }
    if (hlen > len - hstart)
        return fail(MXFA_ERR_FORMAT, err, errlen, "header length %zu runs past the end of the file (%zu bytes)",
                    hlen, len);
    const char *h = (const char *)buf + hstart;
    if (hlen == 0 || h[hlen - 1] != '\n')
        return fail(MXFA_ERR_FORMAT, err, errlen, "malformed .npy header (no terminating newline)");
    for (size_t i = 0; i < hlen; i++)
        if (h[i] == '\0')
            return fail(MXFA_ERR_FORMAT, err, errlen, "malformed .npy header (NUL byte)");

    cursor c = {h, h + hlen - 1};
    char key[32], descr[32] = "";
    int have_descr = 0, have_order = 0, have_shape = 0, fortran = 0, ndim = 0;
    int64_t shape[NPY_MAX_DIMS];
    if (!eat(&c, '{'))
        return fail(MXFA_ERR_FORMAT, err, errlen, "malformed .npy header (expected '{')");
    while (!eat(&c, '}')) {
        if (!read_string(&c, key, sizeof key) || !eat(&c, ':'))
            return fail(MXFA_ERR_FORMAT, err, errlen, "malformed .npy header (expected a quoted key and ':')");
        if (strcmp(key, "descr") == 0 && !have_descr) {
            if (!read_string(&c, descr, sizeof descr))
                return fail(MXFA_ERR_FORMAT, err, errlen, "malformed .npy header (descr is not a string)");
            have_descr = 1;
        } else if (strcmp(key, "fortran_order") == 0 && !have_order) {
            if (read_word(&c, "False"))
                fortran = 0;
            else if (read_word(&c, "True"))
                fortran = 1;
            else
                return fail(MXFA_ERR_FORMAT, err, errlen, "malformed .npy header (fortran_order is not a bool)");
            have_order = 1;
        } else if (strcmp(key, "shape") == 0 && !have_shape) {
            if (!eat(&c, '('))
                return fail(MXFA_ERR_FORMAT, err, errlen, "malformed .npy header (shape is not a tuple)");
            while (!eat(&c, ')')) {
                if (ndim == NPY_MAX_DIMS)
                    return fail(MXFA_ERR_FORMAT, err, errlen, "shape has more than %d dimensions", NPY_MAX_DIMS);
                int r = read_dim(&c, &shape[ndim]);
                if (r < 0)
                    return fail(MXFA_ERR_OVERFLOW, err, errlen, "a dimension of the shape overflows");
                if (r == 0)
                    return fail(MXFA_ERR_FORMAT, err, errlen,
                                "malformed .npy header (shape must hold non-negative integers)");
                ndim++;
                if (!eat(&c, ',')) {
                    if (!eat(&c, ')'))
                        return fail(MXFA_ERR_FORMAT, err, errlen, "malformed .npy header (bad shape tuple)");
                    break;
                }
            }
            have_shape = 1;
        } else {
            return fail(MXFA_ERR_FORMAT, err, errlen, "malformed .npy header (unexpected or repeated key '%s')", key);
        }
        if (!eat(&c, ',')) {
            if (!eat(&c, '}'))
                return fail(MXFA_ERR_FORMAT, err, errlen, "malformed .npy header (expected ',' or '}')");
            break;
        }
    }
    skip_space(&c);
    if (c.p != c.end)
        return fail(MXFA_ERR_FORMAT, err, errlen, "malformed .npy header (text after the dict)");
    if (!have_descr || !have_order || !have_shape)
        return fail(MXFA_ERR_FORMAT, err, errlen, "malformed .npy header (descr, fortran_order and shape are required)");
    if (fortran && ndim > 1)
        return fail(MXFA_ERR_FORMAT, err, errlen, "Fortran-order arrays are not supported (save with C order)");

    const char *d = descr;
    char norm[32];
    if ((d[0] == '=' || d[0] == '<' || d[0] == '|') && strlen(d) == 3) {
        /* '=' and '|' on a little-endian host mean little-endian too */
        snprintf(norm, sizeof norm, "%c%s", (d[1] == 'u' && d[2] == '1') ? '|' : '<', d + 1);
        d = norm;
    }
    int found = -1;
    for (size_t i = 0; i < NTYPES; i++)
        if (strcmp(npy_types[i].descr, d) == 0)
            found = (int)i;
    if (found < 0) {
        if (descr[0] == '>')
            return fail(MXFA_ERR_FORMAT, err, errlen, "big-endian dtype '%s' is not supported (use little-endian)",
                        descr);
        return fail(MXFA_ERR_FORMAT, err, errlen,
                    "unsupported dtype '%s' (supported: <f4, <f8, <f2, |u1, <i4, <i8)", descr);
    }

    int64_t count = 1, bytes;
    for (int i = 0; i < ndim; i++)
        if (__builtin_mul_overflow(count, shape[i], &count))
            return fail(MXFA_ERR_OVERFLOW, err, errlen, "the shape's element count overflows");
    if (__builtin_mul_overflow(count, (int64_t)npy_types[found].size, &bytes) || (uint64_t)bytes > SIZE_MAX)
        return fail(MXFA_ERR_OVERFLOW, err, errlen, "the array's size in bytes overflows");
    size_t have = len - hstart - hlen;
    if ((uint64_t)bytes != have)
        return fail(MXFA_ERR_FORMAT, err, errlen, "the shape needs %lld bytes of data but the file has %zu%s",
                    (long long)bytes, have, (uint64_t)bytes > have ? " (truncated)" : "");
    void *data = malloc(bytes ? (size_t)bytes : 1);
    if (!data)
        return fail(MXFA_ERR_NO_MEMORY, err, errlen, "cannot allocate %lld bytes", (long long)bytes);
    memcpy(data, buf + hstart + hlen, (size_t)bytes);
    a->dtype = npy_types[found].dtype;
    a->ndim = ndim;
    for (int i = 0; i < ndim; i++)
        a->shape[i] = shape[i];
    a->count = count;
    a->data = data;
    return MXFA_OK;
}

mxfa_status npy_read(const char *path, npy_array *a, char *err, size_t errlen)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return fail(MXFA_ERR_IO, err, errlen, "%s: %s", path, strerror(errno));
    uint8_t *buf = NULL;
    size_t len = 0, cap = 0;
    for (;;) {
        if (len == cap) {
            size_t ncap = cap ? cap * 2 : 65536;
            uint8_t *nb = ncap > cap ? realloc(buf, ncap) : NULL;
            if (!nb) {
                free(buf);
                fclose(f);
                return fail(MXFA_ERR_NO_MEMORY, err, errlen, "%s: out of memory reading the file", path);
            }
            buf = nb;
            cap = ncap;
        }
        size_t n = fread(buf + len, 1, cap - len, f);
        len += n;
        if (n == 0)
            break;
    }
    int bad = ferror(f);
    fclose(f);
    if (bad) {
        free(buf);
        return fail(MXFA_ERR_IO, err, errlen, "%s: read error", path);
    }
    char msg[256];
    mxfa_status st = npy_parse(buf, len, a, msg, sizeof msg);
    free(buf);
    if (st != MXFA_OK)
        return fail(st, err, errlen, "%s: %s", path, msg);
    return MXFA_OK;
}

void npy_free(npy_array *a)
{
    if (a) {
        free(a->data);
        a->data = NULL;
    }
}

/* binary16 bits to the binary32 bits of the same value, by integers: a
 * subnormal half (m * 2^-24) is normalized; Inf and NaN keep their sign and
 * payload (a quiet NaN stays quiet). */
static uint32_t f16_to_f32_bits(uint16_t h)
{
    const uint32_t sign = (uint32_t)(h >> 15) << 31;
    int exp = (h >> 10) & 0x1F;
    uint32_t man = h & 0x3FFu;
    if (exp == 0x1F)
        return sign | 0x7F800000u | man << 13;
    if (exp == 0) {
        if (man == 0)
            return sign;
        for (exp = 1; !(man & 0x400u); exp--)
            man <<= 1;
        man &= 0x3FFu;
    }
    return sign | (uint32_t)(exp + 112) << 23 | man << 13; /* rebias: 127 - 15 */
}

mxfa_status npy_to_f32(npy_array *a, char *err, size_t errlen)
{
    if (a->dtype == NPY_F32)
        return MXFA_OK;
    if (a->dtype != NPY_F64 && a->dtype != NPY_F16)
        return fail(MXFA_ERR_INVALID, err, errlen, "a %s array has no float32 conversion", npy_descr(a->dtype));
    float *f = malloc(a->count ? (size_t)a->count * sizeof *f : 1);
    if (!f)
        return fail(MXFA_ERR_NO_MEMORY, err, errlen, "cannot allocate %lld bytes for the float32 copy",
                    (long long)a->count * 4);
    if (a->dtype == NPY_F64) {
        const double *d = a->data;
        for (int64_t i = 0; i < a->count; i++)
            f[i] = (float)d[i];
    } else {
        const uint16_t *h = a->data;
        for (int64_t i = 0; i < a->count; i++) {
            uint32_t bits = f16_to_f32_bits(h[i]);
            memcpy(&f[i], &bits, sizeof bits);
        }
    }
    free(a->data);
    a->data = f;
    a->dtype = NPY_F32;
    return MXFA_OK;
}

mxfa_status npy_write_temp(const char *path, npy_dtype dtype, int ndim, const int64_t *shape,
                           const void *data, char *tmp, size_t tmplen, char *err, size_t errlen)
{
    char header[512];
    size_t n = (size_t)snprintf(header, sizeof header, "{'descr': '%s', 'fortran_order': False, 'shape': (",
                                npy_descr(dtype));
    int64_t count = 1;
    for (int i = 0; i < ndim; i++) {
        n += (size_t)snprintf(header + n, sizeof header - n, "%lld,%s", (long long)shape[i],
                              (i + 1 < ndim) ? " " : "");
        count *= shape[i];
    }
    if (ndim > 1)
        n--; /* (3, 4) rather than (3, 4,); a 1-D shape keeps its comma */
    n += (size_t)snprintf(header + n, sizeof header - n, "), }");
    /* pad with spaces so that the data starts at a multiple of 64 */
    size_t total = 10 + n + 1;
    size_t pad = (64 - total % 64) % 64;
    if (n + pad + 1 >= sizeof header)
        return fail(MXFA_ERR_INTERNAL, err, errlen, "npy header too long");
    memset(header + n, ' ', pad);
    header[n + pad] = '\n';
    size_t hlen = n + pad + 1;

    FILE *f = npy_create_temp(path, tmp, tmplen, err, errlen);
    if (!f)
        return MXFA_ERR_IO;
    uint8_t pre[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, (uint8_t)(hlen & 0xFF), (uint8_t)(hlen >> 8)};
    size_t bytes = (size_t)count * npy_itemsize(dtype);
    if (fwrite(pre, 1, 10, f) == 10 && fwrite(header, 1, hlen, f) == hlen)
        if (bytes > 0)
            fwrite(data, 1, bytes, f);
    return npy_close_temp(f, tmp, path, err, errlen);
}

FILE *npy_create_temp(const char *path, char *tmp, size_t tmplen, char *err, size_t errlen)
{
    if ((size_t)snprintf(tmp, tmplen, "%s.tmpXXXXXX", path) >= tmplen) {
        fail(MXFA_ERR_IO, err, errlen, "%s: path too long", path);
        return NULL;
    }
    int fd = mkstemp(tmp);
    if (fd < 0) {
        fail(MXFA_ERR_IO, err, errlen, "%s: cannot create a temporary file: %s", path, strerror(errno));
        return NULL;
    }
    mode_t mask = umask(0);
    umask(mask);
    fchmod(fd, 0666 & ~mask);
    FILE *f = fdopen(fd, "wb");
    if (!f) {
        fail(MXFA_ERR_IO, err, errlen, "%s: %s", path, strerror(errno));
        close(fd);
        unlink(tmp);
    }
    return f;
}

mxfa_status npy_close_temp(FILE *f, const char *tmp, const char *path, char *err, size_t errlen)
{
    int ok = !ferror(f) && fflush(f) == 0;
#ifdef HAVE_FSYNC
    ok = ok && fsync(fileno(f)) == 0;
#endif
    int saved = errno;
    if (fclose(f) != 0)
        ok = 0;
    if (!ok) {
        unlink(tmp);
        return fail(MXFA_ERR_IO, err, errlen, "%s: write failed: %s", path, strerror(saved ? saved : EIO));
    }
    return MXFA_OK;
}

mxfa_status npy_commit(const char *tmp, const char *path, char *err, size_t errlen)
{
    if (rename(tmp, path) != 0) {
        int saved = errno;
        unlink(tmp);
        return fail(MXFA_ERR_IO, err, errlen, "%s: cannot rename the finished file into place: %s", path,
                    strerror(saved));
    }
    return MXFA_OK;
}

void npy_discard(const char *tmp)
{
    if (tmp && *tmp)
        unlink(tmp);
}
