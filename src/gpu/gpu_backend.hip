// The GPU backend's entry points (src/internal/plan_impl.hpp: gpu_select, gpu_layout, gpu_pack,
// gpu_forward, gpu_backward) and the public device-memory functions of include/rnncore/gpu.hpp. Built by hipcc
// (-Dgpu=hip) or nvcc (-Dgpu=cuda); the runtime is reached through HIP names only, which
// src/gpu/vendor.hpp maps to CUDA for nvcc. The planning (src/gpu/host/plan.hpp), the
// launch schedules (src/gpu/host/schedule.hpp) and the kernels (src/gpu/device/kernels.hpp) also run in the
// host tests; this file adds the device queries and the launcher (src/gpu/host/launcher.hpp).
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "src/gpu/vendor.hpp"
#include "src/gpu/host/launcher.hpp"
#include "src/gpu/host/graph.hpp"
#include "src/gpu/host/backward.hpp"
#include "src/gpu/host/schedule.hpp"
#include "rnncore/gpu.hpp"
#include "src/internal/error.hpp"
#include "src/internal/backend.hpp"

namespace rnncore {
namespace detail {

namespace {

using gpu::GpuPlan;

// Makes `device` current for the scope of a call and restores the caller's device afterwards.
class DeviceScope {
 public:
  explicit DeviceScope(int device) {
    if (hipGetDevice(&previous_) != hipSuccess) previous_ = -1;
    status_ = previous_ == device ? hipSuccess : hipSetDevice(device);
  }
  ~DeviceScope() {
    int now = -1;
    if (previous_ >= 0 && hipGetDevice(&now) == hipSuccess && now != previous_) (void)hipSetDevice(previous_);
  }
  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;
  hipError_t status() const { return status_; }

