/*
 * The fusion configuration: defaults, the JSON reader (libcjson, allocating through af_malloc so
 * out-of-memory tests reach it) and af_parse_size. docs/config.md documents every key.
 */
#include "fusion/config.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "fusion/pattern/pattern.h"
#include "util/alloc.h"
#include "util/error.h"

#define CONFIG_MAX_FILE_BYTES (16u << 20)     /* a config is a few hundred bytes; this stops /dev/zero */
#define JSON_MAX_EXACT_INT 9007199254740992.0 /* 2^53: larger JSON numbers may have been rounded */

static const char *const policy_names[] = {
    [AF_POLICY_ALWAYS] = "always",
    [AF_POLICY_MEMORY_AWARE] = "memory_aware",
    [AF_POLICY_AGGRESSIVE] = "aggressive",
    [AF_POLICY_NEVER] = "never",
};
_Static_assert(sizeof policy_names / sizeof policy_names[0] == AF_POLICY_COUNT, "one name per policy");

static const char *const strategy_names[] = {
    [AF_STRATEGY_AUTO] = "auto",
    [AF_STRATEGY_CONSERVATIVE] = "conservative",
    [AF_STRATEGY_TEMPORAL] = "temporal",
    [AF_STRATEGY_AGGRESSIVE] = "aggressive",
};
_Static_assert(sizeof strategy_names / sizeof strategy_names[0] == AF_STRATEGY_COUNT,
               "one name per strategy");

const char *af_fusion_policy_name(af_fusion_policy p) {
    return (unsigned)p < AF_POLICY_COUNT ? policy_names[p] : "unknown";
}

const char *af_fusion_strategy_name(af_fusion_strategy s) {
    return (unsigned)s < AF_STRATEGY_COUNT ? strategy_names[s] : "unknown";
}

void af_fusion_config_default(af_fusion_config *cfg) {
    if (!cfg) return;
    memset(cfg, 0, sizeof *cfg);
    cfg->fusion_level = 3;
    cfg->fusion_aggressiveness = 0.5;
    cfg->max_fused_ops = 24; /* BERT's self-attention with its Q, K, V projections is 19 nodes */
    for (int f = 0; f < AF_FUSION_FAMILY_COUNT; f++) cfg->policy[f] = AF_POLICY_MEMORY_AWARE;
    cfg->policy[AF_FUSION_ELEMENTWISE] = AF_POLICY_AGGRESSIVE;
    cfg->max_mem_usage = 0;
    cfg->enable_dynamic_shape = true;
    cfg->shape_elasticity = 0.25;
    cfg->lite_mode = false;
    cfg->strategy = AF_STRATEGY_AUTO;
    cfg->weight_latency = 1.0;
    cfg->weight_memory = 0.25;
    cfg->weight_energy = 0.1;
    cfg->winograd = true;
    cfg->verify = false;
    cfg->verify_rtol = 1e-3;
    cfg->verify_atol = 1e-4;
    cfg->hardware_cache = NULL;
    cfg->peak_gflops = 0;
    cfg->bandwidth_gbs = 0;
}

void af_fusion_config_free(af_fusion_config *cfg) {
    if (!cfg) return;
    for (int i = 0; i < cfg->n_rule_files && i < AF_CONFIG_MAX_RULE_FILES; i++) af_free(cfg->rule_files[i]);
    af_free(cfg->hardware_cache);
    af_fusion_config_default(cfg);
}

af_kernel_choice af_fusion_kernel_choice(const af_fusion_config *cfg, af_isa isa, int n_threads) {
    return (af_kernel_choice){.isa = isa, .n_threads = n_threads, .no_winograd = !cfg->winograd};
}

/* ---- sizes ---- */

typedef enum size_result {
    SIZE_OK,
    SIZE_MALFORMED,
    SIZE_NEGATIVE,
    SIZE_BAD_UNIT,
    SIZE_FRACTION, /* a fraction of a byte: "1.5" or "1.5B" */
    SIZE_OVERFLOW,
} size_result;

static const struct {
    const char *name;
    uint64_t bytes;
} size_units[] = {
    {"B", 1},
    {"KB", 1000ull},
    {"MB", 1000000ull},
    {"GB", 1000000000ull},
    {"TB", 1000000000000ull},
    {"KiB", 1ull << 10},
    {"MiB", 1ull << 20},
    {"GiB", 1ull << 30},
    {"TiB", 1ull << 40},
};
#define SIZE_UNIT_LIST "B, KB, MB, GB, TB, KiB, MiB, GiB, TiB"

static int is_space(char c) { return c == ' ' || c == '\t'; }
static int is_digit(char c) { return c >= '0' && c <= '9'; }
static int is_alpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

