/*
 * The slot holding a session's current plan state. A run acquires the current state (a reference
 * of its own) and runs on it to the end; a replan publishes a new one, and the old state lives on
 * until the runs that hold it finish. Neither side ever waits for a run.
 *
 *   af_plan_slot *slot = af_plan_slot_new(ps);        // takes over the caller's reference to ps
 *   af_plan_state *cur = af_plan_slot_acquire(slot);  // ... run on cur ...
 *   af_plan_state_release(cur);
 *   af_plan_slot_publish(slot, next);                 // takes over next; drops the slot's old one
 *   af_plan_slot_free(slot);
 *
 * The race: between loading the pointer and taking a reference, a publish could drop the last
 * reference and free the state. A spinlock held for exactly those two steps (and for the
 * exchange in publish) closes it: the slot's own reference is dropped only after the pointer has
 * left the slot, so every reader that saw the pointer already holds a reference. The lock is never
 * held while building, running or freeing a plan, so waiting on it costs a few instructions.
 */
#ifndef AF_RUNTIME_PLAN_SLOT_H
#define AF_RUNTIME_PLAN_SLOT_H

#include "runtime/plan_state.h"

typedef struct af_plan_slot af_plan_slot;

/* NULL when out of memory (ps is then still the caller's). */
af_plan_slot *af_plan_slot_new(af_plan_state *ps);
/* The current state with one more reference, which the caller drops with af_plan_state_release. */
af_plan_state *af_plan_slot_acquire(af_plan_slot *slot);
/* Makes ps current (the slot takes over the caller's reference) and drops the slot's reference to
 * the one it replaces, which is freed here unless a run still holds it. */
void af_plan_slot_publish(af_plan_slot *slot, af_plan_state *ps);
/* Drops the slot's reference. Accepts NULL. */
void af_plan_slot_free(af_plan_slot *slot);

#endif
