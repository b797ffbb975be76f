/*
 * Single-precision GEMM with fused epilogues, the anchor kernel behind Conv (as GEMM), Gemm and
 * MatMul in the fast runtime:  C = epilogue(alpha * op(A) op(B) + beta * C), per batch item.
 *
 *   af_gemm_packed *w;                                  // once, at session creation:
 *   af_gemm_pack_a(AF_ISA_AVX512, 1, Cout, K, weights, K, false, 0, &w);   // Conv: Y = W X
 *   af_gemm_desc d = af_gemm_desc_default();            // per run:
 *   d.M = Cout; d.N = HW; d.K = K;
 *   d.packed_a = w;
 *   d.B = x; d.ldb = HW;
 *   d.C = y; d.ldc = HW;
 *   d.epilogue = &bias_relu;                            // applied to each tile while in L1
 *   d.workspace = ws; d.workspace_size = af_sgemm_workspace_size(&d, n_threads);
 *   af_sgemm(&d, pool);
 *   af_gemm_packed_free(w);
 *
 * Operands: op(A) is M x K, op(B) is K x N, C is M x N, all row-major with leading dimensions in
 * elements. trans_a means A is stored K x M (op(A) = A^T), trans_b that B is stored N x K. Batch
 * item b uses A + b*stride_a, B + b*stride_b, C + b*stride_c; a stride of 0 broadcasts the operand
 * (attention's QK^T and PV over heads need no copies: set lda/ldb/strides to the strided heads).
 * A constant operand (weights) may be packed once; a packed operand replaces the raw pointer and
 * carries its own shape, transposition and batch (1 item: broadcast, or `batch` items).
 *
 * Results do not depend on the thread count, the partition into tiles or on which operands were
 * prepacked: every element is summed in the same order (K split into the same blocks) with one FMA
 * per product, whatever thread and microkernel compute it.
 *
 * Epilogues of the shape [BIAS_ROW | SCALE_SHIFT_ROW] [BIAS_COL] [ADD] [RELU | CLIP] (each step
 * optional, in this order) run inside the microkernel on the accumulators; any other program runs
 * through the ISA's tile applier right after each tile is stored. Both give the same bits.
 *
 * Speed (AVX-512 on one Zen 4 core, ~112 GFLOP/s FMA peak): 80-110 GFLOP/s per core on the
 * ResNet-50, BERT and MobileNetV3 shapes, 0.9-1.3x oneDNN's dnnl_sgemm at 1 and 2 threads; see
 * bench/GEMM_RESULTS.md.
 */
#ifndef AF_KERNELS_GEMM_GEMM_H
#define AF_KERNELS_GEMM_GEMM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "autofusion.h"
#include "kernels/epilogue.h"
#include "util/cpu.h"
#include "util/threadpool.h"

/* The longest run of products a convolution sums before adding it into its total: its kernels'
 * rounding error grows with this block, not with K (gemm_internal.h has the measurements). */
#define AF_CONV_FLUSH_K 256

/* A prepacked operand: panels of the microkernel's width, zero-padded, for one ISA. Opaque. */
typedef struct af_gemm_packed af_gemm_packed;

/* Packs op(A) (M x K) of `batch` items (stride_a elements apart; batch 1: one matrix shared by
 * every batch item of the GEMM) for `isa` (clamped to the CPU). The caller owns *out and frees it
 * with af_gemm_packed_free; the source may be freed afterwards. AF_ERR_INVALID_ARGUMENT on bad
 * sizes, AF_ERR_OUT_OF_MEMORY. */
af_status af_gemm_pack_a(af_isa isa, int64_t batch, int64_t M, int64_t K, const float *A, int64_t lda, bool trans_a,
                         int64_t stride_a, af_gemm_packed **out);
/* The same for op(B) (K x N). */
af_status af_gemm_pack_b(af_isa isa, int64_t batch, int64_t K, int64_t N, const float *B, int64_t ldb, bool trans_b,
                         int64_t stride_b, af_gemm_packed **out);
/* af_gemm_pack_b for a B that will mostly meet `rows` rows of op(A) (0: unknown). On AVX-512,
 * with 8 to af_gemm_narrow_rows() - 1 rows or unknown, its panels are 48 columns wide for an 8x48
 * register tile instead of the 14x32 one; fewer rows keep the 14x32 panels and their gemv (a
 * classifier's batch 1), and so do more: the 14x32 tile spreads them evenly over 14-row panels
 * (128 as 13 and 12 rows) and loads fewer bytes of B per FMA, which counts where the weights come
 * from DRAM. On AMD (Zen 5), weights cycled through 16 copies (cold), rows x 3072 x 768, one
 * thread: 96 rows 193 / 186-189 GFLOP/s (8x48 / 14x32), 128 rows 182-185 / 189-192, 256 rows
 * 167-171 / 172-174; BERT-base (128 rows) 3% faster on the 14x32 tile at one thread, 2% at two
 * (alternating runs, bench/RESULTS.md session 18): there the limit is 128. On Intel (a Xeon of
 * family 6, model 207) the 8x48 tile was the faster one up to 256 rows: BERT-base 0.964
 * [quartiles 0.945-0.985] of the 14x32 tile's time at one thread, 0.987 [0.956-1.053] at two (40
 * pairs, bench/inproc_ab.c), its MatMuls and fused attention 4-6% faster in the profile; ViT-B/16
 * (197 rows) 0.976 / 0.972 (20 pairs); 30 copies cold, rows x 3072 x 768, mean GFLOP/s 8x48 /
 * 14x32: 128 rows 113-132 / 95-128, 197 rows 130-138 / 100-115, 256 rows 146-157 / 140-149, 512
 * rows 108-122 / 122-139 (session 28): there the limit is 257. The results are the same bits
 * either way (the same K blocks, one FMA per product in k order). */