static int unit_equal(const char *a, size_t n, const char *b) {
    if (strlen(b) != n) return 0;
    for (size_t i = 0; i < n; i++) {
        char x = a[i], y = b[i];
        if (x >= 'a' && x <= 'z') x = (char)(x - 'a' + 'A');
        if (y >= 'a' && y <= 'z') y = (char)(y - 'a' + 'A');
        if (x != y) return 0;
    }
    return 1;
}

/* [spaces] digits [. digits] [spaces] [unit] [spaces]; the value is exact, a fraction of a byte
 * left over by a unit is rounded down. unit_at and unit_len locate the unit text for messages. */
static size_result size_parse(const char *s, uint64_t *out, const char **unit_at, size_t *unit_len) {
    const char *p = s;
    while (is_space(*p)) p++;
    if (*p == '-') return SIZE_NEGATIVE;
    const char *int_at = p;
    while (is_digit(*p)) p++;
    size_t int_len = (size_t)(p - int_at);
    if (!int_len) return SIZE_MALFORMED;
    const char *frac_at = p;
    size_t frac_len = 0;
    if (*p == '.') {
        frac_at = ++p;
        while (is_digit(*p)) p++;
        frac_len = (size_t)(p - frac_at);
        if (!frac_len) return SIZE_MALFORMED;
    }
    while (is_space(*p)) p++;
    const char *u = p;
    while (is_alpha(*p)) p++;
    size_t ulen = (size_t)(p - u);
    while (is_space(*p)) p++;
    if (*p) return SIZE_MALFORMED;
    if (unit_at) *unit_at = u;
    if (unit_len) *unit_len = ulen;

    uint64_t mult = 1;
    if (ulen) {
        size_t k = 0, n = sizeof size_units / sizeof size_units[0];
        while (k < n && !unit_equal(u, ulen, size_units[k].name)) k++;
        if (k == n) return SIZE_BAD_UNIT;
        mult = size_units[k].bytes;
    }

    uint64_t whole = 0;
    for (size_t i = 0; i < int_len; i++) {
        if (__builtin_mul_overflow(whole, 10u, &whole) ||
            __builtin_add_overflow(whole, (uint64_t)(int_at[i] - '0'), &whole))
            return SIZE_OVERFLOW;
    }
    if (__builtin_mul_overflow(whole, mult, &whole)) return SIZE_OVERFLOW;

    /* floor(mult * 0.d1d2...dn), exactly: long multiplication from the last digit, whose final
     * carry is the integer part. Every intermediate stays below 10 * mult. */
    uint64_t carry = 0;
    int frac_nonzero = 0;
    for (size_t i = frac_len; i-- > 0;) {
        uint64_t d = (uint64_t)(frac_at[i] - '0');
        frac_nonzero |= d != 0;
        carry = (d * mult + carry) / 10;
    }
    if (mult == 1 && frac_nonzero) return SIZE_FRACTION;
    if (__builtin_add_overflow(whole, carry, &whole)) return SIZE_OVERFLOW;
    *out = whole;
    return SIZE_OK;
}

af_status af_parse_size(const char *text, uint64_t *bytes) {
    if (!text || !bytes) return AF_ERR_INVALID_ARGUMENT;
    uint64_t v;
    if (size_parse(text, &v, NULL, NULL) != SIZE_OK) return AF_ERR_INVALID_ARGUMENT;
    *bytes = v;
    return AF_OK;
}

/* ---- cJSON through af_malloc ---- */

/* cJSON reports an allocation failure as a parse failure; this flag tells them apart. */
static _Thread_local bool json_oom;

static void *json_malloc(size_t n) {
    void *p = af_malloc(n);
    if (!p) json_oom = true;
    return p;
}

static void json_free(void *p) { af_free(p); }

static pthread_once_t json_hooks_once = PTHREAD_ONCE_INIT;

/* The hooks are process-wide in cJSON; af_malloc hands out malloc memory, so cJSON objects made
 * before or elsewhere are still freed correctly. */
static void json_install_hooks(void) {
    cJSON_Hooks hooks = {.malloc_fn = json_malloc, .free_fn = json_free};
    cJSON_InitHooks(&hooks);
}

/* ---- strict JSON syntax (RFC 8259) ----
 * cJSON is lenient (it takes "02", raw control characters, "\u0000" that silently cuts a key) and
 * its error offsets are approximate; this pass finds the exact byte and says what was expected,
 * so cJSON only ever sees well-formed text. */

#define JSON_MAX_DEPTH 64

typedef struct json_check {
    const char *s;
    size_t len, pos;
    const char *why; /* set at the first error; pos is then its byte offset */
} json_check;

static int jc_fail(json_check *jc, size_t pos, const char *why) {
    jc->pos = pos;
    jc->why = why;
    return 0;
}

