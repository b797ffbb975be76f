/*
 * Error reporting: every failing call fills an af_error with a status and a message that names the
 * node, the tensor and the cause.
 *
 *   return af_errorf(err, AF_ERR_INVALID_MODEL, "node '%s' (%s): input '%s' is undefined", ...);
 */
#ifndef AF_UTIL_ERROR_H
#define AF_UTIL_ERROR_H

#include "autofusion.h"

/* Sets err (if not NULL) and returns status, so callers can `return af_errorf(...)`. */
af_status af_errorf(af_error *err, af_status status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Prepends "prefix: " to an existing message, keeping its status; returns the status. */
af_status af_error_prefix(af_error *err, af_status status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif
