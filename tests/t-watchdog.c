/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The time limit of tools/watchdog.h, which `mxfa selftest` puts on every
 * call into a GPU kernel: a child process arms it over a call that outlives
 * the limit (a sleep) and must be ended with WATCHDOG_EXIT and a report
 * naming the call; calls that end in time, one after another, must not be.
 * (`mxfa selftest --stall-test` shows the same on a GPU with a kernel.)
 */
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tap.h"
#include "watchdog.h"

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void nap(double seconds)
{
    struct timespec t = {(time_t)seconds, (long)((seconds - (double)(time_t)seconds) * 1e9)};
    while (nanosleep(&t, &t) != 0)
        ;
}

/* Runs body in a child with stderr into err; returns its exit status, or
 * -1 if it did not exit normally. */
static int in_child(void (*body)(void), char *err, size_t len)
{
    int fd[2];
    if (pipe(fd))
        return -1;
    fflush(stdout);
    const pid_t pid = fork();
    if (pid == 0) {
        close(fd[0]);
        dup2(fd[1], 2);
        body();
        _exit(0);
    }
    close(fd[1]);
    size_t n = 0;
    ssize_t r;
    while (n + 1 < len && (r = read(fd[0], err + n, len - 1 - n)) > 0)
        n += (size_t)r;
    err[n] = 0;
    close(fd[0]);
    int status;
    if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status))
        return -1;
    return WEXITSTATUS(status);
}

static void hangs(void)
{
    if (watchdog_start("test", 0.2))
        _exit(9);
    watchdog_arm("a sleep of 5 s standing for a kernel");
    nap(5);
    watchdog_disarm();
}

static void ends_in_time(void)
{
    if (watchdog_start("test", 0.5))
        _exit(9);
    for (int i = 0; i < 8; i++) { /* 8 calls of 0.2 s: 1.6 s in all, each within the limit */
        watchdog_arm("a sleep of 0.2 s");
        nap(0.2);
        watchdog_disarm();
    }
    nap(0.7); /* disarmed: no limit */
}

int main(void)
{
    char err[1024];
    const double t0 = now();
    int st = in_child(hangs, err, sizeof err);
    const double took = now() - t0;
    ok(st == WATCHDOG_EXIT && strstr(err, "HANG") && strstr(err, "a sleep of 5 s standing for a kernel") &&
           strstr(err, "0.2 s"),
       "a call that outlives its limit of 0.2 s is reported with its description and ends the process with %d (got "
       "%d)", WATCHDOG_EXIT, st);
    if (err[0])
        diag("its report: %s", strtok(err, "\n"));
    ok(took < 4, "and it ends near the limit, long before the call would have (%.2f s)", took);
    st = in_child(ends_in_time, err, sizeof err);
    ok(st == 0 && !err[0], "calls that end within the limit, and time spent disarmed, are left alone (exit %d)", st);
    return done_testing();
}
