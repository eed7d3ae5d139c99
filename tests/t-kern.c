/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * White-box checks of the cpu backend's vector kernels that the
 * attention tests reach too rarely to trust, on every instruction set this
 * CPU runs: the E4M3 decoder against the decoding table, code by code, and
 * the softmax's P, E(RN_f16(min(fma(S, c, b), 0))) (times 256 in the
 * forward pass, from either table), against mxfa_f32_to_f16 and
 * mxfa_exp2_f16. The rounding to f16 in integer vector operations is where
 * a vector form can go wrong, so the sweep covers every tie between f16
 * neighbours and its fp32 neighbours, every input halfway between integers
 * with its neighbours, the bounds of the range, signed zeros, subnormals,
 * infinities and NaNs, and a strided sweep over every fp32 input (every
 * one with MXFA_CHECK_EXPENSIVE=1); and the rounding of the row sum's f16
 * block sums. Linked statically: the kernel tables are not part of the
 * library's interface.
 */
#include <math.h>

#include "cpu.h"
#include "fx.h"
#include "mxfa.h"
#include "tap.h"

#define CHUNK 4096

typedef struct sweep {
    float x[CHUNK];
    int n;
    uint64_t checked, wrong;
    uint32_t first_wrong;
} sweep;

/* The softmax's weight from the library's public functions: E(RN_f16(min(z,
 * 0))), the cap keeping a NaN */
static float weight(float z)
{
    return mxfa_f16_to_f32(mxfa_exp2_f16(mxfa_f32_to_f16(z > 0.0f ? 0.0f : z)));
}

static void flush(const cpu_kernels *k, sweep *s)
{
    /* the inputs as S of the forward's P = 256 E(RN_f16(min(fma(S, c, b),
     * 0))) and the backward's P = E(...): with c = 1, b = 0 the inputs
     * themselves (-0 aside), and with a scale and offset as a row of
     * attention has them; three keys past nvis get P = 0 */
    static const float cb[2][2] = {{1.0f, 0.0f}, {0.18033688f, 5.75f}};
    float p[CHUNK], q[CHUNK + 3];
    uint32_t sb[CHUNK];
    for (int i = 0; i < s->n; i++)
        sb[i] = bits_of(s->x[i]);
    for (int v = 0; v < 2; v++) {
        k->softmax_p(sb, s->n, s->n, cb[v][0], cb[v][1], cpu_softmax_e_table(), p);
        k->softmax_p(sb, s->n, s->n + 3, cb[v][0], cb[v][1], cpu_softmax_p_table(), q);
        for (int i = 0; i < s->n + 3; i++) {
            float z = i < s->n ? fmaf(s->x[i], cb[v][0], cb[v][1]) : 0.0f;
            float want = i < s->n ? 256.0f * weight(z) : 0.0f;
            int bad = bits_of(q[i]) != bits_of(want) || (i < s->n && bits_of(p[i]) != bits_of(weight(z)));
            if (bad && !s->wrong++)
                s->first_wrong = i < s->n ? sb[i] : 0;
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
    /* the forward's rounding to f16: each tie between neighbouring f16
     * magnitudes (the overflow threshold 65520 among them) and the fp32
     * values around it, negative as the forward's exponents are */
    for (uint16_t h = 0; h < 0x7C00u; h++) {
        const float next = h == 0x7BFFu ? 65536.0f : mxfa_f16_to_f32((uint16_t)(h + 1));
        const float mid = (mxfa_f16_to_f32(h) + next) / 2;
        for (int d = -2; d <= 2; d++)
            add(k, &s, -f32_of(bits_of(mid) + (uint32_t)d));
    }
    for (uint32_t b = 0x7F800001u; b < 0x7F800001u + 64; b++) /* NaN payloads, both signs */
        add(k, &s, f32_of(b)), add(k, &s, f32_of(b | 0x80000000u));
    const uint64_t step = expensive() ? 1 : 4099;
    for (uint64_t b = 0; b <= 0xFFFFFFFFu; b += step)
        add(k, &s, f32_of((uint32_t)b));
    flush(k, &s);
    if (!ok(s.wrong == 0, "%s: the softmax's P, forward and backward, as defined, on %" PRIu64 " inputs", k->name, s.checked))
        diag("%" PRIu64 " differ, the first at x = 0x%08" PRIx32, s.wrong, s.first_wrong);
}

/* Every E4M3 code through the vector decoder, in a whole run and at each
 * offset of a run with a tail, against the decoding table (fx.h). */
static void check_decode(const cpu_kernels *k)
{
    const fx_table *t = fx_table_fp8(MXFA_E4M3, 0);
    uint8_t codes[256 + 8];
    double v[256 + 8];
    uint16_t e[256 + 8], code[256 + 8];
    int bad = 0;
    for (int i = 0; i < 256 + 8; i++)
        codes[i] = (uint8_t)(i * 7 + 3); /* every code, in an order that mixes them */
    for (int n = 8; n <= 256 + 8; n += 8) {
        int want_nan = 0;
        for (int i = 0; i < n; i++)
            want_nan |= (codes[i] & 0x7F) == 0x7F;
        int got_nan = k->decode_e4m3(codes, n, v, e, code) != 0;
        bad += got_nan != want_nan;
        for (int i = 0; i < n; i++) {
            uint8_t c = codes[i];
            bad += memcmp(&v[i], &t->v[c], sizeof v[i]) != 0 || e[i] != t->e[c] || code[i] != c;
        }
    }
    ok(bad == 0, "%s: the E4M3 decoder gives the table's value, fields and NaN flag for every code and length", k->name);
}

/* f32_round_f16, the row sum's rounding of f16 sums (cpu/ref/attn_fwd.c),
 * against mxfa_f32_to_f16 and back: every f16 value in [0, 2048] (the block
 * sums stay below 1024), the ties halfway to the next, and the fp32
 * neighbours of both; then NaN. */
static void check_round_f16(void)
{
    long bad = 0, n = 0;
    for (uint16_t h = 0; h <= 0x6800; h++) { /* 0 .. 2048 */
        const float v = mxfa_f16_to_f32(h), tie = (v + mxfa_f16_to_f32((uint16_t)(h + 1))) / 2;
        const float xs[6] = {v, nextafterf(v, 4096.0f), tie, nextafterf(tie, 0.0f), nextafterf(tie, 4096.0f),
                             h ? nextafterf(v, 0.0f) : 0.0f};
        for (int i = 0; i < 6; i++, n++) {
            const float want = mxfa_f16_to_f32(mxfa_f32_to_f16(xs[i]));
            if (bits_of(f32_round_f16(xs[i])) != bits_of(want) && bad++ < 5)
                diag("f32_round_f16(%a) = %a, not %a", (double)xs[i], (double)f32_round_f16(xs[i]), (double)want);
        }
    }
    ok(bad == 0 && isnan(f32_round_f16(NAN)), "f32_round_f16 rounds to nearest even f16 on %ld inputs in [0, 2048], NaN to NaN", n);
}

int main(void)
{
    check_round_f16();
    const char *isas[] = {"scalar", "avx2", "avx512"};
    for (int i = 0; i < 3; i++) {
        char why[200];
        const cpu_kernels *k = mxfa_cpu_pick(isas[i], why, sizeof why);
        if (!k) {
            skip(why);
            continue;
        }
        check_exp2(k);
        check_decode(k);
    }
    return done_testing();
}
