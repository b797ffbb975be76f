#include "onnx/external_data.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/error.h"

static int has_dotdot_component(const char *p) {
    const char *s = p;
    while (*s) {
        const char *e = strchr(s, '/');
        size_t n = e ? (size_t)(e - s) : strlen(s);
        if (n == 2 && s[0] == '.' && s[1] == '.') return 1;
        if (!e) break;
        s = e + 1;
    }
    return 0;
}

af_status af_external_data_read(const char *base_dir, const char *location, int64_t offset, int64_t length,
                                void *dst, size_t size, af_error *err) {
    if (!location || !*location) return af_errorf(err, AF_ERR_INVALID_MODEL, "external data has no location");
    if (!base_dir) return af_errorf(err, AF_ERR_INVALID_MODEL, "external data '%s' is not allowed here", location);
    if (location[0] == '/' || strchr(location, '\\') || has_dotdot_component(location))
        return af_errorf(err, AF_ERR_INVALID_MODEL,
                         "external data location '%s' must be a relative path inside the model's folder",
                         location);
    if (offset < 0) return af_errorf(err, AF_ERR_INVALID_MODEL, "external data '%s': negative offset", location);
    if (length >= 0 && (uint64_t)length != size)
        return af_errorf(err, AF_ERR_INVALID_MODEL, "external data '%s': length %lld, tensor needs %zu bytes",
                         location, (long long)length, size);

    char path[PATH_MAX], real_base[PATH_MAX], real_path[PATH_MAX];
    if (snprintf(path, sizeof path, "%s/%s", base_dir, location) >= (int)sizeof path)
        return af_errorf(err, AF_ERR_INVALID_MODEL, "external data location '%s' is too long", location);
    if (!realpath(base_dir, real_base))
        return af_errorf(err, AF_ERR_IO, "cannot resolve model folder '%s': %s", base_dir, strerror(errno));
    if (!realpath(path, real_path))
        return af_errorf(err, AF_ERR_IO, "external data '%s': %s", location, strerror(errno));
    if (strcmp(real_path, real_base) == 0) /* "." or "sub/..": the folder itself */
        return af_errorf(err, AF_ERR_INVALID_MODEL, "external data '%s' is not a regular file", location);
    size_t nb = strlen(real_base);
    if (strncmp(real_path, real_base, nb) != 0 || (real_path[nb] != '/' && strcmp(real_base, "/") != 0))
        return af_errorf(err, AF_ERR_INVALID_MODEL, "external data '%s' resolves outside the model's folder",
                         location);

    int fd = open(real_path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return af_errorf(err, AF_ERR_IO, "external data '%s': %s", location, strerror(errno));
    af_status st = AF_OK;
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        st = af_errorf(err, AF_ERR_INVALID_MODEL, "external data '%s' is not a regular file", location);
        goto done;
    }
    if (sb.st_nlink > 1) { /* a hard link may point at any file on the same filesystem */
        st = af_errorf(err, AF_ERR_INVALID_MODEL, "external data '%s' has several hard links", location);
        goto done;
    }
    if ((uint64_t)offset > (uint64_t)sb.st_size || size > (uint64_t)sb.st_size - (uint64_t)offset) {
        st = af_errorf(err, AF_ERR_INVALID_MODEL,
                       "external data '%s': %zu bytes at offset %lld pass the end of the %lld-byte file",
                       location, size, (long long)offset, (long long)sb.st_size);
        goto done;
    }
    if (!dst) goto done; /* a check before the caller allocates `size` bytes */
    size_t got = 0;
    while (got < size) {
        ssize_t r = pread(fd, (char *)dst + got, size - got, (off_t)(offset + (int64_t)got));
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) {
            st = af_errorf(err, AF_ERR_IO, "external data '%s': short read", location);
            goto done;
        }
        got += (size_t)r;
    }
done:
    close(fd);
    return st;
}
