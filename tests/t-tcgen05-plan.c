/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The order in which the sm100 attention forward kernels issue O += P V
 * (gpu/sm100/pv_plan.h), checked on the host. The PTX ISA executes two
 * tcgen05.mma of one thread in issue order only when they have the same
 * accumulator and the same shape; the leak-free mask mixes kind::f16 k16
 * and kind::mxf8f6f4 k32 steps on O within one key tile. The kernels follow
 * mxfa_pv_plan step by step, so walking every plan with a model of what is
 * in flight shows whether two steps of different kinds can ever be
 * unordered:
 *   - every plan for up to five blocks, every mix of kinds, with and without
 *     the slow path's block steps;
 *   - the plans of real tiles: every query tile and key tile of many
 *     causal shapes, their bf16 blocks from mxfa_pv_diagonal_blocks, which
 *     is checked against the mask itself (a block some row sees only in part).
 * None of this needs a GPU; `mxfa selftest` runs the kernels on one.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "sm100/pv_plan.h"
#include "tap.h"

enum { BN = 128, BM = 128 };

/* What walking a plan found; ok = 0 with the reason in why. */
typedef struct {
    int ok, orders, blocks_seen;
    char why[160];
} walk;

/*
 * Walks a plan as the kernels execute it, tracking the kinds of the steps
 * in flight on O (issued since the last completed commit). The rules: a
 * step never joins steps of another kind in flight; an ORDER comes only
 * where the next step needs it; blocks come in key order with the kind
 * their bit says; the slow path waits for the rows after every block.
 */
static walk walk_plan(uint64_t plan, unsigned bf16_blocks, int nblocks, int by_block)
{
    walk w = {1, 0, 0, ""};
    int in_flight = 0; /* bit MXFA_PV_MXF8, bit MXFA_PV_F16 */
    int after_block = 0, ops = 0;
    for (; plan; plan >>= MXFA_PV_OP_BITS, ops++) {
        const int op = (int)(plan & 0xF);
        if (ops >= 64 / MXFA_PV_OP_BITS) {
            snprintf(w.why, sizeof w.why, "more operations than a plan word holds");
            w.ok = 0;
            return w;
        }
        if (by_block && after_block && op != MXFA_PV_BLOCK) {
            snprintf(w.why, sizeof w.why, "block %d is not followed by the rows' read of O", w.blocks_seen - 1);
            w.ok = 0;
            return w;
        }
        after_block = 0;
        if (op == MXFA_PV_MXF8 || op == MXFA_PV_F16) {
            const int b = w.blocks_seen++;
            const int want = bf16_blocks >> b & 1u ? MXFA_PV_F16 : MXFA_PV_MXF8;
            if (b >= nblocks || op != want) {
                snprintf(w.why, sizeof w.why, "block %d: %s, expected %s", b, op == MXFA_PV_F16 ? "bf16" : "mxf8",
                         b >= nblocks ? "no block" : want == MXFA_PV_F16 ? "bf16" : "mxf8");
                w.ok = 0;
                return w;
            }
            if (in_flight & ~(1 << op)) {
                snprintf(w.why, sizeof w.why, "block %d (%s) is issued while steps of the other kind are in flight", b,
                         op == MXFA_PV_F16 ? "bf16" : "mxf8");
                w.ok = 0;
                return w;
            }
            in_flight |= 1 << op;
            after_block = 1;
        } else if (op == MXFA_PV_ORDER) {
            /* needed only before a block of the other kind */
            const int next = (int)(plan >> MXFA_PV_OP_BITS & 0xF);
            if (!in_flight || !(next == MXFA_PV_MXF8 || next == MXFA_PV_F16) || !(in_flight & ~(1 << next))) {
                snprintf(w.why, sizeof w.why, "a commit and wait that orders nothing, before block %d", w.blocks_seen);
                w.ok = 0;
                return w;
            }
            in_flight = 0, w.orders++;
        } else if (op == MXFA_PV_BLOCK) {
            if (!by_block) {
                snprintf(w.why, sizeof w.why, "a block step outside the slow path");
                w.ok = 0;
                return w;
            }
            in_flight = 0;
        } else {
            snprintf(w.why, sizeof w.why, "unknown operation %d", op);
            w.ok = 0;
            return w;
        }
    }
    if (w.blocks_seen != nblocks) {
        snprintf(w.why, sizeof w.why, "%d blocks issued of %d", w.blocks_seen, nblocks);
        w.ok = 0;
    } else if (by_block && after_block) {
        snprintf(w.why, sizeof w.why, "the last block is not followed by the rows' read of O");
        w.ok = 0;
    }
    return w;
}

/* Changes of kind along the blocks: what the plan must order. */
static int kind_changes(unsigned bf16_blocks, int nblocks)
{
    int n = 0;
    for (int b = 1; b < nblocks; b++)
        n += (bf16_blocks >> b & 1u) != (bf16_blocks >> (b - 1) & 1u);
    return n;
}

