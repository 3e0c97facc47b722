// The user guide's model-loading example (docs/guide.md): a PyTorch model saved as safetensors (an LSTM,
// and a Linear head after it if the state_dict has one), run on a .npy input, the output written as .npy.
// Everything about the model is inferred from the file.
#include <cstdio>
#include <string>
#include <vector>

#include <rnncore/io/model.hpp>
#include <rnncore/io/npy.hpp>

int main(int argc, char** argv) {
  if (argc != 4) return std::fprintf(stderr, "usage: load_model MODEL.safetensors X.npy Y.npy\n"), 2;
  namespace io = rnncore::io;
  io::Array x;  // [T, B, I]
  std::vector<float> xs;
  if (io::read_npy(argv[2], &x) != RNNCORE_OK || io::to_f32(x, &xs) != RNNCORE_OK || x.shape.size() != 3)
    return std::fprintf(stderr, "%s: expected a [T, B, I] float array\n", argv[2]), 1;
  const int T = static_cast<int>(x.shape[0]), B = static_cast<int>(x.shape[1]);

  io::LoadOptions options;
  options.plan.max_seq_len = T;
  options.plan.max_batch = B;
  rnncore::Model model;
  io::LoadedModel info;
  std::string error;
  if (io::load_model(argv[1], options, &model, &info, &error) != rnncore::Status::ok)
    return std::fprintf(stderr, "%s\n", error.c_str()), 1;
  for (const std::string& n : info.notes) std::fprintf(stderr, "note: %s\n", n.c_str());
  for (const std::string& t : info.ignored) std::fprintf(stderr, "ignored: %s\n", t.c_str());

  // y is [T, B, out]: the last layer's D·O units, or a Linear/Dense head's features; a head on each
  // row's last step gives [B, out].
  const int out = rnncore::stack_output_size(info.stack);
  const bool last_step = info.stack.head.last_step_only;
  std::vector<float> y(static_cast<std::size_t>(last_step ? 1 : T) * B * out);
  rnncore::ForwardArgs args;
  args.batch = B;
  args.seq_len = T;
  args.x = xs.data();
  args.y = y.data();
  if (model.forward(args) != rnncore::Status::ok) return std::fprintf(stderr, "%s\n", rnncore::last_error_detail()), 1;
  const std::int64_t shape[3] = {T, B, out}, last_shape[2] = {B, out};
  return io::write_npy(argv[3], io::ElemType::f32, last_step ? last_shape : shape, last_step ? 2 : 3, y.data()) == RNNCORE_OK
             ? 0
             : 1;
}
