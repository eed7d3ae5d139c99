/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The mxfa program run as a user would, for the tests of the command line:
 * each run in a child process, its exit status returned, its standard
 * error kept in errtext (and its standard output, on request), all files
 * in a scratch directory of the test's own (path()).
 */
#ifndef MXFA_CLI_RUN_H
#define MXFA_CLI_RUN_H

#include <config.h> /* nftw and mkdtemp: the system extensions */

#include <dirent.h>
#include <fcntl.h>
#include <ftw.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "mxfa.h"
#include "npy.h"
#include "tap.h"

static char mxfa_bin[1024], dir[1024], errtext[8192];

/* Find the program ($MXFA_BUILDDIR/tools/mxfa; SKIP when it is not built)
 * and make the scratch directory, named after the test. */
static __attribute__((unused)) void cli_start(const char *test)
{
    const char *bdir = getenv("MXFA_BUILDDIR");
    snprintf(mxfa_bin, sizeof mxfa_bin, "%s/tools/mxfa", bdir && *bdir ? bdir : "..");
    if (access(mxfa_bin, X_OK) != 0)
        skip_all("the mxfa program is not built");
    snprintf(dir, sizeof dir, "%s.dir.XXXXXX", test);
    if (!mkdtemp(dir)) {
        printf("Bail out! cannot make a temporary directory\n");
        exit(1);
    }
}

static const char *path(const char *name)
{
    static char buf[128][1100];
    static int k;
    k = (k + 1) % 128;
    snprintf(buf[k], sizeof buf[k], "%s/%s", dir, name);
    return buf[k];
}

/* Remove the scratch directory and everything under it (the study's
 * output directories included), deepest entries first. */
static int cli_remove_entry(const char *p, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st, (void)flag, (void)ftw;
    remove(p);
    return 0; /* keep going: whatever is left shows in distcheck */
}

static __attribute__((unused)) void cli_finish(void)
{
    nftw(dir, cli_remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

/* How a run is made beyond its arguments. */
typedef struct run_how {
    const char *stdout_to; /* standard output to this file (default: the scratch directory's stdout.txt) */
    rlim_t address_space;  /* a limit on the child's memory (RLIMIT_AS), or 0 */
} run_how;

/* Run mxfa with args (NULL-terminated, at most 30); returns the exit status
 * (128 + the signal when killed). Standard error goes to errtext; standard
 * output into out (outlen bytes) when out is not NULL. */
static __attribute__((unused)) int run_as(const run_how *how, const char *const *args, char *out, size_t outlen)
{
    char errpath[1100], outpath[1100];
    snprintf(errpath, sizeof errpath, "%s/stderr.txt", dir);
    snprintf(outpath, sizeof outpath, "%s", how->stdout_to ? how->stdout_to : path("stdout.txt"));
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        const char *argv[32];
        int n = 0;
        argv[n++] = mxfa_bin;
        for (int i = 0; args[i] && n < 31; i++)
            argv[n++] = args[i];
        argv[n] = NULL;
        int fe = open(errpath, O_WRONLY | O_CREAT | O_TRUNC, 0644), fo = open(outpath, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        dup2(fe, 2);
        dup2(fo, 1);
        if (how->address_space) {
            struct rlimit r = {how->address_space, how->address_space};
            setrlimit(RLIMIT_AS, &r);
        }
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
    if (out) {
        f = fopen(outpath, "r");
        n = f ? fread(out, 1, outlen - 1, f) : 0;
        out[n] = '\0';
        if (f)
            fclose(f);
    }
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

static __attribute__((unused)) int run(const char *const *args, char *out, size_t outlen)
{
    const run_how plain = {NULL, 0};
    return run_as(&plain, args, out, outlen);
}

static __attribute__((unused)) int exists(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0;
}

/* No "*.tmp*" file is left in the directory. */
static __attribute__((unused)) int no_temporaries(void)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    int clean = 1;
    while (d && (e = readdir(d)))
        if (strstr(e->d_name, ".tmp"))
            clean = 0;
    if (d)
        closedir(d);
    return clean;
}

static __attribute__((unused)) void write_raw(const char *p, const void *bytes, size_t n)
{
    FILE *f = fopen(p, "wb");
    if (!f || fwrite(bytes, 1, n, f) != n || fclose(f) != 0)
        printf("Bail out! cannot write %s\n", p);
}

static __attribute__((unused)) void write_npy(const char *p, npy_dtype dt, int ndim, const int64_t *shape, const void *data)
{
    char tmp[1200], err[256];
    if (npy_write_temp(p, dt, ndim, shape, data, tmp, sizeof tmp, err, sizeof err) != MXFA_OK ||
        npy_commit(tmp, p, err, sizeof err) != MXFA_OK)
        printf("Bail out! %s\n", err);
}

/* Whether the files hold the same bytes (both readable). */
static __attribute__((unused)) int same_file(const char *a, const char *b)
{
    FILE *fa = fopen(a, "rb"), *fb = fopen(b, "rb");
    int same = fa && fb;
    while (same) {
        int ca = getc(fa), cb = getc(fb);
        same = ca == cb;
        if (ca == EOF)
            break;
    }
    if (fa)
        fclose(fa);
    if (fb)
        fclose(fb);
    return same;
}

/* A run that must fail with exit status `want`, a message on stderr and no
 * file left behind (must_not_exist, and no temporary). */
static __attribute__((unused)) void expect_fail(const char *what, int want, const char *const *args, const char *must_not_exist)
{
    int rc = run(args, NULL, 0);
    int clean = (!must_not_exist || !exists(must_not_exist)) && no_temporaries();
    if (!ok(rc == want && errtext[0] != '\0' && clean, "%s: exit %d, a message, nothing left behind", what, want))
        diag("exit %d, stderr '%s', %s", rc, errtext, clean ? "clean" : "LEFT FILES BEHIND");
    else
        diag("  stderr: %.*s", (int)strcspn(errtext, "\n"), errtext);
}

#endif
