/* The current plan state of a session, swapped under runs in flight. */
#include "runtime/plan_slot.h"

#include <sched.h>

#include "util/alloc.h"

struct af_plan_slot {
    _Atomic(af_plan_state *) current; /* holds one reference */
    atomic_flag lock;                 /* guards load + retain against exchange + release */
};

af_plan_slot *af_plan_slot_new(af_plan_state *ps) {
    af_plan_slot *slot = af_calloc(1, sizeof *slot);
    if (!slot) return NULL;
    atomic_init(&slot->current, ps);
    atomic_flag_clear(&slot->lock);
    return slot;
}

/* A spinlock, not a mutex: the critical sections are a few instructions, and it cannot fail to
 * initialize. A holder that was preempted is waited out by yielding. */
static void slot_lock(af_plan_slot *slot) {
    while (atomic_flag_test_and_set_explicit(&slot->lock, memory_order_acquire)) sched_yield();
}

static void slot_unlock(af_plan_slot *slot) { atomic_flag_clear_explicit(&slot->lock, memory_order_release); }

af_plan_state *af_plan_slot_acquire(af_plan_slot *slot) {
    slot_lock(slot);
    af_plan_state *ps = atomic_load_explicit(&slot->current, memory_order_relaxed);
    af_plan_state_retain(ps);
    slot_unlock(slot);
    return ps;
}

void af_plan_slot_publish(af_plan_slot *slot, af_plan_state *ps) {
    slot_lock(slot);
    af_plan_state *old = atomic_exchange_explicit(&slot->current, ps, memory_order_relaxed);
    slot_unlock(slot);
    af_plan_state_release(old); /* outside the lock: freeing a plan takes a while */
}

void af_plan_slot_free(af_plan_slot *slot) {
    if (!slot) return;
    af_plan_state_release(atomic_load_explicit(&slot->current, memory_order_relaxed));
    af_free(slot);
}
