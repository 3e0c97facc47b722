// The user guide's model-loading example (docs/guide.md): a PyTorch model saved as safetensors, run on a .npy input,
// the output written as .npy. Everything about the model is inferred from the file.
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
  for (const std::string& t : info.ignored) std::fprintf(stderr, "ignored: %s\n", t.c_str());

  const rnncore::LayerSpec& last = info.stack.layers[info.stack.num_layers - 1];
  const int out = rnncore::num_directions(last) * last.hidden_size;
  std::vector<float> y(static_cast<std::size_t>(T) * B * out);
  rnncore::ForwardArgs args;
  args.batch = B;
  args.seq_len = T;
  args.x = xs.data();
  args.y = y.data();
  if (model.forward(args) != rnncore::Status::ok) return std::fprintf(stderr, "%s\n", rnncore::last_error_detail()), 1;
  const std::int64_t shape[3] = {T, B, out};
  return io::write_npy(argv[3], io::ElemType::f32, shape, 3, y.data()) == RNNCORE_OK ? 0 : 1;
}
