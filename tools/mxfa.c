/* SPDX-License-Identifier: BSD-3-Clause */
/* mxfa: the command-line program. One subcommand per file (cmd_*.c). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static const struct {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary;
} commands[] = {
    {"info", cmd_info, "version, backends, CPU features and GPUs"},
    {"quantize", cmd_quantize, "quantize a float32 .npy matrix to MXFP8 (data and scales)"},
    {"dequantize", cmd_dequantize, "turn MXFP8 data and scales back into float32"},
    {"attn", cmd_attn, "MXFP8 attention forward, with its error against float64"},
    {"compare", cmd_compare, "another implementation's attention outputs against the emulator's, in ULPs"},
    {"gemm", cmd_gemm, "D = A * B^T + C for MXFP8 A and B under a tensor-core model"},
    {"bench", cmd_bench, "throughput of quantization, products and attention on a backend"},
    {"study", cmd_study, "MXFP8 attention error against float64 across models, data and options"},
    {"selftest", cmd_selftest, "the Blackwell (sm_100a) kernels against the emulator, bit for bit"},
};

#define NCOMMANDS (sizeof commands / sizeof commands[0])

static void usage(FILE *out)
{
    fprintf(out, "usage: mxfa COMMAND [OPTIONS]\n       mxfa --help | --version\n\ncommands:\n");
    for (size_t i = 0; i < NCOMMANDS; i++)
        fprintf(out, "  %-12s %s\n", commands[i].name, commands[i].summary);
    fprintf(out, "\n'mxfa COMMAND --help' describes a command. The environment variable\n"
                 "MXFA_BACKEND (ref, cpu, cuda, auto) overrides the backend.\n");
}

/* A command's status, or 1 when what it printed could not all be written
 * (a full disk, a closed pipe): a run whose output is lost is no success. */
static int finish(int rc)
{
    errno = 0;
    if (fflush(stdout) != 0 || ferror(stdout)) {
        fprintf(stderr, "mxfa: writing the standard output: %s\n", errno ? strerror(errno) : "write error");
        return rc ? rc : EXIT_FAILURE;
    }
    return rc;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return EXIT_USAGE;
    }
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "help") == 0) {
        usage(stdout);
        return finish(0);
    }
    if (strcmp(argv[1], "--version") == 0) {
        printf("mxfa %s\n", mxfa_version());
        return finish(0);
    }
    for (size_t i = 0; i < NCOMMANDS; i++)
        if (strcmp(argv[1], commands[i].name) == 0)
            return finish(commands[i].run(argc - 1, argv + 1));
    fprintf(stderr, "mxfa: unknown command '%s'\n", argv[1]);
    usage(stderr);
    return EXIT_USAGE;
}
