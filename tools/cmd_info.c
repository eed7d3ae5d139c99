/* SPDX-License-Identifier: BSD-3-Clause */
/* mxfa info: what this build and this machine offer. */
#include "config.h"

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>
#ifdef HAVE_CPUID_H
#include <cpuid.h>
#endif

#include "cli.h"

static void print_cpu_features(void)
{
    printf("cpu features:");
#if defined(HAVE_CPUID_H) && (defined(__x86_64__) || defined(__i386__))
    unsigned a, b, c, d;
    int any = 0;
    unsigned xcr0 = 0;
    if (__get_cpuid(1, &a, &b, &c, &d)) {
        if (c & bit_OSXSAVE) {
            unsigned lo, hi;
            __asm__("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
            xcr0 = lo;
        }
        int os_avx = (xcr0 & 0x6) == 0x6, os_avx512 = (xcr0 & 0xE6) == 0xE6;
        if (c & bit_SSE4_2) { printf(" sse4.2"); any = 1; }
        if ((c & bit_FMA) && os_avx) printf(" fma");
        if ((c & bit_F16C) && os_avx) printf(" f16c");
        if (__get_cpuid_count(7, 0, &a, &b, &c, &d)) {
            if ((b & bit_AVX2) && os_avx) printf(" avx2");
            if (os_avx512) {
                if (b & bit_AVX512F) printf(" avx512f");
                if (b & bit_AVX512BW) printf(" avx512bw");
                if (b & bit_AVX512VL) printf(" avx512vl");
                if (b & bit_AVX512DQ) printf(" avx512dq");
            }
        }
        if (__get_cpuid_count(7, 1, &a, &b, &c, &d) && os_avx512 && (a & (1u << 5)))
            printf(" avx512bf16");
    }
    if (!any)
        printf(" (none of interest)");
#else
    printf(" (not an x86 CPU; no SIMD backend paths apply)");
#endif
    printf("\n");
}

/* List GPUs through the CUDA driver, loaded at run time so that mxfa never
 * depends on it. */
static void print_gpus(void)
{
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        printf("gpus: none found (no CUDA driver: libcuda.so.1 cannot be loaded)\n");
        return;
    }
    typedef int (*init_fn)(unsigned);
    typedef int (*count_fn)(int *);
    typedef int (*get_fn)(int *, int);
    typedef int (*name_fn)(char *, int, int);
    typedef int (*attr_fn)(int *, int, int);
    typedef int (*error_fn)(int, const char **);
    init_fn cu_init = (init_fn)dlsym(lib, "cuInit");
    count_fn cu_count = (count_fn)dlsym(lib, "cuDeviceGetCount");
    get_fn cu_get = (get_fn)dlsym(lib, "cuDeviceGet");
    name_fn cu_name = (name_fn)dlsym(lib, "cuDeviceGetName");
    attr_fn cu_attr = (attr_fn)dlsym(lib, "cuDeviceGetAttribute");
    error_fn cu_error = (error_fn)dlsym(lib, "cuGetErrorString");
    int n = 0, st;
    if (!cu_init || !cu_count || !cu_get || !cu_name || !cu_attr) {
        printf("gpus: the CUDA driver (libcuda.so.1) lacks the functions mxfa lists GPUs with\n");
        dlclose(lib);
        return;
    }
    if ((st = cu_init(0)) != 0 || (st = cu_count(&n)) != 0) {
        const char *why = NULL;
        if (!cu_error || cu_error(st, &why) != 0 || !why)
            why = "no description";
        printf("gpus: the CUDA driver is present but does not initialize (error %d: %s)\n", st, why);
        dlclose(lib);
        return;
    }
    printf("gpus: %d\n", n);
    for (int i = 0; i < n; i++) {
        int dev, major = 0, minor = 0;
        char name[256] = "?";
        if ((st = cu_get(&dev, i)) != 0) {
            printf("  %d: cannot be opened (CUDA driver error %d)\n", i, st);
            continue;
        }
        cu_name(name, sizeof name, dev);
        cu_attr(&major, 75, dev); /* CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR */
        cu_attr(&minor, 76, dev); /* CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR */
        printf("  %d: %s (sm_%d%d)\n", i, name, major, minor);
    }
    dlclose(lib);
}

int cmd_info(int argc, char **argv)
{
    if (argc > 1 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
        printf("usage: mxfa info\n\nPrints the library version, the backends built into it and whether each\n"
               "can run here, the CPU's SIMD features and the GPUs the CUDA driver sees.\n");
        return 0;
    }
    if (argc > 1)
        return cli_usage("info", "unexpected argument '%s'", argv[1]);
    printf("mxfa %s (library %s)\n", MXFA_VERSION_STRING, mxfa_version());
    printf("backends:\n");
    static const char *const names[] = {"ref", "cpu", "cuda"};
    for (int i = 0; i < 3; i++) {
        char why[256];
        int built = mxfa_backend_built(names[i]);
        int usable = mxfa_backend_usable(names[i], why, sizeof why);
        printf("  %-5s %s%s%s\n", names[i], built ? "built, " : "", usable ? "usable" : "not usable: ",
               usable ? "" : why);
    }
    mxfa_ctx *ctx;
    if (mxfa_open(&ctx, "auto") == MXFA_OK) {
        printf("auto selects: %s\n", mxfa_backend_name(ctx));
        mxfa_close(ctx);
    } else {
        printf("auto selects: nothing (%s)\n", mxfa_last_error(NULL));
    }
    print_cpu_features();
    print_gpus();
    return 0;
}
