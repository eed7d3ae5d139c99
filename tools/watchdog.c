/* SPDX-License-Identifier: BSD-3-Clause */
/* The watchdog of tools/watchdog.h, on POSIX threads and the monotonic clock. */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

#include "watchdog.h"

static struct {
    pthread_mutex_t lock;
    pthread_cond_t change; /* armed or disarmed */
    const char *cmd, *what;
    double seconds;
    int armed;
    struct timespec deadline;
} wd = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, "", NULL, 0, 0, {0, 0}};

static int past(const struct timespec *t)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return now.tv_sec > t->tv_sec || (now.tv_sec == t->tv_sec && now.tv_nsec >= t->tv_nsec);
}

static void *watch(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&wd.lock);
    for (;;) {
        if (!wd.armed) {
            pthread_cond_wait(&wd.change, &wd.lock);
            continue;
        }
        const struct timespec deadline = wd.deadline;
        if (pthread_cond_timedwait(&wd.change, &wd.lock, &deadline) == ETIMEDOUT && wd.armed && past(&wd.deadline)) {
            /* the call cannot be stopped, and exit() would wait for it in the
             * GPU runtime's teardown: report and end the process here */
            fprintf(stdout, "\n");
            fflush(stdout);
            fprintf(stderr, "mxfa %s: HANG: a call did not finish within %g s: %s\n", wd.cmd, wd.seconds,
                    wd.what ? wd.what : "(no description)");
            fflush(stderr);
            _exit(WATCHDOG_EXIT);
        }
    }
    return NULL;
}

int watchdog_start(const char *cmd, double seconds)
{
    pthread_condattr_t attr;
    pthread_t thread;
    wd.cmd = cmd, wd.seconds = seconds;
    if (pthread_condattr_init(&attr) || pthread_condattr_setclock(&attr, CLOCK_MONOTONIC) ||
        pthread_cond_init(&wd.change, &attr))
        return -1;
    pthread_condattr_destroy(&attr);
    if (pthread_create(&thread, NULL, watch, NULL))
        return -1;
    pthread_detach(thread);
    return 0;
}

void watchdog_arm(const char *what)
{
    pthread_mutex_lock(&wd.lock);
    clock_gettime(CLOCK_MONOTONIC, &wd.deadline);
    const double whole = (double)(long long)wd.seconds, frac = wd.seconds - whole;
    wd.deadline.tv_sec += (time_t)whole;
    wd.deadline.tv_nsec += (long)(frac * 1e9);
    if (wd.deadline.tv_nsec >= 1000000000L)
        wd.deadline.tv_sec++, wd.deadline.tv_nsec -= 1000000000L;
    wd.what = what, wd.armed = 1;
    pthread_cond_signal(&wd.change);
    pthread_mutex_unlock(&wd.lock);
}

void watchdog_disarm(void)
{
    pthread_mutex_lock(&wd.lock);
    wd.armed = 0, wd.what = NULL;
    pthread_cond_signal(&wd.change);
    pthread_mutex_unlock(&wd.lock);
}
