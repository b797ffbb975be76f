/*
 * Fused multi-head scaled dot-product attention, the kernel of the `attention_blocks` family:
 *   ctx[b, i, h, :] = sum_j softmax_j(scale * Q[b,i,h,:] . K[b,j,h,:] + mask[b,h,i,j]) V[b,j,h,:]
 * Q, K and V are read where the projections wrote them (torch's [B, S, H*D]: head h of position s
 * at s * row_stride + h * head_stride) and ctx is written in the same layout, so the exporter's
 * Reshape/Transpose copies and the [B, H, S, S] score tensor never reach memory: each task keeps
 * one tile of query rows x all keys of scores in L1/L2 (QK^T, scale, mask, softmax, then P V).
 *
 *   af_attention_desc d = af_attention_desc_packed(1, 128, 128, 12, 64);   // [1,128,768] each
 *   d.q = q; d.k = k; d.v = v; d.out = ctx;
 *   d.mask = m; d.mask_batch_stride = 128;          // torch's additive [B,1,1,S] mask
 *   d.workspace_size = af_attention_workspace_size(&d, af_threadpool_n_threads(pool));
 *   d.workspace = ws;                               // any alignment
 *   if (af_attention_run(&d, pool) != AF_OK) ...;
 *
 * From torch's BERT export: q, k, v are the three projection Adds ([B, S, H*D]) ahead of the
 * Reshape [B,S,H,D] + Transpose (0,2,1,3) (K: (0,2,3,1)), scale is 1 / the Div's constant (8 for
 * D = 64), mask the Add's other operand ((1 - attention_mask) * finfo.min, [B,1,1,S]: batch
 * stride S, row stride 0; a [1,1,1,S] one has batch stride 0 too), out the final Reshape's
 * [B, S, H*D] output, reached through Transpose (0,2,1,3) of the second MatMul.
 * Semantics are those of the exported graph MatMul(Q, K^T) -> Div -> Add(mask) -> Softmax(-1) ->
 * MatMul(., V): scores are scale * (Q K^T) + mask, the row maximum is subtracted before exp, so
 * torch's finfo(float32).min mask gives exactly zero weight to masked keys and a uniform row when
 * every key is masked (never NaN); an -inf in every key of a row gives NaN, as ONNX Softmax does.
 * Results do not depend on the thread count or the tiling (each score and each ctx element is
 * summed in a fixed order); they do depend on the isa (vector exp, FMA).
 * Accuracy against af_attention_ref: |fast - ref| <= 1e-5 + 1e-4 |ref| for inputs of order 1
 * (tests/unit/test_attention.c).
 */
#ifndef AF_KERNELS_FAST_ATTENTION_H
#define AF_KERNELS_FAST_ATTENTION_H

#include <stddef.h>
#include <stdint.h>

#include "autofusion.h"
#include "util/cpu.h"
#include "util/threadpool.h"

/* Strides are in floats and must be >= 0; 0 broadcasts along that axis (e.g. k/v head stride 0:
 * one key/value head shared by every query head). */
typedef struct af_attention_desc {
    int64_t batch, seq_q, seq_k, heads, head_dim; /* B, S_q, S_k, H, D; any may be 0 */
    const float *q;                  /* element (b, i, h, e) at b*q_batch_stride + i*q_row_stride +
                                        h*q_head_stride + e; e < head_dim is contiguous */
    int64_t q_batch_stride, q_row_stride, q_head_stride;
    const float *k;                  /* (b, j, h, e), as q */
    int64_t k_batch_stride, k_row_stride, k_head_stride;
    const float *v;                  /* (b, j, h, e), as q */
    int64_t v_batch_stride, v_row_stride, v_head_stride;
    const float *mask;               /* additive; NULL: none. (b, h, i, j) at b*mask_batch_stride +
                                        h*mask_head_stride + i*mask_row_stride + j */
    int64_t mask_batch_stride, mask_head_stride;
    int64_t mask_row_stride;         /* 0: one row for every query ([B,1,1,S]); S_k for [B,1,S,S] */
    float scale;                     /* multiplies Q K^T; the exporter's Div by c is scale 1/c */
    float *out;                      /* ctx (b, i, h, e), as q. May be q itself with q's strides
                                        (each task reads its Q rows before writing them); must not
                                        overlap k, v or mask */
    int64_t out_batch_stride, out_row_stride, out_head_stride;
    af_isa isa;                      /* clamped to the CPU */
    void *workspace;                 /* af_attention_workspace_size bytes for the pool's threads */
    size_t workspace_size;
} af_attention_desc;

/* Sizes set, every tensor contiguous in the natural [B, S, H*D] layout (row stride H*D, head
 * stride D, batch stride S*H*D; ctx likewise with S_q), no mask, scale 1/sqrt(D),
 * isa af_cpu_isa(), pointers and workspace NULL. */
af_attention_desc af_attention_desc_packed(int64_t batch, int64_t seq_q, int64_t seq_k, int64_t heads,
                                           int64_t head_dim);

/* Scratch bytes af_attention_run needs for d with n_threads threads: per thread one query tile's
 * scores (tile x S_k floats, the tile at most 64 rows), its Q^T (tile x D) and row statistics,
 * plus 64 bytes of alignment slack. Depends on the isa, the sizes and n_threads only (the tile
 * shrinks when there are too few tasks for the threads). */
size_t af_attention_workspace_size(const af_attention_desc *d, int n_threads);

/* Runs on pool (NULL: the caller's thread). Allocates nothing. AF_ERR_INVALID_ARGUMENT for
 * negative sizes or strides, missing pointers, a workspace smaller than
 * af_attention_workspace_size(d, af_threadpool_n_threads(pool)), or more than INT32_MAX tasks. */
af_status af_attention_run(const af_attention_desc *d, af_threadpool *pool);

/* The plain reference twin: one query row at a time, double accumulation and libm exp, single
 * thread; isa and workspace are ignored. Same argument checks; allocates S_k + D doubles
 * (AF_ERR_OUT_OF_MEMORY). */
af_status af_attention_ref(const af_attention_desc *d);

/* The kernel af_attention_run uses for d's isa, e.g. "f32_attention__avx512"; a static string. */
const char *af_attention_name(const af_attention_desc *d);
/* The same for a step that computes Q, K and V itself first, e.g. "f32_qkv_attention__avx512". */
const char *af_attention_qkv_name(const af_attention_desc *d);

#endif