static void jc_space(json_check *jc) {
    while (jc->pos < jc->len) {
        char c = jc->s[jc->pos];
        if (c != ' ' && c != '\t' && c != '\n' && c != '\r') break;
        jc->pos++;
    }
}

static int jc_hex(char c) { return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }

static int jc_string(json_check *jc) {
    size_t start = jc->pos++;
    while (jc->pos < jc->len) {
        unsigned char c = (unsigned char)jc->s[jc->pos];
        if (c == '"') {
            jc->pos++;
            return 1;
        }
        if (c < 0x20) return jc_fail(jc, jc->pos, "control character in a string (escape it)");
        if (c == '\\') {
            char e = jc->pos + 1 < jc->len ? jc->s[jc->pos + 1] : '\0';
            if (e == 'u') {
                for (size_t i = 2; i < 6; i++)
                    if (jc->pos + i >= jc->len || !jc_hex(jc->s[jc->pos + i]))
                        return jc_fail(jc, jc->pos, "\\u needs four hex digits");
                if (!strncmp(jc->s + jc->pos + 2, "0000", 4))
                    return jc_fail(jc, jc->pos, "\\u0000 is not allowed in a string");
                jc->pos += 6;
                continue;
            }
            if (!e || !strchr("\"\\/bfnrt", e)) return jc_fail(jc, jc->pos, "invalid escape in a string");
            jc->pos += 2;
            continue;
        }
        jc->pos++;
    }
    return jc_fail(jc, start, "unterminated string");
}

static int jc_digits(json_check *jc) {
    size_t start = jc->pos;
    while (jc->pos < jc->len && is_digit(jc->s[jc->pos])) jc->pos++;
    return jc->pos > start;
}

static int jc_number(json_check *jc) {
    const char *s = jc->s;
    if (s[jc->pos] == '-') jc->pos++;
    if (jc->pos < jc->len && s[jc->pos] == '0') {
        jc->pos++;
        if (jc->pos < jc->len && is_digit(s[jc->pos]))
            return jc_fail(jc, jc->pos - 1, "a number has a leading zero");
    } else if (!jc_digits(jc)) {
        return jc_fail(jc, jc->pos, "expected a digit");
    }
    if (jc->pos < jc->len && s[jc->pos] == '.') {
        jc->pos++;
        if (!jc_digits(jc)) return jc_fail(jc, jc->pos, "expected a digit after '.'");
    }
    if (jc->pos < jc->len && (s[jc->pos] == 'e' || s[jc->pos] == 'E')) {
        jc->pos++;
        if (jc->pos < jc->len && (s[jc->pos] == '+' || s[jc->pos] == '-')) jc->pos++;
        if (!jc_digits(jc)) return jc_fail(jc, jc->pos, "expected a digit in the exponent");
    }
    return 1;
}

static int jc_value(json_check *jc, int depth);

/* An object or array after its opening bracket; `close` is '}' or ']'. */
static int jc_members(json_check *jc, int depth, char close) {
    int object = close == '}';
    jc->pos++;
    jc_space(jc);
    if (jc->pos < jc->len && jc->s[jc->pos] == close) {
        jc->pos++;
        return 1;
    }
    for (int first = 1;; first = 0) {
        if (object) {
            if (jc->pos >= jc->len || jc->s[jc->pos] != '"')
                return jc_fail(jc, jc->pos,
                               first ? "expected a \"key\" or '}'"
                                     : "expected a \"key\" (no trailing commas)");
            if (!jc_string(jc)) return 0;
            jc_space(jc);
            if (jc->pos >= jc->len || jc->s[jc->pos] != ':')
                return jc_fail(jc, jc->pos, "expected ':' after a key");
            jc->pos++;
        }
        jc_space(jc);
        if (!object && !first && jc->pos < jc->len && jc->s[jc->pos] == ']')
            return jc_fail(jc, jc->pos, "expected a value (no trailing commas)");
        if (!jc_value(jc, depth + 1)) return 0;
        jc_space(jc);
        if (jc->pos < jc->len && jc->s[jc->pos] == ',') {
            jc->pos++;
            jc_space(jc);
            continue;
        }
        if (jc->pos < jc->len && jc->s[jc->pos] == close) {
            jc->pos++;
            return 1;
        }
        return jc_fail(jc, jc->pos, object ? "expected ',' or '}'" : "expected ',' or ']'");
    }
}

