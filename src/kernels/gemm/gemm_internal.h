/*
 * What the GEMM driver (gemm.c) needs from each ISA's file: the register-tile shape, the tile
 * function that runs the right microkernel for a full or partial tile (optionally with the fused
 * epilogue steps), the epilogue applier for everything else, and the packing routine. Internal to
 * src/kernels/gemm.
 *
 * Packed panel layout (prepacked operands and workspace blocks alike): a panel holds W lanes (MR
 * rows of op(A) or NR columns of op(B)) for consecutive k, k-major: panel[k * W + lane]; lanes past
 * the matrix edge are zero. A prepacked operand stores each panel over the whole K, so any K block
 * of it is a pointer; an untransposed B is not packed at all for full panels (ldb = its row stride).
 */
#ifndef AF_KERNELS_GEMM_INTERNAL_H
#define AF_KERNELS_GEMM_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "kernels/epilogue.h"
#include "kernels/gemm/gemm.h"

/* The elementwise steps a microkernel can apply itself, in registers, before its store, in this
 * order: x = x * row_scale[i] + row_shift[i] (or + row_shift[i] alone), + col_shift[j],
 * + residual[i * res_ld + j], then min(max(x, lo), hi) or x * clamp01(x / 6 + 1/2) (HardSwish).
 * Pointers are already offset to the tile's first row/column; NULL skips a step, lo = -inf and
 * hi = inf skip the clamp. The driver builds it
 * from an epilogue program of that shape (conv + folded BatchNorm + residual + ReLU/ReLU6, linear
 * + bias + ReLU); the operations are those of the ISA's epilogue applier, so the result is the
 * same bit for bit. */
typedef struct af_gemm_fused {
    const float *row_scale, *row_shift, *col_shift, *residual;
    int64_t res_ld;
    float lo, hi;
    bool clamp;
    bool hard_swish;
} af_gemm_fused;

/* One call of a tile function: C[0..mr) x [0..nr) (row stride ldc) = alpha * sum_k a[k*MR + i] *
 * b[k*ldb + j] + beta * C (beta == 0: C is not read), then `fused` when not NULL. Every tile
 * function reads an element of fused->residual before it writes C's element at the same
 * position, and never after: with beta == 0 the residual may be C itself (same ld), a step's
 * output written over its residual (af_gemm_residual_in_registers). a is a packed A
 * panel; b a packed B panel (ldb = NR) or B itself (any ldb). mr <= MR, nr <= NR, kc >= 1. While
 * it runs, the kernel prefetches (into L2) the B row of NR floats at pf + k * pf_ld for each
 * k < kc: the panel the driver needs next (pf_ld 0 when there is none; prefetches never fault). */
typedef struct af_gemm_tile_args {
    int64_t kc;
    const float *a, *b;
    int64_t ldb;
    /* The convolution tile function's input (conv_implicit.c): kc / taps channels of `taps` taps,
     * the pixel values of channel ch, tap j at a + ch * chan_ld + tap_off[j] (mr consecutive
     * floats, one per output pixel). */
    const int32_t *tap_off;
    int taps;
    int64_t chan_ld;
    int64_t flush_ch; /* channels summed before each add into the running total (see
                         AF_CONV_FLUSH_K); 0: af_conv_flush_channels(taps) */
    float *c;
    int64_t ldc;
    int mr, nr;
    float alpha, beta;
    const float *pf;
    int64_t pf_ld;
    const af_gemm_fused *fused;
} af_gemm_tile_args;

typedef void (*af_gemm_tile_fn)(const af_gemm_tile_args *t);

/* The convolution tile kernels (conv_tile, conv_rows_tile), which run a tile's whole K in one
 * call, add their accumulators into a running total every AF_CONV_FLUSH_K k steps (rounded down
 * to whole channels): blocked summation, whose rounding error grows with the block, not with K.
 * A 3x3 convolution over 512 channels (K = 4608, |y| about 1) had an RMS error of 1.0e-6 against
 * float64 summed in one run of FMAs, 2.5e-7 blocked, ONNX Runtime's 2.1e-7
 * (bench/conv_accuracy.py); ResNet-50 and MobileNetV3-L ran 1.006 and 1.010 as long (bench/ab.py).
 * The GEMM tile kernels get K in blocks of at most KC_MAX (gemm.c) that the driver adds into C,
 * and must sum as the gemv and column kernels do, bit for bit: they are left as they are, and a
 * convolution run as a GEMM asks the driver for blocks of AF_CONV_FLUSH_K (af_gemm_desc.k_block):
 * 1x1 2048 -> 512 at 28x28 4.7e-7 -> 2.9e-7, a dilated 3x3 over 512 channels 4.6e-7 -> 2.8e-7. */

