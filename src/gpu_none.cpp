// The GPU backend of a build without one (-Dgpu=none): every entry reports that clearly.
#include <cstdio>

#include "rnncore/gpu.hpp"
#include "src/internal/error.hpp"
#include "src/internal/backend.hpp"

namespace rnncore {
namespace detail {

namespace {
Status no_gpu() {
  return fail_status(Status::backend_unavailable,
                     "backend gpu: this build has no GPU support (configure with -Dgpu=cuda or -Dgpu=hip)");
}
}  // namespace

Status gpu_select(const PlanOptions&, PlanImpl*) { return no_gpu(); }
Status gpu_layout(PlanImpl*) { return no_gpu(); }
Status gpu_pack(const PlanImpl&, const void*, void*) { return no_gpu(); }
Status gpu_forward(const PlanImpl&, const void*, void*, const ForwardArgs&) { return no_gpu(); }
Status gpu_backward(const PlanImpl&, const void*, void*, const BackwardArgs&) { return no_gpu(); }

}  // namespace detail

// include/rnncore/gpu.hpp
Status gpu_alloc(int, std::size_t, void** out) {
  *out = nullptr;
  return detail::no_gpu();
}
void gpu_free(int, void*) {}
const char* gpu_backend_kind() { return "none"; }
Status gpu_describe(int, char* out, std::size_t capacity) {
  if (capacity > 0) out[0] = '\0';
  return detail::no_gpu();
}
Status gpu_copy(void*, const void*, std::size_t, GpuCopy) { return detail::no_gpu(); }
Status gpu_synchronize(void*) { return detail::no_gpu(); }
void gpu_graph_report(char* out, std::size_t capacity) {
  if (capacity > 0) std::snprintf(out, capacity, "none");
}

}  // namespace rnncore
