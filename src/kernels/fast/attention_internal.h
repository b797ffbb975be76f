/*
 * What the attention driver (attention.c) shares with its per-ISA tile functions: the plan (tile
 * shape and per-thread workspace layout) and the task entry points. Internal to src/kernels/fast.
 *
 * Vector ISAs keep a tile's scores transposed, st[j * tile + l] for key j and query lane l, so the
 * softmax along keys is elementwise across query vectors (no horizontal reductions) and P V reads
 * P[l][j] for consecutive l as broadcasts. Q^T of the tile, qt[e * tile + l], feeds QK^T as
 * vector loads; K and V are read in place.
 */
#ifndef AF_KERNELS_FAST_ATTENTION_INTERNAL_H
#define AF_KERNELS_FAST_ATTENTION_INTERNAL_H

#include "kernels/fast/attention.h"

typedef struct af_attention_plan {
    af_isa isa;          /* clamped */
    int lanes;           /* floats per vector: 16 (avx512), 8 (avx2), 1 (scalar) */
    int nv;              /* query vectors per tile (1 for scalar) */
    int64_t tile;        /* query rows per task: nv * lanes, or the scalar path's row count */
    int64_t n_qt;        /* tiles per (batch, head) */
    int64_t qt_floats;   /* per-thread workspace, in floats, each piece a multiple of 16: */
    int64_t s_floats;    /*   Q^T (D x tile; 0 for scalar), scores (S_k x tile), then 1/sum */
    int64_t ws_floats;   /*   (tile); the whole per-thread slice */
} af_attention_plan;

/* Query rows [i0, i0 + rows) (rows <= p->tile) of head h of batch item b; ws is the calling
 * thread's slice of p->ws_floats floats, 64-byte aligned. The desc has been checked. */
typedef void (*af_attention_tile_fn)(const af_attention_desc *d, const af_attention_plan *p, int64_t b, int64_t h,
                                     int64_t i0, int64_t rows, float *ws);

void af_attention_tile_avx512(const af_attention_desc *d, const af_attention_plan *p, int64_t b, int64_t h,
                              int64_t i0, int64_t rows, float *ws);
void af_attention_tile_avx2(const af_attention_desc *d, const af_attention_plan *p, int64_t b, int64_t h, int64_t i0,
                            int64_t rows, float *ws);

/* Query vectors per tile at most, per vector isa (the QK^T register block's width). */
#define AF_ATTENTION_NV_AVX512 4
#define AF_ATTENTION_NV_AVX2 2

#endif