 private:
  int previous_ = -1;
  hipError_t status_ = hipSuccess;
};

// The device count, or a backend_unavailable status that says why there is no device.
Status usable_device(int device) {
  int count = 0;
  const hipError_t e = hipGetDeviceCount(&count);
  if (e != hipSuccess) {
    (void)hipGetLastError();
    return fail_status(Status::backend_unavailable, "backend gpu (%s build): no usable GPU: %s", RNNCORE_GPU_VENDOR,
                       hipGetErrorString(e));
  }
  RNNCORE_ENSURE(count > 0, Status::backend_unavailable, "backend gpu (%s build): no GPU device found", RNNCORE_GPU_VENDOR);
  RNNCORE_ENSURE(device >= 0 && device < count, Status::invalid_size, "options.gpu_device = %d, but %d device(s) exist",
                 device, count);
  return Status::ok;
}

// An environment override among `names` (index), or `fallback`.
int env_choice(const char* var, const char* const* names, int count, int fallback) {
  const char* v = std::getenv(var);
  if (v == nullptr) return fallback;
  for (int i = 0; i < count; ++i)
    if (std::strcmp(v, names[i]) == 0) return i;
  return fallback;
}

// A non-blocking stream per device, on which forward reads the packed buffer's header back
// (gpu::check_packed): created once per device at plan time (gpu_layout), so that forward
// allocates nothing, and never destroyed. Devices beyond kMaxDevices read on the legacy stream.
hipStream_t g_read_stream[gpu::kMaxDevices];
hipError_t g_read_stream_error[gpu::kMaxDevices];
std::once_flag g_read_stream_once[gpu::kMaxDevices];

// The read stream of `device` (the current device), creating it on the first call.
Status read_stream(int device, hipStream_t* out) {
  *out = nullptr;
  if (device < 0 || device >= gpu::kMaxDevices) return Status::ok;
  std::call_once(g_read_stream_once[device], [device] {
    g_read_stream_error[device] = hipStreamCreateWithFlags(&g_read_stream[device], hipStreamNonBlocking);
  });
  RNNCORE_GPU_CHECK(g_read_stream_error[device], "creating a stream", "");
  *out = g_read_stream[device];
  return Status::ok;
}

// Graph replay (src/gpu/host/graph.hpp): the process's graphs, one per (device, workspace), a
// capture stream per device (made at the first capture), and each thread's line about its last
// forward (gpu_graph_report).
std::mutex g_graph_mutex;
gpu::GraphTable g_graph_table;
hipStream_t g_capture_stream[gpu::kMaxDevices];
thread_local char g_graph_note[160] = "off: no GPU forward has run on this thread";

template <int C, class WT>
int grad_persistent_occupancy(int k, int threads, std::size_t smem) {
  if (k == 0) return gpu::blocks_per_multiprocessor<gpu::f32_rnn_grad_persistent<C, gpu::kGradBuckets[0], WT>>(threads, smem);
  return gpu::blocks_per_multiprocessor<gpu::f32_rnn_grad_persistent<C, gpu::kGradBuckets[1], WT>>(threads, smem);
}

template <int C, class WT>
int persistent_occupancy(int bucket, int threads, std::size_t smem) {
  if (bucket >= gpu::kGradPersistentBucket) return grad_persistent_occupancy<C, WT>(bucket - gpu::kGradPersistentBucket, threads, smem);
  switch (bucket) {
    case gpu::kPersistentMmaBucket:
      return gpu::blocks_per_multiprocessor<gpu::rnn_recurrence_persistent_mma<C, WT>>(threads, smem);
    case 0: return gpu::blocks_per_multiprocessor<gpu::f32_rnn_recurrence_persistent<C, 1, WT>>(threads, smem);
    case 1: return gpu::blocks_per_multiprocessor<gpu::f32_rnn_recurrence_persistent<C, 2, WT>>(threads, smem);
    case 2: return gpu::blocks_per_multiprocessor<gpu::f32_rnn_recurrence_persistent<C, 4, WT>>(threads, smem);
    case 3: return gpu::blocks_per_multiprocessor<gpu::f32_rnn_recurrence_persistent<C, 8, WT>>(threads, smem);
    case 4: return gpu::blocks_per_multiprocessor<gpu::f32_rnn_recurrence_persistent<C, 16, WT>>(threads, smem);
    case 5: return gpu::blocks_per_multiprocessor<gpu::f32_rnn_recurrence_persistent<C, 32, WT>>(threads, smem);
    default: return gpu::blocks_per_multiprocessor<gpu::f32_rnn_recurrence_persistent<C, 64, WT>>(threads, smem);
  }
}

template <class WT>
int persistent_occupancy_cell(int cell, int bucket, int threads, std::size_t smem) {
  switch (cell) {
    case gpu::kLstm: return persistent_occupancy<gpu::kLstm, WT>(bucket, threads, smem);
    case gpu::kGruResetAfter: return persistent_occupancy<gpu::kGruResetAfter, WT>(bucket, threads, smem);
    case gpu::kGruResetBefore: return persistent_occupancy<gpu::kGruResetBefore, WT>(bucket, threads, smem);
    case gpu::kRnnTanh: return persistent_occupancy<gpu::kRnnTanh, WT>(bucket, threads, smem);
    default: return persistent_occupancy<gpu::kRnnRelu, WT>(bucket, threads, smem);
  }
}

// Occupancy of the persistent kernel instance a plan would launch (src/gpu/host/plan.hpp's plan_persistent,
// plan_grad_persistent).
int persistent_occupancy_of(int cell, int bucket, int weights, int threads, std::size_t smem) {
  if (weights == gpu::kWeightF16) return persistent_occupancy_cell<gpu::WeightF16>(cell, bucket, threads, smem);
  if (weights == gpu::kWeightBF16) return persistent_occupancy_cell<gpu::WeightBF16>(cell, bucket, threads, smem);
  return persistent_occupancy_cell<float>(cell, bucket, threads, smem);
}

// The description of `device` from the runtime (what src/gpu/host/plan.hpp plans for).
Status describe_device(int device, gpu::DeviceDescription* d) {
  struct Query {
    hipDeviceAttribute_t attribute;
    std::int32_t* out;
  };
  std::int32_t smem_per_sm = 0;
  const Query queries[] = {
      {hipDeviceAttributeMultiprocessorCount, &d->sm_count},
      {hipDeviceAttributeWarpSize, &d->warp_size},  // device code uses its target's constant
      {hipDeviceAttributeMaxThreadsPerBlock, &d->max_threads},
      {hipDeviceAttributeMaxThreadsPerMultiProcessor, &d->max_threads_per_sm},
      {hipDeviceAttributeMaxRegistersPerMultiprocessor, &d->registers_per_sm},
      {hipDeviceAttributeMaxSharedMemoryPerMultiprocessor, &smem_per_sm},
      {hipDeviceAttributeCooperativeLaunch, &d->cooperative},
  };
  for (const Query& q : queries) {
    int v = 0;
    RNNCORE_GPU_CHECK(hipDeviceGetAttribute(&v, q.attribute, device), "device query", "");
    *q.out = v;
  }
  d->smem_per_sm = smem_per_sm;
  int optin = 0;
  RNNCORE_GPU_CHECK(rnncore_gpu_smem_optin(device, &optin), "device query", "");
  d->smem_optin = optin;
  d->max_blocks_per_sm = 32;  // not a HIP attribute; the occupancy queries apply the real limit
  (void)rnncore_gpu_arch_name(device, d->arch, sizeof d->arch);
  d->mma = rnncore_gpu_arch_has_mma(d->arch) ? 1 : 0;
  d->mma_tf32 = rnncore_gpu_arch_has_mma_tf32(d->arch) ? 1 : 0;
  d->direct_step = rnncore_gpu_arch_prefers_direct_step(d->arch) ? 1 : 0;
  char name[256] = "";
  if (rnncore_gpu_device_name(device, name, sizeof name) != hipSuccess) std::snprintf(name, sizeof name, "device %d", device);
  std::snprintf(d->name, sizeof d->name, "%.23s", name);
  return Status::ok;
}

}  // namespace

Status gpu_select(const PlanOptions& options, PlanImpl* p) {
  RNNCORE_RETURN_IF_ERROR(usable_device(options.gpu_device));
  gpu::DeviceDescription device;
  RNNCORE_RETURN_IF_ERROR(describe_device(options.gpu_device, &device));
  static const char* const kRecurrence[] = {"auto", "persistent", "tiled"};
  static const char* const kTile[] = {"auto", "small", "large", "direct", "lanes", "lanes8"};
  static_assert(sizeof kTile / sizeof kTile[0] == gpu::kTileChoiceCount, "a name per TileChoice");
  static const char* const kGraphs[] = {"off", "on"};
  gpu::Choices choices;
  choices.recurrence = static_cast<gpu::Recurrence>(env_choice("RNNCORE_GPU_RECURRENCE", kRecurrence, 3, 0));
  choices.tile = static_cast<gpu::TileChoice>(env_choice("RNNCORE_GPU_TILE", kTile, gpu::kTileChoiceCount, 0));
  choices.graphs = env_choice("RNNCORE_GPU_GRAPHS", kGraphs, 2, 0) == 1;
  return gpu::plan_select(options, device, options.gpu_device, choices, p);
}

Status gpu_layout(PlanImpl* p) {
  DeviceScope scope(p->gpu.device);
  RNNCORE_GPU_CHECK(scope.status(), "selecting device", "");
  hipStream_t unused = nullptr;
  RNNCORE_RETURN_IF_ERROR(read_stream(p->gpu.device, &unused));  // made here, used by forward
  gpu::plan_layout(p, persistent_occupancy_of);
  return Status::ok;
}

Status gpu_pack(const PlanImpl& p, const void* canonical_host, void* packed_device) {
  const GpuPlan& g = p.gpu;
  DeviceScope scope(g.device);
  RNNCORE_GPU_CHECK(scope.status(), "selecting device", "");
  gpu::DeviceLauncher launcher(nullptr, true);
  return gpu::pack(launcher, p, g, static_cast<const float*>(canonical_host), static_cast<unsigned char*>(packed_device));
}

Status gpu_forward(const PlanImpl& p, const void* packed, void* workspace, const ForwardArgs& args) {
  const GpuPlan& g = p.gpu;
  DeviceScope scope(g.device);
  RNNCORE_GPU_CHECK(scope.status(), "selecting device", "");
  hipStream_t reads = nullptr;
  RNNCORE_RETURN_IF_ERROR(read_stream(g.device, &reads));
  gpu::DeviceLauncher launcher(static_cast<hipStream_t>(args.stream), false, reads);
  const auto* packed_c = static_cast<const unsigned char*>(packed);
  auto* ws = static_cast<unsigned char*>(workspace);
  if (g.graphs == 0 || g.device < 0 || g.device >= gpu::kMaxDevices) {
    std::snprintf(g_graph_note, sizeof g_graph_note, "%s", g.graphs == 0 ? "off (RNNCORE_GPU_GRAPHS=on at plan time turns them on)"
                                                                         : "direct: a device ordinal beyond the graph table's");
    return gpu::forward(launcher, p, g, packed_c, ws, args);
  }
  gpu::DeviceGraphRuntime runtime(static_cast<hipStream_t>(args.stream), &g_capture_stream[g.device]);
  gpu::GraphUse use = gpu::GraphUse::direct;
  return gpu::with_weight_type(g, [&](auto wt) {
    return gpu::forward_graphed<decltype(wt)>(launcher, runtime, g_graph_table, g_graph_mutex, p, g, packed_c, ws, args, &use,
                                              g_graph_note, sizeof g_graph_note);
  });
}

Status gpu_backward(const PlanImpl& p, const void* packed, void* workspace, const BackwardArgs& args) {
  const GpuPlan& g = p.gpu;
  DeviceScope scope(g.device);
  RNNCORE_GPU_CHECK(scope.status(), "selecting device", "");
  hipStream_t reads = nullptr;
  RNNCORE_RETURN_IF_ERROR(read_stream(g.device, &reads));
  gpu::DeviceLauncher launcher(static_cast<hipStream_t>(args.forward.stream), false, reads);
  return gpu::backward(launcher, p, g, static_cast<const unsigned char*>(packed), static_cast<unsigned char*>(workspace),
                       args);
}

}  // namespace detail

// ------------------------------------------------------------------ include/rnncore/gpu.hpp

using detail::DeviceScope;
using detail::fail_status;
using detail::usable_device;

Status gpu_alloc(int device, std::size_t bytes, void** out) {
  *out = nullptr;
  RNNCORE_RETURN_IF_ERROR(usable_device(device));
  DeviceScope scope(device);
  RNNCORE_GPU_CHECK(scope.status(), "selecting device", "");
  const hipError_t e = hipMalloc(out, bytes != 0 ? bytes : 1);  // 256-byte aligned, more than kAlignment
  if (e != hipSuccess) {
    *out = nullptr;
    (void)hipGetLastError();
    return fail_status(Status::out_of_memory, "gpu: could not allocate %zu bytes on device %d: %s", bytes, device,
                       hipGetErrorString(e));
  }
  return Status::ok;
}

void gpu_free(int device, void* ptr) {
  if (ptr == nullptr) return;
  DeviceScope scope(device);
  (void)hipFree(ptr);
}

const char* gpu_backend_kind() { return RNNCORE_GPU_VENDOR; }

Status gpu_describe(int device, char* out, std::size_t capacity) {
  if (capacity > 0) out[0] = '\0';
  RNNCORE_RETURN_IF_ERROR(usable_device(device));
  char name[256] = "?", arch[32] = "?";
  int sms = 0, warp = 0;
  RNNCORE_GPU_CHECK(rnncore_gpu_device_name(device, name, sizeof name), "device query", "");
  RNNCORE_GPU_CHECK(rnncore_gpu_arch_name(device, arch, sizeof arch), "device query", "");
  RNNCORE_GPU_CHECK(hipDeviceGetAttribute(&sms, hipDeviceAttributeMultiprocessorCount, device), "device query", "");
  RNNCORE_GPU_CHECK(hipDeviceGetAttribute(&warp, hipDeviceAttributeWarpSize, device), "device query", "");
  std::snprintf(out, capacity, "%s (%s, %d multiprocessors, warp %d)", name, arch, sms, warp);
  return Status::ok;
}

Status gpu_copy(void* dst, const void* src, std::size_t bytes, GpuCopy kind) {
  if (bytes == 0) return Status::ok;
  RNNCORE_GPU_CHECK(hipMemcpy(dst, src, bytes, kind == GpuCopy::host_to_device ? hipMemcpyHostToDevice : hipMemcpyDeviceToHost),
                    "copy", kind == GpuCopy::host_to_device ? "to the device" : "to the host");
  return Status::ok;
}

void gpu_graph_report(char* out, std::size_t capacity) {
  if (capacity > 0) std::snprintf(out, capacity, "%s", detail::g_graph_note);
}

Status gpu_synchronize(void* stream) {
  RNNCORE_GPU_CHECK(hipStreamSynchronize(static_cast<hipStream_t>(stream)), "stream synchronisation", "");
  return Status::ok;
}

}  // namespace rnncore
