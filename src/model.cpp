// Model: the convenience owner. Allocates the packed weights and workspace once, at create.
#include <cstdlib>
#include <initializer_list>
#include <utility>

#include "rnncore/gpu.hpp"
#include "src/internal/error.hpp"
#include "src/internal/backend.hpp"
#include "src/internal/spec_internal.hpp"

namespace rnncore {

namespace {

#if !defined(RNNCORE_NO_HEAP)
void* allocate_aligned(std::size_t bytes) {
  const std::size_t rounded = static_cast<std::size_t>(detail::round_up(static_cast<std::int64_t>(bytes ? bytes : 1), kAlignment));
  return std::aligned_alloc(kAlignment, rounded);
}
#endif

}  // namespace

Model::~Model() { release(); }

void Model::release() {
#if !defined(RNNCORE_NO_HEAP)  // without a heap no Model ever holds memory
  if (detail::buffers_in_device_memory(detail::impl(plan_))) {  // device memory (src/gpu)
    for (void* buffer : {packed_, workspace_, reserve_, backward_workspace_}) gpu_free(plan_.options().gpu_device, buffer);
  } else {
    for (void* buffer : {packed_, workspace_, reserve_, backward_workspace_}) std::free(buffer);
  }
#endif
  packed_ = nullptr;
  workspace_ = nullptr;
  reserve_ = nullptr;
  backward_workspace_ = nullptr;
  ThreadPool::destroy(pool_);
  pool_ = nullptr;
}

Model::Model(Model&& other) noexcept
    : plan_(other.plan_), packed_(std::exchange(other.packed_, nullptr)), workspace_(std::exchange(other.workspace_, nullptr)),
      reserve_(std::exchange(other.reserve_, nullptr)), backward_workspace_(std::exchange(other.backward_workspace_, nullptr)),
      pool_(std::exchange(other.pool_, nullptr)), step_(other.step_), last_step_(other.last_step_) {}

Model& Model::operator=(Model&& other) noexcept {
  if (this != &other) {
    release();
    plan_ = other.plan_;
    packed_ = std::exchange(other.packed_, nullptr);
    workspace_ = std::exchange(other.workspace_, nullptr);
    reserve_ = std::exchange(other.reserve_, nullptr);
    backward_workspace_ = std::exchange(other.backward_workspace_, nullptr);
    pool_ = std::exchange(other.pool_, nullptr);
    step_ = other.step_;
    last_step_ = other.last_step_;
  }
  return *this;
}

Status Model::create(const RnnSpec& spec, const PlanOptions& options, const void* canonical, Model* out) {
  RNNCORE_RETURN_IF_ERROR(validate(spec));
  return create(to_stack(spec), options, canonical, out);
}

Status Model::create(const StackSpec& stack, const PlanOptions& options, const void* canonical, Model* out) {
  RNNCORE_ENSURE(out != nullptr, Status::null_pointer, "Model::create: out is null");
  RNNCORE_ENSURE(canonical != nullptr, Status::null_pointer, "Model::create: canonical weights are null");
#if defined(RNNCORE_NO_HEAP)
  (void)stack;
  (void)options;
  return detail::fail_status(Status::unsupported,
                             "Model::create: this build has no heap (firmware profile); use a Plan with caller memory");
#else
  Model m;
  PlanOptions opt = options;
  if (opt.threads > 1 && opt.thread_pool == nullptr) {  // the threads are made now, once
    RNNCORE_RETURN_IF_ERROR(ThreadPool::create(opt.threads, &m.pool_));
    opt.thread_pool = m.pool_;
  }
  RNNCORE_RETURN_IF_ERROR(Plan::create(stack, opt, &m.plan_));
  const bool device = detail::buffers_in_device_memory(detail::impl(m.plan_));
  if (device) {  // a GPU plan's buffers are device memory
    RNNCORE_RETURN_IF_ERROR(gpu_alloc(opt.gpu_device, m.plan_.packed_weight_bytes(), &m.packed_));
    RNNCORE_RETURN_IF_ERROR(gpu_alloc(opt.gpu_device, m.plan_.workspace_bytes(), &m.workspace_));
  } else {
    m.packed_ = allocate_aligned(m.plan_.packed_weight_bytes());
    m.workspace_ = allocate_aligned(m.plan_.workspace_bytes());
  }
  RNNCORE_ENSURE(m.packed_ != nullptr && m.workspace_ != nullptr, Status::out_of_memory,
                 "Model::create: could not allocate %zu + %zu bytes", m.plan_.packed_weight_bytes(),
                 m.plan_.workspace_bytes());
  if (opt.training && device) {
    RNNCORE_RETURN_IF_ERROR(gpu_alloc(opt.gpu_device, m.plan_.reserve_bytes(), &m.reserve_));
    RNNCORE_RETURN_IF_ERROR(gpu_alloc(opt.gpu_device, m.plan_.backward_workspace_bytes(), &m.backward_workspace_));
  } else if (opt.training) {
    m.reserve_ = allocate_aligned(m.plan_.reserve_bytes());
    m.backward_workspace_ = allocate_aligned(m.plan_.backward_workspace_bytes());
    RNNCORE_ENSURE(m.reserve_ != nullptr && m.backward_workspace_ != nullptr, Status::out_of_memory,
                   "Model::create: could not allocate %zu + %zu bytes for training", m.plan_.reserve_bytes(),
                   m.plan_.backward_workspace_bytes());
  }
  RNNCORE_RETURN_IF_ERROR(m.plan_.pack_weights(canonical, m.packed_, m.plan_.packed_weight_bytes()));
  *out = std::move(m);
  return Status::ok;
#endif
}

// The arguments a Model passes to its plan: its own reserve when none is given (training models),
// and its step counter for a counted run.
ForwardArgs Model::resolve(const ForwardArgs& args, std::uint64_t counted_step) const {
  ForwardArgs a = args;
  if (a.reserve == nullptr && reserve_ != nullptr) {
    a.reserve = reserve_;
    a.reserve_bytes = plan_.reserve_bytes();
  }
  if (a.count_steps) {
    a.count_steps = false;
    a.step = counted_step;
  }
  return a;
}

Status Model::forward(const ForwardArgs& args) {
  RNNCORE_ENSURE(packed_ != nullptr, Status::weights_not_packed, "Model::forward: the model was not created");
  const Status s = plan_.forward(packed_, workspace_, plan_.workspace_bytes(), resolve(args, step_));
  if (s == Status::ok && args.count_steps && args.run_mode != RunMode::inference) last_step_ = step_++;  // inference runs draw no masks
  return s;
}

Status Model::backward(const BackwardArgs& args) {
  RNNCORE_ENSURE(packed_ != nullptr, Status::weights_not_packed, "Model::backward: the model was not created");
  RNNCORE_ENSURE(backward_workspace_ != nullptr, Status::unsupported,
                 "Model::backward: the model was not made for training (PlanOptions::training)");
  BackwardArgs a = args;
  a.forward = resolve(args.forward, last_step_);
  return plan_.backward(packed_, backward_workspace_, plan_.backward_workspace_bytes(), a);
}

Status Model::update_weights(const void* canonical) {
  RNNCORE_ENSURE(packed_ != nullptr, Status::weights_not_packed, "Model::update_weights: the model was not created");
  return plan_.pack_weights(canonical, packed_, plan_.packed_weight_bytes());
}

}  // namespace rnncore
