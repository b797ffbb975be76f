/* The broadcasting index iterator (see broadcast.h). */
#include "kernels/ref/broadcast.h"

#include "ir/tensor.h"

bool af_bcast_init(af_bcast_iter *it, int rank, const int64_t *dims, int n_inputs,
                   const af_tensor *const *inputs) {
    if (n_inputs < 1 || n_inputs > AF_BCAST_MAX_INPUTS || rank < 0 || rank > AF_MAX_RANK) return false;
    it->n_inputs = n_inputs;
    it->rank = rank;
    it->numel = af_dims_numel(rank, dims);
    if (it->numel < 0) return false;
    for (int d = 0; d < rank; d++) {
        it->dims[d] = dims[d];
        it->index[d] = 0;
    }
    for (int k = 0; k < n_inputs; k++) {
        const af_tensor *t = inputs[k];
        if (!t || t->rank < 0 || t->rank > rank) return false;
        it->offset[k] = 0;
        int off = rank - t->rank;
        int64_t stride = 1;
        for (int d = rank - 1; d >= 0; d--) {
            int64_t in_dim = d < off ? 1 : t->dims[d - off];
            if (in_dim == dims[d]) {
                it->strides[k][d] = in_dim == 1 ? 0 : stride;
            } else if (in_dim == 1) {
                it->strides[k][d] = 0;
            } else {
                return false;
            }
            stride *= in_dim;
        }
    }
    return true;
}
