/* Sliding-window geometry for Conv, ConvTranspose and the pools: attributes, auto_pad and output
 * sizes, following the formulas of the ONNX operator spec. */
#include "ir/shape/conv_geom.h"

#include <string.h>

/* Attribute values above this are rejected so that sizes computed from them cannot overflow. */
#define GEOM_MAX_ATTR ((int64_t)1 << 31)
/* Spatial sizes above this are rejected for the same reason (no tensor that large can exist). */
#define GEOM_MAX_DIM ((int64_t)1 << 40)

static af_status read_ints(const af_op_ctx *c, const char *name, int want, int64_t lo, int64_t def,
                           int64_t *out) {
    const int64_t *v = NULL;
    int n = af_node_attr_ints(c->node, name, &v);
    if (n < 0) {
        for (int i = 0; i < want; i++) out[i] = def;
        return AF_OK;
    }
    if (n != want)
        return af_ctx_fail(c, AF_ERR_INVALID_MODEL, "%s has %d values, expected %d", name, n, want);
    for (int i = 0; i < n; i++) {
        if (v[i] < lo || v[i] > GEOM_MAX_ATTR)
            return af_ctx_fail(c, AF_ERR_INVALID_MODEL, "%s[%d] = %lld is out of range", name, i,
                               (long long)v[i]);
        out[i] = v[i];
    }
    return AF_OK;
}

af_status af_conv_geom_init(const af_op_ctx *c, int n_sp, const int64_t *w_kernel,
                            af_conv_geom *g) {
    memset(g, 0, sizeof *g);
    if (n_sp < 1 || n_sp > AF_CONV_MAX_SP)
        return af_ctx_fail(c, AF_ERR_INVALID_MODEL, "%d spatial dims; 1 to %d are supported", n_sp,
                           AF_CONV_MAX_SP);
    g->n_sp = n_sp;
    af_status st;
    const int64_t *ks = NULL;
    int nk = af_node_attr_ints(c->node, "kernel_shape", &ks);
    if (nk >= 0) {
        if ((st = read_ints(c, "kernel_shape", n_sp, 1, 1, g->kernel)) != AF_OK) return st;
        for (int i = 0; w_kernel && i < n_sp; i++)
            if (w_kernel[i] >= 0 && w_kernel[i] != g->kernel[i])
                return af_ctx_fail(c, AF_ERR_INVALID_MODEL,
                                   "kernel_shape[%d] = %lld but W's spatial dim is %lld", i,
                                   (long long)g->kernel[i], (long long)w_kernel[i]);
    } else if (w_kernel) {
        for (int i = 0; i < n_sp; i++) {
            if (w_kernel[i] == 0)
                return af_ctx_fail(c, AF_ERR_INVALID_MODEL, "W's spatial dim %d is 0", i);
            g->kernel[i] = w_kernel[i] < 0 ? -1 : w_kernel[i];
        }
    } else {
        return af_ctx_fail(c, AF_ERR_INVALID_MODEL, "needs the kernel_shape attribute");
    }
    for (int i = 0; i < n_sp; i++)
        if (g->kernel[i] > GEOM_MAX_ATTR)
            return af_ctx_fail(c, AF_ERR_LIMIT, "kernel dim %d is too large", i);
    if ((st = read_ints(c, "strides", n_sp, 1, 1, g->stride)) != AF_OK) return st;
    if ((st = read_ints(c, "dilations", n_sp, 1, 1, g->dilation)) != AF_OK) return st;
    int64_t pads[2 * AF_CONV_MAX_SP];
    if ((st = read_ints(c, "pads", 2 * n_sp, 0, 0, pads)) != AF_OK) return st;
    for (int i = 0; i < n_sp; i++) {
        g->pad_begin[i] = pads[i];
        g->pad_end[i] = pads[n_sp + i];
    }
    if ((st = read_ints(c, "output_padding", n_sp, 0, 0, g->out_pad)) != AF_OK) return st;
    const int64_t *os = NULL;
    int nos = af_node_attr_ints(c->node, "output_shape", &os);
    if (nos >= 0) {
        /* Some exporters write the full N, C, spatial shape; the spatial part is what counts. */
        int skip = nos == n_sp + 2 ? 2 : 0;
        if (nos - skip != n_sp)
            return af_ctx_fail(c, AF_ERR_INVALID_MODEL, "output_shape has %d values, expected %d",
                               nos, n_sp);
        for (int i = 0; i < n_sp; i++) {
            if (os[skip + i] < 0 || os[skip + i] > GEOM_MAX_DIM)
                return af_ctx_fail(c, AF_ERR_INVALID_MODEL,
                                   "output_shape[%d] = %lld is out of range", skip + i,
                                   (long long)os[skip + i]);
            g->out_shape[i] = os[skip + i];
        }
        g->n_out_shape = n_sp;
    }
    const char *ap = af_node_attr_string(c->node, "auto_pad", "NOTSET");
    if (strcmp(ap, "NOTSET") == 0 || ap[0] == '\0') {
        g->auto_pad = AF_CONV_PAD_NOTSET;
    } else if (strcmp(ap, "SAME_UPPER") == 0) {
        g->auto_pad = AF_CONV_PAD_SAME_UPPER;
    } else if (strcmp(ap, "SAME_LOWER") == 0) {
        g->auto_pad = AF_CONV_PAD_SAME_LOWER;
    } else if (strcmp(ap, "VALID") == 0) {
        g->auto_pad = AF_CONV_PAD_VALID;
    } else {
        return af_ctx_fail(c, AF_ERR_INVALID_MODEL, "unknown auto_pad '%s'", ap);
    }
    int64_t ceil_mode = af_node_attr_int(c->node, "ceil_mode", 0);
    if (ceil_mode != 0 && ceil_mode != 1)
        return af_ctx_fail(c, AF_ERR_INVALID_MODEL, "ceil_mode must be 0 or 1, not %lld",
                           (long long)ceil_mode);
    g->ceil_mode = ceil_mode == 1;
    return AF_OK;
}

