/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * mxfa bench at small settings, on the host backends: it exits 0 and
 * prints its table, one row per measurement the options ask for (named
 * here from the options, not from the program), each with a positive rate
 * and time. Among them the settings of the report that found the
 * product's operands carved from too small attention buffers.
 */
#include "cli_run.h"

static char out[1 << 16];

/* The row of the table that starts with `name`, or NULL. */
static const char *row(const char *name)
{
    for (const char *line = out; line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL)
        if (strncmp(line, name, strlen(name)) == 0 && line[strlen(name)] == ' ')
            return line;
    return NULL;
}

/* Whether the table has the row `name` with a positive rate and time;
 * counted into *found and *measured. */
static void check_row(const char *name, int *found, int *measured)
{
    const char *line = row(name);
    char unit[16];
    double rate = 0, seconds = 0;
    if (!line) {
        diag("no row '%s'", name);
        return;
    }
    ++*found;
    *measured += sscanf(line + strlen(name), "%lf %15s %lf", &rate, unit, &seconds) == 3 && rate > 0 && seconds > 0;
}

/* Every row the settings ask for, and no other: quantization (quantize),
 * a product per model (gemm_n > 0), attention per model, head dim, mask and
 * pass. */
static void expect_table(const char *what, int quantize, const char *const *models, int nmodels, const int *dims,
                         int ndims, int gemm_n, int causal, int backward)
{
    int want = quantize, found = 0, measured = 0;
    char name[96];
    if (quantize)
        check_row("quantize 4096x4096 (GB/s of fp32 in)", &found, &measured);
    for (int m = 0; m < nmodels && gemm_n > 0; m++, want++) {
        snprintf(name, sizeof name, "gemm %d^3 %s", gemm_n, models[m]);
        check_row(name, &found, &measured);
    }
    for (int m = 0; m < nmodels; m++)
        for (int d = 0; d < ndims; d++)
            for (int c = 0; c <= causal; c++)
                for (int b = 0; b <= backward; b++, want++) {
                    snprintf(name, sizeof name, "attn %s %s D=%d%s", b ? "bwd" : "fwd", models[m], dims[d],
                             c ? " causal" : "");
                    check_row(name, &found, &measured);
                }
    /* the rows between the column heads and the closing line */
    int rows = 0;
    const char *head = strstr(out, "\noperation ");
    for (const char *p = head ? strchr(head + 1, '\n') : NULL; p && p[1] && strncmp(p + 1, "inputs and outputs", 18);
         p = strchr(p + 1, '\n'))
        rows++;
    if (!ok(found == want && measured == want && rows == want, "%s: the %d rows asked for, each measured", what, want))
        diag("found %d, measured %d, rows %d of %d:\n%s", found, measured, rows, want, out);
}

/* mxfa `args` into out: exit 0, and its title holds `backend` (unless
 * NULL) and `settings`; the point is named by the command line. */
static void bench_runs(const char *const *args, const char *backend, const char *settings)
{
    char line[512] = "";
    for (const char *const *a = args; *a; a++)
        snprintf(line + strlen(line), sizeof line - strlen(line), "%s%s", a == args ? "" : " ", *a);
    const int rc = run(args, out, sizeof out);
    ok(rc == 0 && (!backend || strstr(out, backend)) && strstr(out, settings),
       "%s: exit 0 and the table's title (exit %d)", line, rc);
    if (rc)
        diag("stderr: %s", errtext);
}

int main(void)
{
    cli_start("t-cli-bench");
    static const char *const all[] = {"ideal", "sm100", "sm90-fp8", "sm90-bf16"};
    static const char *const sm100[] = {"sm100"};
    static const char *const ideal[] = {"ideal"};
    static const char *const sm90bf16[] = {"sm90-bf16"};
    static const int dims_all[] = {64, 128, 256}, dims_64[] = {64}, dims_128[] = {128};

    /* one head of 64 tokens: every model, head dim, mask and pass */
    const char *b1[] = {"bench", "--backend", "cpu", "--heads", "1", "--seqlen", "64", "--gemm", "64", "--reps", "1",
                        NULL};
    bench_runs(b1, "bench: backend cpu", "H=1 S=64, key tiles of 128, median of 1");
    expect_table("bench --heads 1 --seqlen 64", 1, all, 4, dims_all, 3, 64, 1, 1);

    /* the report's settings: a 1024^3 product beside attention of 2 x 512 x 64 */
    const char *b2[] = {"bench", "--backend", "cpu", "--heads", "2", "--seqlen", "512", "--dims", "64", "--models",
                        "sm100", "--reps", "2", NULL};
    bench_runs(b2, NULL, "H=2 S=512, key tiles of 128, median of 2");
    expect_table("the report's settings", 1, sm100, 1, dims_64, 1, 1024, 1, 1);

    /* the smallest settings there are, on the emulator */
    const char *b3[] = {"bench", "--backend", "ref", "--heads", "1", "--seqlen", "1", "--dims", "64", "--models",
                        "ideal", "--gemm", "1", "--reps", "1", "--no-backward", "--no-causal", NULL};
    bench_runs(b3, "bench: backend ref", "H=1 S=1, key tiles of 128, median of 1");
    expect_table("one token, a 1 x 1 x 1 product", 1, ideal, 1, dims_64, 1, 1, 0, 0);

    /* --no-quantize and --gemm 0: attention alone */
    const char *b4[] = {"bench", "--backend", "cpu", "--heads", "1", "--seqlen", "32", "--dims", "128", "--models",
                        "sm90-bf16", "--gemm", "0", "--reps", "1", "--no-quantize", NULL};
    bench_runs(b4, NULL, "H=1 S=32, key tiles of 128, median of 1");
    expect_table("attention alone", 0, sm90bf16, 1, dims_128, 1, 0, 1, 1);

    /* the attention's key tiles: taken where they are a multiple of 32
     * from 32 to 1024, refused otherwise (exit 2, the option named) */
    const char *b5[] = {"bench", "--backend", "cpu", "--heads", "1", "--seqlen", "96", "--dims", "64", "--models",
                        "sm90-bf16", "--gemm", "0", "--reps", "1", "--no-quantize", "--block-n", "64", NULL};
    bench_runs(b5, NULL, "H=1 S=96, key tiles of 64, median of 1");
    expect_table("key tiles of 64", 0, sm90bf16, 1, dims_64, 1, 0, 1, 1);
    static const char *const bad_bn[] = {"48", "0", "2048", "64x", ""};
    for (int i = 0; i < 5; i++) {
        const char *b6[] = {"bench", "--backend", "cpu", "--block-n", bad_bn[i], NULL};
        const int rc = run(b6, out, sizeof out);
        if (!ok(rc == 2 && strstr(errtext, "--block-n: expected a multiple of 32") && !strstr(out, "operation"),
                "bench --block-n '%s': exit 2 naming the option, no table (exit %d)", bad_bn[i], rc))
            diag("stderr: %s", errtext);
    }

    cli_finish();
    return done_testing();
}
