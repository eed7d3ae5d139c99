/* SPDX-License-Identifier: BSD-3-Clause */
/* The ref backend's entry in the registry: always built, always usable. */
#include "ref.h"

const mxfa_backend mxfa_backend_ref = {
    .name = "ref",
    .usable = NULL,
    .takes_device_memory = 0,
    .quantize = mxfa_ref_quantize,
    .dequantize = mxfa_ref_dequantize,
    .copy = mxfa_ref_copy,
    .expand = mxfa_ref_expand,
    .swizzle = mxfa_ref_swizzle,
    .unswizzle = mxfa_ref_unswizzle,
    .gemm = mxfa_ref_gemm,
    .mma_chain = mxfa_ref_mma_chain,
    .attn_fwd = mxfa_ref_attn_fwd,
    .attn_bwd = mxfa_ref_attn_bwd,
};
