// One interface for the backends: a table of operations per backend (after oneDNN's primitive
// descriptors), chosen once by Plan::create (choose_backend, src/plan.cpp) and kept in
// PlanImpl::ops. Callers go through the table or read a property it states; no code outside the
// choice asks which backend a plan has. How to add a backend: docs/architecture.md.
#ifndef RNNCORE_SRC_INTERNAL_BACKEND_HPP
#define RNNCORE_SRC_INTERNAL_BACKEND_HPP

#include "src/internal/plan_impl.hpp"

namespace rnncore {
namespace detail {

struct BackendOps {
  Backend kind;  // what Plan::backend() reports
  // Properties.
  bool device_memory;  // packed weights, workspace, reserve and backward workspace are device memory
                       // (Model allocates them with gpu_alloc; forward cannot read the packed header)
  bool thread_pool;    // runs on options.threads (one scratch slot per thread, threaded products)
  bool resets;         // runs per-step state resets (ForwardArgs::resets), forward and backward

  // Planning (Plan::create, after the choice). layout: packed_bytes, ends, ws (and the backend's
  // own part of PlanImpl); `gpu` says where a GPU plan's device part comes from. layout_training
  // (options.training): train (and the backend's own training regions), growing packed_bytes and ws.total.
  Status (*layout)(PlanImpl* p, const GpuPlanner& gpu);
  void (*layout_training)(PlanImpl* p);
  // Plan::pack_weights, the buffer checked: canonical (host memory) into `packed`.
  Status (*pack)(const PlanImpl& p, const void* canonical, void* packed);
  // Plan::forward and Plan::backward, their arguments checked (forward: batch > 0).
  Status (*forward)(const PlanImpl& p, const void* packed, void* workspace, const ForwardArgs& args);
  Status (*backward)(const PlanImpl& p, const void* packed, void* workspace, const BackwardArgs& args);

