// The host side of a launch on the GPU: the launcher that src/gpu/host/schedule.hpp's schedules
// drive (kernels of src/gpu/device/, run by src/gpu/device/global.hpp's __global__ template), and
// the runtime's occupancy and shared-memory queries. Compiled by hipcc or nvcc only
// (src/gpu/gpu_backend.hip includes it).
#ifndef RNNCORE_SRC_GPU_HOST_LAUNCHER_HPP
#define RNNCORE_SRC_GPU_HOST_LAUNCHER_HPP

#include "src/gpu/device/global.hpp"
#include "src/gpu/host/graph.hpp"
#include "src/gpu/host/schedule.hpp"
#include "src/gpu/vendor.hpp"

namespace rnncore {
namespace gpu {

/// Above this, a kernel must opt in to more dynamic shared memory (NVIDIA; harmless on AMD).
constexpr std::size_t kDefaultSmemLimit = 48 * 1024;

/// Status of a failed runtime call, naming the call and the runtime's message.
inline Status runtime_error(hipError_t e, const char* what, const char* detail = "") {
  return detail::fail_status(Status::device, "gpu: %s%s%s: %s", what, detail[0] ? " " : "", detail, hipGetErrorString(e));
}

#define RNNCORE_GPU_CHECK(call, what, detail)              \
  do {                                                    \
    const hipError_t rnncore_e_ = (call);                 \
    if (rnncore_e_ != hipSuccess) return ::rnncore::gpu::runtime_error(rnncore_e_, (what), (detail)); \
  } while (0)

/// Raises K's dynamic shared-memory limit on the current device to the device's opt-in maximum,
/// once per (kernel, device) in the process (src/gpu/host/schedule.hpp, raise_smem_limit_once): never to a
/// plan's own size, which another thread's larger plan may exceed.
template <class K>
Status raise_smem_limit() {
  int device = 0;
  RNNCORE_GPU_CHECK(hipGetDevice(&device), "device query", "");
  const auto query = [](int dev, int* bytes) -> Status {
    RNNCORE_GPU_CHECK(rnncore_gpu_smem_optin(dev, bytes), "device query", "");
    return Status::ok;
  };
  const auto set = [](int, int bytes) -> Status {
    RNNCORE_GPU_CHECK(hipFuncSetAttribute(reinterpret_cast<const void*>(&rnncore_kernel<K>),
                                          hipFuncAttributeMaxDynamicSharedMemorySize, bytes),
                      "shared memory opt-in of", K::name());
    return Status::ok;
  };
  return raise_smem_limit_once<K>(device, query, set);
}

/// Occupancy of a kernel at a block size and dynamic shared memory (opting in where needed).
template <class K>
int blocks_per_multiprocessor(int threads, std::size_t smem) {
  const void* fn = reinterpret_cast<const void*>(&rnncore_kernel<K>);
  if (threads > K::kMaxThreads) return 0;
  if (smem > kDefaultSmemLimit && raise_smem_limit<K>() != Status::ok) {
    (void)hipGetLastError();
    return 0;
  }
  int n = 0;
  if (hipOccupancyMaxActiveBlocksPerMultiprocessor(&n, fn, threads, smem) != hipSuccess) {
    (void)hipGetLastError();
    return 0;
  }
  return n;
}

/// Whether a cooperative launch failed because the runtime refuses cooperative launches here
/// (not supported, e.g. under MPS or on a device without the attribute) or
/// because fewer blocks can be co-resident now than at plan time. Other errors are real errors.
inline bool cooperative_refused(hipError_t e) {
  return e == hipErrorCooperativeLaunchTooLarge || e == hipErrorNotSupported;
}

/// Launches kernels on one stream. `synchronous` (packing) makes finish() wait for the stream.
class DeviceLauncher {
 public:
  /// `read_stream`: where copy_to_host runs (a non-blocking stream of the device, so that reading
  /// the packed header neither waits for nor orders the run's stream); null: the legacy stream.
  DeviceLauncher(hipStream_t stream, bool synchronous, hipStream_t read_stream = nullptr)
      : stream_(stream), read_stream_(read_stream), synchronous_(synchronous) {}

  /// Whether kernels take a pointer to the argument block's device copy (else the block by value).
  static constexpr bool kArgsInDeviceMemory = !RNNCORE_GPU_ARGS_BY_VALUE;

  template <class K>
  Status launch(const Dims& d, const typename K::Args& host, const typename K::Args* dev, int arg) {
    RNNCORE_RETURN_IF_ERROR(prepare<K>(d));
#if RNNCORE_GPU_ARGS_BY_VALUE
    (void)dev;
    rnncore_kernel<K><<<dim3(d.gx, d.gy, d.gz), dim3(d.block), d.smem, stream_>>>(host, arg);
#else
    (void)host;
    rnncore_kernel<K><<<dim3(d.gx, d.gy, d.gz), dim3(d.block), d.smem, stream_>>>(dev, arg);
#endif
    RNNCORE_GPU_CHECK(hipGetLastError(), "launch of", K::name());
    return Status::ok;
  }