/* Every plan: 1 to MXFA_PV_MAX_BLOCKS blocks, every mix, both paths. */
static void every_plan(void)
{
    int plans = 0, bad = 0, wrong_count = 0;
    for (int nb = 1; nb <= MXFA_PV_MAX_BLOCKS; nb++)
        for (unsigned mask = 0; mask < 1u << nb; mask++)
            for (int by_block = 0; by_block < 2; by_block++) {
                const walk w = walk_plan(mxfa_pv_plan(mask, nb, by_block), mask, nb, by_block);
                plans++;
                if (!w.ok && bad++ < 5)
                    diag("blocks %d, bf16 mask %#x, %s path: %s", nb, mask, by_block ? "slow" : "fast", w.why);
                /* exactly one ORDER at each change of kind on the fast path, none on the slow one */
                if (w.ok && w.orders != (by_block ? 0 : kind_changes(mask, nb)) && wrong_count++ < 5)
                    diag("blocks %d, bf16 mask %#x: %d orders for %d changes of kind", nb, mask, w.orders,
                             kind_changes(mask, nb));
            }
    ok(bad == 0 && wrong_count == 0,
           "%d plans (1 to %d blocks, every mix of bf16 and mxf8 blocks, both paths): no step ever joins steps of "
           "the other kind in flight, a commit and wait at each change of kind and nowhere else",
           plans, MXFA_PV_MAX_BLOCKS);
}

/*
 * Block b of key tile j is taken in bf16 when some row of the query tile
 * sees it only in part: brute force over the rows of the tile (row i sees
 * key k when k <= i + lk - lq) and the keys of the block.
 */
static unsigned diagonal_by_rows(int64_t r0, int64_t nr, int64_t lq, int64_t lk, int j)
{
    unsigned bits = 0;
    for (int b = 0; b < BN / 32; b++) {
        const int64_t k0 = (int64_t)j * BN + 32 * b;
        if (k0 >= lk)
            continue;
        const int64_t k1 = k0 + 32 < lk ? k0 + 32 : lk; /* the block's keys: [k0, k1) */
        int partial = 0;
        for (int64_t i = r0; i < r0 + nr && !partial; i++) {
            int64_t seen = 0;
            for (int64_t k = k0; k < k1; k++)
                seen += k <= i + lk - lq;
            partial = seen > 0 && seen < k1 - k0;
        }
        /* or rows that see all of it beside rows that see none of it */
        int all = 0, none = 0;
        for (int64_t i = r0; i < r0 + nr; i++) {
            all += k1 - 1 <= i + lk - lq;
            none += k0 > i + lk - lq;
        }
        if (partial || (all && none))
            bits |= 1u << b;
    }
    return bits;
}

/* The kernels' tiles for causal shapes (lq, lk): every query tile and the
 * key tiles it visits, as gpu/sm100/attn_fwd.cuh makes them. */
static void real_tiles(void)
{
    int shapes = 0, tiles = 0, mixed = 0, bad_mask = 0, bad_plan = 0;
    int mixed_when_aligned = 0, offsets_without_mixed = 0;
    for (int64_t lq = 1; lq <= 600; lq += lq < 64 ? 7 : 29)
        for (int64_t delta = 0; delta <= 400; delta += delta < 64 ? 1 : 17) {
            const int64_t lk = lq + delta;
            int mixed_here = 0;
            shapes++;
            for (int64_t r0 = 0; r0 < lq; r0 += BM) {
                const int64_t nr = lq - r0 < BM ? lq - r0 : BM;
                const int64_t lim_first = r0 + lk - lq, lim_last = lim_first + nr - 1;
                const int64_t tiles_k = (lk + BN - 1) / BN;
                const int nt = (int)(lim_last / BN + 1 < tiles_k ? lim_last / BN + 1 : tiles_k);
                for (int j = 0; j < nt; j++) {
                    const unsigned bf = mxfa_pv_diagonal_blocks(lim_first, lim_last, nt, lk, j, BN);
                    const unsigned want = diagonal_by_rows(r0, nr, lq, lk, j);
                    if (bf != want && bad_mask++ < 5)
                        diag("lq %lld lk %lld, rows from %lld, key tile %d: bf16 blocks %#x, the mask says %#x",
                                 (long long)lq, (long long)lk, (long long)r0, j, bf, want);
                    const int nb = BN / 32;
                    tiles++;
                    for (int by_block = 0; by_block < 2; by_block++) {
                        const walk w = walk_plan(mxfa_pv_plan(bf, nb, by_block), bf, nb, by_block);
                        if (!w.ok && bad_plan++ < 5)
                            diag("lq %lld lk %lld, key tile %d: %s", (long long)lq, (long long)lk, j, w.why);
                    }
                    if (kind_changes(bf, nb) > 0)
                        mixed++, mixed_here = 1;
                }
            }
            /*
             * Where tiles mix kinds: a full query tile's bf16 blocks hold the keys (lim_first, lim_first +
             * 127], which fill one key tile exactly when lim_first is 0 or 127 modulo the tile; else they
             * share a key tile with fully visible blocks before them or (from two query tiles on, where
             * keys past the band exist) with blocks no row sees after them.
             */
            const int64_t off = delta % BN;
            if ((off == 0 || off == BN - 1) && lq % BM == 0 && mixed_here)
                mixed_when_aligned++;
            if (off != 0 && off != BN - 1 && lq >= 2 * BM && !mixed_here)
                offsets_without_mixed++;
        }
    ok(bad_mask == 0, "the bf16 blocks of %d key tiles of %d causal shapes are those some row of the query tile "
           "sees only in part", tiles, shapes);
    ok(bad_plan == 0, "their plans, on both paths, never leave steps of two kinds in flight on O");
    ok(mixed > 0 && offsets_without_mixed == 0,
           "%d of the %d key tiles mix the two kinds, among them some in every shape of two or more query tiles "
           "whose len_k - len_q is neither 0 nor 127 modulo the key tile",
           mixed, tiles);
    ok(mixed_when_aligned == 0,
           "none mixes them where len_q is a multiple of the tile and len_k - len_q is 0 or 127 modulo it");
}

int main(void)
{
    every_plan();
    real_tiles();
    return done_testing();
}