/* The kernel's extent with dilation: (k - 1) * d + 1; both are at most GEOM_MAX_ATTR. */
static int64_t dilated(const af_conv_geom *g, int i) {
    return (g->kernel[i] - 1) * g->dilation[i] + 1;
}

void af_conv_tap_outputs(int64_t in, int64_t out, int64_t s, int64_t d, int64_t pb, int64_t t, int64_t *o0,
                         int64_t *o1) {
    const int64_t lo = pb - t * d, hi = in + pb - t * d; /* o s in [lo, hi) */
    int64_t a = lo <= 0 ? 0 : (lo + s - 1) / s, b = hi <= 0 ? 0 : (hi + s - 1) / s;
    if (a > out) a = out;
    if (b > out) b = out;
    *o0 = a;
    *o1 = b > a ? b : a;
}

af_status af_conv_geom_forward(const af_op_ctx *c, af_conv_geom *g, const int64_t *in,
                               int64_t *out) {
    for (int i = 0; i < g->n_sp; i++) {
        if (in[i] < 0 || g->kernel[i] < 0) {
            out[i] = -1;
            continue;
        }
        int64_t dk = dilated(g, i), s = g->stride[i];
        if (in[i] > GEOM_MAX_DIM)
            return af_ctx_fail(c, AF_ERR_LIMIT, "spatial dim %d (%lld) is too large", i,
                               (long long)in[i]);
        if (g->auto_pad == AF_CONV_PAD_SAME_UPPER || g->auto_pad == AF_CONV_PAD_SAME_LOWER) {
            out[i] = (in[i] + s - 1) / s;
            int64_t total = out[i] > 0 ? (out[i] - 1) * s + dk - in[i] : 0;
            if (total < 0) total = 0;
            g->pad_begin[i] = g->auto_pad == AF_CONV_PAD_SAME_UPPER ? total / 2 : total - total / 2;
            g->pad_end[i] = total - g->pad_begin[i];
            continue;
        }
        if (g->auto_pad == AF_CONV_PAD_VALID) g->pad_begin[i] = g->pad_end[i] = 0;
        int64_t span = in[i] + g->pad_begin[i] + g->pad_end[i] - dk;
        if (span < 0)
            return af_ctx_fail(c, AF_ERR_INVALID_MODEL,
                               "spatial dim %d: the window (%lld with dilation) is larger than the "
                               "padded input (%lld)",
                               i, (long long)dk, (long long)(span + dk));
        if (g->ceil_mode && g->auto_pad == AF_CONV_PAD_NOTSET) {
            out[i] = (span + s - 1) / s + 1;
            /* A last window that would start inside the end padding is dropped. */
            if ((out[i] - 1) * s >= in[i] + g->pad_begin[i]) out[i]--;
        } else {
            out[i] = span / s + 1;
        }
    }
    return AF_OK;
}

af_status af_conv_geom_transpose(const af_op_ctx *c, af_conv_geom *g, const int64_t *in,
                                 int64_t *out) {
    for (int i = 0; i < g->n_sp; i++) {
        bool same = g->auto_pad == AF_CONV_PAD_SAME_UPPER || g->auto_pad == AF_CONV_PAD_SAME_LOWER;
        if (in[i] < 0 || g->kernel[i] < 0) {
            out[i] = g->n_out_shape ? g->out_shape[i] : -1;
            continue;
        }
        int64_t dk = dilated(g, i), s = g->stride[i], full;
        if (in[i] > GEOM_MAX_DIM)
            return af_ctx_fail(c, AF_ERR_LIMIT, "spatial dim %d (%lld) is too large", i,
                               (long long)in[i]);
        /* The output size with no padding removed. */
        full = s * (in[i] > 0 ? in[i] - 1 : 0) + g->out_pad[i] + dk;
        if (g->n_out_shape || same) {
            out[i] = g->n_out_shape ? g->out_shape[i] : in[i] * s;
            int64_t total = full - out[i];
            /* SAME_UPPER puts the smaller half first, everything else the larger half; the halves
             * round toward -inf, which matters when output_shape asks for more than `full`. */
            int64_t half = total >= 0 ? total / 2 : -((-total + 1) / 2);
            g->pad_begin[i] = g->auto_pad == AF_CONV_PAD_SAME_UPPER ? half : total - half;
            g->pad_end[i] = total - g->pad_begin[i];
            continue;
        }
        if (g->auto_pad == AF_CONV_PAD_VALID) g->pad_begin[i] = g->pad_end[i] = 0;
        out[i] = full - g->pad_begin[i] - g->pad_end[i];
        if (out[i] < 0)
            return af_ctx_fail(c, AF_ERR_INVALID_MODEL,
                               "spatial dim %d: pads %lld + %lld exceed the output size %lld", i,
                               (long long)g->pad_begin[i], (long long)g->pad_end[i],
                               (long long)full);
    }
    return AF_OK;
}
