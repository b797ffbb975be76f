/*
 * Helpers shared by the conv, pool and normalization reference kernels, which compute in double:
 *
 *   double *x = af_convref_load(t);     // t's elements as doubles, NULL when out of memory
 *   af_convref_store(y, 0, v, n);       // writes v[0..n) to y's elements 0..n, rounding
 *   af_free(x);
 */
#ifndef AF_KERNELS_REF_CONV_H
#define AF_KERNELS_REF_CONV_H

#include "ir/op_ctx.h"
#include "ir/shape/conv_geom.h"

/* Copies t's elements into a new double array released with af_free; NULL only when out of
 * memory (an empty tensor gives a one-element array). */
double *af_convref_load(const af_tensor *t);
/* Writes v[0..n) into t's elements off..off+n-1, converting to t's dtype. */
void af_convref_store(af_tensor *t, int64_t off, const double *v, int64_t n);
/* Allocates n doubles (at least one, so n == 0 is not a failure); NULL when out of memory. */
double *af_convref_alloc(int64_t n);

/* Re-runs shape function `infer` on c's actual inputs, so all its checks apply at run time too,
 * and fails unless every present output was given the dtype and shape it implies. */
af_status af_convref_recheck(af_op_ctx *c, af_op_fn infer);

/* A window op's geometry over exactly three spatial dims: 1-D and 2-D ops get leading dims of
 * size 1, so one loop nest serves every rank. */
typedef struct af_convref_win {
    int64_t in[3], out[3];    /* input and output spatial sizes */
    int64_t k[3], s[3], d[3]; /* kernel, stride, dilation */
    int64_t pb[3], pe[3];     /* resolved pads at the beginning and end */
} af_convref_win;

/* Fills w from geometry g resolved over the n_sp spatial sizes in/out. */
void af_convref_win_init(af_convref_win *w, const af_conv_geom *g, const int64_t *in,
                         const int64_t *out);

/* The t in [0, count) for which 0 <= t * s + base < limit form one run [*lo, *hi) (s >= 1);
 * empty when *lo >= *hi. */
static inline void af_convref_range(int64_t base, int64_t s, int64_t limit, int64_t count,
                                    int64_t *lo, int64_t *hi) {
    int64_t a = base >= 0 ? 0 : (-base + s - 1) / s;
    int64_t b = limit - base <= 0 ? 0 : (limit - base + s - 1) / s;
    *lo = a;
    *hi = b < count ? b : count;
}

#endif
