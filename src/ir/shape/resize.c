/* Shape function of Resize and the parameter reading its reference kernel shares
 * (ir/shape/resize.h): modes, coordinate transformation, scales or sizes, axes and roi. */
#include "ir/shape/resize.h"

#include <math.h>
#include <string.h>

#include "ir/shape/movement.h"

static af_status read_attrs(const af_op_ctx *c, af_resize_params *p) {
    const af_node *n = c->node;
    const char *mode = af_node_attr_string(n, "mode", "nearest");
    if (strcmp(mode, "nearest") == 0)
        p->mode = AF_RESIZE_NEAREST;
    else if (strcmp(mode, "linear") == 0)
        p->mode = AF_RESIZE_LINEAR;
    else if (strcmp(mode, "cubic") == 0 && c->opset >= 11)
        p->mode = AF_RESIZE_CUBIC;
    else
        return af_ctx_fail(c, AF_ERR_INVALID_MODEL, "unknown mode '%s' at opset %d", mode, c->opset);

    /* Resize-10 has no such attributes: it maps coordinates as Upsample did. */
    const char *coord = c->opset >= 11
                            ? af_node_attr_string(n, "coordinate_transformation_mode", "half_pixel")
                            : "asymmetric";
    static const struct {
        const char *name;
        af_resize_coord coord;
    } coords[] = {
        {"half_pixel", AF_RESIZE_HALF_PIXEL},
        {"half_pixel_symmetric", AF_RESIZE_HALF_PIXEL_SYMMETRIC},
        {"pytorch_half_pixel", AF_RESIZE_PYTORCH_HALF_PIXEL},
        {"align_corners", AF_RESIZE_ALIGN_CORNERS},
        {"asymmetric", AF_RESIZE_ASYMMETRIC},
        {"tf_half_pixel_for_nn", AF_RESIZE_TF_HALF_PIXEL_FOR_NN},
        {"tf_crop_and_resize", AF_RESIZE_TF_CROP_AND_RESIZE},
    };
    int i = 0, nc = (int)(sizeof coords / sizeof coords[0]);
    while (i < nc && strcmp(coord, coords[i].name) != 0) i++;
    if (i == nc)
        return af_ctx_fail(c, AF_ERR_INVALID_MODEL, "unknown coordinate_transformation_mode '%s'", coord);
    p->coord = coords[i].coord;

    const char *near =
        c->opset >= 11 ? af_node_attr_string(n, "nearest_mode", "round_prefer_floor") : "floor";
    if (strcmp(near, "round_prefer_floor") == 0)
        p->nearest = AF_RESIZE_ROUND_PREFER_FLOOR;
    else if (strcmp(near, "round_prefer_ceil") == 0)
        p->nearest = AF_RESIZE_ROUND_PREFER_CEIL;
    else if (strcmp(near, "floor") == 0)
        p->nearest = AF_RESIZE_FLOOR;
    else if (strcmp(near, "ceil") == 0)
        p->nearest = AF_RESIZE_CEIL;
    else
        return af_ctx_fail(c, AF_ERR_INVALID_MODEL, "unknown nearest_mode '%s'", near);

    p->cubic_a = af_node_attr_float(n, "cubic_coeff_a", -0.75f);
    p->exclude_outside = af_node_attr_int(n, "exclude_outside", 0) != 0;
    p->extrapolation = af_node_attr_float(n, "extrapolation_value", 0.0f);
    p->antialias = c->opset >= 18 && af_node_attr_int(n, "antialias", 0) != 0;
    if (p->antialias && p->mode == AF_RESIZE_NEAREST)
        return af_ctx_fail(c, AF_ERR_INVALID_MODEL, "antialias needs mode linear or cubic");
    return AF_OK;
}

/* An optional input that holds no values counts as absent. */
static const af_tensor *given(const af_op_ctx *c, int i) {
    const af_tensor *t = af_ctx_input(c, i);
    return t && af_tensor_numel(t) == 0 ? NULL : t;
}

/* Resize-18 axes: the axes scales/sizes/roi refer to, all axes by default. */
static af_status read_axes(const af_op_ctx *c, int rank, int *axes, int *n) {
    const int64_t *v;
    int len = c->opset >= 18 ? af_node_attr_ints(c->node, "axes", &v) : -1;
    if (len < 0) {
        for (int i = 0; i < rank; i++) axes[i] = i;
        *n = rank;
        return AF_OK;
    }
    if (len > rank) return af_ctx_fail(c, AF_ERR_INVALID_MODEL, "axes has %d values for rank %d", len, rank);
    bool seen[AF_MAX_RANK] = {false};
    for (int i = 0; i < len; i++) {
        af_status st = af_ctx_axis(c, v[i], rank, &axes[i]);
        if (st) return st;
        if (seen[axes[i]]) return af_ctx_fail(c, AF_ERR_INVALID_MODEL, "axis %d is listed twice", axes[i]);
        seen[axes[i]] = true;
    }
    *n = len;
    return AF_OK;
}

