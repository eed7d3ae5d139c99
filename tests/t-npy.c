/* SPDX-License-Identifier: BSD-3-Clause */
/* The strict .npy reader: valid files in the shapes NumPy writes them, and
 * every kind of malformed or hostile file refused with a clear error. */
#include "narrowing.h"
#include "npy.h"
#include "tap.h"

/* Build a .npy image: magic, version, header length (as given, so that it
 * can lie), header text, then `data_bytes` bytes of payload. */
static size_t build(uint8_t *buf, int major, const char *header, long hlen_field, size_t data_bytes)
{
    size_t hl = strlen(header), n = 0;
    memcpy(buf, "\x93NUMPY", 6);
    buf[6] = (uint8_t)major;
    buf[7] = 0;
    n = 8;
    if (hlen_field < 0)
        hlen_field = (long)hl;
    if (major == 1) {
        buf[n++] = (uint8_t)(hlen_field & 0xFF);
        buf[n++] = (uint8_t)((hlen_field >> 8) & 0xFF);
    } else {
        for (int i = 0; i < 4; i++)
            buf[n++] = (uint8_t)((hlen_field >> (8 * i)) & 0xFF);
    }
    memcpy(buf + n, header, hl);
    n += hl;
    for (size_t i = 0; i < data_bytes; i++)
        buf[n++] = (uint8_t)i;
    return n;
}

static uint8_t buf[1 << 16];

static void good(const char *what, int major, const char *header, size_t data_bytes, npy_dtype dt, int ndim,
                 int64_t d0, int64_t d1)
{
    size_t n = build(buf, major, header, -1, data_bytes);
    npy_array a;
    char err[256] = "";
    mxfa_status st = npy_parse(buf, n, &a, err, sizeof err);
    int pass = st == MXFA_OK && a.dtype == dt && a.ndim == ndim && (ndim < 1 || a.shape[0] == d0) &&
               (ndim < 2 || a.shape[1] == d1);
    if (st == MXFA_OK) {
        pass = pass && memcmp(a.data, buf + n - data_bytes, data_bytes) == 0;
        npy_free(&a);
    }
    if (!ok(pass, "accepts %s", what))
        diag("status %d: %s", st, err);
}

static void bad(const char *what, mxfa_status want, const uint8_t *img, size_t n, const char *needle)
{
    npy_array a;
    memset(&a, 0x5A, sizeof a);
    char err[256] = "";
    mxfa_status st = npy_parse(img, n, &a, err, sizeof err);
    if (!ok(st == want && strstr(err, needle) != NULL && a.ndim == 0x5A5A5A5A, "refuses %s: %s", what, err))
        diag("status %d, wanted %d and a message containing '%s'", st, want, needle);
}

static void bad_header(const char *what, mxfa_status want, const char *header, size_t data_bytes, const char *needle)
{
    size_t n = build(buf, 1, header, -1, data_bytes);
    bad(what, want, buf, n, needle);
}

/* An array of n elements of dtype over a malloc'ed copy of data. */
static npy_array array_of(npy_dtype dtype, int64_t n, const void *data)
{
    npy_array a = {dtype, 1, {n}, n, malloc((size_t)n * npy_itemsize(dtype))};
    memcpy(a.data, data, (size_t)n * npy_itemsize(dtype));
    return a;
}

/* npy_to_f32: float64 rounded to nearest even (ties, the top of the
 * range, beyond it, subnormals, NaN), every float16 exactly, other dtypes
 * refused untouched. */
