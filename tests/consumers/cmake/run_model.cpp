// Loads examples/models/lstm_small.safetensors (a 2-layer PyTorch LSTM) with rnncore::io, runs it
// on the stored input and compares the output with PyTorch's:
//   |y - y_torch| <= 1e-5 + 1e-5 * |y_torch| for every element (float32 rounding; rnncore differs
//   from PyTorch by about 5e-8).
// Exit status 0 when every element is within the tolerance.
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include <rnncore/io/model.hpp>
#include <rnncore/io/npy.hpp>
#include <rnncore/rnncore.hpp>

namespace {

bool load_f32(const std::string& path, rnncore::io::Array* array, std::vector<float>* values) {
  if (rnncore::io::read_npy(path.c_str(), array) != RNNCORE_OK || rnncore::io::to_f32(*array, values) != RNNCORE_OK) {
    std::fprintf(stderr, "run_model: cannot read %s: %s\n", path.c_str(), rnncore::last_error_detail());
    return false;
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string dir = argc > 1 ? argv[1] : RNNCORE_MODELS_DIR;
  rnncore::io::Array x_array, y_array;
  std::vector<float> x, y_torch;
  if (!load_f32(dir + "/lstm_small_input.npy", &x_array, &x) ||
      !load_f32(dir + "/lstm_small_expected_y.npy", &y_array, &y_torch))
    return 1;
  if (x_array.shape.size() != 3 || y_array.shape.size() != 3) {
    std::fprintf(stderr, "run_model: expected x [T, B, I] and y [T, B, H]\n");
    return 1;
  }
  const int seq_len = static_cast<int>(x_array.shape[0]);
  const int batch = static_cast<int>(x_array.shape[1]);

  rnncore::io::LoadOptions options;
  options.plan.max_batch = batch;
  options.plan.max_seq_len = seq_len;
  rnncore::Model model;
  rnncore::io::LoadedModel info;
  std::string error;
  if (rnncore::io::load_model(dir + "/lstm_small.safetensors", options, &model, &info, &error) != rnncore::Status::ok) {
    std::fprintf(stderr, "run_model: %s\n", error.c_str());
    return 1;
  }

  std::vector<float> y(y_torch.size(), 0.0f);
  rnncore::ForwardArgs args;
  args.batch = batch;
  args.seq_len = seq_len;
  args.x = x.data();
  args.y = y.data();
  if (model.forward(args) != rnncore::Status::ok) {
    std::fprintf(stderr, "run_model: forward: %s\n", rnncore::last_error_detail());
    return 1;
  }

  const double atol = 1e-5, rtol = 1e-5;
  double max_abs = 0.0;
  std::size_t bad = 0;
  for (std::size_t i = 0; i < y.size(); ++i) {
    const double diff = std::fabs(static_cast<double>(y[i]) - y_torch[i]);
    if (diff > max_abs) max_abs = diff;
    if (!(diff <= atol + rtol * std::fabs(static_cast<double>(y_torch[i])))) ++bad;
  }
  std::printf("run_model: %d layer(s), hidden %d, T=%d B=%d: max_abs_diff=%.3g vs PyTorch, %zu of %zu outside "
              "1e-5 + 1e-5*|y|\n",
              info.stack.num_layers, info.spec.hidden_size, seq_len, batch, max_abs, bad, y.size());
  return bad == 0 ? 0 : 1;
}
