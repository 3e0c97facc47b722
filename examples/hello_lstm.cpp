// The user guide's C++ example (docs/guide.md): a 1-layer LSTM from PyTorch-layout tensors, run in caller memory.
#include <cstdio>
#include <cstdlib>
#include <vector>

#include <rnncore/rnncore.hpp>

int main() {
  using namespace rnncore;
  RnnSpec spec;                 // LSTM, unidirectional, f32
  spec.input_size = 3;
  spec.hidden_size = 4;
  PlanOptions opt;
  opt.max_batch = 2;
  opt.max_seq_len = 5;

  // PyTorch nn.LSTM(3, 4) state_dict tensors (here: constant weights, no biases).
  std::vector<float> w_ih(16 * 3, 0.1f), w_hh(16 * 4, -0.05f);
  TensorView tensors[2] = {{"weight_ih_l0", DType::f32, {2, {16, 3}}, w_ih.data()},
                           {"weight_hh_l0", DType::f32, {2, {16, 4}}, w_hh.data()}};
  std::vector<float> canonical(param_count(spec));
  Status s = import_weights(spec, WeightFormat::pytorch, tensors, 2, "", canonical.data());
  if (s != Status::ok) return std::printf("import: %s\n", last_error_detail()), 1;

  Plan plan;  // sizes and kernels, decided once
  if ((s = Plan::create(spec, opt, &plan)) != Status::ok) return std::printf("plan: %s\n", last_error_detail()), 1;
  void* packed = std::aligned_alloc(kAlignment, plan.packed_weight_bytes());
  void* workspace = std::aligned_alloc(kAlignment, plan.workspace_bytes());
  plan.pack_weights(canonical.data(), packed, plan.packed_weight_bytes());

  std::vector<float> x(5 * 2 * 3, 1.0f), y(5 * 2 * 4), h(2 * 4), c(2 * 4);
  ForwardArgs args;
  args.batch = 2;
  args.seq_len = 5;
  args.x = x.data();
  args.y = y.data();
  args.hy = h.data();
  args.cy = c.data();
  s = plan.forward(packed, workspace, plan.workspace_bytes(), args);  // no allocation inside
  std::printf("%s: h[0] = %.6f (%s)\n", status_message(s), h[0], plan.kernel_name());
  std::free(packed);
  std::free(workspace);
  return s == Status::ok ? 0 : 1;
}
