/*
 * White-box checks of the cpu backend's vector kernels that the
 * attention tests reach too rarely to trust: the softmax's exp2 against
 * mxfa_exp2, on every instruction set this CPU runs. The reduction
 * n = floor(x + 1/2) is where a vector form can go wrong, so the sweep
 * covers every input exactly halfway between integers and its neighbours
 * a few ulps away, the bounds of the range (-127 to -126, 127 to 128),
 * signed zeros, subnormals, infinities and NaNs, and a strided sweep over
 * every fp32 input (every one with MXFA_CHECK_EXPENSIVE=1). Linked
 * statically: the kernel tables are not part of the library's interface.
 */
#include <math.h>

#include "cpu.h"
#include "mxfa.h"
#include "tap.h"

#define CHUNK 4096

typedef struct sweep {
    float x[CHUNK];
    int n;
    uint64_t checked, wrong;
    uint32_t first_wrong;
} sweep;

static void flush(const cpu_kernels *k, sweep *s)
{
    float p[CHUNK], q[CHUNK];
    k->exp2(s->x, s->n, p);
    /* the softmax form: P = exp2((x - m) + 8) with m = 8, -Inf to 0 */
    k->softmax_p(s->x, s->n, 8.0f, q);
    for (int i = 0; i < s->n; i++) {
        float want = mxfa_exp2(s->x[i]);
        float want_p = s->x[i] == -INFINITY ? 0.0f : mxfa_exp2((s->x[i] - 8.0f) + 8.0f);
        if (bits_of(p[i]) != bits_of(want) || bits_of(q[i]) != bits_of(want_p)) {
            if (!s->wrong)
                s->first_wrong = bits_of(s->x[i]);
            s->wrong++;
        }
    }
    s->checked += (uint64_t)s->n;
    s->n = 0;
}

static void add(const cpu_kernels *k, sweep *s, float x)
{
    s->x[s->n++] = x;
    if (s->n == CHUNK)
        flush(k, s);
}

static void check_exp2(const cpu_kernels *k)
{
    static sweep s;
    memset(&s, 0, sizeof s);
    /* halfway points and their neighbours, through and past the range */
    for (int i = -140; i <= 140; i++) {
        float h = (float)i + 0.5f;
        uint32_t b = bits_of(h);
        for (int d = -3; d <= 3; d++)
            add(k, &s, f32_of(b + (uint32_t)d));
        add(k, &s, (float)i);
        add(k, &s, nextafterf((float)i, -INFINITY));
        add(k, &s, nextafterf((float)i, INFINITY));
    }
    const float edges[] = {0.0f, -0.0f, 0x1p-149f, -0x1p-149f, 0x1p-126f, -0x1p-126f, 0.5f, -0.5f,
                           -126.0f, -126.5f, -127.0f, -127.5f, 127.0f, 127.5f, 128.0f, 0x1p22f, -0x1p22f,
                           0x1p23f, 0x1p30f, -0x1p30f, 3.0e38f, -3.0e38f, INFINITY, -INFINITY, NAN, -NAN};
    for (size_t i = 0; i < sizeof edges / sizeof edges[0]; i++)
        add(k, &s, edges[i]);
    for (uint32_t b = 0x7F800001u; b < 0x7F800001u + 64; b++) /* NaN payloads, both signs */
        add(k, &s, f32_of(b)), add(k, &s, f32_of(b | 0x80000000u));
    const uint64_t step = expensive() ? 1 : 4099;
    for (uint64_t b = 0; b <= 0xFFFFFFFFu; b += step)
        add(k, &s, f32_of((uint32_t)b));
    flush(k, &s);
    if (!ok(s.wrong == 0, "%s: exp2 and the softmax's P equal mxfa_exp2 on %" PRIu64 " inputs", k->name, s.checked))
        diag("%" PRIu64 " differ, the first at x = 0x%08" PRIx32, s.wrong, s.first_wrong);
}

int main(void)
{
    const char *isas[] = {"scalar", "avx2", "avx512"};
    for (int i = 0; i < 3; i++) {
        char why[200];
        const cpu_kernels *k = mxfa_cpu_pick(isas[i], why, sizeof why);
        if (!k) {
            skip(why);
            continue;
        }
        check_exp2(k);
    }
    return done_testing();
}