/* Fills p->scale and p->out_dims from the known sizes input. */
static af_status from_sizes(const af_op_ctx *c, const af_tensor *x, const af_tensor *sizes_t, const int *axes,
                            int n, af_resize_params *p) {
    int64_t sizes[AF_MAX_RANK];
    int len;
    af_status st = af_movement_read_ints(c, sizes_t, "sizes", AF_MAX_RANK, sizes, &len);
    if (st) return st;
    if (len != n) return af_ctx_fail(c, AF_ERR_INVALID_MODEL, "sizes has %d values for %d axes", len, n);
    const char *policy =
        c->opset >= 18 ? af_node_attr_string(c->node, "keep_aspect_ratio_policy", "stretch") : "stretch";
    bool larger = strcmp(policy, "not_larger") == 0, smaller = strcmp(policy, "not_smaller") == 0;
    if (!larger && !smaller && strcmp(policy, "stretch") != 0)
        return af_ctx_fail(c, AF_ERR_INVALID_MODEL, "unknown keep_aspect_ratio_policy '%s'", policy);
    double keep = larger ? INFINITY : 0;
    for (int i = 0; i < n; i++) {
        int64_t in = x->dims[axes[i]];
        if (sizes[i] < 0)
            return af_ctx_fail(c, AF_ERR_INVALID_MODEL, "sizes value %lld is negative", (long long)sizes[i]);
        p->out_dims[axes[i]] = sizes[i];
        p->scale[axes[i]] = in > 0 ? (double)sizes[i] / (double)in : 1.0;
        if (in < 0) {
            p->out_dims[axes[i]] = larger || smaller ? -1 : sizes[i];
            keep = NAN;
        } else if (larger ? p->scale[axes[i]] < keep : p->scale[axes[i]] > keep) {
            keep = p->scale[axes[i]];
        }
    }
    if (!larger && !smaller) return AF_OK;
    for (int i = 0; i < n; i++) {
        if (isnan(keep)) continue;
        p->scale[axes[i]] = keep;
        p->out_dims[axes[i]] = (int64_t)(keep * (double)x->dims[axes[i]] + 0.5); /* round half up */
    }
    return AF_OK;
}

af_status af_resize_params_of(const af_op_ctx *c, const af_tensor *x, af_resize_params *p, bool *known) {
    memset(p, 0, sizeof *p);
    af_status st = read_attrs(c, p);
    if (st) return st;
    int rank = x->rank, axes[AF_MAX_RANK], n = 0;
    p->rank = rank;
    for (int i = 0; i < rank; i++) {
        p->out_dims[i] = x->dims[i];
        p->scale[i] = 1.0;
        p->roi_start[i] = 0.0;
        p->roi_end[i] = 1.0;
    }
    if ((st = read_axes(c, rank, axes, &n))) return st;
    bool v10 = c->opset < 11;
    const af_tensor *scales = given(c, v10 ? 1 : 2), *sizes = v10 ? NULL : given(c, 3);
    const af_tensor *roi = v10 ? NULL : given(c, 1);
    if (scales && sizes) return af_ctx_fail(c, AF_ERR_INVALID_MODEL, "scales and sizes are both given");
    if (!scales && !sizes) return af_ctx_fail(c, AF_ERR_INVALID_MODEL, "needs scales or sizes");
    *known = af_movement_known(scales ? scales : sizes);
    if (!*known) {
        for (int i = 0; i < n; i++) p->out_dims[axes[i]] = -1;
        return AF_OK;
    }
    if (p->coord == AF_RESIZE_TF_CROP_AND_RESIZE && af_movement_known(roi)) {
        if (af_tensor_numel(roi) != 2 * n)
            return af_ctx_fail(c, AF_ERR_INVALID_MODEL, "roi has %lld values for %d axes",
                               (long long)af_tensor_numel(roi), n);
        for (int i = 0; i < n; i++) {
            p->roi_start[axes[i]] = af_tensor_get_f64(roi, i);
            p->roi_end[axes[i]] = af_tensor_get_f64(roi, n + i);
        }
    }
    if (sizes) return from_sizes(c, x, sizes, axes, n, p);
    if (af_tensor_numel(scales) != n || scales->rank != 1)
        return af_ctx_fail(c, AF_ERR_INVALID_MODEL, "scales has %lld values for %d axes",
                           (long long)af_tensor_numel(scales), n);
    for (int i = 0; i < n; i++) {
        double s = af_tensor_get_f64(scales, i);
        int64_t in = x->dims[axes[i]];
        if (!(s > 0) || !isfinite(s))
            return af_ctx_fail(c, AF_ERR_INVALID_MODEL, "scale %g is not positive", s);
        p->scale[axes[i]] = s;
        double out = floor((double)in * s);
        if (out > 1e18) return af_ctx_fail(c, AF_ERR_LIMIT, "resized axis %d is too large", axes[i]);
        p->out_dims[axes[i]] = in < 0 ? -1 : (int64_t)out;
    }
    return AF_OK;
}

af_status af_infer_RESIZE(af_op_ctx *c) {
    const af_tensor *x = af_ctx_input(c, 0);
    af_tensor *out = af_ctx_output(c, 0);
    if (!x || !out) return af_ctx_fail(c, AF_ERR_INVALID_MODEL, "needs input X and an output");
    af_status st = af_movement_check_dtype(c, x, "X");
    if (st) return st;
    af_resize_params p;
    if (x->rank < 0) {
        memset(&p, 0, sizeof p);
        if ((st = read_attrs(c, &p))) return st;
        af_movement_unknown(out, x->dtype, -1);
        return AF_OK;
    }
    bool known;
    if ((st = af_resize_params_of(c, x, &p, &known))) return st;
    if (p.mode != AF_RESIZE_NEAREST && (x->dtype == AF_DTYPE_BOOL))
        return af_ctx_fail(c, AF_ERR_UNSUPPORTED, "linear and cubic Resize of bool is not supported");
    af_shape_copy(out, x);
    for (int i = 0; i < x->rank; i++) out->dims[i] = p.out_dims[i];
    return af_movement_check_numel(c, out->rank, out->dims);
}
