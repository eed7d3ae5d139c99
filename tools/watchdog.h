/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A time limit on calls that may never return: a GPU kernel waiting on a
 * barrier that nothing arrives at hangs its caller, and no call can cancel
 * it. A thread watches the clock; when an armed call outlives the limit it
 * prints what was running and ends the process with WATCHDOG_EXIT.
 */
#ifndef MXFA_WATCHDOG_H
#define MXFA_WATCHDOG_H

#define WATCHDOG_EXIT 3

/* Start the watching thread for calls of at most `seconds`; names the
 * command in its report. 0, or -1 when no thread could be started. */
int watchdog_start(const char *cmd, double seconds);
/* From here until watchdog_disarm, the limit runs; `what` (kept by
 * pointer, not copied) describes the call for the report. */
void watchdog_arm(const char *what);
void watchdog_disarm(void);

#endif
