/*
 * The elastic arena: the memory plan redone for the sizes a session's dynamic values actually
 * take (config `shape_elasticity`). A plan sizes only values whose shapes are static; a value with
 * a symbolic dimension (a dynamic batch or sequence) goes to the heap on every run. After a run in
 * which such a value found no slot, the session plans its values again with each dynamic one at
 * the largest size it took times (1 + shape_elasticity) and runs on that arena from then on: a
 * dimension may grow by that fraction before the plan is redone. Smaller sizes fit their slots.
 *
 *   af_elastic_arena ea = {0};
 *   af_elastic_arena_begin(&ea, g, ps, err);     // per run: resets it if ps is a new plan state
 *   e.memory = ea.arena ? &ea.memory : &ps->memory; ...; e.observed = ea.observed;
 *   e.outgrown = &ea.outgrown;
 *   af_exec_run(&e, err);
 *   af_elastic_arena_update(&ea, g, ps, err);    // after a good run: replan if outgrown
 *   af_elastic_arena_free(&ea);
 */
#ifndef AF_RUNTIME_ELASTIC_ARENA_H
#define AF_RUNTIME_ELASTIC_ARENA_H

#include <stdbool.h>

#include "runtime/plan_state.h"

typedef struct af_elastic_arena {
    uint64_t planned_for;             /* the id of the state its plan extends (a replan
                                         invalidates it; ids, unlike addresses, never recur) */
    af_memory_plan memory;            /* valid when arena is not NULL */
    uint8_t *arena;
    size_t *observed;                 /* per value: the most bytes a dynamic value took this run */
    int n_values;
    bool outgrown;                    /* a dynamic value found no slot this run */
    int replans;                      /* times the plan was made (for reports and tests) */
} af_elastic_arena;

af_status af_elastic_arena_begin(af_elastic_arena *ea, const af_graph *g, const af_plan_state *ps, af_error *err);
/* After a successful run: when a dynamic value outgrew its slot, plans again (a plan over
 * ps's activation limits is not made: the values stay on the heap). */
af_status af_elastic_arena_update(af_elastic_arena *ea, const af_graph *g, const af_plan_state *ps, af_error *err);
void af_elastic_arena_free(af_elastic_arena *ea);

#endif
