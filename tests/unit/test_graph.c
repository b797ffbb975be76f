/* Graph IR basics: value lookup, topological sort, cycle detection, dead-code removal. */
#include <stdlib.h>
#include <string.h>

#include "ir/graph.h"
#include "unit.h"

static int add_node(af_graph *g, const char *name, const char *op, int in0, int in1, int out) {
    int n = af_graph_add_node(g, name, op, "", NULL);
    int ins[2] = {in0, in1};
    af_node_set_io(&g->nodes[n], in1 >= 0 ? 2 : 1, ins, 1, &out, NULL);
    return n;
}

AF_TEST(graph_values_are_found_by_name) {
    af_graph *g = af_graph_new(NULL);
    char name[32];
    for (int i = 0; i < 1000; i++) {
        snprintf(name, sizeof name, "v%d", i);
        CHECK_EQ_INT(af_graph_add_value(g, name, NULL), i);
    }
    CHECK_EQ_INT(af_graph_find_value(g, "v0"), 0);
    CHECK_EQ_INT(af_graph_find_value(g, "v777"), 777);
    CHECK_EQ_INT(af_graph_find_value(g, "missing"), -1);
    af_graph_free(g);
}

AF_TEST(graph_toposort_orders_nodes_and_finds_cycles) {
    af_graph *g = af_graph_new(NULL);
    int x = af_graph_add_value(g, "x", NULL), a = af_graph_add_value(g, "a", NULL),
        b = af_graph_add_value(g, "b", NULL);
    g->values[x].kind = AF_VALUE_INPUT;
    add_node(g, "second", "Relu", a, -1, b); /* listed before its producer */
    add_node(g, "first", "Relu", x, -1, a);
    CHECK(af_graph_toposort(g, NULL) == AF_OK);
    CHECK(strcmp(g->nodes[0].name, "first") == 0);
    CHECK_EQ_INT(g->values[b].producer, 1);
    /* make it a cycle: first reads b */
    g->nodes[0].inputs[0] = b;
    af_error err = {0};
    CHECK(af_graph_toposort(g, &err) == AF_ERR_INVALID_MODEL);
    CHECK(strstr(err.message, "cycle") != NULL);
    af_graph_free(g);
}

AF_TEST(graph_remove_dead_keeps_only_what_reaches_outputs) {
    af_graph *g = af_graph_new(NULL);
    int x = af_graph_add_value(g, "x", NULL), a = af_graph_add_value(g, "a", NULL),
        dead = af_graph_add_value(g, "dead", NULL);
    g->values[x].kind = AF_VALUE_INPUT;
    add_node(g, "live", "Relu", x, -1, a);
    add_node(g, "unused", "Relu", x, -1, dead);
    int outs[1] = {a};
    g->outputs = malloc(sizeof outs);
    memcpy(g->outputs, outs, sizeof outs);
    g->n_outputs = 1;
    CHECK(af_graph_toposort(g, NULL) == AF_OK);
    af_graph_remove_dead(g);
    CHECK_EQ_INT(g->n_nodes, 1);
    CHECK(strcmp(g->nodes[0].name, "live") == 0);
    af_graph_free(g);
}
