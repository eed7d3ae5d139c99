/* SPDX-License-Identifier: BSD-3-Clause */
/* Versions, status strings, contexts and the backend registry, including
 * the MXFA_BACKEND override and the rule that a missing backend is an
 * error, never a silent fallback. */
#include "mxfa.h"
#include "tap.h"

int main(void)
{
    char expect_version[32];
    snprintf(expect_version, sizeof expect_version, "%d.%d.%d", MXFA_VERSION_MAJOR, MXFA_VERSION_MINOR,
             MXFA_VERSION_PATCH);
    ok(strcmp(mxfa_version(), expect_version) == 0 && strcmp(MXFA_VERSION_STRING, expect_version) == 0,
       "mxfa_version() is %s, as the header says", expect_version);
    ok(mxfa_version_number() == MXFA_VERSION_NUMBER, "mxfa_version_number() matches the header");

    int distinct = 1;
    for (int a = MXFA_OK; a <= MXFA_ERR_INTERNAL; a++) {
        const char *sa = mxfa_strerror((mxfa_status)a);
        distinct &= sa && sa[0];
        for (int b = a + 1; b <= MXFA_ERR_INTERNAL; b++)
            distinct &= strcmp(sa, mxfa_strerror((mxfa_status)b)) != 0;
    }
    ok(distinct, "every status has its own non-empty sentence");
    ok(strcmp(mxfa_strerror((mxfa_status)999), "unknown status") == 0, "an unknown status is named as such");

    unsetenv("MXFA_BACKEND");
    mxfa_ctx *ctx = NULL;
    ok(mxfa_open(&ctx, "ref") == MXFA_OK && strcmp(mxfa_backend_name(ctx), "ref") == 0, "open ref");
    {
        int arch = -1;
        char name[8] = "x";
        ok(ctx && mxfa_device_info(ctx, &arch, name, sizeof name) == MXFA_OK && arch == 0 && !strcmp(name, "cpu") &&
               mxfa_device_info(ctx, NULL, NULL, 0) == MXFA_OK,
           "device info of ref: no GPU (0, \"cpu\")");
        ok(mxfa_device_info(NULL, &arch, name, sizeof name) == MXFA_ERR_NULL, "device info without a context: "
           "MXFA_ERR_NULL");
        size_t peak = 12345;
        ok(mxfa_scratch_peak(ctx, &peak, 0) == MXFA_ERR_UNSUPPORTED && peak == 12345 &&
               strstr(mxfa_last_error(ctx), "no device scratch") != NULL,
           "scratch peak of ref: unsupported, *bytes untouched (%s)", mxfa_last_error(ctx));
        ok(mxfa_scratch_peak(NULL, &peak, 0) == MXFA_ERR_NULL && mxfa_scratch_peak(ctx, NULL, 1) == MXFA_ERR_NULL,
           "scratch peak without a context or an out pointer: MXFA_ERR_NULL");
    }
    mxfa_close(ctx);
    ctx = NULL;
    ok(mxfa_open(&ctx, NULL) == MXFA_OK && ctx != NULL, "open with NULL means auto");
    const char *auto_name = ctx ? mxfa_backend_name(ctx) : "";
    /* cuda is opened by name until it does every operation */
    ok(strcmp(auto_name, "cpu") == 0 ? mxfa_backend_usable("cpu", NULL, 0)
                                      : strcmp(auto_name, "ref") == 0 && !mxfa_backend_usable("cpu", NULL, 0),
       "auto picked '%s': the first usable of cpu, ref", auto_name);
    mxfa_close(ctx);

    ok(mxfa_backend_built("ref") && mxfa_backend_usable("ref", NULL, 0), "ref is always built and usable");
    char why[256] = "";
    ok(!mxfa_backend_usable("tpu", why, sizeof why) && strstr(why, "no such backend"),
       "an unknown name is not usable: %s", why);
    for (int i = 0; i < 2; i++) {
        const char *name = i ? "cuda" : "cpu";
        if (mxfa_backend_usable(name, why, sizeof why))
            continue;
        ctx = NULL;
        mxfa_status st = mxfa_open(&ctx, name);
        ok(st == MXFA_ERR_NO_BACKEND && ctx == NULL && strstr(mxfa_last_error(NULL), name) &&
               strstr(mxfa_last_error(NULL), why),
           "open %s when it is not usable fails and says why: %s", name, mxfa_last_error(NULL));
    }

    /* MXFA_BACKEND overrides the name given */
    setenv("MXFA_BACKEND", "ref", 1);
    ctx = NULL;
    ok(mxfa_open(&ctx, "cuda") == MXFA_OK && strcmp(mxfa_backend_name(ctx), "ref") == 0,
       "MXFA_BACKEND=ref overrides the name passed to mxfa_open");
    mxfa_close(ctx);
    setenv("MXFA_BACKEND", "nonesuch", 1);
    ctx = NULL;
    ok(mxfa_open(&ctx, "ref") == MXFA_ERR_INVALID && strstr(mxfa_last_error(NULL), "MXFA_BACKEND"),
       "a bad MXFA_BACKEND is an error that names the variable: %s", mxfa_last_error(NULL));
    setenv("MXFA_BACKEND", "", 1);
    ctx = NULL;
    ok(mxfa_open(&ctx, "ref") == MXFA_OK, "an empty MXFA_BACKEND is ignored");
    mxfa_close(ctx);
    unsetenv("MXFA_BACKEND");

    /* names round-trip */
    int names = 1;
    for (int b = 0; b < 3; b++) {
        mxfa_block v;
        names &= mxfa_block_parse(mxfa_block_name((mxfa_block)b), &v) == MXFA_OK && v == (mxfa_block)b;
    }
    for (int p = 0; p < 4; p++) {
        mxfa_preset v;
        names &= mxfa_preset_parse(mxfa_preset_name((mxfa_preset)p), &v) == MXFA_OK && v == (mxfa_preset)p;
    }
    for (int l = 0; l < 2; l++) {
        mxfa_layout v;
        names &= mxfa_layout_parse(mxfa_layout_name((mxfa_layout)l), &v) == MXFA_OK && v == (mxfa_layout)l;
    }
    mxfa_dtype f;
    names &= mxfa_format_parse("e4m3", &f) == MXFA_OK && f == MXFA_E4M3;
    names &= mxfa_format_parse("e5m2", &f) == MXFA_OK && f == MXFA_E5M2;
    ok(names, "every block, preset, layout and format name parses back to itself");
    ok(mxfa_dtype_size(MXFA_BF16) == 2 && mxfa_dtype_size(MXFA_E8M0) == 1 && mxfa_dtype_size((mxfa_dtype)99) == 0,
       "dtype sizes");
    return done_testing();
}
