// The user guide's model-loading example (docs/guide.md): a model saved as safetensors (a PyTorch
// LSTM, with a Linear head after it if the state_dict has one; or an int8 LSTM model, format
// tflite_int8), run on a .npy input, the output written as .npy, as `rnncore run` writes it.
// Everything about the model is inferred from the file.
#include <cstdio>
#include <string>
#include <vector>

#include <rnncore/io/model.hpp>
#include <rnncore/io/npy.hpp>

int main(int argc, char** argv) {
  if (argc != 4) return std::fprintf(stderr, "usage: load_model MODEL.safetensors X.npy Y.npy\n"), 2;
  namespace io = rnncore::io;
  io::Array x;  // float models: float [T, B, I]; int8 models: [B, T, I] int8 (or float32, or int32 token ids [B, T])
  if (io::read_npy(argv[2], &x) != RNNCORE_OK || x.shape.size() < 2)
    return std::fprintf(stderr, "%s: expected an array [T, B, I] (int8 models: [B, T, I])\n", argv[2]), 1;
  std::vector<float> xs;
  if (x.type != io::ElemType::i8 && x.type != io::ElemType::i32 && io::to_f32(x, &xs) != RNNCORE_OK)
    return std::fprintf(stderr, "%s: expected a float, int8 or int32 array\n", argv[2]), 1;
  // An int8 model is batch-major, as LiteRT's op (and `rnncore run`): the model says so once loaded.
  const int d0 = static_cast<int>(x.shape[0]), d1 = static_cast<int>(x.shape[1]);

  io::LoadOptions options;
  options.plan.max_seq_len = d0 > d1 ? d0 : d1;
  options.plan.max_batch = d0 > d1 ? d0 : d1;
  rnncore::Model model;
  io::LoadedModel info;
  std::string error;
  if (io::load_model(argv[1], options, &model, &info, &error) != rnncore::Status::ok)
    return std::fprintf(stderr, "%s\n", error.c_str()), 1;
  for (const std::string& n : info.notes) std::fprintf(stderr, "note: %s\n", n.c_str());
  for (const std::string& t : info.ignored) std::fprintf(stderr, "ignored: %s\n", t.c_str());
  const bool int8 = info.stack.dtype == rnncore::DType::i8;
  const int T = int8 ? d1 : d0, B = int8 ? d0 : d1;

  // y is [T, B, out] ([B, T, out] for an int8 model): the last layer's units, or a head's features;
  // a head on each row's last step gives [B, out]. An int8 model's y is int8 unless it dequantizes.
  const int out = rnncore::stack_output_size(info.stack);
  const bool last_step = info.stack.head.last_step_only;
  const bool y_int8 = int8 && !info.stack.float_output;
  std::vector<float> y(static_cast<std::size_t>(last_step ? 1 : T) * B * out);
  rnncore::ForwardArgs args;
  args.batch = B;
  args.seq_len = T;
  args.layout = int8 ? rnncore::Layout::batch_major : rnncore::Layout::time_major;
  args.x = xs.empty() ? static_cast<const void*>(x.bytes.data()) : xs.data();
  args.y = y.data();
  if (model.forward(args) != rnncore::Status::ok) return std::fprintf(stderr, "%s\n", rnncore::last_error_detail()), 1;
  const std::int64_t shape[3] = {int8 ? B : T, int8 ? T : B, out}, last_shape[2] = {B, out};
  return io::write_npy(argv[3], y_int8 ? io::ElemType::i8 : io::ElemType::f32, last_step ? last_shape : shape,
                       last_step ? 2 : 3, y.data()) == RNNCORE_OK
             ? 0
             : 1;
}
