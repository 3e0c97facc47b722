// The GPU backend of a build without one (-Dgpu=none): every entry reports that clearly.
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

}  // namespace detail
}  // namespace rnncore
