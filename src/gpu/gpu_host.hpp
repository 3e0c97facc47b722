// Host-side helpers of the GPU backend for the rnncore command and the tests: which backend the
// build has, the device, copies between host and device memory, synchronisation and timing. Every
// function exists in every build; without a GPU backend (-Dgpu=none, src/gpu_none.cpp) they fail
// with Status::backend_unavailable. The library itself never calls them on its run path.
#ifndef RNNCORE_SRC_GPU_GPU_HOST_HPP
#define RNNCORE_SRC_GPU_GPU_HOST_HPP

#include <cstddef>

#include "rnncore/rnncore.hpp"
#include "src/internal/error.hpp"
#include "src/internal/plan_impl.hpp"

namespace rnncore {
namespace detail {

/// The GPU backend of this build: "cuda" (kernels built by nvcc), "hip" (hipcc) or "none".
const char* gpu_backend_kind();

/// One line about device `device`, e.g. "NVIDIA H100 80GB HBM3 (sm_90, 132 multiprocessors, warp 32)";
/// fails (backend_unavailable, with the runtime's reason) when there is no usable device.
/// @param[out] out a NUL-terminated line of at most `capacity` bytes
Status gpu_describe(int device, char* out, std::size_t capacity);

/// Direction of a copy.
enum class GpuCopy { host_to_device, device_to_host };
/// Synchronous copy of `bytes` between host and device memory (after all prior default-stream work).
Status gpu_copy(void* dst, const void* src, std::size_t bytes, GpuCopy kind);

/// Waits until all work queued on `stream` (null: the default stream) has finished.
Status gpu_synchronize(void* stream);

/// Device-side timing with events: gpu_timer_start records on a stream, gpu_timer_stop records,
/// waits and returns the milliseconds in between.
Status gpu_timer_create(void** timer);
Status gpu_timer_start(void* timer, void* stream);
Status gpu_timer_stop(void* timer, void* stream, double* ms);
void gpu_timer_destroy(void* timer);

/// Device copies of one forward run's tensors, for hosts whose data lives in host memory (the
/// rnncore command): upload() allocates device buffers, fills x / h0 / c0 from the host tensors of
/// `host` and returns the same arguments with device pointers; download() waits for the device and
/// copies y / hy / cy back to the host pointers. seq_lengths and row_ids stay host arrays (the GPU
/// backend takes them from the host). Allocates: not for the run path of firmware-like callers.
class GpuForwardBuffers {
 public:
  GpuForwardBuffers() = default;
  GpuForwardBuffers(const GpuForwardBuffers&) = delete;
  GpuForwardBuffers& operator=(const GpuForwardBuffers&) = delete;
  ~GpuForwardBuffers() {
    for (void*& p : ptr_) gpu_free(device_, p);
  }

  /// @param[in] host the run with host tensors  @param[in] x_bytes,y_bytes,state_bytes their sizes
  /// @param[out] on_device the run with device tensors
  Status upload(int device, const ForwardArgs& host, std::size_t x_bytes, std::size_t y_bytes, std::size_t state_bytes,
                ForwardArgs* on_device) {
    device_ = device;
    *on_device = host;
    const void* in[kSlots] = {host.x, nullptr, host.h0, host.c0, nullptr, nullptr};
    const void* used[kSlots] = {host.x, host.y, host.h0, host.c0, host.hy, host.cy};
    const std::size_t bytes[kSlots] = {x_bytes, y_bytes, state_bytes, state_bytes, state_bytes, state_bytes};
    for (int i = 0; i < kSlots; ++i) {
      bytes_[i] = bytes[i];
      if (used[i] == nullptr) continue;
      RNNCORE_RETURN_IF_ERROR(gpu_alloc(device, bytes[i], &ptr_[i]));
      if (in[i] != nullptr) RNNCORE_RETURN_IF_ERROR(gpu_copy(ptr_[i], in[i], bytes[i], GpuCopy::host_to_device));
    }
    on_device->x = ptr_[0];
    on_device->y = ptr_[1];
    on_device->h0 = ptr_[2];
    on_device->c0 = ptr_[3];
    on_device->hy = ptr_[4];
    on_device->cy = ptr_[5];
    return Status::ok;
  }

  /// Waits for `stream` and copies the outputs back into the host tensors of `host`.
  Status download(const ForwardArgs& host, void* stream) {
    RNNCORE_RETURN_IF_ERROR(gpu_synchronize(stream));
    void* out[kSlots] = {nullptr, host.y, nullptr, nullptr, host.hy, host.cy};
    for (int i = 0; i < kSlots; ++i)
      if (out[i] != nullptr && ptr_[i] != nullptr)
        RNNCORE_RETURN_IF_ERROR(gpu_copy(out[i], ptr_[i], bytes_[i], GpuCopy::device_to_host));
    return Status::ok;
  }

 private:
  static constexpr int kSlots = 6;  // x, y, h0, c0, hy, cy
  int device_ = 0;
  void* ptr_[kSlots] = {};
  std::size_t bytes_[kSlots] = {};
};

}  // namespace detail
}  // namespace rnncore

#endif  // RNNCORE_SRC_GPU_GPU_HOST_HPP
