/*
 * Resource limits (af_limits in the public header): defaults, and filling the fields a caller left
 * at 0. Every limit is documented with its default in docs/security.md.
 *
 *   af_limits lim;
 *   af_limits_resolve(opts ? &opts->limits : NULL, &lim);   // zero fields become defaults
 */
#ifndef AF_UTIL_LIMITS_H
#define AF_UTIL_LIMITS_H

#include "autofusion.h"

#define AF_LIMIT_MAX_GRAPH_DEPTH 256 /* max_graph_depth is clamped to this: the parser recurses */

/* *out = in with every 0 field replaced by its default (in may be NULL); max_rank is clamped to
 * [1, AF_MAX_RANK] and max_graph_depth to [1, AF_LIMIT_MAX_GRAPH_DEPTH]. */
void af_limits_resolve(const af_limits *in, af_limits *out);
/* *out = base with every non-zero field of over replacing it (over may be NULL). */
void af_limits_override(const af_limits *base, const af_limits *over, af_limits *out);

#endif