static void to_f32(void)
{
    static narrow_case cases[NARROW_EDGE_CASES + 10 * 2000];
    static double x64[NARROW_EDGE_CASES + 10 * 2000];
    static uint16_t x16[65536];
    rng_seed_from_env(1);
    char err[256];
    int n = narrow_cases(cases, 2000), bad = 0;
    for (int i = 0; i < n; i++)
        x64[i] = cases[i].x;
    npy_array a = array_of(NPY_F64, n, x64);
    int conv = npy_to_f32(&a, err, sizeof err) == MXFA_OK && a.dtype == NPY_F32 && a.count == n;
    for (int i = 0; conv && i < n; i++) {
        uint32_t got;
        memcpy(&got, (const float *)a.data + i, 4);
        if (!narrow_match(got, cases[i].want) && bad++ < 5)
            diag("%a became 0x%08X, not 0x%08X", cases[i].x, (unsigned)got, (unsigned)cases[i].want);
    }
    ok(conv && !bad, "npy_to_f32 rounds %d float64 values to nearest even: ties, their neighbours, subnormals, "
       "the top of the range and beyond (to Inf), NaN", n);
    npy_free(&a);

    for (int h = 0; h < 65536; h++)
        x16[h] = (uint16_t)h;
    a = array_of(NPY_F16, 65536, x16);
    conv = npy_to_f32(&a, err, sizeof err) == MXFA_OK && a.dtype == NPY_F32 && a.count == 65536;
    bad = 0;
    for (int h = 0; conv && h < 65536; h++) {
        const float want = narrow_half((uint16_t)h), got = ((const float *)a.data)[h];
        int same = isnan(want) ? isnan(got) && signbit(got) == signbit(want) : bits_of(got) == bits_of(want);
        if (!same && bad++ < 5)
            diag("half 0x%04X became %a, not %a", h, (double)got, (double)want);
    }
    ok(conv && !bad, "npy_to_f32 turns every one of the 65536 float16 values into the same float32");
    npy_free(&a);

    const int32_t ints[2] = {1, 2};
    a = array_of(NPY_I32, 2, ints);
    void *before = a.data;
    ok(npy_to_f32(&a, err, sizeof err) == MXFA_ERR_INVALID && a.dtype == NPY_I32 && a.data == before &&
           strstr(err, "<i4"),
       "npy_to_f32 refuses an int32 array and leaves it as it was: %s", err);
    npy_free(&a);
}

