/* The portable instantiation of the Reduce* loops (one lane, libm exp), the af_reduce_scalar
 * table, and the per-ISA table choice. */
#include <math.h>
#include <stdbool.h>

#include "kernels/fast/reduce_internal.h"

#define RV_TARGET
#define RV_INLINE static inline
#define RV_NAME(f) f##__scalar
#define RV_W 1

typedef float rv_v;
typedef int rv_m;

RV_INLINE rv_m rv_tail(int64_t n) { return n > 0; }
RV_INLINE rv_v rv_load(const float *p) { return *p; }
RV_INLINE void rv_store(float *p, rv_v v) { *p = v; }
RV_INLINE rv_v rv_loadm(const float *p, rv_m m) { return m ? *p : 0.0f; }
RV_INLINE void rv_storem(float *p, rv_m m, rv_v v) {
    if (m) *p = v;
}
RV_INLINE rv_v rv_blend(rv_m m, rv_v v, rv_v fill) { return m ? v : fill; }
RV_INLINE rv_v rv_set1(float x) { return x; }
RV_INLINE rv_v rv_zero(void) { return 0.0f; }
RV_INLINE rv_v rv_add(rv_v a, rv_v b) { return a + b; }
RV_INLINE rv_v rv_sub(rv_v a, rv_v b) { return a - b; }
RV_INLINE rv_v rv_mul(rv_v a, rv_v b) { return a * b; }
/* Two roundings, as the scalar elementwise loops: fmaf is a library call without FMA. */
RV_INLINE rv_v rv_fma(rv_v a, rv_v b, rv_v c) { return a * b + c; }
RV_INLINE rv_v rv_abs(rv_v a) { return fabsf(a); }
RV_INLINE rv_v rv_maxnan(rv_v acc, rv_v x) { return isnan(x) ? x : x > acc ? x : acc; }
RV_INLINE rv_v rv_minnan(rv_v acc, rv_v x) { return isnan(x) ? x : x < acc ? x : acc; }
RV_INLINE rv_v rv_exp(rv_v v) { return expf(v); }

#include "kernels/fast/reduce_body.h"

const af_reduce_kernels af_reduce_scalar = {
    .isa = AF_ISA_SCALAR,
    .row = RV_NAME(f32_reduce_row),
    .accum = RV_NAME(f32_reduce_accum),
};

const af_reduce_kernels *af_reduce_kernels_for(af_isa isa) {
    switch (af_cpu_isa_clamp(isa)) {
    case AF_ISA_AVX512: return &af_reduce_avx512;
    case AF_ISA_AVX2: return &af_reduce_avx2;
    default: return &af_reduce_scalar;
    }
}
