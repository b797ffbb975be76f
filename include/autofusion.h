/*
 * autofusion: load ONNX models, fuse their operators, run them on the CPU.
 *
 *   af_error err;
 *   af_model *model = NULL;
 *   af_session *sess = NULL;
 *   if (af_model_load("model.onnx", NULL, &model, &err) != AF_OK) { puts(err.message); ... }
 *   af_session_options opts = af_session_options_default();
 *   if (af_session_create(model, &opts, &sess, &err) != AF_OK) { ... }
 *   af_tensor in = {.dtype = AF_DTYPE_FLOAT, .rank = 4, .dims = {1, 3, 224, 224}, .data = buf};
 *   const char *names[] = {"input"};
 *   if (af_session_run(sess, 1, names, &in, &err) != AF_OK) { ... }
 *   const af_tensor *out = af_session_output(sess, 0);   // valid until the next run
 *   af_session_free(sess);
 *   af_model_free(model);
 *
 * Every function that can fail returns an af_status and, when `err` is not NULL, fills it with a
 * message naming the node, the tensor and the cause. Nothing aborts on bad input. Free functions
 * accept NULL and cannot fail.
 */
#ifndef AUTOFUSION_H
#define AUTOFUSION_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

#define AF_MAX_RANK 8 /* the highest tensor rank autofusion accepts */

typedef enum af_status {
    AF_OK = 0,
    AF_ERR_INVALID_ARGUMENT, /* a caller passed something unusable (NULL, wrong count) */
    AF_ERR_IO,               /* a file could not be opened, read or written */
    AF_ERR_PARSE,            /* the bytes are not a well-formed ONNX protobuf */
    AF_ERR_INVALID_MODEL,    /* well-formed, but inconsistent (undefined names, cycles, bad shapes) */
    AF_ERR_UNSUPPORTED,      /* valid ONNX that autofusion does not implement */
    AF_ERR_LIMIT,            /* a size limit was exceeded (see the README's limits) */
    AF_ERR_OUT_OF_MEMORY,
    AF_ERR_RUNTIME, /* a failure while running (bad input shape, data-dependent error) */
    AF_STATUS_COUNT
} af_status;

/* Values match ONNX's TensorProto.DataType so files map one to one. */
typedef enum af_dtype {
    AF_DTYPE_UNDEFINED = 0,
    AF_DTYPE_FLOAT = 1,
    AF_DTYPE_UINT8 = 2,
    AF_DTYPE_INT8 = 3,
    AF_DTYPE_UINT16 = 4,
    AF_DTYPE_INT16 = 5,
    AF_DTYPE_INT32 = 6,
    AF_DTYPE_INT64 = 7,
    AF_DTYPE_STRING = 8, /* not supported by the runtime */
    AF_DTYPE_BOOL = 9,   /* one byte per element, 0 or 1 */
    AF_DTYPE_FLOAT16 = 10,
    AF_DTYPE_DOUBLE = 11,
    AF_DTYPE_UINT32 = 12,
    AF_DTYPE_UINT64 = 13,
    AF_DTYPE_BFLOAT16 = 16,
    AF_DTYPE_MAX = 17
} af_dtype;

typedef struct af_error {
    af_status status;
    char message[512];
} af_error;

/* A dense, row-major tensor. Who owns `data` is stated by each function that hands one out. */
typedef struct af_tensor {
    af_dtype dtype;
    int rank;
    int64_t dims[AF_MAX_RANK];
    void *data;
    size_t nbytes; /* bytes at `data`; element count times the dtype's size */
} af_tensor;

/* Describes a graph input or output; dims are -1 where unknown or symbolic. */
typedef struct af_value_info {
    const char *name;  /* owned by the model */
    af_dtype dtype;
    int rank;          /* -1 when unknown */
    int64_t dims[AF_MAX_RANK];
    const char *dim_params[AF_MAX_RANK]; /* symbolic dim names or NULL, owned by the model */
} af_value_info;

typedef struct af_model af_model;
typedef struct af_session af_session;

const char *af_status_name(af_status status);
const char *af_dtype_name(af_dtype dtype);
size_t af_dtype_size(af_dtype dtype); /* 0 for types the runtime does not hold */

/* ---- Models ---------------------------------------------------------------------------------- */

/* Resource limits for untrusted models (docs/security.md). A field left 0 takes its default; a limit
 * that is exceeded fails with AF_ERR_LIMIT and a message naming the limit, before anything of that
 * size is allocated. Load-time limits come from af_load_options.limits; a session uses the model's
 * limits except for the fields its af_session_options.limits sets. */
