// The int8 LSTM's step time per matrix-vector kernel (src/internal/int8_kernels.hpp), beside the
// f32 LSTM of the SIMD backend at the same shape (I = H, B = 1) as the anchor. A measurement, not
// a test: it prints a table (docs/int8.md, "Kernels").
//
//   int8_lstm_bench [--reps N] [H ...]        (default H: 32 128 512 1024; N: 15)
//
// Each repetition runs a sequence of T steps (T chosen so that a repetition does about 2^25
// multiply-adds, 8 to 256 steps); the time per step is the median repetition over T, in the
// thread's CPU time. An int8 step
// does 4 · H · (I + H) multiply-adds in its matrix-vector products, as does the f32 step. Every
// matrix-vector kernel runs with the step kernels prepare picks for the rest of the step (the
// rescaling, activations, cell and output: "+ <step kernel>"), and the fastest one also with the
// step's scalar code for it ("+ scalar rest"); the last rows time the step with the products left
// out (not a kernel: the bias alone), the rest of the step alone, both ways.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <random>
#include <string>
#include <vector>

#include "rnncore/rnncore.hpp"
#include "src/internal/int8_lstm.hpp"

namespace {

// The thread's CPU time where POSIX has it (both runs are single-threaded): on a shared machine
// the time the thread waits for a core is left out. Elsewhere wall time.
double now_seconds() {
#if defined(CLOCK_THREAD_CPUTIME_ID)
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
#else
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
#endif
}

template <class F>
double median_seconds(int reps, F&& run) {
  run();  // warm-up: caches, page faults
  std::vector<double> t;
  for (int r = 0; r < reps; ++r) {
    const double t0 = now_seconds();
    run();
    t.push_back(now_seconds() - t0);
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

// Seconds per step of the f32 LSTM (SIMD backend where built), or a negative value.
double f32_step_seconds(int H, int T, int reps, std::mt19937& rng, const char** kernel) {
  using namespace rnncore;
  RnnSpec spec;
  spec.input_size = H;
  spec.hidden_size = H;
  PlanOptions opt;
  opt.max_batch = 1;
  opt.max_seq_len = T;
  std::uniform_real_distribution<float> u(-0.1f, 0.1f);
  std::vector<float> canonical(static_cast<std::size_t>(param_count(spec)));
  for (float& v : canonical) v = u(rng);
  Plan plan;
  if (Plan::create(spec, opt, &plan) != Status::ok) return -1;
  *kernel = plan.kernel_name();
  void* packed = std::aligned_alloc(kAlignment, (plan.packed_weight_bytes() + kAlignment - 1) / kAlignment * kAlignment);
  void* ws = std::aligned_alloc(kAlignment, (plan.workspace_bytes() + kAlignment - 1) / kAlignment * kAlignment + kAlignment);
  plan.pack_weights(canonical.data(), packed, plan.packed_weight_bytes());
  std::vector<float> x(static_cast<std::size_t>(T) * H), y(x.size()), h(static_cast<std::size_t>(H)), c(h.size());
  for (float& v : x) v = u(rng);
  ForwardArgs a;
  a.batch = 1;
  a.seq_len = T;
  a.x = x.data();
  a.y = y.data();
  a.hy = h.data();
  a.cy = c.data();
  bool ok = true;
  const double s = median_seconds(reps, [&] { ok = ok && plan.forward(packed, ws, plan.workspace_bytes(), a) == Status::ok; });
  std::free(packed);
  std::free(ws);
  return ok ? s / T : -1;
}

// Not a kernel: the bias alone, so that a row of the table shows what the rest of the step (the
// rescaling, activations and cell update) costs without any multiply-add.
void bias_only(const std::int8_t*, int rows, int, const std::int8_t*, const std::int32_t* bias, std::int32_t* out) {
  std::memcpy(out, bias, static_cast<std::size_t>(rows) * sizeof(std::int32_t));
}

}  // namespace

int main(int argc, char** argv) {
  using namespace rnncore;
  using namespace rnncore::q8;
  int reps = 15;
  std::vector<int> sizes;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--reps") == 0 && i + 1 < argc) reps = std::max(1, std::atoi(argv[++i]));
    else if (std::atoi(argv[i]) > 0) sizes.push_back(std::atoi(argv[i]));
    else return std::fprintf(stderr, "usage: %s [--reps N] [H ...]\n", argv[0]), 2;
  }
  if (sizes.empty()) sizes = {32, 128, 512, 1024};
  int nk = 0;
  const DotRowsKernel* kernels = int8_dot_kernels(&nk);
  std::mt19937 rng(13);
  std::uniform_int_distribution<int> byte(-127, 127);

  std::printf("int8 LSTM step (I = H, B = 1), median of %d; GMAC/s = 4·H·(I+H) per step / time; "
              "ratio = f32 step time / int8 step time\n", reps);
  std::printf("%6s %5s  %-48s %12s %9s %8s\n", "H", "T", "kernel", "us/step", "GMAC/s", "vs f32");
  for (int H : sizes) {
    const int I = H;
    const double macs = 4.0 * H * (I + H);
    const int T = static_cast<int>(std::min(256.0, std::max(8.0, 33554432.0 / macs)));
    const char* f32_kernel = "?";
    const double f32 = f32_step_seconds(H, T, reps, rng, &f32_kernel);

    Int8LstmQuantization q;
    q.input_scale = 1.0f / 128;
    q.input_zp = 3;
    q.state_scale = 1.0f / 128;
    q.state_zp = -2;
    q.hidden_scale = 1.0f / 128;
    q.hidden_zp = -2;
    q.cell_scale = 1.0f / 2048;
    q.cell_clip = 10.0f;
    std::vector<std::int8_t> w[kGates], r[kGates];
    std::vector<std::int32_t> b[kGates];
    const std::int8_t* wp[kGates];
    const std::int8_t* rp[kGates];
    const std::int32_t* bp[kGates];
    for (int g = 0; g < kGates; ++g) {
      q.w_scale[g] = 1.0f / 4096;
      q.r_scale[g] = 1.0f / 4096;
      w[g].resize(static_cast<std::size_t>(H) * I);
      r[g].resize(static_cast<std::size_t>(H) * H);
      b[g].resize(static_cast<std::size_t>(H));
      for (auto& v : w[g]) v = static_cast<std::int8_t>(byte(rng));
      for (auto& v : r[g]) v = static_cast<std::int8_t>(byte(rng));
      for (auto& v : b[g]) v = byte(rng) * 16;
      wp[g] = w[g].data();
      rp[g] = r[g].data();
      bp[g] = b[g].data();
    }
    std::vector<std::int32_t> bias_storage(int8_lstm_bias_words(H));
    Int8LstmParams p;
    if (int8_lstm_prepare(q, I, H, wp, rp, bp, bias_storage.data(), bias_storage.size(), &p) != Status::ok)
      return std::fprintf(stderr, "prepare: %s\n", last_error_detail()), 1;
    std::vector<std::int8_t> x(static_cast<std::size_t>(T) * I), y(static_cast<std::size_t>(T) * H);
    for (auto& v : x) v = static_cast<std::int8_t>(byte(rng));
    std::vector<std::int8_t> h(static_cast<std::size_t>(H)), scratch(int8_lstm_scratch_bytes(H));
    std::vector<std::int16_t> c(static_cast<std::size_t>(H));
    const GateActivationsFn step_gate = p.gate_activations;
    const CellUpdateFn step_cell = p.cell_update;
    const StepKernels* step = int8_best_step_kernels();
    const std::string with_step = std::string(" + ") + (step ? step->gate_name : "scalar rest");
    // Rows: every kernel with the step kernels; the fastest with the scalar rest (where there are
    // step kernels); the rest alone, with the step kernels and (where there are) without.
    struct Row { int kernel; bool scalar_rest; };
    std::vector<Row> rows;
    for (int ki = 0; ki < nk; ++ki) rows.push_back({ki, false});
    if (step != nullptr) rows.push_back({nk - 1, true});
    rows.push_back({-1, false});
    if (step != nullptr) rows.push_back({-1, true});
    for (const Row& row : rows) {
      p.dot = row.kernel < 0 ? bias_only : kernels[row.kernel].fn;
      p.gate_activations = row.scalar_rest ? nullptr : step_gate;
      p.cell_update = row.scalar_rest ? nullptr : step_cell;
      bool ok = true;
      const double s = median_seconds(reps, [&] {
        ok = ok && int8_lstm_sequence(p, 1, T, x.data(), y.data(), h.data(), c.data(), scratch.data(), scratch.size()) == Status::ok;
      }) / T;
      if (!ok) return std::fprintf(stderr, "int8_lstm_sequence failed\n"), 1;
      const std::string rest = row.scalar_rest || step == nullptr ? " + scalar rest" : with_step;
      if (row.kernel < 0) {
        std::printf("%6d %5d  %-48s %12.2f %9s %8s\n", H, T, ("(no dots)" + rest).c_str(), s * 1e6, "-", "-");
      } else {
        std::printf("%6d %5d  %-48s %12.2f %9.2f %8.2f\n", H, T, (kernels[row.kernel].name + rest).c_str(), s * 1e6,
                    macs / s * 1e-9, f32 > 0 ? f32 / s : 0.0);
      }
    }
    if (f32 > 0)
      std::printf("%6d %5d  %-48s %12.2f %9.2f %8.2f\n", H, T, (std::string("f32 ") + f32_kernel).c_str(), f32 * 1e6,
                  macs / f32 * 1e-9, 1.0);
  }
  return 0;
}