static int jc_value(json_check *jc, int depth) {
    if (depth > JSON_MAX_DEPTH) return jc_fail(jc, jc->pos, "nested too deeply");
    if (jc->pos >= jc->len) return jc_fail(jc, jc->pos, "expected a value");
    char c = jc->s[jc->pos];
    if (c == '{') return jc_members(jc, depth, '}');
    if (c == '[') return jc_members(jc, depth, ']');
    if (c == '"') return jc_string(jc);
    if (c == '-' || is_digit(c)) return jc_number(jc);
    static const char *const words[] = {"true", "false", "null"};
    for (int i = 0; i < 3; i++) {
        size_t n = strlen(words[i]);
        if (jc->len - jc->pos >= n && !strncmp(jc->s + jc->pos, words[i], n) &&
            (jc->pos + n == jc->len || !is_alpha(jc->s[jc->pos + n]))) {
            jc->pos += n;
            return 1;
        }
    }
    return jc_fail(jc, jc->pos, "expected a value (an object, array, string, number, true, false or null)");
}

/* AF_OK, or an error naming the line, column and byte offset of the first syntax error. */
static af_status json_check_syntax(const char *json, size_t len, af_error *err) {
    json_check jc = {.s = json, .len = len};
    jc_space(&jc);
    if (jc_value(&jc, 0)) {
        jc_space(&jc);
        if (jc.pos == jc.len) return AF_OK;
        jc_fail(&jc, jc.pos, "unexpected text after the JSON value");
    }
    int line = 1, col = 1;
    for (size_t i = 0; i < jc.pos; i++) {
        if (json[i] == '\n') {
            line++;
            col = 1;
        } else {
            col++;
        }
    }
    return af_errorf(err, AF_ERR_INVALID_ARGUMENT, "invalid JSON at line %d, column %d (byte %zu): %s%s",
                     line, col, jc.pos, jc.pos >= len ? "unexpected end of text; " : "", jc.why);
}

/* ---- the parser ---- */

typedef struct cfg_parser {
    af_fusion_config next; /* the result; replaces *cfg only when everything parsed */
    const char *base_dir;  /* the config file's folder with its trailing '/', or NULL */
    size_t base_len;
    bool rules_new, cache_new; /* next owns new rule_files / hardware_cache strings */
    bool check_rules;          /* open and parse each rules file (a loaded config file) */
    af_error *err;
} cfg_parser;

typedef struct key_handler key_handler;
struct key_handler {
    const char *name;
    af_status (*fn)(cfg_parser *p, const cJSON *v, const char *path, const key_handler *k);
    size_t arg;    /* field offset in af_fusion_config, or a family index */
    double lo, hi; /* bounds for numbers; hi = INFINITY for none */
};

/* "a string", or the number itself, for "expected X, got Y" messages. */
static const char *describe(const cJSON *v, char *buf, size_t n) {
    if (cJSON_IsNumber(v)) {
        snprintf(buf, n, "%g", v->valuedouble);
        return buf;
    }
    if (cJSON_IsString(v)) {
        snprintf(buf, n, "the string \"%.48s\"", v->valuestring);
        return buf;
    }
    if (cJSON_IsBool(v)) return cJSON_IsTrue(v) ? "true" : "false";
    if (cJSON_IsNull(v)) return "null";
    if (cJSON_IsArray(v)) return "an array";
    if (cJSON_IsObject(v)) return "an object";
    return "an invalid value";
}

static af_status bad_type(cfg_parser *p, const cJSON *v, const char *path, const char *expected) {
    char buf[96];
    return af_errorf(p->err, AF_ERR_INVALID_ARGUMENT, "%s: expected %s, got %s", path, expected,
                     describe(v, buf, sizeof buf));
}

static af_status out_of_memory(cfg_parser *p, const char *path) {
    return af_errorf(p->err, AF_ERR_OUT_OF_MEMORY, "%s: out of memory", path);
}

static void join_path(char *buf, size_t n, const char *parent, const char *key) {
    if (parent[0])
        snprintf(buf, n, "%s.%s", parent, key);
    else
        snprintf(buf, n, "%s", key);
}

static void join_names(char *buf, size_t n, const char *const *names, int count) {
    size_t used = 0;
    buf[0] = '\0';
    for (int i = 0; i < count && used < n; i++) {
        int w = snprintf(buf + used, n - used, "%s%s", i ? ", " : "", names[i]);
        if (w < 0) break;
        used += (size_t)w;
    }
}

/* Checks that obj is an object whose keys each have a handler and appear once, then runs the
 * handlers in document order, so the first error in the file is the one reported. */