  template <class K>
  Status launch_cooperative(const Dims& d, const typename K::Args& host, const typename K::Args* dev, int arg) {
    RNNCORE_RETURN_IF_ERROR(prepare<K>(d));
#if RNNCORE_GPU_ARGS_BY_VALUE
    (void)dev;
    typename K::Args args = host;
#else
    (void)host;
    const typename K::Args* args = dev;
#endif
    void* params[] = {&args, &arg};
    const hipError_t e = hipLaunchCooperativeKernel(reinterpret_cast<const void*>(&rnncore_kernel<K>), dim3(d.gx, d.gy, d.gz),
                                                    dim3(d.block), params, static_cast<unsigned int>(d.smem), stream_);
    if (e == hipSuccess) return Status::ok;
    if (cooperative_refused(e)) {  // nothing was queued; the schedule runs the per-step kernels instead
      (void)hipGetLastError();     // not a sticky error: clear it so that later checks do not see it
      return Status::unsupported;
    }
    return runtime_error(e, "cooperative launch of", K::name());
  }

  Status copy_to_device(void* dst, const void* src, std::size_t bytes) {
    RNNCORE_GPU_CHECK(hipMemcpy(dst, src, bytes, hipMemcpyHostToDevice), "copy to the device", "");
    return Status::ok;
  }
  Status copy_to_device_async(void* dst, const void* src, std::size_t bytes) {
    RNNCORE_GPU_CHECK(hipMemcpyAsync(dst, src, bytes, hipMemcpyHostToDevice, stream_), "copy to the device", "");
    return Status::ok;
  }
  Status copy_to_host(void* dst, const void* src, std::size_t bytes) {
    RNNCORE_GPU_CHECK(hipMemcpyAsync(dst, src, bytes, hipMemcpyDeviceToHost, read_stream_), "copy to the host", "");
    RNNCORE_GPU_CHECK(hipStreamSynchronize(read_stream_), "copy to the host", "");
    return Status::ok;
  }
  /// After everything queued on the run's stream (backward reads the reserve header a training
  /// forward queued): a copy on that stream, waited for.
  Status copy_to_host_in_order(void* dst, const void* src, std::size_t bytes) {
    RNNCORE_GPU_CHECK(hipMemcpyAsync(dst, src, bytes, hipMemcpyDeviceToHost, stream_), "copy to the host", "");
    RNNCORE_GPU_CHECK(hipStreamSynchronize(stream_), "copy to the host", "");
    return Status::ok;
  }
  Status zero_async(void* dst, std::size_t bytes) {
    RNNCORE_GPU_CHECK(hipMemsetAsync(dst, 0, bytes, stream_), "zeroing", "");
    return Status::ok;
  }
  Status finish(const char* what) {
    if (synchronous_) RNNCORE_GPU_CHECK(hipStreamSynchronize(stream_), what, "");
    RNNCORE_GPU_CHECK(hipGetLastError(), what, "");
    return Status::ok;
  }

 private:
  template <class K>
  Status prepare(const Dims& d) {
    RNNCORE_ENSURE(d.block > 0 && d.block <= static_cast<std::uint32_t>(K::kMaxThreads), Status::internal,
                   "gpu: %s launched with %u threads (bound %d)", K::name(), d.block, K::kMaxThreads);
    if (d.smem > kDefaultSmemLimit) RNNCORE_RETURN_IF_ERROR(raise_smem_limit<K>());
    return Status::ok;
  }

  hipStream_t stream_;
  hipStream_t read_stream_;
  bool synchronous_;
};

/// The device's GraphRuntime (src/gpu/host/graph.hpp): captures on `*capture_stream` (a
/// non-blocking stream of the device, made at the first capture; nothing ever runs on it) in the
/// thread-local mode, and replays on the run's stream (the default stream too). Any failure of a
/// capture or instantiation is a refusal (Status::unsupported, the error cleared): the run then
/// launches its kernels directly, where a real error shows as usual.
class DeviceGraphRuntime {
 public:
  DeviceGraphRuntime(hipStream_t run, hipStream_t* capture_stream) : run_(run), capture_(capture_stream) {}

  template <class F>
  Status capture(F launches, void** exec) {
    *exec = nullptr;
    if (*capture_ == nullptr && hipStreamCreateWithFlags(capture_, hipStreamNonBlocking) != hipSuccess) return refused(nullptr);
    if (hipStreamBeginCapture(*capture_, hipStreamCaptureModeThreadLocal) != hipSuccess) return refused(nullptr);
    DeviceLauncher ln(*capture_, false);
    const Status s = launches(ln);
    hipGraph_t graph = nullptr;
    const hipError_t ended = hipStreamEndCapture(*capture_, &graph);
    if (s != Status::ok || ended != hipSuccess) return refused(graph);
    hipGraphExec_t instance = nullptr;
    if (rnncore_gpu_graph_instantiate(&instance, graph) != hipSuccess) return refused(graph);
    (void)hipGraphDestroy(graph);
    *exec = static_cast<void*>(instance);
    return Status::ok;
  }
  Status launch(void* exec) {
    RNNCORE_GPU_CHECK(hipGraphLaunch(static_cast<hipGraphExec_t>(exec), run_), "graph launch", "");
    return Status::ok;
  }
  void destroy(void* exec) { (void)hipGraphExecDestroy(static_cast<hipGraphExec_t>(exec)); }

 private:
  static Status refused(hipGraph_t graph) {
    if (graph != nullptr) (void)hipGraphDestroy(graph);
    (void)hipGetLastError();
    return Status::unsupported;
  }

  hipStream_t run_;
  hipStream_t* capture_;
};

}  // namespace gpu
}  // namespace rnncore

#endif  // RNNCORE_SRC_GPU_HOST_LAUNCHER_HPP