  // Host backends only (null in the GPU's table; its forward and backward do the whole run).
  // One direction of a training forward: fills io.keep; `rows` are its reference buffers.
  void (*train_direction)(const PlanImpl& p, int layer, int dir, const DirectionIO& io, const unsigned char* packed,
                          unsigned char* ws, const ReferenceBuffers& rows);
  // The head's products c [n, out] = a [n, in] · Wᵀ of an f32 stack (f64 stacks: the reference's loop).
  void (*head_product_f32)(const PlanImpl& p, const unsigned char* packed, const float* a, int n, float* c);
};

// The tables, written out at the end of src/plan.cpp (beside choose_backend) from the pieces below.
extern const BackendOps kReferenceBackend;
extern const BackendOps kSimdBackend;
extern const BackendOps kGpuBackend;  // planning on the host; its runs in src/gpu/ (or src/gpu_none.cpp)
// Integer stacks (StackSpec::dtype i8; its table and pieces in src/int8_layer.cpp): the q8 core's
// kernels under max_isa (Plan::backend() says simd, or reference for the portable ones), chosen by
// its layout, so that choose_backend references the table alone. In the firmware profile
// (RNNCORE_INT8_ON_CALL) that reference is weak: an image links the integer core only when it
// calls rnncore_link_int8() (defined beside the table), and is otherwise null (docs/porting.md).
#ifdef RNNCORE_INT8_ON_CALL
extern const BackendOps kInt8Backend __attribute__((weak));
#else
extern const BackendOps kInt8Backend;
#endif

// Whether a created plan's buffers are device memory (false for a plan not created).
inline bool buffers_in_device_memory(const PlanImpl& p) { return p.ops() != nullptr && p.ops()->device_memory; }

// ---- Pieces the tables are made of ----

// Planning (src/plan.cpp).
Status layout_reference(PlanImpl* p, const GpuPlanner& gpu);
Status layout_simd(PlanImpl* p, const GpuPlanner& gpu);
// A host backend's packed buffer: zeroed, then the header.
unsigned char* begin_host_pack(const PlanImpl& p, void* packed);

// The forward of the host backends (src/forward.cpp): the reserve's training forward, or the
// embedding, the backend's layers and the head.
Status reference_forward(const PlanImpl& p, const void* packed, void* workspace, const ForwardArgs& args);
Status simd_forward(const PlanImpl& p, const void* packed, void* workspace, const ForwardArgs& args);

// Reference backend (src/reference.cpp): its packed buffer is the canonical one.
Status reference_pack(const PlanImpl& p, const void* canonical, unsigned char* packed);
// One direction of one layer over the canonical weights; with io.keep it also fills the reserve rows.
void reference_run_direction(const PlanImpl& p, int layer, int dir, const DirectionIO& io, const unsigned char* canonical,
                             const ReferenceBuffers& buf);
// Every layer, one direction after the other, one thread.
void reference_layers(const PlanImpl& p, const unsigned char* packed, unsigned char* ws, const ForwardArgs& args,
                      const RunDropout& run);

// SIMD backend (src/simd_backend.cpp): the panels, and every layer on the plan's threads.
Status simd_pack(const PlanImpl& p, const void* canonical, unsigned char* packed);
void simd_layers(const PlanImpl& p, const unsigned char* packed, unsigned char* ws, const ForwardArgs& args,
                 const RunDropout& run);
// The ends (src/head.cpp): the embedding table and head in canonical order, and the head's Wᵀ.
void simd_pack_ends(const PlanImpl& p, const void* canonical, unsigned char* packed);
void simd_head_product(const PlanImpl& p, const unsigned char* packed, const float* a, int n, float* c);
void reference_head_product(const PlanImpl& p, const unsigned char* packed, const float* a, int n, float* c);

// Training (src/train_plan.cpp, src/train.cpp; in a build without training, meson option training
// = false, RNNCORE_TRAINING 0, src/train_none.cpp instead: every entry refuses or does nothing, since
// Plan::create refuses a training plan there first).
// The training layouts (options.training): the reserve, the training-forward and backward buffers.
void layout_training_reference(PlanImpl* p);
void layout_training_simd(PlanImpl* p);
void layout_training_gpu(PlanImpl* p);
// The plan's reserve and backward workspace bytes (0: no training plan).
std::size_t reserve_total(const PlanImpl& p);
std::size_t backward_total(const PlanImpl& p);
// SIMD training plans: the canonical weights and their transposes into the packed buffer.
void simd_pack_training(const PlanImpl& p, const float* canonical, unsigned char* packed);
// A one-gate panel of mᵀ in the plan's weight storage (simd/kernels.hpp's panel order; NV = 4, so
// that a single row runs four accumulator chains): `cols` units over K = rows, from m [rows, cols]
// row-major; round_up(cols, 4·V) columns.
void simd_pack_transposed_panel(const PlanImpl& p, const float* m, int rows, int cols, void* dst);
// The training forward: every layer into the reserve, a direction by ops->train_direction.
Status train_forward(const PlanImpl& p, const unsigned char* packed, unsigned char* ws, const ForwardArgs& args,
                     const RunDropout& run);
void reference_train_direction(const PlanImpl& p, int layer, int dir, const DirectionIO& io, const unsigned char* packed,
                               unsigned char* ws, const ReferenceBuffers& rows);
void simd_train_direction(const PlanImpl& p, int layer, int dir, const DirectionIO& io, const unsigned char* packed,
                          unsigned char* ws, const ReferenceBuffers& rows);
Status train_backward(const PlanImpl& p, const void* packed, void* workspace, const BackwardArgs& args);

// GPU backend (src/gpu/, built with -Dgpu=cuda or -Dgpu=hip; src/gpu_none.cpp otherwise).
// Buffers of a GPU plan (packed weights, workspace) and the tensors of ForwardArgs are device
// memory, except seq_lengths and row_ids, which are host arrays (forward() validates them).
// gpu_select: whether a device is usable; writes the kernel family name.
Status gpu_select(const PlanOptions& options, PlanImpl* p);
// Fills packed_bytes and ws (device byte offsets) for the plan.
Status gpu_layout(PlanImpl* p);
// Packs host canonical weights into the device buffer `packed` (no allocation beyond it).
Status gpu_pack(const PlanImpl& p, const void* canonical_host, void* packed_device);
// The whole forward pass on the GPU, on args.stream.
Status gpu_forward(const PlanImpl& p, const void* packed, void* workspace, const ForwardArgs& args);
// Backward through time on the GPU after a training forward (args.forward.reserve), on its stream.
Status gpu_backward(const PlanImpl& p, const void* packed, void* workspace, const BackwardArgs& args);
// (Device memory for Model: gpu_alloc / gpu_free of include/rnncore/gpu.hpp.)

}  // namespace detail
}  // namespace rnncore

#endif  // RNNCORE_SRC_INTERNAL_BACKEND_HPP