static af_status parse_object(cfg_parser *p, const cJSON *obj, const char *path, const key_handler *keys,
                              int n_keys) {
    if (!cJSON_IsObject(obj)) return bad_type(p, obj, path[0] ? path : "the configuration", "an object");
    for (const cJSON *c = obj->child; c; c = c->next) {
        char sub[256];
        join_path(sub, sizeof sub, path, c->string);
        for (const cJSON *prev = obj->child; prev != c; prev = prev->next)
            if (!strcmp(prev->string, c->string))
                return af_errorf(p->err, AF_ERR_INVALID_ARGUMENT, "%s: duplicate key", sub);
        int k = 0;
        while (k < n_keys && strcmp(keys[k].name, c->string)) k++;
        if (k == n_keys) {
            const char *names[32];
            int n = n_keys < 32 ? n_keys : 32;
            for (int i = 0; i < n; i++) names[i] = keys[i].name;
            char list[384];
            join_names(list, sizeof list, names, n);
            return af_errorf(p->err, AF_ERR_INVALID_ARGUMENT, "%s: unknown key (expected one of %s)", sub,
                             list);
        }
        af_status st = keys[k].fn(p, c, sub, &keys[k]);
        if (st != AF_OK) return st;
    }
    return AF_OK;
}

static void *field(cfg_parser *p, const key_handler *k) { return (char *)&p->next + k->arg; }

static af_status h_bool(cfg_parser *p, const cJSON *v, const char *path, const key_handler *k) {
    if (!cJSON_IsBool(v)) return bad_type(p, v, path, "true or false");
    *(bool *)field(p, k) = cJSON_IsTrue(v);
    return AF_OK;
}

static af_status h_int(cfg_parser *p, const cJSON *v, const char *path, const key_handler *k) {
    char expected[64];
    snprintf(expected, sizeof expected, "an integer from %g to %g", k->lo, k->hi);
    if (!cJSON_IsNumber(v)) return bad_type(p, v, path, expected);
    double d = v->valuedouble;
    if (!(d >= k->lo && d <= k->hi) || d != floor(d)) return bad_type(p, v, path, expected);
    *(int *)field(p, k) = (int)d;
    return AF_OK;
}

static af_status h_number(cfg_parser *p, const cJSON *v, const char *path, const key_handler *k) {
    char expected[64];
    if (isinf(k->hi))
        snprintf(expected, sizeof expected, "a finite number >= %g", k->lo);
    else
        snprintf(expected, sizeof expected, "a number from %g to %g", k->lo, k->hi);
    if (!cJSON_IsNumber(v)) return bad_type(p, v, path, expected);
    double d = v->valuedouble;
    if (!isfinite(d) || !(d >= k->lo && d <= k->hi)) return bad_type(p, v, path, expected);
    *(double *)field(p, k) = d;
    return AF_OK;
}

static const char *op_alias(const char *name) {
    if (!strcmp(name, "LayerNorm")) return "LayerNormalization";
    if (!strcmp(name, "BatchNorm")) return "BatchNormalization";
    return name;
}

static af_status h_no_fusion_ops(cfg_parser *p, const cJSON *v, const char *path, const key_handler *k) {
    (void)k;
    if (!cJSON_IsArray(v)) return bad_type(p, v, path, "an array of ONNX op type names");
    bool set[AF_OP_COUNT] = {0};
    int i = 0;
    for (const cJSON *e = v->child; e; e = e->next, i++) {
        char sub[256];
        snprintf(sub, sizeof sub, "%s[%d]", path, i);
        if (!cJSON_IsString(e)) return bad_type(p, e, sub, "an ONNX op type name (a string)");
        af_op op = af_op_from_name(op_alias(e->valuestring));
        if (op == AF_OP_UNKNOWN)
            return af_errorf(p->err, AF_ERR_INVALID_ARGUMENT, "%s: '%.64s' is not a known ONNX op type", sub,
                             e->valuestring);
        set[op] = true;
    }
    memcpy(p->next.no_fusion_ops, set, sizeof set);
    return AF_OK;
}

static af_status parse_enum(cfg_parser *p, const cJSON *v, const char *path, const char *const *names, int n,
                            int *out) {
    char list[160];
    join_names(list, sizeof list, names, n);
    if (cJSON_IsString(v)) {
        for (int i = 0; i < n; i++) {
            if (!strcmp(names[i], v->valuestring)) {
                *out = i;
                return AF_OK;
            }
        }
        return af_errorf(p->err, AF_ERR_INVALID_ARGUMENT, "%s: '%.64s' is not one of %s", path,
                         v->valuestring, list);
    }
    char expected[192];
    snprintf(expected, sizeof expected, "one of %s", list);
    return bad_type(p, v, path, expected);
}

static af_status h_policy(cfg_parser *p, const cJSON *v, const char *path, const key_handler *k) {
    int pol;
    af_status st = parse_enum(p, v, path, policy_names, AF_POLICY_COUNT, &pol);
    if (st == AF_OK) p->next.policy[k->arg] = (af_fusion_policy)pol;
    return st;
}

