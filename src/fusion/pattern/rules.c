/* Rule templates: parsing the rules text format (docs/rules.md) into op sets. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fusion/pattern/pattern_internal.h"
#include "util/alloc.h"
#include "util/error.h"

/* rules/cv.rules and rules/nlp.rules, embedded at build time (see the Makefile). */
extern const char af_builtin_rules[];

static af_status line_error(af_error *err, const char *origin, int line, const char *fmt, const char *what) {
    char msg[256];
    snprintf(msg, sizeof msg, fmt, what);
    return af_errorf(err, AF_ERR_INVALID_ARGUMENT, "%s:%d: %s", origin, line, msg);
}

/* Parses "Relu|Clip|@elementwise" into an op set. */
static af_status parse_ops(const char *text, af_op_set *set, const char *origin, int line, af_error *err) {
    memset(set, 0, sizeof *set);
    char buf[512];
    snprintf(buf, sizeof buf, "%s", text);
    for (char *save = NULL, *tok = strtok_r(buf, "|", &save); tok; tok = strtok_r(NULL, "|", &save)) {
        if (tok[0] == '@') {
            static const char *const classes[] = {"elementwise", "broadcast", "injective", "reduction", "many-to-many",
                                                  "opaque"};
            int found = -1;
            for (int c = 0; c < 6; c++)
                if (!strcmp(tok + 1, classes[c])) found = c;
            if (found < 0) return line_error(err, origin, line, "unknown op class '%s'", tok);
            set->classes |= 1u << found;
            continue;
        }
        af_op op = af_op_from_name(tok);
        if (op == AF_OP_UNKNOWN) return line_error(err, origin, line, "unknown op '%s'", tok);
        set->ops[op] = true;
    }
    return AF_OK;
}

af_status af_rules_parse(af_rule_set *rs, const char *text, const char *origin, af_error *err) {
    int line_no = 0;
    const char *p = text;
    while (*p) {
        const char *end = strchr(p, '\n');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        char line[1024];
        line_no++;
        if (len >= sizeof line) return line_error(err, origin, line_no, "line longer than %s characters", "1023");
        memcpy(line, p, len);
        line[len] = 0;
        p += len + (end ? 1 : 0);
        char *hash = strchr(line, '#');
        if (hash) *hash = 0;
        char *fields[8];
        int n = 0;
        for (char *save = NULL, *tok = strtok_r(line, " \t\r", &save); tok && n < 8; tok = strtok_r(NULL, " \t\r", &save))
            fields[n++] = tok;
        if (n == 0) continue;
        if (n < 3) return line_error(err, origin, line_no, "a rule needs a family, a name and %s", "anchor=...");
        if (rs->n == AF_MAX_RULES) return line_error(err, origin, line_no, "more than %s rules", "64");
        af_rule *r = &rs->rules[rs->n];
        memset(r, 0, sizeof *r);
        r->max_nodes = AF_FUSION_MAX_NODES;
        int fam = af_fusion_family_parse(fields[0]);
        if (fam < 0) return line_error(err, origin, line_no, "unknown family '%s'", fields[0]);
        r->family = (af_fusion_family)fam;
        snprintf(r->name, sizeof r->name, "%s", fields[1]);
        bool have_anchor = false;
        for (int i = 2; i < n; i++) {
            char *eq = strchr(fields[i], '=');
            if (!eq) return line_error(err, origin, line_no, "expected key=value, got '%s'", fields[i]);
            *eq = 0;
            const char *key = fields[i], *val = eq + 1;
            af_status st = AF_OK;
            if (!strcmp(key, "anchor")) {
                st = parse_ops(val, &r->anchor, origin, line_no, err);
                have_anchor = true;
            } else if (!strcmp(key, "tail")) {
                st = parse_ops(val, &r->tail, origin, line_no, err);
            } else if (!strcmp(key, "residual")) {
                r->residual = !strcmp(val, "1");
                if (strcmp(val, "0") && strcmp(val, "1")) return line_error(err, origin, line_no, "residual is 0 or 1, not '%s'", val);
            } else if (!strcmp(key, "max")) {
                char *e;
                errno = 0;
                long m = strtol(val, &e, 10);
                if (errno || *e || m < 1 || m > AF_FUSION_MAX_NODES)
                    return line_error(err, origin, line_no, "max must be 1 to 64, not '%s'", val);
                r->max_nodes = (int)m;
            } else if (!strcmp(key, "structure")) {
                if (strcmp(val, "attention")) return line_error(err, origin, line_no, "unknown structure '%s'", val);
                r->structure = AF_STRUCTURE_ATTENTION;
            } else {
                return line_error(err, origin, line_no, "unknown key '%s'", key);
            }
            if (st != AF_OK) return st;
        }
        if (!have_anchor) return line_error(err, origin, line_no, "rule '%s' has no anchor=", r->name);
        rs->n++;
    }
    return AF_OK;
}

af_status af_rules_builtin(af_rule_set **out, af_error *err) {
    *out = af_calloc(1, sizeof **out);
    if (!*out) return af_errorf(err, AF_ERR_OUT_OF_MEMORY, "out of memory loading rules");
    af_status st = af_rules_parse(*out, af_builtin_rules, "built-in rules", err);
    if (st != AF_OK) {
        af_rules_free(*out);
        *out = NULL;
    }
    return st;
}

af_status af_rules_load_file(af_rule_set *rs, const char *path, af_error *err) {
    FILE *f = fopen(path, "rb");
    if (!f) return af_errorf(err, AF_ERR_IO, "cannot open rules file '%s': %s", path, strerror(errno));
    char *text = af_malloc(1 << 20);
    if (!text) {
        fclose(f);
        return af_errorf(err, AF_ERR_OUT_OF_MEMORY, "out of memory reading '%s'", path);
    }
    size_t n = fread(text, 1, (1 << 20) - 1, f);
    bool too_big = n == (1 << 20) - 1 && fgetc(f) != EOF;
    fclose(f);
    text[n] = 0;
    af_status st = too_big ? af_errorf(err, AF_ERR_LIMIT, "rules file '%s' is larger than 1 MiB", path)
                           : af_rules_parse(rs, text, path, err);
    af_free(text);
    return st;
}

int af_rules_count(const af_rule_set *rs) { return rs ? rs->n : 0; }

void af_rules_free(af_rule_set *rs) { af_free(rs); }
