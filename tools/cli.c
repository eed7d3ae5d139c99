#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "cli.h"

int cli_usage(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "mxfa %s: ", cmd);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\nTry 'mxfa %s --help'.\n", cmd);
    va_end(ap);
    return EXIT_USAGE;
}

int cli_error(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "mxfa %s: ", cmd);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return EXIT_FAILURE;
}

int cli_open(const char *cmd, const char *backend, mxfa_ctx **ctx)
{
    mxfa_status st = mxfa_open(ctx, backend);
    if (st == MXFA_OK)
        return 0;
    if (st == MXFA_ERR_INVALID)
        return cli_usage(cmd, "%s", mxfa_last_error(NULL));
    return cli_error(cmd, "%s", mxfa_last_error(NULL));
}