static af_status h_fusion_policy(cfg_parser *p, const cJSON *v, const char *path, const key_handler *k) {
    (void)k;
    key_handler keys[AF_FUSION_FAMILY_COUNT];
    for (int f = 0; f < AF_FUSION_FAMILY_COUNT; f++)
        keys[f] = (key_handler){af_fusion_family_name((af_fusion_family)f), h_policy, (size_t)f, 0, 0};
    return parse_object(p, v, path, keys, AF_FUSION_FAMILY_COUNT);
}

static af_status h_strategy(cfg_parser *p, const cJSON *v, const char *path, const key_handler *k) {
    (void)k;
    int s;
    af_status st = parse_enum(p, v, path, strategy_names, AF_STRATEGY_COUNT, &s);
    if (st == AF_OK) p->next.strategy = (af_fusion_strategy)s;
    return st;
}

static af_status h_max_mem(cfg_parser *p, const cJSON *v, const char *path, const key_handler *k) {
    (void)k;
    if (cJSON_IsNumber(v)) {
        double d = v->valuedouble;
        if (!(d >= 0) || d != floor(d))
            return bad_type(p, v, path, "a whole number of bytes >= 0 or a size string such as \"1.5GB\"");
        if (d > JSON_MAX_EXACT_INT)
            return af_errorf(p->err, AF_ERR_INVALID_ARGUMENT,
                             "%s: %g is too large to be exact as a JSON number; write it as a string "
                             "such as \"8PiB\" or \"9000TB\"",
                             path, d);
        p->next.max_mem_usage = (uint64_t)d;
        return AF_OK;
    }
    if (!cJSON_IsString(v))
        return bad_type(p, v, path, "a size string such as \"1.5GB\" or a whole number of bytes");
    const char *s = v->valuestring, *unit = NULL;
    size_t unit_len = 0;
    uint64_t bytes = 0;
    switch (size_parse(s, &bytes, &unit, &unit_len)) {
    case SIZE_OK:
        p->next.max_mem_usage = bytes;
        return AF_OK;
    case SIZE_NEGATIVE:
        return af_errorf(p->err, AF_ERR_INVALID_ARGUMENT,
                         "%s: '%.64s' is negative (sizes are >= 0; 0 means no limit)", path, s);
    case SIZE_BAD_UNIT:
        return af_errorf(p->err, AF_ERR_INVALID_ARGUMENT,
                         "%s: '%.64s' has an unknown unit '%.*s' (expected " SIZE_UNIT_LIST ")", path, s,
                         (int)(unit_len < 32 ? unit_len : 32), unit);
    case SIZE_FRACTION:
        return af_errorf(p->err, AF_ERR_INVALID_ARGUMENT, "%s: '%.64s' is not a whole number of bytes", path,
                         s);
    case SIZE_OVERFLOW:
        return af_errorf(p->err, AF_ERR_INVALID_ARGUMENT, "%s: '%.64s' is too large (at most 2^64-1 bytes)",
                         path, s);
    case SIZE_MALFORMED:
        break;
    }
    return af_errorf(p->err, AF_ERR_INVALID_ARGUMENT,
                     "%s: '%.64s' is not a size (expected a number like 512 or 1.5, optionally followed by "
                     "one of " SIZE_UNIT_LIST ")",
                     path, s);
}

static af_status h_resources(cfg_parser *p, const cJSON *v, const char *path, const key_handler *k) {
    (void)k;
    static const key_handler keys[] = {{"max_mem_usage", h_max_mem, 0, 0, 0}};
    return parse_object(p, v, path, keys, 1);
}

/* A path from the config, made relative to the config file's folder unless absolute. NULL on OOM. */
static char *resolve_path(const cfg_parser *p, const char *rel) {
    if (!p->base_len || rel[0] == '/') return af_strdup(rel);
    size_t n = strlen(rel);
    char *s = af_malloc(p->base_len + n + 1);
    if (!s) return NULL;
    memcpy(s, p->base_dir, p->base_len);
    memcpy(s + p->base_len, rel, n + 1);
    return s;
}

/* Each rules file must open and parse, checked when the config is loaded rather than at the first
 * plan, so the error names the key and a bad file fails at every fusion level. The files are read
 * after the built-in rules and in order, as a plan reads them, so a rule name taken twice fails too. */
static af_status check_rule_files(cfg_parser *p, char *const *files, int n, const char *path) {
    af_rule_set *rs = NULL;
    af_status st = af_rules_builtin(&rs, p->err);
    if (st != AF_OK) return af_error_prefix(p->err, st, "%s", path);
    for (int i = 0; i < n && st == AF_OK; i++)
        if ((st = af_rules_load_file(rs, files[i], p->err)) != AF_OK) af_error_prefix(p->err, st, "%s[%d]", path, i);
    af_rules_free(rs);
    return st;
}