/* The flush itself, for an ISA's vector ADD and ZERO: acc[i][v] for i < ROWS, v < NV goes into
 * total (copied the first time, `flushed` false) and restarts from zero; AF_ADD_TOTAL adds the
 * total back at the end. total lives in memory (L1), out of the k loop's registers. */
#define AF_EACH_ACC(ROWS, NV)                                                                      \
    _Pragma("GCC unroll 16") for (int i_ = 0; i_ < (ROWS); i_++)                                   \
        _Pragma("GCC unroll 3") for (int v_ = 0; v_ < (NV); v_++)
#define AF_FLUSH_TILE(ADD, ZERO, ROWS, NV, acc, total, flushed)                                    \
    AF_EACH_ACC(ROWS, NV) {                                                                        \
        (total)[i_][v_] = (flushed) ? ADD((total)[i_][v_], (acc)[i_][v_]) : (acc)[i_][v_];         \
        (acc)[i_][v_] = ZERO();                                                                    \
    }
#define AF_ADD_TOTAL(ADD, ROWS, NV, acc, total) AF_EACH_ACC(ROWS, NV)(acc)[i_][v_] = ADD((total)[i_][v_], (acc)[i_][v_])

/* How far ahead, in channels, the conv tile kernels prefetch their input rows: each channel's rows
 * sit a plane apart, a stride the hardware prefetchers do not follow, so they fetch those about
 * 8 k steps ahead (at least two channels). */
static inline int64_t af_conv_prefetch_channels(int taps) { return taps >= 4 ? 2 : 8 / taps; }

/* The channels between two flushes of a conv tile kernel: AF_CONV_FLUSH_K k steps rounded down to
 * whole channels, at least one. */
static inline int64_t af_conv_flush_channels(int taps) {
    return AF_CONV_FLUSH_K / taps > 0 ? AF_CONV_FLUSH_K / taps : 1;
}
/* A conv tile call's flush interval in channels: its own, or the rule above. */
static inline int64_t af_conv_tile_flush_channels(const af_gemm_tile_args *t) {
    return t->flush_ch > 0 ? t->flush_ch : af_conv_flush_channels(t->taps);
}

/* Packs the lanes x kc block of a source matrix into ceil(lanes / w) consecutive panels of kc * w
 * floats at dst (the last one zero-padded). Element (k, l) of the block is src[k * ld + l] when
 * lanes_contiguous, else src[l * ld + k]. */
typedef void (*af_gemm_pack_fn)(const float *src, int64_t ld, int lanes_contiguous, int64_t lanes, int w, int64_t kc,
                                float *dst);

/* A matrix-vector product on prepacked panels (N = 1 on a packed A, M = 1 on a packed B): for
 * p < n_panels (<= AF_GEMV_PANELS) and lane l < w (the panels' width, MR or NR),
 *   out[p * w + l] = sum over k < kc of panels[p * panel_stride + k * w + l] * v[k],
 * summed from zero in k order with one FMA per k, as a tile kernel sums an element, so the
 * result is the same bit for bit. A tile kernel would run one panel's dependent FMA chain at a
 * time on one column or row of its tile; this keeps several panels' chains, and their memory
 * streams, in flight. */
#define AF_GEMV_PANELS 8
#define AF_GEMV_MAX_W 48 /* the widest panel */
typedef void (*af_gemm_gemv_fn)(const float *panels, int64_t panel_stride, int w, int n_panels, int64_t kc,
                                const float *v, float *out);