typedef struct af_limits {
    uint64_t max_file_bytes;        /* size of the model file or buffer (default 2 GiB) */
    int64_t max_nodes;              /* nodes in the model, subgraphs included (default 1000000) */
    int max_rank;                   /* rank of any tensor, 1 to AF_MAX_RANK (default AF_MAX_RANK) */
    int max_graph_depth;            /* nesting of If/Loop subgraphs (default 16) */
    uint64_t max_tensor_bytes;      /* one tensor: a stored one, a statically shaped value, or one
                                       made while running (Expand, Tile, ConstantOfShape, Resize,
                                       Reshape, ...) (default 4 GiB) */
    uint64_t max_initializer_bytes; /* all stored tensors together: initializers, Constant nodes,
                                       tensor attributes, external data included (default 8 GiB) */
    uint64_t max_fold_bytes;        /* a constant-folding result larger than this stays unfolded
                                       (default 64 MiB) */
    uint64_t max_activation_bytes;  /* activation arena plus kernel scratch of a session's plan
                                       (default 16 GiB) */
    int64_t max_attr_elems;         /* elements of one ints/floats/strings attribute (default 1000000) */
    uint64_t max_string_bytes;      /* one name or string attribute (default 65536) */
    int64_t max_loop_iterations;    /* iterations of one Loop node per run (default 100000000) */
} af_limits;

/* Every field set to its default. */
af_limits af_limits_default(void);

typedef struct af_load_options {
    int fold_constants;     /* fold constant subgraphs at load (default 1) */
    uint64_t max_file_bytes; /* 0 = limits.max_file_bytes; kept for compatibility */
    af_limits limits;       /* zero fields take their defaults */
} af_load_options;

af_load_options af_load_options_default(void);

/* Loads an ONNX model; external data is read from files in the model's folder only.
 * On success *out is a new model the caller frees with af_model_free. opts may be NULL.
 * The file is mapped while it loads (its weights are copied out one at a time, so they are not
 * held twice): truncating it meanwhile from elsewhere faults, as with any mapped file. */
af_status af_model_load(const char *path, const af_load_options *opts, af_model **out, af_error *err);
/* As af_model_load, from memory. base_dir locates external data; NULL forbids external data. */
af_status af_model_load_buffer(const void *data, size_t size, const char *base_dir,
                               const af_load_options *opts, af_model **out, af_error *err);
/* Writes the model's graph back as an ONNX file with all tensors inline. */
af_status af_model_save(const af_model *model, const char *path, af_error *err);
void af_model_free(af_model *model);

int af_model_n_inputs(const af_model *model);
int af_model_n_outputs(const af_model *model);
/* Fills *info for input/output i; returns AF_ERR_INVALID_ARGUMENT when i is out of range. */
af_status af_model_input_info(const af_model *model, int i, af_value_info *info);
af_status af_model_output_info(const af_model *model, int i, af_value_info *info);
int af_model_opset(const af_model *model);

/* Summary figures for `autofusion inspect`. */
typedef struct af_model_stats {
    int n_nodes;
    int64_t n_params;      /* elements in constant tensors */
    double flops;          /* multiply-adds count as 2; from static shapes, 0 where unknown */
    int n_op_types;
    const char *op_types[256]; /* owned by the library, static strings */
    int op_counts[256];
} af_model_stats;
void af_model_get_stats(const af_model *model, af_model_stats *stats);

/* ---- Sessions -------------------------------------------------------------------------------- */

typedef struct af_session_options {
    int n_threads;         /* 0 = the cores this process may use */
    int fusion_level;      /* -1 (default): the config's (3 unless it says otherwise); 0 = no fusion;
                              1-3 (docs/config.md) */
    const char *config_path; /* fusion config JSON (docs/config.md); NULL: the defaults */
    int reference_kernels; /* 1 = run only the plain reference kernels (the correctness oracle) */
    const char *isa;       /* NULL or "": the best the CPU has (the AF_ISA environment variable may
                              lower it); "avx512", "avx2" or "scalar" to force a lower level */
    af_limits limits;      /* zero fields: the limits the model was loaded with; the session uses
                              max_tensor_bytes, max_activation_bytes, max_loop_iterations, max_rank */
} af_session_options;

af_session_options af_session_options_default(void);

/* Creates a session over `model`; the model must outlive the session. Several sessions may share
 * one model and run at the same time from different threads. A session runs one inference at a
 * time: a call to af_session_run while another is running on the same session fails with
 * AF_ERR_INVALID_ARGUMENT ("already running") instead of corrupting it. */
af_status af_session_create(const af_model *model, const af_session_options *opts, af_session **out,
                            af_error *err);
/* As af_session_create, but the session takes ownership of the model (af_session_free frees it)
 * and drops the model's copy of every weight its kernels hold packed, each as soon as its kernel
 * is built, so weights are in memory once even while the plan is built. On failure the model is
 * still the caller's to free, but weights packed before the failure may be gone from it: then
 * af_session_create and af_model_save refuse it (AF_ERR_INVALID_ARGUMENT); load it again. */
af_status af_session_create_owning(af_model *model, const af_session_options *opts, af_session **out,
                                   af_error *err);
/* Runs the graph. inputs[i] is bound to the graph input called names[i]; every graph input without a
 * default initializer must be given. Input data is read, never kept. */
af_status af_session_run(af_session *session, int n_inputs, const char *const *names,
                         const af_tensor *inputs, af_error *err);
