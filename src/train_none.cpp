// The training entries of a build without training (meson option training=false, RNNCORE_TRAINING
// 0; the firmware profile's default), in place of src/train.cpp, src/head_grad.cpp and
// src/train_plan.cpp. Plan::create refuses a training plan first (check_training, src/plan.cpp), so
// no plan reaches the layouts or the training forward; the rest report the build clearly.
#include "src/internal/backend.hpp"
#include "src/internal/error.hpp"

static_assert(!RNNCORE_TRAINING, "src/train_none.cpp stands in for the training code only in a build without it");

namespace rnncore {
namespace detail {

namespace {
Status no_training() {
  return fail_status(Status::unsupported,
                     "training: the library was built without it (meson option training=false): configure it with "
                     "-Dtraining=true");
}
}  // namespace

void layout_training_reference(PlanImpl*) {}
void layout_training_simd(PlanImpl*) {}
void layout_training_gpu(PlanImpl*) {}
std::size_t reserve_total(const PlanImpl&) { return 0; }
std::size_t backward_total(const PlanImpl&) { return 0; }

void simd_pack_training(const PlanImpl&, const float*, unsigned char*) {}
Status train_forward(const PlanImpl&, const unsigned char*, unsigned char*, const ForwardArgs&, const RunDropout&) {
  return no_training();
}
void reference_train_direction(const PlanImpl&, int, int, const DirectionIO&, const unsigned char*, unsigned char*,
                               const ReferenceBuffers&) {}
void simd_train_direction(const PlanImpl&, int, int, const DirectionIO&, const unsigned char*, unsigned char*,
                          const ReferenceBuffers&) {}
Status train_backward(const PlanImpl&, const void*, void*, const BackwardArgs&) { return no_training(); }

}  // namespace detail
}  // namespace rnncore
