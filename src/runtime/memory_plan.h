/*
 * Activation memory plan: every intermediate value with a static size gets an offset in one arena,
 * chosen from its lifetime (producing step .. last reading step) so that values alive at the same
 * time never overlap. Graph inputs, outputs and constants are not in the arena, nor are the
 * intermediates a fused step keeps to itself (they never exist).
 *
 * In place: the output of an unfused elementwise step (a one-to-one float32 op whose kernels, fast
 * and reference, read element i before writing element i and nothing else after) may take the
 * arena slot of an input of the same shape whose last reader is that step, when neither is a
 * graph input, output or constant. So may the output of a fused step over the residual its
 * epilogue adds, under the same conditions, when the step's kernel reads each residual element
 * before writing the output element at its position (af_kernel.residual_in_place) and the
 * residual is not also one of the kernel's inputs: a conv + residual Add (+ ReLU) then streams one
 * tensor through the cache instead of two. So may the output of a Reshape, Flatten, Squeeze,
 * Unsqueeze, Identity or maskless Dropout step, or a Transpose that moves only axes of length 1,
 * over its input (the same bytes under another shape), whose kernels
 * then copy nothing. Such values form one slot that lives from the first's producer to the last's
 * last reader.
 *
 * Within: the inputs of an unfused Concat whose parts are whole runs of its output (every axis
 * before the concatenated one of size 1: channels of one image) live inside the output's slot, at
 * their parts' offsets, when each is read last by the Concat, shares no slot in place, and starts
 * on a 64-byte boundary. Their producers write the output's parts, and the Concat copies nothing.
 * An unfused Concat whose inputs are a run of consecutive inputs of such a Concat (a dense block's
 * layer k reads the block input and layers 1..k-1, the block's last Concat all of them) lives
 * inside that one's output, over its parts: a view, which copies nothing either.
 * Likewise an unfused Slice whose output is one run of its input's bytes (step 1 along one axis,
 * every axis before it of size 1, every axis after it whole: ShuffleNet's channel split) lives
 * inside its input's slot, which then lives as long as the output, and the Slice copies nothing;
 * so does a Gather of one constant index along an axis with every axis before it of size 1
 * (Swin's q, k, v = qkv[0], qkv[1], qkv[2]).
 * A value inside another takes the offset of the one holding it plus its own offset there, after
 * the holder's in-place chain is resolved.
 *
 *   af_lifetimes lt;
 *   af_lifetimes_compute(g, plan, &lt, err);         // or plan NULL: one step per node
 *   af_memory_plan mp;
 *   af_memory_plan_build(g, &lt, &mp, err);          // mp.offset[v] < 0: not planned
 *   ... arena = af_malloc_aligned(mp.arena_bytes) ...
 *   af_memory_plan_free(&mp); af_lifetimes_free(&lt);
 */
#ifndef AF_RUNTIME_MEMORY_PLAN_H
#define AF_RUNTIME_MEMORY_PLAN_H

#include "ir/graph.h"

struct af_exec_plan;

typedef struct af_lifetimes {
    int n_values, n_steps;
    int *first; /* per value: the step that writes it; -1 for values no step writes (inputs,
                   constants, a fused step's intermediates) */
    int *last;  /* per value: the last step reading it (n_steps for graph outputs, -1 if unread) */
    int *alias; /* per value: the input whose arena slot it may reuse (written in place), or -1 */
    int *within; /* per value: the value whose bytes hold it, at within_offset (a Concat's input
                    inside its output), or -1 */
    int64_t *within_offset; /* per value: its byte offset inside within's bytes */
} af_lifetimes;

af_status af_lifetimes_compute(const af_graph *g, const struct af_exec_plan *plan, af_lifetimes *lt, af_error *err);
void af_lifetimes_free(af_lifetimes *lt);

typedef struct af_memory_plan {
    int n_values;
    int64_t *offset;     /* per value: byte offset in the arena, or -1 */
    size_t *size;        /* per value: planned bytes (64-byte rounded), 0 if not planned */
    size_t arena_bytes;  /* the arena's size: the plan's peak */
    size_t live_bound;   /* max over steps of the bytes of the slots live at once (a value written
                            in place shares its input's slot): no placement can do better */
    size_t live_bound_unshared; /* the same counting every value apart (no in-place reuse) */
    int n_inplace;       /* values written in place over an input's slot */
    size_t inplace_bytes; /* their bytes */
} af_memory_plan;

af_status af_memory_plan_build(const af_graph *g, const af_lifetimes *lt, af_memory_plan *plan, af_error *err);
/* The same with sizes for dynamic values: hint[v] bytes (0: not planned) for a value whose size is
 * not static. Hinted values never share a slot in place: at run time their shapes may differ
 * from their input's (a broadcast), where writing over the input would corrupt it. */
af_status af_memory_plan_build_hinted(const af_graph *g, const af_lifetimes *lt, const size_t *hint,
                                      af_memory_plan *plan, af_error *err);
void af_memory_plan_free(af_memory_plan *plan);

#endif
