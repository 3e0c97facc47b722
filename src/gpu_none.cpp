// The GPU backend of a build without one (-Dgpu=none): every entry reports that clearly.
#include "src/gpu/gpu_host.hpp"
#include "src/internal/error.hpp"
#include "src/internal/plan_impl.hpp"

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
Status gpu_alloc(int, std::size_t, void** out) {
  *out = nullptr;
  return no_gpu();
}
void gpu_free(int, void*) {}

// Host helpers of src/gpu/gpu_host.hpp.
const char* gpu_backend_kind() { return "none"; }
Status gpu_describe(int, char* out, std::size_t capacity) {
  if (capacity > 0) out[0] = '\0';
  return no_gpu();
}
Status gpu_copy(void*, const void*, std::size_t, GpuCopy) { return no_gpu(); }
Status gpu_synchronize(void*) { return no_gpu(); }
Status gpu_timer_create(void** timer) {
  *timer = nullptr;
  return no_gpu();
}
Status gpu_timer_start(void*, void*) { return no_gpu(); }
Status gpu_timer_stop(void*, void*, double* ms) {
  *ms = 0.0;
  return no_gpu();
}
void gpu_timer_destroy(void*) {}

}  // namespace detail
}  // namespace rnncore