static af_status h_rules(cfg_parser *p, const cJSON *v, const char *path, const key_handler *k) {
    (void)k;
    if (!cJSON_IsArray(v)) return bad_type(p, v, path, "an array of rule file paths");
    int n = cJSON_GetArraySize(v);
    if (n > AF_CONFIG_MAX_RULE_FILES)
        return af_errorf(p->err, AF_ERR_INVALID_ARGUMENT, "%s: at most %d rule files, got %d", path,
                         AF_CONFIG_MAX_RULE_FILES, n);
    int i = 0;
    for (const cJSON *e = v->child; e; e = e->next, i++) {
        char sub[256];
        snprintf(sub, sizeof sub, "%s[%d]", path, i);
        if (!cJSON_IsString(e) || !e->valuestring[0]) return bad_type(p, e, sub, "a non-empty file path");
    }
    char *files[AF_CONFIG_MAX_RULE_FILES] = {0};
    i = 0;
    for (const cJSON *e = v->child; e; e = e->next, i++) {
        files[i] = resolve_path(p, e->valuestring);
        if (!files[i]) {
            for (int j = 0; j < i; j++) af_free(files[j]);
            return out_of_memory(p, path);
        }
    }
    af_status st = p->check_rules ? check_rule_files(p, files, n, path) : AF_OK;
    if (st != AF_OK) {
        for (int j = 0; j < n; j++) af_free(files[j]);
        return st;
    }
    if (p->rules_new)
        for (int j = 0; j < p->next.n_rule_files; j++) af_free(p->next.rule_files[j]);
    memcpy(p->next.rule_files, files, sizeof files);
    p->next.n_rule_files = n;
    p->rules_new = true;
    return AF_OK;
}

static af_status h_weights(cfg_parser *p, const cJSON *v, const char *path, const key_handler *k) {
    (void)k;
    static const key_handler keys[] = {
        {"latency", h_number, offsetof(af_fusion_config, weight_latency), 0, INFINITY},
        {"memory", h_number, offsetof(af_fusion_config, weight_memory), 0, INFINITY},
        {"energy", h_number, offsetof(af_fusion_config, weight_energy), 0, INFINITY},
    };
    return parse_object(p, v, path, keys, 3);
}

static af_status h_tolerance(cfg_parser *p, const cJSON *v, const char *path, const key_handler *k) {
    (void)k;
    static const key_handler keys[] = {
        {"rtol", h_number, offsetof(af_fusion_config, verify_rtol), 0, INFINITY},
        {"atol", h_number, offsetof(af_fusion_config, verify_atol), 0, INFINITY},
    };
    return parse_object(p, v, path, keys, 2);
}

static af_status h_cache_file(cfg_parser *p, const cJSON *v, const char *path, const key_handler *k) {
    (void)k;
    char *s = NULL;
    if (!cJSON_IsNull(v)) {
        if (!cJSON_IsString(v) || !v->valuestring[0])
            return bad_type(p, v, path, "a non-empty file path, or null for the default");
        s = resolve_path(p, v->valuestring);
        if (!s) return out_of_memory(p, path);
    }
    if (p->cache_new) af_free(p->next.hardware_cache);
    p->next.hardware_cache = s;
    p->cache_new = true;
    return AF_OK;
}

static af_status h_hardware(cfg_parser *p, const cJSON *v, const char *path, const key_handler *k) {
    (void)k;
    static const key_handler keys[] = {
        {"cache_file", h_cache_file, 0, 0, 0},
        {"peak_gflops", h_number, offsetof(af_fusion_config, peak_gflops), 0, INFINITY},
        {"bandwidth_gbs", h_number, offsetof(af_fusion_config, bandwidth_gbs), 0, INFINITY},
    };
    return parse_object(p, v, path, keys, 3);
}

static const key_handler top_keys[] = {
    {"fusion_level", h_int, offsetof(af_fusion_config, fusion_level), 0, 3},
    {"fusion_aggressiveness", h_number, offsetof(af_fusion_config, fusion_aggressiveness), 0, 1},
    {"max_fused_ops", h_int, offsetof(af_fusion_config, max_fused_ops), 1, AF_FUSION_MAX_NODES},
    {"no_fusion_ops", h_no_fusion_ops, 0, 0, 0},
    {"fusion_policy", h_fusion_policy, 0, 0, 0},
    {"resource_constraints", h_resources, 0, 0, 0},
    {"enable_dynamic_shape", h_bool, offsetof(af_fusion_config, enable_dynamic_shape), 0, 0},
    {"shape_elasticity", h_number, offsetof(af_fusion_config, shape_elasticity), 0, 1},
    {"lite_mode", h_bool, offsetof(af_fusion_config, lite_mode), 0, 0},
    {"strategy", h_strategy, 0, 0, 0},
    {"rules", h_rules, 0, 0, 0},
    {"cost_weights", h_weights, 0, 0, 0},
    {"winograd", h_bool, offsetof(af_fusion_config, winograd), 0, 0},
    {"verify", h_bool, offsetof(af_fusion_config, verify), 0, 0},
    {"verify_tolerance", h_tolerance, 0, 0, 0},
    {"hardware", h_hardware, 0, 0, 0},
};