typedef struct af_gemm_isa_cfg {
    int mr, nr;
    af_gemm_tile_fn tile;
    bool fused; /* tile honours af_gemm_tile_args.fused */
    /* The convolution tile: mr (<= MR) output pixels of one row by nr (<= NR) output channels.
     * The pixels are broadcast from the input as tap_off describes, b is a packed panel of NR
     * channels (k-major, like a packed B), and the tile is stored transposed, as rows of channels:
     * C[j * ldc + i] for channel j, pixel i, with `fused` (rows = channels) when conv_fused. alpha
     * 1 and beta 0 (C is only written). pf / pf_ld as for `tile` (pf must be set): the driver
     * points it at the next weight panel, which on the large layers comes from DRAM. */
    af_gemm_tile_fn conv_tile;
    bool conv_fused;
    /* The convolution tile with channels as rows, for few output channels (NULL: none): mr (<= MR)
     * output channels, their weights broadcast from a packed A panel of MR channels (a, k-major),
     * by nr (<= NR) output pixels of one row read as vectors from the input (b: the planes at the
     * tile's first pixel, channel ch tap j at b + ch * chan_ld + tap_off[j]), stored as rows of
     * channels C[i * ldc + j] with `fused`. alpha 1, beta 0; no prefetch (pf unused). */
    af_gemm_tile_fn conv_rows_tile;
    af_gemm_pack_fn pack;
    af_epilogue_tile_fn epilogue;
    af_gemm_gemv_fn gemv; /* NULL: matrix-vector products run on the tile kernels */
} af_gemm_isa_cfg;

extern const af_gemm_isa_cfg af_gemm_cfg_scalar;
extern const af_gemm_isa_cfg af_gemm_cfg_avx2;
extern const af_gemm_isa_cfg af_gemm_cfg_avx512;
/* AVX-512 with an 8x48 tile, for a B prepacked in 48-wide panels (af_gemm_pack_b_for_rows). */
extern const af_gemm_isa_cfg af_gemm_cfg_avx512_wide;

/* The configuration of an isa (already clamped to the CPU). */
const af_gemm_isa_cfg *af_gemm_isa_cfg_for(af_isa isa);
/* The panels of a prepacked operand (batch item 0): panel r starts at r * K * w. */
const float *af_gemm_packed_data(const af_gemm_packed *p);
/* The panels of batch item b (item 0 for an operand shared by every item). */
const float *af_gemm_packed_item(const af_gemm_packed *p, int64_t b);
/* af_gemm_pack_a (one item) for the tile of cfg, an isa's own or a variant (cfg->mr rows a panel). */
af_status af_gemm_pack_a_cfg(af_isa isa, const af_gemm_isa_cfg *cfg, int64_t M, int64_t K, const float *A,
                             int64_t lda, bool trans_a, af_gemm_packed **out);

/* The in-register prefix of an epilogue program (vectors offset to batch item b) into f; returns
 * how many of its steps that is. */
int af_gemm_compile_fused(const af_epilogue *e, int64_t b, af_gemm_fused *f);
/* True when e adds exactly one residual (AF_EPI_ADD) and that step is among the in-register ones
 * af_gemm_compile_fused takes: then a tile reads each residual element before it stores C's (see
 * af_gemm_tile_args). Steps' vectors may be NULL (only their ops are looked at). */
bool af_gemm_residual_in_registers(const af_epilogue *e);
/* f offset to the tile whose first element is (m, n). */
void af_gemm_fused_at(const af_gemm_fused *f, int64_t m, int64_t n, af_gemm_fused *out);

/* The tile functions under their XNNPACK-style names (the full tile is the fast path). */
void af_f32_gemm_ukernel_14x32__avx512(const af_gemm_tile_args *t);
void af_f32_gemm_ukernel_8x48__avx512(const af_gemm_tile_args *t);
void af_f32_gemm_ukernel_6x16__avx2(const af_gemm_tile_args *t);
void af_f32_gemm_ukernel_4x4__scalar(const af_gemm_tile_args *t);
void af_f32_conv_ukernel_14x32__avx512(const af_gemm_tile_args *t);
void af_f32_conv_rows_ukernel_8x48__avx512(const af_gemm_tile_args *t);
void af_f32_conv_ukernel_6x16__avx2(const af_gemm_tile_args *t);

/* The portable packer (gemm_scalar.c); ISA files may use it or their own. */
void af_gemm_pack_scalar(const float *src, int64_t ld, int lanes_contiguous, int64_t lanes, int w, int64_t kc,
                         float *dst);

#endif
