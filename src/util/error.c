#include "util/error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

af_status af_errorf(af_error *err, af_status status, const char *fmt, ...) {
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->message, sizeof err->message, fmt, ap);
        va_end(ap);
        err->status = status;
    }
    return status;
}

af_status af_error_prefix(af_error *err, af_status status, const char *fmt, ...) {
    if (!err) return status;
    char prefix[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    char old[sizeof err->message];
    memcpy(old, err->message, sizeof old);
    snprintf(err->message, sizeof err->message, "%s: %s", prefix, old);
    err->status = status;
    return status;
}

const char *af_status_name(af_status status) {
    static const char *const names[] = {
        [AF_OK] = "ok",
        [AF_ERR_INVALID_ARGUMENT] = "invalid argument",
        [AF_ERR_IO] = "I/O error",
        [AF_ERR_PARSE] = "parse error",
        [AF_ERR_INVALID_MODEL] = "invalid model",
        [AF_ERR_UNSUPPORTED] = "unsupported",
        [AF_ERR_LIMIT] = "limit exceeded",
        [AF_ERR_OUT_OF_MEMORY] = "out of memory",
        [AF_ERR_RUNTIME] = "runtime error",
    };
    _Static_assert(sizeof names / sizeof names[0] == AF_STATUS_COUNT, "one name per status");
    return (unsigned)status < AF_STATUS_COUNT ? names[status] : "unknown status";
}