/* json[len] must be '\0'. base_dir (with its trailing '/') anchors relative paths, or is NULL.
 * check_rules: read each rules file to check it (see check_rule_files). */
static af_status parse_text(const char *json, size_t len, const char *base_dir, size_t base_len, bool check_rules,
                            af_fusion_config *cfg, af_error *err) {
    if (strlen(json) != len) {
        return af_errorf(err, AF_ERR_INVALID_ARGUMENT, "invalid JSON: a NUL byte at byte %zu", strlen(json));
    }
    af_status st = json_check_syntax(json, len, err);
    if (st != AF_OK) return st;
    pthread_once(&json_hooks_once, json_install_hooks);
    json_oom = false;
    /* The length counts the terminator: cJSON then checks that nothing but spaces follows. */
    cJSON *root = cJSON_ParseWithLengthOpts(json, len + 1, NULL, 1);
    if (!root) {
        if (json_oom) return af_errorf(err, AF_ERR_OUT_OF_MEMORY, "out of memory reading the configuration");
        return af_errorf(err, AF_ERR_INVALID_ARGUMENT, "invalid JSON (rejected by cJSON)");
    }

    cfg_parser p = {.next = *cfg, .base_dir = base_dir, .base_len = base_len, .check_rules = check_rules, .err = err};
    st = parse_object(&p, root, "", top_keys, (int)(sizeof top_keys / sizeof top_keys[0]));
    cJSON_Delete(root);
    if (st != AF_OK) {
        if (p.rules_new)
            for (int i = 0; i < p.next.n_rule_files; i++) af_free(p.next.rule_files[i]);
        if (p.cache_new) af_free(p.next.hardware_cache);
        return st;
    }
    if (p.rules_new)
        for (int i = 0; i < cfg->n_rule_files; i++) af_free(cfg->rule_files[i]);
    if (p.cache_new) af_free(cfg->hardware_cache);
    *cfg = p.next;
    return AF_OK;
}

af_status af_fusion_config_parse(const char *json, af_fusion_config *cfg, af_error *err) {
    if (!json || !cfg)
        return af_errorf(err, AF_ERR_INVALID_ARGUMENT, "af_fusion_config_parse: NULL argument");
    return parse_text(json, strlen(json), NULL, 0, false, cfg, err);
}

af_status af_fusion_config_load_file(const char *path, af_fusion_config *cfg, af_error *err) {
    if (!path || !cfg)
        return af_errorf(err, AF_ERR_INVALID_ARGUMENT, "af_fusion_config_load_file: NULL argument");
    FILE *f = fopen(path, "rb");
    if (!f) return af_errorf(err, AF_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    af_status st = AF_OK;
    size_t len = 0, cap = 4096;
    char *buf = af_malloc(cap);
    if (!buf) {
        st = af_errorf(err, AF_ERR_OUT_OF_MEMORY, "%s: out of memory", path);
        goto done;
    }
    for (;;) {
        if (len + 1 == cap) {
            if (cap >= CONFIG_MAX_FILE_BYTES) {
                st = af_errorf(err, AF_ERR_LIMIT, "%s: larger than %u bytes; not a configuration file", path,
                               CONFIG_MAX_FILE_BYTES);
                goto done;
            }
            char *bigger = af_realloc(buf, cap * 2);
            if (!bigger) {
                st = af_errorf(err, AF_ERR_OUT_OF_MEMORY, "%s: out of memory", path);
                goto done;
            }
            buf = bigger;
            cap *= 2;
        }
        size_t got = fread(buf + len, 1, cap - 1 - len, f);
        len += got;
        if (got == 0) break;
    }
    if (ferror(f)) {
        st = af_errorf(err, AF_ERR_IO, "%s: cannot read: %s", path, strerror(errno));
        goto done;
    }
    buf[len] = '\0';
    const char *slash = strrchr(path, '/');
    st = parse_text(buf, len, path, slash ? (size_t)(slash - path) + 1 : 0, true, cfg, err);
    if (st != AF_OK) af_error_prefix(err, st, "%s", path);
done:
    af_free(buf);
    fclose(f);
    return st;
}