/* Builds a new execution plan for the session (the fusion pass, the memory plan, the fused
 * kernels) beside the current one and swaps it in; it never waits for a run in flight, nor
 * blocks one. config_path: a fusion config (docs/config.md), NULL for the defaults; fusion_level:
 * -1 for the config's, 0 to 3 as in af_session_options. The session keeps its threads, ISA,
 * limits and reference_kernels. A run that started before the swap finishes on the old plan,
 * which is freed when the last such run ends; runs that start after it use the new one. On
 * failure (a bad config, a limit, out of memory) the current plan stays as it was and err says
 * why. Until the old plan is freed both plans' memory (arenas, packed weights) is held. Calls from
 * several threads at once take turns; the one-run-at-a-time rule of af_session_run is unchanged.
 * A session made by af_session_create_owning released its weights after packing them, so it
 * cannot build kernels again: AF_ERR_INVALID_ARGUMENT (create it with af_session_create). */
af_status af_session_replan(af_session *session, const char *config_path, int fusion_level, af_error *err);
int af_session_n_outputs(const af_session *session);
/* Output i of the last successful run, owned by the session and valid until the next run or free.
 * The next run writes its outputs into these buffers where they fit; a run that fails while
 * running leaves the ones it had started writing absent (NULL). */
const af_tensor *af_session_output(const af_session *session, int i);
const char *af_session_output_name(const af_session *session, int i);
/* The calls below, up to af_session_isa, describe the current plan (the newest af_session_replan
 * published) and are safe to call while the session runs or replans. */
/* Bytes of the activation arena the memory plan reserves (0 before any plan exists). */
size_t af_session_arena_bytes(const af_session *session);
/* Writes the fusion report (groups, rejected candidates with reasons, the pass's time) to out. */
void af_session_fusion_report(const af_session *session, FILE *out);
/* Milliseconds the fusion pass took (pattern + cost + schedule); 0 at level 0. */
double af_session_fusion_ms(const af_session *session);
/* Bytes of activations the plan's steps read and write between kernels per run, from static shapes
 * (constants excluded; dynamic dims count as unknown and are left out). */
uint64_t af_session_traffic_bytes(const af_session *session);
/* The fusion level the session's plan was built at. */
int af_session_fusion_level(const af_session *session);
/* Steps in the execution plan (nodes when unfused). */
int af_session_n_steps(const af_session *session);
/* What the plan keeps besides activations and scratch, measured while it was built: bytes of
 * weights its kernels hold (packed, folded or copied; the session's own copies of the model's
 * constants), and of everything else, the engine's metadata (steps, fused groups, epilogue
 * programs, the fusion report, lifetimes and memory plan). Also the model's constants' bytes.
 * The split counts kernel-held weights that a kernel does not report as metadata, so it errs high;
 * a build while other threads of the process allocate is counted approximately. */
typedef struct af_plan_memory {
    size_t kernel_weight_bytes;
    size_t metadata_bytes;
    size_t model_constant_bytes;
    size_t elastic_arena_bytes; /* the arena planned for dynamic values' run-time sizes (config
                                   shape_elasticity; 0: none yet, or a static model) */
    int elastic_replans;        /* how often it was planned: once, plus once per growth beyond it */
    size_t workspace_bytes;     /* the kernels' scratch the plan reserves beside the arena */
    size_t thread_scratch_bytes; /* scratch the session's thread pool keeps for its threads, grown
                                    by runs to what their kernels asked for (0 before the first) */
} af_plan_memory;
af_plan_memory af_session_plan_memory(const af_session *session);
/* The instruction-set level the session's kernels use: "avx512", "avx2" or "scalar". */
const char *af_session_isa(const af_session *session);
/* The threads the session's kernels run on, the caller's included (0 for NULL). */
int af_session_n_threads(const af_session *session);
/* Profiling: while on, every run adds each plan step's wall time to a per-step total (turning it
 * on clears the totals; a replan starts fresh totals, its steps being others).
 * af_session_profile_write prints the current plan's totals per run: every step with its ops, then
 * the time per op type (unfused) or per fusion rule, largest first. af_session_profile_write_json
 * writes the same per step as one JSON object (no newline): {"runs", "ms_per_run", "threads",
 * "idle_share", "steps": [{"step", "ms", "share", "gflops", "idle_share", "ops", "node", "kernel",
 * "kind"}]}, per run; gflops null where a step has no contractions, idle_share null on one
 * thread; null where nothing was profiled. */
af_status af_session_set_profiling(af_session *session, int on, af_error *err);
void af_session_profile_write(const af_session *session, FILE *out);
void af_session_profile_write_json(const af_session *session, FILE *out);
void af_session_free(af_session *session);

/* ---- Tensor files (ONNX TensorProto, the backend test data format) --------------------------- */

/* Reads a serialized TensorProto. On success out->data is malloc'd and owned by the caller (free it
 * with af_tensor_free_data); *name_out, if not NULL, receives a malloc'd copy of the name or NULL. */
af_status af_tensor_read_pb(const char *path, af_tensor *out, char **name_out, af_error *err);
af_status af_tensor_write_pb(const char *path, const af_tensor *t, const char *name, af_error *err);
void af_tensor_free_data(af_tensor *t);

#ifdef __cplusplus
}
#endif
#endif
