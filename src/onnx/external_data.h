/*
 * Reads tensor bytes stored outside the model file. The location is untrusted: it must be a
 * relative path that stays inside the model's folder (no absolute paths, no "..", no symlink
 * leading out), must name a regular file, and offset+length must lie within it.
 */
#ifndef AF_ONNX_EXTERNAL_DATA_H
#define AF_ONNX_EXTERNAL_DATA_H

#include <stdint.h>

#include "autofusion.h"

/* Reads `size` bytes at `offset` of base_dir/location into dst (dst NULL: only checks that they
 * exist, so untrusted sizes are validated before anything is allocated). length < 0 means "to the end";
 * otherwise it must equal size. */
af_status af_external_data_read(const char *base_dir, const char *location, int64_t offset, int64_t length,
                                void *dst, size_t size, af_error *err);

#endif