int64_t af_gemm_narrow_rows(void);
af_status af_gemm_pack_b_for_rows(af_isa isa, int64_t rows, int64_t batch, int64_t K, int64_t N, const float *B,
                                  int64_t ldb, bool trans_b, int64_t stride_b, af_gemm_packed **out);
/* Writes item b of a batched operand into dst, laid out as the source of af_gemm_pack_b. */
typedef void (*af_gemm_fill_fn)(void *ctx, int64_t b, float *dst);
/* af_gemm_pack_b with each item made by fill just before it is packed, items 0, 1, ... in order,
 * so that a computed operand (Winograd's U) never exists unpacked in full: one item of scratch. */
af_status af_gemm_pack_b_each(af_isa isa, int64_t batch, int64_t K, int64_t N, int64_t ldb, bool trans_b,
                              af_gemm_fill_fn fill, void *ctx, af_gemm_packed **out);
/* The source of a packed operand (its first item) back, lanes as rows: dst[l * K + k] is op(A)'s
 * row l or op(B)'s column l at k, so a weight packed from a row-major [rows, K] array (W, or W^T
 * stored transposed) comes back as that array. dst holds rows * K floats. */
void af_gemm_packed_unpack(const af_gemm_packed *p, float *dst);
/* Accepts NULL. */
void af_gemm_packed_free(af_gemm_packed *p);
/* Bytes the packed copy holds (for the memory report). */
size_t af_gemm_packed_bytes(const af_gemm_packed *p);

/* The order in which a GEMM's tiles sweep a cache block (gemm.c, choose_order). AUTO follows the
 * measured rule; the others force one (the test that both give the same bits). */
typedef enum af_gemm_order { AF_GEMM_ORDER_AUTO, AF_GEMM_ORDER_COLS, AF_GEMM_ORDER_ROWS } af_gemm_order;

typedef struct af_gemm_desc {
    int64_t M, N, K;           /* K may be 0: the product is 0 */
    int64_t batch;             /* >= 1 */
    const float *A;            /* ignored when packed_a is set */
    int64_t lda, stride_a;     /* leading dimension and batch stride of A, in elements */
    bool trans_a;
    const af_gemm_packed *packed_a;
    const float *B;
    int64_t ldb, stride_b;
    bool trans_b;
    const af_gemm_packed *packed_b;
    float *C;
    int64_t ldc, stride_c;     /* C items must not overlap each other (or A, B) */
    float alpha;               /* scales the product */
    float beta;                /* 0: C is only written (never read, NaN in C is harmless); else
                                  beta * C is added before the epilogue */
    const af_epilogue *epilogue; /* NULL: none. Row/column/residual vectors are indexed with the
                                    tile's (m, n) and batch item (see epilogue.h) */
    af_isa isa;                /* clamped to the CPU; packed operands must have this isa */
    void *workspace;           /* packing scratch of af_sgemm_workspace_size bytes for the pool's
                                  thread count (any alignment; 64 bytes is best); NULL: af_sgemm
                                  allocates and frees it itself, the slow path */
    size_t workspace_size;
    af_gemm_order order;       /* AUTO (0) unless forcing a sweep order */
    int64_t k_block;           /* 0: K is summed in the GEMM's own blocks (at most 768 steps);
                                  else in blocks of at most k_block steps, each added into C.
                                  Convolutions pass AF_CONV_FLUSH_K (a shorter sum rounds less) */
} af_gemm_desc;

/* batch 1, alpha 1, beta 0, everything else 0/NULL, isa = af_cpu_isa(). */
af_gemm_desc af_gemm_desc_default(void);

/* Scratch bytes af_sgemm needs for d with n_threads threads (0 when nothing needs packing).
 * Depends only on the isa, which operands are packed, and the sizes, so one buffer sized for the
 * largest GEMM of a model serves all of them. */
size_t af_sgemm_workspace_size(const af_gemm_desc *d, int n_threads);

/* Runs the GEMM on pool (NULL: the caller's thread only). AF_ERR_INVALID_ARGUMENT for
 * inconsistent sizes, strides or packed operands, AF_ERR_OUT_OF_MEMORY when the workspace is
 * missing and cannot be allocated. No allocation when d->workspace is large enough. */
af_status af_sgemm(const af_gemm_desc *d, af_threadpool *pool);

/* True when af_sgemm on d reads each element of its epilogue's residual (its one AF_EPI_ADD)
 * before it writes C's element at the same position, and never after, so that the residual may
 * be C itself (ld = ldc): a fused step's output written over its residual. Looks at the isa,
 * sizes, beta, which operands are packed and the epilogue's ops; the pointers may be unset. It
 * holds where the tile kernels apply the residual in registers, beta is 0 and K is one block; not
 * for a matrix-vector product or K = 0, whose epilogues run over C after it is written. */
bool af_sgemm_residual_in_place(const af_gemm_desc *d);

/* The microkernel tile of an isa (after clamping): C is computed in mr x nr register tiles. */
void af_gemm_tile_shape(af_isa isa, int *mr, int *nr);

#endif
