// rnncore — device memory and device queries for users of the GPU backend (Backend::gpu).
//
// A GPU plan's buffers and the tensors of its ForwardArgs are device memory (docs/gpu.md); these
// functions are what a host program needs to provide them: allocate and free device memory, copy
// between host and device, wait for the queued work, and name the device. Every function exists
// in every build; a build without a GPU backend (-Dgpu=none) returns Status::backend_unavailable
// with a detail line saying so. None of them is on the run path of Plan::forward.
#ifndef RNNCORE_GPU_HPP
#define RNNCORE_GPU_HPP

#include <cstddef>

#include "rnncore/rnncore.hpp"

namespace rnncore {

/// The GPU runtime of this build: "cuda" (built with nvcc), "hip" (hipcc) or "none".
const char* gpu_backend_kind();

/// One line about device `device`, e.g. "NVIDIA H100 80GB HBM3 (sm_90, 132 multiprocessors, warp 32)".
/// Fails with backend_unavailable (the runtime's reason in last_error_detail()) where there is no
/// usable device, invalid_size for an ordinal that does not exist.
/// @param[out] out a NUL-terminated line of at most `capacity` bytes (empty on failure)
Status gpu_describe(int device, char* out, std::size_t capacity);

/// Allocates `bytes` of device memory on `device` (at least kAlignment-aligned; 0 bytes gives a
/// valid minimal allocation). On failure *out is null (out_of_memory, backend_unavailable).
Status gpu_alloc(int device, std::size_t bytes, void** out);
/// Frees memory from gpu_alloc on the same device; a null pointer is ignored.
void gpu_free(int device, void* ptr);

/// Direction of gpu_copy.
enum class GpuCopy { host_to_device, device_to_host };
/// Copies `bytes` between host and device memory; waits for the copy (and for the work queued
/// before it on the default stream).
Status gpu_copy(void* dst, const void* src, std::size_t bytes, GpuCopy kind);

/// One line about the calling thread's last Plan::forward on the GPU and graph replay
/// (RNNCORE_GPU_GRAPHS=on, docs/gpu.md "Graphs"): "replayed the graph (N launches, M zeroings)",
/// "captured and replayed a graph (...)", "direct: <why>" or "off ...". A build without a GPU
/// backend writes "none". For benchmarks and tests; it does not fail.
/// @param[out] out a NUL-terminated line of at most `capacity` bytes
void gpu_graph_report(char* out, std::size_t capacity);

/// Waits until all work queued on `stream` (a hipStream_t / cudaStream_t; null: the default
/// stream) has finished, e.g. the forward passes queued by Plan::forward.
Status gpu_synchronize(void* stream);

}  // namespace rnncore

#endif  // RNNCORE_GPU_HPP
