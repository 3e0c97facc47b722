// `rnncore bench --dtype int8` (tools/bench_int8.hpp).
#include "tools/bench_int8.hpp"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "src/internal/int8_lstm.hpp"
#include "tools/cli.hpp"

namespace rnncore {
namespace tools {
namespace {

using q8::kGates;

// One layer: its int8 weights and biases, the prepared parameters and the effective biases.
struct Layer {
  std::vector<std::int8_t> w[kGates], r[kGates];
  std::vector<std::int32_t> b[kGates], storage;
  q8::Int8LstmParams p;
};

// The quantization of a Keras LSTM converted with a cell clip (scales of 1/128 for the int8
// tensors, the weights' range [−1, 1] in 127 steps, the cell at 2^-11 with a clip of 10).
q8::Int8LstmQuantization keras_like_quantization() {
  q8::Int8LstmQuantization q;
  q.input_scale = q.state_scale = q.hidden_scale = 1.0f / 128;
  q.input_zp = 3;
  q.state_zp = q.hidden_zp = -2;
  for (int g = 0; g < kGates; ++g) q.w_scale[g] = q.r_scale[g] = 1.0f / 127;
  q.cell_scale = 1.0f / 2048;
  q.cell_clip = 10.0f;
  return q;
}

}  // namespace

int bench_int8(const Int8BenchShape& s) {
  const int T = static_cast<int>(s.seq), B = static_cast<int>(s.batch), L = static_cast<int>(s.layers);
  const int I = static_cast<int>(s.input), H = static_cast<int>(s.hidden);
  std::uint64_t state = 12345;
  auto next_byte = [&state]() {  // small LCG: benchmark data only needs to be non-degenerate
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<std::int8_t>(static_cast<int>((state >> 33) % 255) - 127);
  };
  const q8::Int8LstmQuantization q = keras_like_quantization();
  std::vector<Layer> layers(static_cast<std::size_t>(L));
  for (int l = 0; l < L; ++l) {
    Layer& ly = layers[static_cast<std::size_t>(l)];
    const int in = l == 0 ? I : H;
    const std::int8_t* w[kGates];
    const std::int8_t* r[kGates];
    const std::int32_t* b[kGates];
    for (int g = 0; g < kGates; ++g) {
      ly.w[g].resize(static_cast<std::size_t>(H) * static_cast<std::size_t>(in));
      ly.r[g].resize(static_cast<std::size_t>(H) * static_cast<std::size_t>(H));
      ly.b[g].resize(static_cast<std::size_t>(H));
      for (std::int8_t& v : ly.w[g]) v = next_byte();
      for (std::int8_t& v : ly.r[g]) v = next_byte();
      for (std::int32_t& v : ly.b[g]) v = 64 * next_byte();
      w[g] = ly.w[g].data();
      r[g] = ly.r[g].data();
      b[g] = ly.b[g].data();
    }
    ly.storage.resize(q8::int8_lstm_storage_words(q, H));
    if (q8::int8_lstm_prepare(q, in, H, w, r, b, ly.storage.data(), ly.storage.size(), &ly.p) != Status::ok)
      return error(std::string("int8 LSTM: ") + last_error_detail());
    if (s.reference) {  // the portable kernels (the DSP one where the build is for ARM) and the scalar rest
      ly.p.dot = q8::int8_best_dot_kernel(Isa::none).fn;
      ly.p.gate_activations = nullptr;
      ly.p.cell_update = nullptr;
    }
  }
  const q8::StepKernels* step = s.reference ? nullptr : q8::int8_best_step_kernels();
  const std::string dot_name = s.reference ? q8::int8_best_dot_kernel(Isa::none).name : q8::int8_best_dot_kernel().name;

  const std::size_t rows = static_cast<std::size_t>(B) * static_cast<std::size_t>(T);
  std::vector<std::int8_t> x(rows * static_cast<std::size_t>(I)), y[2];
  for (std::int8_t& v : x) v = next_byte();
  for (std::vector<std::int8_t>& v : y) v.resize(rows * static_cast<std::size_t>(H));
  std::vector<std::int8_t> h(static_cast<std::size_t>(B) * static_cast<std::size_t>(H)),
      scratch(q8::int8_lstm_scratch_bytes(layers[0].p));
  std::vector<std::int16_t> c(h.size());
  // One forward of the stack from a zero state (the output state at its zero point).
  auto forward = [&]() -> bool {
    const std::int8_t* in = x.data();
    for (int l = 0; l < L; ++l) {
      std::fill(h.begin(), h.end(), static_cast<std::int8_t>(q.state_zp));
      std::fill(c.begin(), c.end(), std::int16_t{0});
      std::int8_t* out = y[l % 2].data();
      if (q8::int8_lstm_sequence(layers[static_cast<std::size_t>(l)].p, B, T, in, out, h.data(), c.data(), scratch.data(),
                                 scratch.size()) != Status::ok)
        return false;
      in = out;
    }
    return true;
  };
  using clock = std::chrono::steady_clock;
  std::vector<double> ms;
  const auto start = clock::now();
  for (long long i = -1; i < s.reps; ++i) {  // i = -1: the warm-up
    const auto t0 = clock::now();
    if (!forward()) return error(std::string("int8 LSTM: ") + last_error_detail());
    const double t = std::chrono::duration<double, std::milli>(clock::now() - t0).count();
    if (i >= 0) ms.push_back(t);
    if (t > 500.0)
      std::fprintf(stderr, "rnncore bench: %s %lld/%lld, %.1f s\n", i < 0 ? "warm-up" : "repetition", i < 0 ? 0 : i + 1,
                   s.reps, std::chrono::duration<double>(clock::now() - start).count());
  }
  std::sort(ms.begin(), ms.end());
  const double median = ms[ms.size() / 2];
  double ops = 0;  // 2 · 4H · (I_l + H) per step, row and layer
  for (int l = 0; l < L; ++l) ops += 2.0 * kGates * H * ((l == 0 ? I : H) + H) * static_cast<double>(rows);
  const std::string step_name = step ? std::string(step->gate_name) + " / " + step->cell_name : "scalar step";
  std::printf("lstm int8 T=%d B=%d I=%d H=%d L=%d unidirectional threads=1 backend=%s kernel=%s + %s reps=%lld\n", T, B, I,
              H, L, s.reference ? "reference" : "simd", dot_name.c_str(), step_name.c_str(), s.reps);
  std::printf("median_ms=%.4f gops=%.2f\n", median, ops / (median * 1e6));
  return 0;
}

}  // namespace tools
}  // namespace rnncore
