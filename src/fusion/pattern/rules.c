/* Rule templates: parses the rules text format (docs/rules.md) into compiled rules, checks each
 * rule's structure, and manages rule sets (built-in, from files, from the config). */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fusion/pattern/pattern.h"
#include "fusion/pattern/rules_internal.h"
#include "util/alloc.h"
#include "util/error.h"

#define MAX_LINE 1024
#define MAX_TOKENS 32
#define MAX_RULES_FILE_BYTES (1 << 20)

typedef enum tok_kind { TOK_WORD, TOK_CMP, TOK_EQ, TOK_PUNCT, TOK_STRING } tok_kind;

typedef struct token {
    tok_kind kind;
    af_cmp cmp;     /* TOK_CMP */
    char text[128]; /* word, string contents, or the punctuation character */
} token;

typedef struct parser {
    const char *origin;
    int line;
    af_error *err;
    af_rule *rule; /* the rule being read (rs->rules[rs->n]), NULL between rules */
    af_rule_set *rs;
    int first;     /* rs->n before this text: rules from here on are this text's */
} parser;

static af_status fail(parser *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static af_status fail(parser *p, const char *fmt, ...) {
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return af_errorf(p->err, AF_ERR_INVALID_ARGUMENT, "%s:%d: %s", p->origin, p->line, msg);
}

/* ---- lexing ---------------------------------------------------------------------------------- */

static bool is_word_char(const char *s) {
    switch (*s) {
    case 0: case ' ': case '\t': case '\r': case '=': case '<': case '>': case '[': case ']': case '(': case ')':
    case ',': case '"':
        return false;
    case '!': return s[1] != '=';
    default: return true;
    }
}

static af_status lex(parser *p, const char *line, token *toks, int *n_toks) {
    int n = 0;
    const char *s = line;
    for (;;) {
        while (*s == ' ' || *s == '\t' || *s == '\r') s++;
        if (!*s || *s == '#') break;
        if (n == MAX_TOKENS) return fail(p, "more than %d tokens on one line", MAX_TOKENS);
        token *t = &toks[n++];
        memset(t, 0, sizeof *t);
        size_t len = 0;
        if (*s == '"') {
            const char *e = strchr(s + 1, '"');
            if (!e) return fail(p, "unterminated string");
            len = (size_t)(e - s - 1);
            if (len >= sizeof t->text) return fail(p, "string longer than %zu characters", sizeof t->text - 1);
            t->kind = TOK_STRING;
            memcpy(t->text, s + 1, len);
            s = e + 1;
            continue;
        }
        static const struct {
            const char *text;
            af_cmp cmp;
        } cmps[] = {{"==", AF_CMP_EQ}, {"!=", AF_CMP_NE}, {"<=", AF_CMP_LE},
                    {">=", AF_CMP_GE}, {"<", AF_CMP_LT},  {">", AF_CMP_GT}};
        bool matched = false;
        for (size_t k = 0; *s && strchr("=!<>", *s) && k < sizeof cmps / sizeof cmps[0] && !matched; k++) {
            size_t l = strlen(cmps[k].text);
            if (!strncmp(s, cmps[k].text, l)) {
                t->kind = TOK_CMP;
                t->cmp = cmps[k].cmp;
                memcpy(t->text, cmps[k].text, l);
                s += l;
                matched = true;
            }
        }
        if (matched) continue;
        if (*s == '=') {
            t->kind = TOK_EQ;
            t->text[0] = '=';
            s++;
            continue;
        }
        if (strchr("[](),", *s)) {
            t->kind = TOK_PUNCT;
            t->text[0] = *s++;
            continue;
        }
        while (is_word_char(s + len)) len++;
        if (len >= sizeof t->text) return fail(p, "word longer than %zu characters", sizeof t->text - 1);
        t->kind = TOK_WORD;
        memcpy(t->text, s, len);
        s += len;
    }
    *n_toks = n;
    return AF_OK;
}

/* ---- pieces ---------------------------------------------------------------------------------- */

static bool valid_id(const char *s) {
    if (!*s || !(*s == '_' || (*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z'))) return false;
    for (; *s; s++)
        if (!(*s == '_' || (*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9')))
            return false;
    return true;
}

static int find_node(const af_rule *r, const char *id) {
    for (int i = 0; i < r->n_nodes; i++)
        if (!strcmp(r->nodes[i].id, id)) return i;
    return -1;
}

/* A non-negative index: "0", "12". */
static bool parse_index(const char *s, int *out) {
    if (!*s || strlen(s) > 4) return false;
    int v = 0;
    for (; *s; s++) {
        if (*s < '0' || *s > '9') return false;
        v = v * 10 + (*s - '0');
    }
    *out = v;
    return true;
}

static af_status lookup_node(parser *p, const char *id, int *out) {
    *out = find_node(p->rule, id);
    if (*out < 0) return fail(p, "unknown node '%s' (declare it with 'node' first)", id);
    return AF_OK;
}

/* Splits "a.b.c" into at most 3 parts (written into buf). */
static int split_dots(char *buf, char **parts) {
    int n = 0;
    parts[n++] = buf;
    for (char *c = buf; *c; c++)
        if (*c == '.') {
            *c = 0;
            if (n == 3) return 4;
            parts[n++] = c + 1;
        }
    return n;
}

static af_status parse_number(parser *p, const char *s, double *out) {
    char *end = NULL;
    errno = 0;
    double v = strtod(s, &end);
    if (!*s || *end || errno == ERANGE || isnan(v)) return fail(p, "'%s' is not a number", s);
    *out = v;
    return AF_OK;
}

/* A literal at toks[*i]: NUM, [NUM, ...] or "string". */
static af_status parse_literal(parser *p, const token *toks, int n, int *i, af_literal *lit) {
    memset(lit, 0, sizeof *lit);
    if (*i >= n) return fail(p, "expected a value");
    const token *t = &toks[*i];
    if (t->kind == TOK_STRING) {
        lit->kind = AF_LIT_STR;
        snprintf(lit->str, sizeof lit->str, "%s", t->text);
        (*i)++;
        return AF_OK;
    }
    if (t->kind == TOK_PUNCT && t->text[0] == '[') {
        lit->kind = AF_LIT_LIST;
        (*i)++;
        for (;;) {
            if (*i >= n) return fail(p, "unterminated list: expected ']'");
            if (toks[*i].kind == TOK_PUNCT && toks[*i].text[0] == ']' && lit->n == 0) break;
            if (toks[*i].kind != TOK_WORD) return fail(p, "expected a number in the list, got '%s'", toks[*i].text);
            if (lit->n == AF_PAT_MAX_LIST) return fail(p, "a list holds at most %d values", AF_PAT_MAX_LIST);
            af_status st = parse_number(p, toks[*i].text, &lit->list[lit->n++]);
            if (st != AF_OK) return st;
            (*i)++;
            if (*i < n && toks[*i].kind == TOK_PUNCT && toks[*i].text[0] == ',') {
                (*i)++;
                continue;
            }
            if (*i < n && toks[*i].kind == TOK_PUNCT && toks[*i].text[0] == ']') break;
            return fail(p, "expected ',' or ']' in the list");
        }
        (*i)++;
        return AF_OK;
    }
    if (t->kind != TOK_WORD) return fail(p, "expected a value, got '%s'", t->text);
    lit->kind = AF_LIT_NUM;
    (*i)++;
    return parse_number(p, t->text, &lit->num);
}

/* ---- statements ------------------------------------------------------------------------------ */

static af_status parse_rule_header(parser *p, const token *toks, int n) {
    if (p->rule) return fail(p, "'rule' inside rule '%s' (missing 'end')", p->rule->name);
    if (n != 3 || toks[1].kind != TOK_WORD || toks[2].kind != TOK_WORD)
        return fail(p, "expected 'rule NAME FAMILY'");
    if (!valid_id(toks[1].text) || strlen(toks[1].text) >= sizeof p->rule->name)
        return fail(p, "bad rule name '%s' (letters, digits and '_', at most 63)", toks[1].text);
    int fam = af_fusion_family_parse(toks[2].text);
    if (fam < 0) {
        char list[256] = "";
        for (int f = 0; f < AF_FUSION_FAMILY_COUNT; f++)
            snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", f ? ", " : "",
                     af_fusion_family_name((af_fusion_family)f));
        return fail(p, "unknown family '%s' (expected one of %s)", toks[2].text, list);
    }
    af_rule_set *rs = p->rs;
    for (int i = 0; i < rs->n; i++) {
        const af_rule *o = &rs->rules[i];
        if (strcmp(o->name, toks[1].text)) continue;
        if (i >= p->first) return fail(p, "rule '%s' is defined twice (first at line %d)", toks[1].text, o->line);
        return fail(p, "rule '%s' is already defined in %s:%d", toks[1].text, o->file, o->line);
    }
    if (rs->n == rs->cap) {
        int cap = rs->cap ? rs->cap * 2 : 16;
        af_rule *r = af_realloc(rs->rules, (size_t)cap * sizeof *r);
        if (!r) return af_errorf(p->err, AF_ERR_OUT_OF_MEMORY, "%s: out of memory reading rules", p->origin);
        rs->rules = r;
        rs->cap = cap;
    }
    af_rule *r = &rs->rules[rs->n];
    memset(r, 0, sizeof *r);
    snprintf(r->name, sizeof r->name, "%s", toks[1].text);
    r->family = (af_fusion_family)fam;
    r->anchor = -1;
    snprintf(r->file, sizeof r->file, "%s", p->origin);
    r->line = p->line;
    p->rule = r;
    return AF_OK;
}

static af_status parse_class(parser *p, const char *name, unsigned *classes) {
    static const char *const names[][2] = {{"elementwise", NULL},         {"broadcast", NULL},
                                           {"injective", NULL},           {"reduction", NULL},
                                           {"many_to_many", "many-to-many"}, {"opaque", NULL}};
    for (int c = 0; c < (int)(sizeof names / sizeof names[0]); c++)
        if (!strcmp(name, names[c][0]) || (names[c][1] && !strcmp(name, names[c][1]))) {
            *classes |= 1u << c;
            return AF_OK;
        }
    return fail(p, "unknown op class '@%s' (expected @elementwise, @broadcast, @injective, @reduction, "
                   "@many_to_many or @opaque)",
                name);
}

static af_status parse_node(parser *p, const token *toks, int n) {
    af_rule *r = p->rule;
    if (n != 3 || toks[1].kind != TOK_WORD || toks[2].kind != TOK_WORD) return fail(p, "expected 'node ID[?] OPS'");
    if (r->n_nodes == AF_PAT_MAX_NODES) return fail(p, "a rule has at most %d nodes", AF_PAT_MAX_NODES);
    char id[128];
    snprintf(id, sizeof id, "%s", toks[1].text);
    size_t len = strlen(id);
    bool optional = len > 0 && id[len - 1] == '?';
    if (optional) id[len - 1] = 0;
    if (!valid_id(id) || strlen(id) >= AF_PAT_ID_LEN)
        return fail(p, "bad node id '%s' (letters, digits and '_', at most %d)", id, AF_PAT_ID_LEN - 1);
    if (!strcmp(id, "attr") || !strcmp(id, "in") || !strcmp(id, "min") || !strcmp(id, "max"))
        return fail(p, "'%s' is reserved and cannot name a node", id);
    if (find_node(r, id) >= 0) return fail(p, "node '%s' is declared twice", id);
    af_pnode *pn = &r->nodes[r->n_nodes];
    memset(pn, 0, sizeof *pn);
    snprintf(pn->id, sizeof pn->id, "%s", id);
    pn->optional = optional;
    pn->primary = -1;
    pn->line = p->line;
    char buf[128];
    snprintf(buf, sizeof buf, "%s", toks[2].text);
    for (char *save = NULL, *alt = strtok_r(buf, "|", &save); alt; alt = strtok_r(NULL, "|", &save)) {
        af_status st;
        if (alt[0] == '@') {
            if ((st = parse_class(p, alt + 1, &pn->classes)) != AF_OK) return st;
            continue;
        }
        af_op op = af_op_from_name(alt);
        if (op == AF_OP_UNKNOWN) return fail(p, "unknown op '%s'", alt);
        if (pn->n_ops == AF_PAT_MAX_ALTS) return fail(p, "at most %d op alternatives per node", AF_PAT_MAX_ALTS);
        pn->ops[pn->n_ops++] = (short)op;
    }
    if (!pn->n_ops && !pn->classes) return fail(p, "node '%s' has no op", id);
    r->n_nodes++;
    return AF_OK;
}

static af_status parse_anchor(parser *p, const token *toks, int n) {
    if (n != 2 || toks[1].kind != TOK_WORD) return fail(p, "expected 'anchor ID'");
    if (p->rule->anchor >= 0) return fail(p, "the rule already has an anchor");
    int a;
    af_status st = lookup_node(p, toks[1].text, &a);
    if (st != AF_OK) return st;
    if (p->rule->nodes[a].optional) return fail(p, "the anchor '%s' cannot be optional", toks[1].text);
    p->rule->anchor = a;
    return AF_OK;
}

/* "ID", "ID:K" (output K), "ID.K" or "ID.in" (the value input K of ID reads). */
static af_status parse_source(parser *p, const char *text, af_pref *ref) {
    char buf[128];
    snprintf(buf, sizeof buf, "%s", text);
    memset(ref, 0, sizeof *ref);
    char *colon = strchr(buf, ':'), *dot = strchr(buf, '.');
    if (colon && dot) return fail(p, "bad source '%s'", text);
    af_status st;
    if (colon) {
        *colon = 0;
        ref->kind = AF_PREF_OUTPUT;
        if (!parse_index(colon + 1, &ref->index) || ref->index >= 16) return fail(p, "bad output index in '%s'", text);
    } else if (dot) {
        *dot = 0;
        ref->kind = AF_PREF_INPUT;
        if (!strcmp(dot + 1, "in")) ref->index = 0;
        else if (!parse_index(dot + 1, &ref->index) || ref->index >= 64)
            return fail(p, "bad input index in '%s'", text);
    }
    if ((st = lookup_node(p, buf, &ref->node)) != AF_OK) return st;
    return AF_OK;
}

static af_status parse_edge(parser *p, const token *toks, int n) {
    af_rule *r = p->rule;
    if (n != 4 || toks[1].kind != TOK_WORD || toks[2].kind != TOK_EQ || toks[3].kind != TOK_WORD)
        return fail(p, "expected 'edge ID.K = SOURCE'");
    if (r->n_edges == AF_PAT_MAX_EDGES) return fail(p, "a rule has at most %d edges", AF_PAT_MAX_EDGES);
    af_pedge *e = &r->edges[r->n_edges];
    memset(e, 0, sizeof *e);
    e->line = p->line;
    char buf[128];
    snprintf(buf, sizeof buf, "%s", toks[1].text);
    char *dot = strchr(buf, '.');
    if (!dot) return fail(p, "'%s': name the input, as in '%s.0' or '%s.*'", buf, buf, buf);
    *dot = 0;
    af_status st = lookup_node(p, buf, &e->node);
    if (st != AF_OK) return st;
    if (!strcmp(dot + 1, "*")) e->input = -1;
    else if (!strcmp(dot + 1, "in")) e->input = 0;
    else if (!parse_index(dot + 1, &e->input) || e->input >= 64)
        return fail(p, "bad input index in '%s'", toks[1].text);
    if ((st = parse_source(p, toks[3].text, &e->src)) != AF_OK) return st;
    if (e->src.node == e->node) return fail(p, "node '%s' cannot read itself", buf);
    r->n_edges++;
    return AF_OK;
}

static af_status parse_where(parser *p, const token *toks, int n) {
    af_rule *r = p->rule;
    if (n < 3 || toks[1].kind != TOK_WORD) return fail(p, "expected 'where SUBJECT PREDICATE'");
    if (r->n_conds == AF_PAT_MAX_CONDS) return fail(p, "a rule has at most %d conditions", AF_PAT_MAX_CONDS);
    af_pcond *c = &r->conds[r->n_conds];
    memset(c, 0, sizeof *c);
    c->line = p->line;
    char buf[128], *parts[4];
    snprintf(buf, sizeof buf, "%s", toks[1].text);
    int np = split_dots(buf, parts);
    if (np > 3) return fail(p, "bad subject '%s'", toks[1].text);
    af_status st = lookup_node(p, parts[0], &c->node);
    if (st != AF_OK) return st;
    int i = 2;
    if (np == 3) { /* ID.attr.NAME [(DEFAULT)] CMP LITERAL */
        if (strcmp(parts[1], "attr")) return fail(p, "bad subject '%s' (expected ID.attr.NAME)", toks[1].text);
        if (!*parts[2] || strlen(parts[2]) >= sizeof c->attr) return fail(p, "bad attribute name in '%s'", toks[1].text);
        c->kind = AF_COND_ATTR;
        snprintf(c->attr, sizeof c->attr, "%s", parts[2]);
        if (i < n && toks[i].kind == TOK_PUNCT && toks[i].text[0] == '(') {
            i++;
            if ((st = parse_literal(p, toks, n, &i, &c->def)) != AF_OK) return st;
            if (i >= n || toks[i].kind != TOK_PUNCT || toks[i].text[0] != ')')
                return fail(p, "expected ')' after the default of '%s'", toks[1].text);
            i++;
        }
        if (i >= n || toks[i].kind != TOK_CMP) return fail(p, "expected a comparison after '%s'", toks[1].text);
        c->cmp = toks[i++].cmp;
        if ((st = parse_literal(p, toks, n, &i, &c->value)) != AF_OK) return st;
        if (c->value.kind != AF_LIT_NUM && c->cmp != AF_CMP_EQ && c->cmp != AF_CMP_NE)
            return fail(p, "lists and strings compare only with == and !=");
    } else if (np == 2 && (!strcmp(parts[1], "min") || !strcmp(parts[1], "max"))) {
        c->kind = !strcmp(parts[1], "min") ? AF_COND_CLIP_MIN : AF_COND_CLIP_MAX;
        if (toks[i].kind != TOK_CMP) return fail(p, "expected a comparison after '%s'", toks[1].text);
        c->cmp = toks[i++].cmp;
        if ((st = parse_literal(p, toks, n, &i, &c->value)) != AF_OK) return st;
        if (c->value.kind != AF_LIT_NUM) return fail(p, "'%s' compares with a number", toks[1].text);
    } else if (np == 2) { /* ID.K PREDICATE | ID.K CMP NUM */
        if (!strcmp(parts[1], "in")) c->input = 0;
        else if (!parse_index(parts[1], &c->input) || c->input >= 64)
            return fail(p, "bad subject '%s' (expected ID.K, ID.min, ID.max or ID.attr.NAME)", toks[1].text);
        if (toks[i].kind == TOK_CMP) {
            c->kind = AF_COND_VALUE;
            c->cmp = toks[i++].cmp;
            if ((st = parse_literal(p, toks, n, &i, &c->value)) != AF_OK) return st;
            if (c->value.kind != AF_LIT_NUM) return fail(p, "an input value compares with a number");
        } else {
            if (toks[i].kind != TOK_WORD) return fail(p, "expected a predicate after '%s'", toks[1].text);
            const char *pred = toks[i++].text;
            if (*pred == '!') {
                c->negate = true;
                pred++;
            }
            static const struct {
                const char *name;
                af_cond_kind kind;
            } preds[] = {{"const", AF_COND_CONST},
                         {"scalar", AF_COND_SCALAR},
                         {"per_channel", AF_COND_PER_CHANNEL},
                         {"per_last", AF_COND_PER_LAST},
                         {"same_shape", AF_COND_SAME_SHAPE}};
            int found = -1;
            for (int k = 0; k < (int)(sizeof preds / sizeof preds[0]); k++)
                if (!strcmp(pred, preds[k].name)) found = k;
            if (found < 0)
                return fail(p, "unknown predicate '%s' (expected const, scalar, per_channel, per_last or same_shape)",
                            pred);
            c->kind = preds[found].kind;
        }
    } else { /* ID single */
        const char *pred = toks[i++].text;
        if (toks[i - 1].kind != TOK_WORD) return fail(p, "expected a predicate after '%s'", toks[1].text);
        if (*pred == '!') {
            c->negate = true;
            pred++;
        }
        if (strcmp(pred, "single")) return fail(p, "unknown node predicate '%s' (expected single)", pred);
        c->kind = AF_COND_SINGLE;
    }
    if (i != n) return fail(p, "unexpected '%s' at the end of the condition", toks[i].text);
    r->n_conds++;
    return AF_OK;
}

/* ---- whole-rule checks ----------------------------------------------------------------------- */

static af_status finish_rule(parser *p) {
    af_rule *r = p->rule;
    if (r->n_nodes < 2) return fail(p, "rule '%s' needs at least two nodes (one node is nothing to fuse)", r->name);
    if (r->anchor < 0) return fail(p, "rule '%s' has no anchor", r->name);
    /* The search order: breadth-first from the anchor over edges in either direction. */
    bool seen[AF_PAT_MAX_NODES] = {false};
    int n_order = 0;
    r->order[n_order++] = r->anchor;
    seen[r->anchor] = true;
    for (int head = 0; head < n_order; head++) {
        int x = r->order[head];
        for (int k = 0; k < r->n_edges; k++) {
            const af_pedge *e = &r->edges[k];
            int other = e->node == x ? e->src.node : e->src.node == x ? e->node : -1;
            if (other >= 0 && !seen[other]) {
                seen[other] = true;
                r->order[n_order++] = other;
            }
        }
    }
    for (int i = 0; i < r->n_nodes; i++)
        if (!seen[i]) return fail(p, "rule '%s': node '%s' is not connected to the anchor", r->name, r->nodes[i].id);
    /* Producer -> consumer edges must not form a cycle (Kahn's algorithm). */
    int indeg[AF_PAT_MAX_NODES] = {0}, queue[AF_PAT_MAX_NODES], nq = 0;
    for (int k = 0; k < r->n_edges; k++)
        if (r->edges[k].src.kind == AF_PREF_OUTPUT) indeg[r->edges[k].node]++;
    for (int i = 0; i < r->n_nodes; i++)
        if (!indeg[i]) queue[nq++] = i;
    for (int h = 0; h < nq; h++)
        for (int k = 0; k < r->n_edges; k++)
            if (r->edges[k].src.kind == AF_PREF_OUTPUT && r->edges[k].src.node == queue[h] &&
                --indeg[r->edges[k].node] == 0)
                queue[nq++] = r->edges[k].node;
    if (nq < r->n_nodes)
        for (int i = 0; i < r->n_nodes; i++)
            if (indeg[i]) return fail(p, "rule '%s': the pattern has a cycle through node '%s'", r->name, r->nodes[i].id);
    /* An absent optional node passes on the value of its first declared input edge. */
    for (int k = r->n_edges - 1; k >= 0; k--) r->nodes[r->edges[k].node].primary = k;
    p->rule = NULL;
    p->rs->n++;
    return AF_OK;
}

static af_status parse_line(parser *p, char *line) {
    token toks[MAX_TOKENS];
    int n = 0;
    af_status st = lex(p, line, toks, &n);
    if (st != AF_OK || n == 0) return st;
    if (toks[0].kind != TOK_WORD) return fail(p, "expected a keyword, got '%s'", toks[0].text);
    const char *kw = toks[0].text;
    if (!strcmp(kw, "rule")) return parse_rule_header(p, toks, n);
    if (!p->rule) return fail(p, "'%s' outside a rule (start one with 'rule NAME FAMILY')", kw);
    if (!strcmp(kw, "node")) return parse_node(p, toks, n);
    if (!strcmp(kw, "anchor")) return parse_anchor(p, toks, n);
    if (!strcmp(kw, "edge")) return parse_edge(p, toks, n);
    if (!strcmp(kw, "where")) return parse_where(p, toks, n);
    if (!strcmp(kw, "end")) {
        if (n != 1) return fail(p, "unexpected '%s' after 'end'", toks[1].text);
        return finish_rule(p);
    }
    return fail(p, "unknown keyword '%s' (expected rule, node, anchor, edge, where or end)", kw);
}

/* ---- rule sets ------------------------------------------------------------------------------- */

af_status af_rules_new(af_rule_set **out, af_error *err) {
    if (!out) return af_errorf(err, AF_ERR_INVALID_ARGUMENT, "af_rules_new: NULL argument");
    *out = af_calloc(1, sizeof **out);
    return *out ? AF_OK : af_errorf(err, AF_ERR_OUT_OF_MEMORY, "out of memory creating a rule set");
}

void af_rules_free(af_rule_set *rs) {
    if (!rs) return;
    af_free(rs->rules);
    af_free(rs);
}

int af_rules_count(const af_rule_set *rs) { return rs ? rs->n : 0; }

const char *af_rules_name(const af_rule_set *rs, int i) {
    return rs && i >= 0 && i < rs->n ? rs->rules[i].name : NULL;
}

af_status af_rules_parse(af_rule_set *rs, const char *text, const char *origin, af_error *err) {
    if (!rs || !text) return af_errorf(err, AF_ERR_INVALID_ARGUMENT, "af_rules_parse: NULL argument");
    parser p = {.origin = origin ? origin : "<rules>", .err = err, .rs = rs, .first = rs->n};
    af_status st = AF_OK;
    const char *s = text;
    while (*s && st == AF_OK) {
        const char *end = strchr(s, '\n');
        size_t len = end ? (size_t)(end - s) : strlen(s);
        p.line++;
        char line[MAX_LINE];
        if (len >= sizeof line) {
            st = fail(&p, "line longer than %d characters", MAX_LINE - 1);
            break;
        }
        memcpy(line, s, len);
        line[len] = 0;
        st = parse_line(&p, line);
        s += len + (end ? 1 : 0);
    }
    if (st == AF_OK && p.rule) st = fail(&p, "rule '%s' is not closed with 'end'", p.rule->name);
    if (st != AF_OK) rs->n = p.first; /* rules are plain data: dropping them is enough */
    return st;
}

af_status af_rules_load_file(af_rule_set *rs, const char *path, af_error *err) {
    if (!rs || !path) return af_errorf(err, AF_ERR_INVALID_ARGUMENT, "af_rules_load_file: NULL argument");
    FILE *f = fopen(path, "rb");
    if (!f) return af_errorf(err, AF_ERR_IO, "%s: cannot open rules file: %s", path, strerror(errno));
    char *text = af_malloc(MAX_RULES_FILE_BYTES + 1);
    if (!text) {
        fclose(f);
        return af_errorf(err, AF_ERR_OUT_OF_MEMORY, "%s: out of memory reading rules", path);
    }
    size_t n = fread(text, 1, MAX_RULES_FILE_BYTES + 1, f);
    bool bad = ferror(f);
    fclose(f);
    af_status st;
    if (bad) st = af_errorf(err, AF_ERR_IO, "%s: cannot read rules file", path);
    else if (n > MAX_RULES_FILE_BYTES) st = af_errorf(err, AF_ERR_LIMIT, "%s: rules file over 1 MiB", path);
    else if (memchr(text, 0, n)) st = af_errorf(err, AF_ERR_INVALID_ARGUMENT, "%s: the file holds a NUL byte", path);
    else {
        text[n] = 0;
        st = af_rules_parse(rs, text, path, err);
    }
    af_free(text);
    return st;
}

af_status af_rules_builtin(af_rule_set **out, af_error *err) {
    af_status st = af_rules_new(out, err);
    for (int i = 0; st == AF_OK && af_rules_builtin_names[i]; i++)
        st = af_rules_parse(*out, af_rules_builtin_texts[i], af_rules_builtin_names[i], err);
    if (st != AF_OK && out) {
        af_rules_free(*out);
        *out = NULL;
    }
    return st;
}

af_status af_rules_from_config(const af_fusion_config *cfg, af_rule_set **out, af_error *err) {
    af_status st = af_rules_builtin(out, err);
    for (int i = 0; st == AF_OK && cfg && i < cfg->n_rule_files && i < AF_CONFIG_MAX_RULE_FILES; i++)
        if (cfg->rule_files[i]) st = af_rules_load_file(*out, cfg->rule_files[i], err);
    if (st != AF_OK && out) {
        af_rules_free(*out);
        *out = NULL;
    }
    return st;
}