int main(void)
{
    good("a 2-D float32 array", 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }     \n", 48, NPY_F32,
         2, 3, 4);
    good("keys in another order, no spaces", 1, "{'shape':(2,5),'fortran_order':False,'descr':'|u1'}\n", 10, NPY_U8, 2,
         2, 5);
    good("format version 2.0", 2, "{'descr': '<f8', 'fortran_order': False, 'shape': (2,), }\n", 16, NPY_F64, 1, 2, 0);
    good("a 1-D Fortran-order array (same bytes as C order)", 1,
         "{'descr': '<i4', 'fortran_order': True, 'shape': (3,), }\n", 12, NPY_I32, 1, 3, 0);
    good("'=f4' (native order on a little-endian host)", 1, "{'descr': '=f4', 'fortran_order': False, 'shape': (1, 1), }\n",
         4, NPY_F32, 2, 1, 1);
    good("a scalar (shape ())", 1, "{'descr': '<i8', 'fortran_order': False, 'shape': (), }\n", 8, NPY_I64, 0, 0, 0);
    good("float16", 1, "{'descr': '<f2', 'fortran_order': False, 'shape': (3,), }\n", 6, NPY_F16, 1, 3, 0);

    size_t n;
    bad("an empty file", MXFA_ERR_FORMAT, buf, 0, "not a .npy");
    memcpy(buf, "\x93NUMPX\x01\x00\x00\x00", 10);
    bad("a bad magic string", MXFA_ERR_FORMAT, buf, 10, "not a .npy");
    n = build(buf, 4, "{}\n", -1, 0);
    bad("an unknown format version", MXFA_ERR_FORMAT, buf, n, "version");
    n = build(buf, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }\n", 60000, 4);
    bad("a header length running past the end", MXFA_ERR_FORMAT, buf, n, "past the end");
    n = build(buf, 2, "{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }\n", 0x7FFFFFFF, 4);
    bad("a huge 4-byte header length", MXFA_ERR_FORMAT, buf, n, "past the end");
    n = build(buf, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (4,), }\n", -1, 16);
    bad("a truncated payload", MXFA_ERR_FORMAT, buf, n - 1, "truncated");
    bad("a header cut in the middle", MXFA_ERR_FORMAT, buf, 30, "past the end");
    bad_header("trailing bytes after the data", MXFA_ERR_FORMAT,
               "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }\n", 12, "has 12");
    bad_header("a big-endian dtype", MXFA_ERR_FORMAT, "{'descr': '>f4', 'fortran_order': False, 'shape': (1,), }\n", 4,
               "big-endian");
    bad_header("complex64", MXFA_ERR_FORMAT, "{'descr': '<c8', 'fortran_order': False, 'shape': (1,), }\n", 8,
               "unsupported dtype");
    bad_header("a structured dtype", MXFA_ERR_FORMAT,
               "{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (1,), }\n", 4, "descr");
    bad_header("a 2-D Fortran-order array", MXFA_ERR_FORMAT,
               "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 2), }\n", 16, "Fortran");
    bad_header("a negative dimension", MXFA_ERR_FORMAT, "{'descr': '<f4', 'fortran_order': False, 'shape': (-1, 2), }\n",
               0, "non-negative");
    bad_header("a dimension beyond int64", MXFA_ERR_OVERFLOW,
               "{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,), }\n", 0, "overflows");
    bad_header("a shape whose element count overflows", MXFA_ERR_OVERFLOW,
               "{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296), }\n", 0, "overflows");
    bad_header("a shape whose byte count overflows", MXFA_ERR_OVERFLOW,
               "{'descr': '<f8', 'fortran_order': False, 'shape': (2305843009213693952,), }\n", 0, "overflows");
    bad_header("a huge shape with no data", MXFA_ERR_FORMAT,
               "{'descr': '<f4', 'fortran_order': False, 'shape': (1000000, 1000000), }\n", 0, "truncated");
    bad_header("a missing key", MXFA_ERR_FORMAT, "{'descr': '<f4', 'shape': (1,), }\n", 4, "required");
    bad_header("a repeated key", MXFA_ERR_FORMAT,
               "{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (1,), }\n", 4, "repeated");
    bad_header("an unknown key", MXFA_ERR_FORMAT,
               "{'descr': '<f4', 'fortran_order': False, 'shape': (1,), 'x': 1}\n", 4, "unexpected");
    bad_header("no terminating newline", MXFA_ERR_FORMAT, "{'descr': '<f4', 'fortran_order': False, 'shape': (1,), } ",
               4, "newline");
    bad_header("an unterminated string", MXFA_ERR_FORMAT, "{'descr': '<f4, 'fortran_order': False, 'shape': (1,)}\n", 4,
               "malformed");
    bad_header("a non-boolean fortran_order", MXFA_ERR_FORMAT,
               "{'descr': '<f4', 'fortran_order': 0, 'shape': (1,), }\n", 4, "bool");
    bad_header("a shape that is not a tuple", MXFA_ERR_FORMAT, "{'descr': '<f4', 'fortran_order': False, 'shape': 3}\n",
               12, "tuple");
    bad_header("nine dimensions", MXFA_ERR_FORMAT,
               "{'descr': '<f4', 'fortran_order': False, 'shape': (1,1,1,1,1,1,1,1,1), }\n", 4, "dimensions");
    bad_header("text after the dict", MXFA_ERR_FORMAT,
               "{'descr': '<f4', 'fortran_order': False, 'shape': (1,), } junk\n", 4, "after the dict");
    {
        char h[] = "{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }\n";
        h[3] = '\0';
        size_t hl = sizeof h - 1;
        memcpy(buf, "\x93NUMPY\x01\x00", 8);
        buf[8] = (uint8_t)hl;
        buf[9] = 0;
        memcpy(buf + 10, h, hl);
        memset(buf + 10 + hl, 0, 4);
        bad("a NUL byte in the header", MXFA_ERR_FORMAT, buf, 10 + hl + 4, "NUL");
    }

    /* write, then read back */
    char tmp[512], err[256];
    float v[6] = {1, 2, 3, 4, 5, -0.0f};
    int64_t shape[2] = {2, 3};
    npy_array a;
    int rt = npy_write_temp("t-npy-roundtrip.npy", NPY_F32, 2, shape, v, tmp, sizeof tmp, err, sizeof err) == MXFA_OK &&
             npy_commit(tmp, "t-npy-roundtrip.npy", err, sizeof err) == MXFA_OK &&
             npy_read("t-npy-roundtrip.npy", &a, err, sizeof err) == MXFA_OK;
    if (rt) {
        rt = a.dtype == NPY_F32 && a.ndim == 2 && a.shape[0] == 2 && a.shape[1] == 3 && memcmp(a.data, v, sizeof v) == 0;
        npy_free(&a);
    }
    remove("t-npy-roundtrip.npy");
    ok(rt, "an array written atomically reads back identically");
    ok(npy_read("no/such/dir/file.npy", &a, err, sizeof err) == MXFA_ERR_IO && strstr(err, "file.npy"),
       "a missing file is an I/O error naming it: %s", err);
    ok(npy_write_temp("no/such/dir/out.npy", NPY_F32, 2, shape, v, tmp, sizeof tmp, err, sizeof err) == MXFA_ERR_IO,
       "writing into a missing directory fails cleanly: %s", err);
    to_f32();
    return done_testing();
}
