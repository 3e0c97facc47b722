// Host-side helpers of the GPU backend for the rnncore command and the tests: which backend the
// build has, the device, copies between host and device memory, synchronisation and timing. Every
// function exists in every build; without a GPU backend (-Dgpu=none, src/gpu_none.cpp) they fail
// with Status::backend_unavailable. The library itself never calls them on its run path.
#ifndef RNNCORE_SRC_GPU_GPU_HOST_HPP
#define RNNCORE_SRC_GPU_GPU_HOST_HPP

#include <cstddef>

#include "rnncore/rnncore.hpp"

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

}  // namespace detail
}  // namespace rnncore

#endif  // RNNCORE_SRC_GPU_GPU_HOST_HPP
