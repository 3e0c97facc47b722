// onednn_compare: rnncore against oneDNN's RNN primitive, side by side, in one process.
//
// For each shape both libraries get the same network (f32, input size = hidden size, the same
// random weights converted to each library's layout) and the same input. Timed runs alternate
// (rnncore, oneDNN, rnncore, ...) after a warm-up; each follows a pause (the other library's idle
// threads fall asleep) and untimed runs of its own library (its steady state: weights in cache,
// threads awake). The table reports medians, their ratio
// (oneDNN time / rnncore time: > 1 means rnncore is faster), GFLOP/s, the fraction of the measured
// FMA peak, the CPU time per wall time of each library, and the largest relative difference of
// their outputs, which checks the weight conversion: a comparison is only meaningful if both
// libraries compute the same function.
//
// oneDNN threads: Debian's oneDNN runs on OpenMP; its thread count is set with omp_set_num_threads
// before each configuration's primitives are created (OMP_NUM_THREADS is overridden). rnncore's
// comes from PlanOptions::threads. See docs/performance.md.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <set>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include <unistd.h>

#include <oneapi/dnnl/dnnl.hpp>
#if DNNL_VERSION_MAJOR != 2
#error "onednn_compare uses the oneDNN 2.x API (operation descriptors)"
#endif
#ifdef BENCH_HAVE_OPENMP
#include <omp.h>
#endif

#include "tools/fma_peak/fma_peak.hpp"
#include "rnncore/rnncore.hpp"

namespace {

using rnncore::Mode;

const char* const kUsage =
    "usage: onednn_compare [options]\n"
    "\n"
    "Times rnncore and oneDNN (RNN primitive, forward_inference, f32) on the same shapes in one\n"
    "process, alternating, and prints medians, ratios (oneDNN ms / rnncore ms: > 1 means rnncore is\n"
    "faster), GFLOP/s, fraction of the measured FMA peak and the outputs' largest relative difference.\n"
    "\n"
    "shapes (default: the full sweep, about 76 shapes):\n"
    "  --modes LIST      lstm,gru,rnn_tanh (gru = reset-after = oneDNN's lbr_gru)\n"
    "  --hidden LIST     128,256,512,1024 (input size = hidden size)\n"
    "  --batch LIST      1,16,64\n"
    "  --seq T           100\n"
    "  --threads LIST    1,2\n"
    "  --no-extras       skip the bidirectional and 3-layer LSTM (H=512, B=64) cases\n"
    "  --quick           a handful of shapes, 3 repetitions, no waiting or retries (smoke test)\n"
    "  --backward        time training steps instead: rnncore's training forward + backward (dx, dh0,\n"
    "                    dc0, weight gradients) against oneDNN's forward_training + backward (LSTM, lbr\n"
    "                    GRU, vanilla RNN), and check that the gradients agree (limit 1e-4 relative to\n"
    "                    the largest; --rnncore-weights bf16 5e-2, f16 5e-3); defaults then: --modes\n"
    "                    lstm,gru --hidden 128,256,512 --seq 50\n"
    "                    --threads 1 --reps 5 --warmup 1, no stacked cases, and no untimed runs before\n"
    "                    the timed runs of a library whose warm-up run took over 250 ms\n"
    "  --proj-div K      LSTM shapes get a projection of P = H/K units (LSTMP, K >= 2; rnncore's\n"
    "                    proj_size, oneDNN's weights_projection); no stacked cases; not with --backward\n"
    "  --peepholes       LSTM shapes get peepholes (oneDNN's weights_peephole)\n"
    "  --rnncore-weights f32|bf16|f16   rnncore's weight storage (oneDNN stays f32); the agreement check\n"
    "                    allows bf16 2e-2, f16 2e-3 (their stated error) instead of 1e-4\n"
    "timing:\n"
    "  --reps N          timed repetitions per library and shape (default 15; median reported)\n"
    "  --warmup N        untimed runs per library before timing (default 2)\n"
    "  --gap-ms X        pause before each library's turn so that the other library's idle threads\n"
    "                    stop spinning before it starts (default 10)\n"
    "  --prerun-ms X     before each timed run, untimed runs of the same library (at least one, for\n"
    "                    at least X ms) so that the timed run finds its weights in cache and its\n"
    "                    threads awake and settled on their cores (default 20)\n"
    "  --busy-limit N    a shape during which other processes kept more than N/100 cores busy\n"
    "                    (from /proc/stat) is measured again (default 25)\n"
    "  --retries N       at most N more attempts per shape; the quietest is kept (default 2)\n"
    "  --wait-quiet S    before each attempt (and the FMA peak), wait up to S seconds for the other\n"
    "                    processes' load to drop below the busy limit (default 120)\n"
    "  --peak-runs N     FMA peak: best of N runs (default 7)\n"
    "output (the plain table always goes to stdout; progress to stderr):\n"
    "  --markdown FILE   also write the table as Markdown ('-' = stdout)\n"
    "  --csv FILE        also write the results as CSV ('-' = stdout)\n"
    "  --note TEXT       a line for the output's header (e.g. the commit measured); repeatable\n";

// ---- small helpers ----

struct Shape {
  Mode mode = Mode::lstm;
  int hidden = 0;
  int batch = 0;
  int seq = 0;
  int threads = 1;
  int layers = 1;
  int directions = 1;
  int proj = 0;            // LSTM projection size (0: none)
  bool peepholes = false;  // LSTM peepholes
};

struct Result {
  Shape shape;
  std::string error;  // empty: both ran
  double rn_ms = 0, dn_ms = 0;  // medians
  double rn_min = 0, rn_max = 0, dn_min = 0, dn_max = 0;
  double rn_par = 0, dn_par = 0;  // process CPU time / wall time during the timed runs
  double other_load = -1;         // cores busy with other processes during the timed loop (-1: unknown)
  int attempts = 1;
  double gflop = 0;               // per forward run
  double max_rel = 0;             // max |rnncore - oneDNN| / max |oneDNN| over y, hy (and cy)
  std::string rn_kernel, dn_impl;
  // --backward: medians of the two halves of a training step, and the gradients' agreement
  // (max |rnncore - oneDNN| / max |oneDNN| of the weight gradients, dx, and dh0 with dc0).
  double rn_fwd_ms = 0, rn_bwd_ms = 0, dn_fwd_ms = 0, dn_bwd_ms = 0;
  double rel_dw = 0, rel_dx = 0, rel_dstate = 0;
};

const char* mode_name(Mode m) {
  switch (m) {
    case Mode::lstm: return "lstm";
    case Mode::gru: return "gru";
    case Mode::rnn_tanh: return "rnn_tanh";
    case Mode::rnn_relu: return "rnn_relu";
  }
  return "?";
}

// The mode column: "lstm", or "lstmp" (projection) / "lstm+ph" (peepholes) / "lstmp+ph".
std::string shape_mode(const Shape& s) {
  std::string m = mode_name(s.mode);
  if (s.proj > 0) m += "p";
  if (s.peepholes) m += "+ph";
  return m;
}

bool parse_mode(const std::string& s, Mode* m) {
  if (s == "lstm") *m = Mode::lstm;
  else if (s == "gru") *m = Mode::gru;
  else if (s == "rnn_tanh") *m = Mode::rnn_tanh;
  else return false;
  return true;
}

bool parse_int(const std::string& s, long lo, long hi, long* out) {
  char* end = nullptr;
  const long v = std::strtol(s.c_str(), &end, 10);
  if (s.empty() || *end != '\0' || v < lo || v > hi) return false;
  *out = v;
  return true;
}

bool parse_int_list(const std::string& s, long lo, long hi, std::vector<int>* out) {
  out->clear();
  std::size_t at = 0;
  while (at <= s.size()) {
    const std::size_t comma = s.find(',', at);
    const std::string item = s.substr(at, comma == std::string::npos ? std::string::npos : comma - at);
    long v;
    if (!parse_int(item, lo, hi, &v)) return false;
    out->push_back(static_cast<int>(v));
    if (comma == std::string::npos) break;
    at = comma + 1;
  }
  return !out->empty();
}

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double process_cpu_s() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

// Busy CPU time of the whole machine (all cores, incl. time stolen by the hypervisor), from
// /proc/stat; < 0 if unreadable. With the process's own CPU time it gives the other processes' load.
double machine_busy_s() {
  std::FILE* f = std::fopen("/proc/stat", "r");
  if (!f) return -1;
  unsigned long long v[8] = {0, 0, 0, 0, 0, 0, 0, 0};  // user nice system idle iowait irq softirq steal
  const int n = std::fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3], &v[4],
                            &v[5], &v[6], &v[7]);
  std::fclose(f);
  if (n < 7) return -1;
  const double hz = static_cast<double>(sysconf(_SC_CLK_TCK));
  return static_cast<double>(v[0] + v[1] + v[2] + v[5] + v[6] + v[7]) / hz;
}

// Waits until other processes keep at most `limit` cores busy (measured over half a second), for at
// most `max_s` seconds; returns the last measured load (-1: /proc/stat unreadable).
double wait_until_quiet(double limit, double max_s) {
  const double start = now_s();
  double last_note = start, load = -1;
  for (;;) {
    const double b0 = machine_busy_s(), c0 = process_cpu_s(), t0 = now_s();
    if (b0 < 0) return -1;
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    const double b1 = machine_busy_s(), c1 = process_cpu_s(), t1 = now_s();
    load = std::max(0.0, (b1 - b0 - (c1 - c0)) / (t1 - t0));
    if (load <= limit || t1 - start >= max_s) break;
    if (t1 - last_note >= 10) {
      std::fprintf(stderr, "          waiting for a quiet machine: other processes keep %.2f cores busy (%.0f s)\n",
                   load, t1 - start);
      last_note = t1;
    }
  }
  return load;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// Deterministic uniform numbers in [-scale, scale): benchmark data only needs to be non-degenerate.
struct Rng {
  std::uint64_t state;
  explicit Rng(std::uint64_t seed) : state(seed * 0x9E3779B97F4A7C15ull + 1) {}
  float next(float scale) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return scale * static_cast<float>(static_cast<double>(state >> 11) * 0x1.0p-52 - 1.0);
  }
};

std::string cpu_model() {
  std::ifstream f("/proc/cpuinfo");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("model name", 0) == 0) {
      const std::size_t colon = line.find(':');
      if (colon != std::string::npos) return line.substr(line.find_first_not_of(" \t", colon + 1));
    }
  return "unknown CPU";
}

void set_onednn_threads(int n) {
#ifdef BENCH_HAVE_OPENMP
  omp_set_num_threads(n);
#else
  (void)n;
#endif
}

int onednn_max_threads() {
#ifdef BENCH_HAVE_OPENMP
  return omp_get_max_threads();
#else
  return -1;
#endif
}

double flops_per_run(const rnncore::RnnSpec& spec, int seq, int batch) {
  double f = 0;  // 2 flops per multiply-add of the input, recurrent (K = P with a projection) and projection products
  const double H = spec.hidden_size, P = spec.proj_size, O = P > 0 ? P : H;
  for (int l = 0; l < spec.num_layers; ++l)
    f += 2.0 * (rnncore::num_gates(spec.mode) * H * (rnncore::layer_input_size(spec, l) + O) + P * H) * seq * batch *
         rnncore::num_directions(spec);
  return f;
}

// ---- oneDNN side ----

// One oneDNN RNN primitive with its memories; inputs and outputs live in caller vectors.
struct OnednnNet {
  dnnl::primitive prim;
  std::unordered_map<int, dnnl::memory> args;
  std::vector<float> wl, wi, bias;  // user-layout weights (kept: memories may point into them)
  std::vector<float> peephole, projection;  // LSTM: [L, D, 3, H] (i, f, o) and [L, D, H, P] (ldio)
  std::string impl;
};

// Canonical gate of each oneDNN gate. oneDNN: LSTM i, f, c, o (= canonical i, f, g, o);
// GRU u (update = z), r, o (candidate = n) against canonical r, z, n; RNN one gate.
int canonical_gate(Mode mode, int g) {
  if (mode == Mode::gru) {
    static const int kGru[3] = {1, 0, 2};
    return kGru[g];
  }
  return g;
}

// Converts canonical weights: weights_layer [L, D, I, G, H] and weights_iter [L, D, H, G, H]
// (ldigo: element (l, d, k, g, j) multiplies input k into unit j of gate g), bias [L, D, Gb, H]
// (ldgo). oneDNN has one bias per gate, so it gets bW + bR, except in the linear-before-reset GRU:
// there the candidate's input bias (gate 2) and recurrent bias (the extra gate 3, added to the
// recurrent product before the reset gate multiplies it) stay apart.
void convert_weights(const rnncore::RnnSpec& spec, const float* canonical, OnednnNet* net) {
  using rnncore::ParamKind;
  const int L = spec.num_layers, D = rnncore::num_directions(spec), H = spec.hidden_size;
  const int G = rnncore::num_gates(spec.mode), Gb = spec.mode == Mode::gru ? 4 : G;
  const int I = spec.input_size;  // all layers: input_size == hidden_size, and D == 2 only for L == 1
  const int P = spec.proj_size, K = P > 0 ? P : H;  // K: units of h, the recurrent product's inputs
  net->wl.assign(static_cast<std::size_t>(L) * D * I * G * H, 0.0f);
  net->wi.assign(static_cast<std::size_t>(L) * D * K * G * H, 0.0f);
  net->bias.assign(static_cast<std::size_t>(L) * D * Gb * H, 0.0f);
  if (spec.peepholes) net->peephole.assign(static_cast<std::size_t>(L) * D * 3 * H, 0.0f);
  if (P > 0) net->projection.assign(static_cast<std::size_t>(L) * D * H * P, 0.0f);
  for (int l = 0; l < L; ++l)
    for (int d = 0; d < D; ++d) {
      const std::size_t ld = static_cast<std::size_t>(l) * D + d;
      for (int g = 0; g < G; ++g) {
        const int cg = canonical_gate(spec.mode, g);
        const float* W = canonical + rnncore::canonical_offset(spec, l, d, ParamKind::input_weight, cg);
        const float* R = canonical + rnncore::canonical_offset(spec, l, d, ParamKind::recurrent_weight, cg);
        const float* bW = canonical + rnncore::canonical_offset(spec, l, d, ParamKind::input_bias, cg);
        const float* bR = canonical + rnncore::canonical_offset(spec, l, d, ParamKind::recurrent_bias, cg);
        for (int j = 0; j < H; ++j) {
          for (int k = 0; k < I; ++k)
            net->wl[((ld * I + k) * G + g) * H + j] = W[static_cast<std::size_t>(j) * I + k];
          for (int k = 0; k < K; ++k)
            net->wi[((ld * K + k) * G + g) * H + j] = R[static_cast<std::size_t>(j) * K + k];
          if (spec.mode == Mode::gru && g == 2) {
            net->bias[(ld * Gb + 2) * H + j] = bW[j];
            net->bias[(ld * Gb + 3) * H + j] = bR[j];
          } else {
            net->bias[(ld * Gb + g) * H + j] = bW[j] + bR[j];
          }
        }
      }
      for (int q = 0; q < 3 && spec.peepholes; ++q) {  // oneDNN i, f, o = canonical peepholes 0, 1, 3
        const float* pq = canonical + rnncore::canonical_offset(spec, l, d, ParamKind::peephole, q == 2 ? 3 : q);
        for (int j = 0; j < H; ++j) net->peephole[(ld * 3 + q) * H + j] = pq[j];
      }
      if (P > 0) {  // canonical W_proj [P, H]; oneDNN (l, d, i = cell unit, o = projected unit)
        const float* wp = canonical + rnncore::canonical_offset(spec, l, d, ParamKind::projection, 0);
        for (int j = 0; j < H; ++j)
          for (int o = 0; o < P; ++o) net->projection[(ld * H + j) * P + o] = wp[static_cast<std::size_t>(o) * H + j];
      }
    }
}

// Creates the primitive for `spec` at (seq, batch) with a user scratchpad, converts and reorders the
// weights into the layout the primitive chose. x [T, B, I] in, y [T, B, D·H], hy and cy [L, D, B, H] out.
OnednnNet make_onednn(const dnnl::engine& eng, dnnl::stream& strm, const rnncore::RnnSpec& spec,
                      const float* canonical, int seq, int batch, float* x, float* y, float* hy, float* cy) {
  using dnnl::memory;
  using tag = memory::format_tag;
  const memory::data_type f32 = memory::data_type::f32;
  const memory::dim T = seq, B = batch, L = spec.num_layers, D = rnncore::num_directions(spec);
  const memory::dim H = spec.hidden_size, I = spec.input_size, G = rnncore::num_gates(spec.mode);
  const memory::dim Gb = spec.mode == Mode::gru ? 4 : G;
  const memory::dim P = spec.proj_size, K = P > 0 ? P : H;  // K: units of h (and of y per direction)

  OnednnNet net;
  convert_weights(spec, canonical, &net);

  const memory::desc src_md({T, B, I}, f32, tag::tnc), dst_md({T, B, D * K}, f32, tag::tnc);
  const memory::desc state_md({L, D, B, K}, f32, tag::ldnc), none;  // none: zero initial states
  const memory::desc cell_md({L, D, B, H}, f32, tag::ldnc);
  const memory::desc wl_any({L, D, I, G, H}, f32, tag::any), wi_any({L, D, K, G, H}, f32, tag::any);
  const memory::desc bias_md({L, D, Gb, H}, f32, tag::ldgo);
  const memory::desc peep_md = spec.peepholes ? memory::desc({L, D, 3, H}, f32, tag::ldgo) : none;
  const memory::desc wp_any = P > 0 ? memory::desc({L, D, H, P}, f32, tag::any) : none;
  memory::desc wp_md;
  const auto fwd = dnnl::prop_kind::forward_inference;
  const auto dir = D == 2 ? dnnl::rnn_direction::bidirectional_concat : dnnl::rnn_direction::unidirectional_left2right;
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);  // allocated once here, like rnncore's workspace

  memory::desc wl_md, wi_md, scratch_md;
  switch (spec.mode) {
    case Mode::lstm: {
      const dnnl::lstm_forward::desc d(fwd, dir, src_md, none, none, wl_any, wi_any, peep_md, wp_any, bias_md, dst_md,
                                       state_md, cell_md);
      const dnnl::lstm_forward::primitive_desc pd(d, attr, eng);
      net.prim = dnnl::lstm_forward(pd);
      wl_md = pd.weights_layer_desc(), wi_md = pd.weights_iter_desc(), scratch_md = pd.scratchpad_desc();
      wp_md = pd.weights_projection_desc();
      net.impl = pd.impl_info_str();
      break;
    }
    case Mode::gru: {
      const dnnl::lbr_gru_forward::desc d(fwd, dir, src_md, none, wl_any, wi_any, bias_md, dst_md, state_md);
      const dnnl::lbr_gru_forward::primitive_desc pd(d, attr, eng);
      net.prim = dnnl::lbr_gru_forward(pd);
      wl_md = pd.weights_layer_desc(), wi_md = pd.weights_iter_desc(), scratch_md = pd.scratchpad_desc();
      net.impl = pd.impl_info_str();
      break;
    }
    default: {
      const dnnl::vanilla_rnn_forward::desc d(fwd, dnnl::algorithm::eltwise_tanh, dir, src_md, none, wl_any, wi_any,
                                              bias_md, dst_md, state_md);
      const dnnl::vanilla_rnn_forward::primitive_desc pd(d, attr, eng);
      net.prim = dnnl::vanilla_rnn_forward(pd);
      wl_md = pd.weights_layer_desc(), wi_md = pd.weights_iter_desc(), scratch_md = pd.scratchpad_desc();
      net.impl = pd.impl_info_str();
      break;
    }
  }

  // Weights in ldigo, reordered once into the primitive's own layout when it differs.
  auto weights = [&](const memory::desc& want, std::vector<float>& user, const memory::dims& dims,
                     tag user_tag = tag::ldigo) {
    memory src(memory::desc(dims, f32, user_tag), eng, user.data());
    if (want == src.get_desc()) return src;
    memory dst(want, eng);
    dnnl::reorder(src, dst).execute(strm, src, dst);
    strm.wait();
    return dst;
  };
  net.args[DNNL_ARG_WEIGHTS_LAYER] = weights(wl_md, net.wl, {L, D, I, G, H});
  net.args[DNNL_ARG_WEIGHTS_ITER] = weights(wi_md, net.wi, {L, D, K, G, H});
  if (spec.peepholes) net.args[DNNL_ARG_WEIGHTS_PEEPHOLE] = memory(peep_md, eng, net.peephole.data());
  if (P > 0) net.args[DNNL_ARG_WEIGHTS_PROJECTION] = weights(wp_md, net.projection, {L, D, H, P}, tag::ldio);
  net.args[DNNL_ARG_BIAS] = memory(bias_md, eng, net.bias.data());
  net.args[DNNL_ARG_SRC_LAYER] = memory(src_md, eng, x);
  net.args[DNNL_ARG_DST_LAYER] = memory(dst_md, eng, y);
  net.args[DNNL_ARG_DST_ITER] = memory(state_md, eng, hy);
  if (spec.mode == Mode::lstm) net.args[DNNL_ARG_DST_ITER_C] = memory(cell_md, eng, cy);
  net.args[DNNL_ARG_SCRATCHPAD] = memory(scratch_md, eng);
  return net;
}

// max |a - b| / max |b|, the measure `rnncore run --expect` reports.
double max_rel_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double diff = 0, ref = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const double d = std::fabs(static_cast<double>(a[i]) - b[i]);
    if (!(d <= diff)) diff = d;  // also catches NaN
    ref = std::max(ref, std::fabs(static_cast<double>(b[i])));
  }
  return diff / std::max(ref, 1e-30);
}

struct Timing {
  int reps = 15;
  int warmup = 2;
  double gap_ms = 10;
  double prerun_ms = 20;  // untimed runs of the same library right before each timed run: at least
                         // one, and for at least this long (steady state: weights cached, threads awake)
  double busy_limit = 0.25;  // other processes' load (cores) above which a shape is measured again
  int retries = 2;           // at most this many more attempts; the quietest one is kept
  double wait_quiet_s = 120;  // before each attempt, wait up to this long for the load to drop below busy_limit
  rnncore::DType rnncore_weights = rnncore::DType::f32;  // rnncore's weight storage (oneDNN stays f32)
  bool backward = false;  // time training steps (forward_training + backward) instead of inference
  // A library whose warm-up run took longer than this gets no untimed runs before its timed runs
  // (0: always at least one). Such a run does not depend on a warm cache; it only doubles the sweep.
  double prerun_skip_ms = 0;
};

// Largest relative difference between the libraries' gradients (weights, dx, dh0 / dc0) that still
// means "the same gradients": with f32 weights, f32 sums over T·B rows in different orders (rnncore:
// ascending rows; oneDNN: its GEMMs) and T steps of recurrence; with rnncore's reduced-precision
// weights, the bounds of its tests against f32 training on the unrounded weights (docs/training.md).
double grad_agreement_limit(rnncore::DType weights) {
  return weights == rnncore::DType::bf16 ? 5e-2 : weights == rnncore::DType::f16 ? 5e-3 : 1e-4;
}

// Largest relative difference between the libraries' outputs that still means "the same network":
// rounding alone for f32 weights; the stated error of rnncore's reduced-precision weights otherwise.
double agreement_limit(rnncore::DType weights) {
  return weights == rnncore::DType::bf16 ? 2e-2 : weights == rnncore::DType::f16 ? 2e-3 : 1e-4;
}

// The timed loop shared by both kinds of run: `reps` repetitions, each giving each library in turn
// (rnncore, then oneDNN) a pause, untimed runs for at least prerun_ms (at least one; none where
// `*_prerun` is false), and one timed run. run_rn / run_dn take whether the run is timed and return
// false on an error (with r->error set). Fills the medians, extremes, CPU/wall and other load of *r.
template <class RunRn, class RunDn>
bool time_alternating(const Timing& tm, bool rn_prerun, bool dn_prerun, RunRn run_rn, RunDn run_dn, Result* r,
                      std::vector<double>* rn_ms, std::vector<double>* dn_ms) {
  const auto gap = std::chrono::duration<double, std::milli>(tm.gap_ms);
  double rn_wall = 0, rn_cpu = 0, dn_wall = 0, dn_cpu = 0;
  const double loop_busy0 = machine_busy_s(), loop_cpu0 = process_cpu_s(), loop_t0 = now_s();
  for (int i = 0; i < tm.reps; ++i) {
    std::this_thread::sleep_for(gap);
    double until = now_s() + 1e-3 * tm.prerun_ms;
    if (rn_prerun) {
      do
        if (!run_rn(false)) return false;
      while (now_s() < until);
    }
    double c0 = process_cpu_s(), t0 = now_s();
    bool ok = run_rn(true);
    double t1 = now_s(), c1 = process_cpu_s();
    if (!ok) return false;
    rn_ms->push_back(1e3 * (t1 - t0));
    rn_wall += t1 - t0;
    rn_cpu += c1 - c0;

    std::this_thread::sleep_for(gap);
    until = now_s() + 1e-3 * tm.prerun_ms;
    if (dn_prerun) {
      do
        if (!run_dn(false)) return false;
      while (now_s() < until);
    }
    c0 = process_cpu_s(), t0 = now_s();
    ok = run_dn(true);
    t1 = now_s(), c1 = process_cpu_s();
    if (!ok) return false;
    dn_ms->push_back(1e3 * (t1 - t0));
    dn_wall += t1 - t0;
    dn_cpu += c1 - c0;
  }
  const double loop_busy1 = machine_busy_s(), loop_cpu1 = process_cpu_s(), loop_t1 = now_s();
  if (loop_busy0 >= 0 && loop_busy1 >= 0)
    r->other_load = std::max(0.0, (loop_busy1 - loop_busy0 - (loop_cpu1 - loop_cpu0)) / (loop_t1 - loop_t0));
  r->rn_ms = median(*rn_ms);
  r->dn_ms = median(*dn_ms);
  r->rn_min = *std::min_element(rn_ms->begin(), rn_ms->end());
  r->rn_max = *std::max_element(rn_ms->begin(), rn_ms->end());
  r->dn_min = *std::min_element(dn_ms->begin(), dn_ms->end());
  r->dn_max = *std::max_element(dn_ms->begin(), dn_ms->end());
  r->rn_par = rn_cpu / rn_wall;
  r->dn_par = dn_cpu / dn_wall;
  return true;
}

// The rnncore network of a shape (input size = hidden size, reset-after GRU: oneDNN's lbr GRU).
rnncore::RnnSpec spec_of(const Shape& s) {
  rnncore::RnnSpec spec;
  spec.mode = s.mode;
  spec.gru_variant = rnncore::GruVariant::reset_after;
  spec.input_size = s.hidden;
  spec.hidden_size = s.hidden;
  spec.num_layers = s.layers;
  spec.direction = s.directions == 2 ? rnncore::Direction::bidirectional : rnncore::Direction::unidirectional;
  spec.proj_size = s.proj;
  spec.peepholes = s.peepholes;
  return spec;
}

// Builds both networks for one shape, checks that they agree, and times them alternately.
Result run_shape(const Shape& s, const Timing& tm, const dnnl::engine& eng, dnnl::stream& strm) {
  Result r;
  r.shape = s;
  const rnncore::RnnSpec spec = spec_of(s);
  r.gflop = flops_per_run(spec, s.seq, s.batch) * 1e-9;

  // Weights uniform in ±1/sqrt(H) (PyTorch's initialisation), inputs in ±1: the cells stay out of
  // saturation, so the outputs exercise every gate.
  std::vector<float> canonical(static_cast<std::size_t>(rnncore::param_count(spec)));
  Rng rng(static_cast<std::uint64_t>(s.hidden) * 7919 + static_cast<std::uint64_t>(s.mode) * 31 + s.layers);
  const float scale = 1.0f / std::sqrt(static_cast<float>(s.hidden));
  for (float& w : canonical) w = rng.next(scale);
  const int D = s.directions, O = s.proj > 0 ? s.proj : s.hidden;  // O: units of h and y per direction
  const std::size_t n_x = static_cast<std::size_t>(s.seq) * s.batch * s.hidden;
  const std::size_t n_y = static_cast<std::size_t>(s.seq) * s.batch * D * O;
  const std::size_t n_state = static_cast<std::size_t>(s.layers) * D * s.batch * O;
  const std::size_t n_cell = static_cast<std::size_t>(s.layers) * D * s.batch * s.hidden;
  std::vector<float> x(n_x);
  for (float& v : x) v = rng.next(1.0f);
  std::vector<float> y_rn(n_y), y_dn(n_y), hy_rn(n_state), hy_dn(n_state), cy_rn(n_cell), cy_dn(n_cell);

  rnncore::PlanOptions opt;
  opt.max_batch = s.batch;
  opt.max_seq_len = s.seq;
  opt.threads = s.threads;
  opt.weight_dtype = tm.rnncore_weights;
  rnncore::Model model;
  rnncore::Status st = rnncore::Model::create(spec, opt, canonical.data(), &model);
  if (st != rnncore::Status::ok) {
    r.error = std::string("rnncore: ") + rnncore::last_error_detail();
    return r;
  }
  r.rn_kernel = std::string(model.plan().kernel_name()) + " threads=" + std::to_string(model.plan().options().threads);
  rnncore::ForwardArgs fa;
  fa.batch = s.batch;
  fa.seq_len = s.seq;
  fa.x = x.data();
  fa.y = y_rn.data();
  fa.hy = hy_rn.data();
  if (s.mode == Mode::lstm) fa.cy = cy_rn.data();

  OnednnNet net;
  try {
    net = make_onednn(eng, strm, spec, canonical.data(), s.seq, s.batch, x.data(), y_dn.data(), hy_dn.data(),
                      cy_dn.data());
  } catch (const dnnl::error& e) {
    r.error = std::string("oneDNN: ") + e.what();
    return r;
  }
  r.dn_impl = net.impl;

  auto run_rn = [&]() { return model.forward(fa); };
  auto run_rn_checked = [&]() {
    const rnncore::Status rs = run_rn();
    if (rs != rnncore::Status::ok) r.error = std::string("rnncore: ") + rnncore::last_error_detail();
    return rs == rnncore::Status::ok;
  };
  auto run_dn = [&]() {
    net.prim.execute(strm, net.args);
    strm.wait();
  };

  try {
    for (int i = 0; i < tm.warmup; ++i) {
      st = run_rn();
      if (st != rnncore::Status::ok) {
        r.error = std::string("rnncore: ") + rnncore::last_error_detail();
        return r;
      }
      run_dn();
    }
    if (tm.warmup == 0) {  // the check below needs one run of each
      if ((st = run_rn()) != rnncore::Status::ok) {
        r.error = std::string("rnncore: ") + rnncore::last_error_detail();
        return r;
      }
      run_dn();
    }
    r.max_rel = std::max(max_rel_diff(y_rn, y_dn), max_rel_diff(hy_rn, hy_dn));
    if (s.mode == Mode::lstm) r.max_rel = std::max(r.max_rel, max_rel_diff(cy_rn, cy_dn));

    std::vector<double> rn_ms, dn_ms;
    if (!time_alternating(tm, true, true, [&](bool) { return run_rn_checked(); }, [&](bool) { run_dn(); return true; },
                          &r, &rn_ms, &dn_ms))
      return r;
  } catch (const dnnl::error& e) {
    r.error = std::string("oneDNN: ") + e.what();
  }
  return r;
}

// ---- --backward: training steps ----

// oneDNN's training pair: forward_training (fills the workspace) and backward (all gradients), with
// their memories. Weights are reordered once into each primitive's own layout; the weight gradients
// live in the layout the backward primitive chose and are reordered to ldigo only for the check.
struct OnednnTrain {
  dnnl::primitive fwd, bwd;
  std::unordered_map<int, dnnl::memory> fwd_args, bwd_args;
  std::vector<float> wl, wi, bias;  // user-layout weights (kept: memories may point into them)
  dnnl::memory dwl, dwi, dbias;      // gradients in the backward primitive's layouts (accumulated by oneDNN)
  std::string impl;
};

// Canonical weight gradients from oneDNN's: the inverse of convert_weights. A bias oneDNN sums
// (bW + bR) has one gradient, which is both bW's and bR's; the linear-before-reset GRU's candidate
// keeps bW (gate 2) and bR (the extra gate 3) apart.
void onednn_grads_to_canonical(const rnncore::RnnSpec& spec, const std::vector<float>& dwl, const std::vector<float>& dwi,
                               const std::vector<float>& dbias, float* canonical) {
  using rnncore::ParamKind;
  const int L = spec.num_layers, D = rnncore::num_directions(spec), H = spec.hidden_size;
  const int G = rnncore::num_gates(spec.mode), Gb = spec.mode == Mode::gru ? 4 : G;
  const int I = spec.input_size;
  for (int l = 0; l < L; ++l)
    for (int d = 0; d < D; ++d) {
      const std::size_t ld = static_cast<std::size_t>(l) * D + d;
      for (int g = 0; g < G; ++g) {
        const int cg = canonical_gate(spec.mode, g);
        float* W = canonical + rnncore::canonical_offset(spec, l, d, ParamKind::input_weight, cg);
        float* R = canonical + rnncore::canonical_offset(spec, l, d, ParamKind::recurrent_weight, cg);
        float* bW = canonical + rnncore::canonical_offset(spec, l, d, ParamKind::input_bias, cg);
        float* bR = canonical + rnncore::canonical_offset(spec, l, d, ParamKind::recurrent_bias, cg);
        for (int j = 0; j < H; ++j) {
          for (int k = 0; k < I; ++k) W[static_cast<std::size_t>(j) * I + k] = dwl[((ld * I + k) * G + g) * H + j];
          for (int k = 0; k < H; ++k) R[static_cast<std::size_t>(j) * H + k] = dwi[((ld * H + k) * G + g) * H + j];
          bW[j] = dbias[(ld * Gb + g) * H + j];
          bR[j] = spec.mode == Mode::gru && g == 2 ? dbias[(ld * Gb + 3) * H + j] : bW[j];
        }
      }
    }
}

// Creates oneDNN's forward_training and backward primitives for `spec` at (seq, batch): x, h0, c0 in;
// y, hy, cy out; dy, dhy, dcy in; dx, dh0, dc0 and the weight gradients out. States are [L, D, B, H].
OnednnTrain make_onednn_train(const dnnl::engine& eng, dnnl::stream& strm, const rnncore::RnnSpec& spec,
                              const float* canonical, int seq, int batch, float* x, float* h0, float* c0, float* y,
                              float* hy, float* cy, float* dy, float* dhy, float* dcy, float* dx, float* dh0,
                              float* dc0) {
  using dnnl::memory;
  using tag = memory::format_tag;
  const memory::data_type f32 = memory::data_type::f32;
  const memory::dim T = seq, B = batch, L = spec.num_layers, D = rnncore::num_directions(spec);
  const memory::dim H = spec.hidden_size, I = spec.input_size, G = rnncore::num_gates(spec.mode);
  const memory::dim Gb = spec.mode == Mode::gru ? 4 : G;

  OnednnTrain net;
  {
    OnednnNet conv;
    convert_weights(spec, canonical, &conv);
    net.wl = std::move(conv.wl);
    net.wi = std::move(conv.wi);
    net.bias = std::move(conv.bias);
  }
  const memory::desc src_md({T, B, I}, f32, tag::tnc), dst_md({T, B, D * H}, f32, tag::tnc);
  const memory::desc state_md({L, D, B, H}, f32, tag::ldnc), none;
  const memory::desc wl_any({L, D, I, G, H}, f32, tag::any), wi_any({L, D, H, G, H}, f32, tag::any);
  const memory::desc bias_md({L, D, Gb, H}, f32, tag::ldgo);
  const auto dir = D == 2 ? dnnl::rnn_direction::bidirectional_concat : dnnl::rnn_direction::unidirectional_left2right;
  const auto fwd_kind = dnnl::prop_kind::forward_training, bwd_kind = dnnl::prop_kind::backward;
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  const bool lstm = spec.mode == Mode::lstm;

  memory::desc f_wl, f_wi, f_scratch, ws_md, b_wl, b_wi, b_dwl, b_dwi, b_scratch;
  std::string fwd_impl, bwd_impl;
  switch (spec.mode) {
    case Mode::lstm: {
      const dnnl::lstm_forward::desc fd(fwd_kind, dir, src_md, state_md, state_md, wl_any, wi_any, bias_md, dst_md,
                                        state_md, state_md);
      const dnnl::lstm_forward::primitive_desc fpd(fd, attr, eng);
      const dnnl::lstm_backward::desc bd(bwd_kind, dir, src_md, state_md, state_md, wl_any, wi_any, bias_md, dst_md,
                                         state_md, state_md, src_md, state_md, state_md, wl_any, wi_any, bias_md, dst_md,
                                         state_md, state_md);
      const dnnl::lstm_backward::primitive_desc bpd(bd, attr, eng, fpd);
      net.fwd = dnnl::lstm_forward(fpd);
      net.bwd = dnnl::lstm_backward(bpd);
      f_wl = fpd.weights_layer_desc(), f_wi = fpd.weights_iter_desc(), f_scratch = fpd.scratchpad_desc();
      ws_md = fpd.workspace_desc();
      b_wl = bpd.weights_layer_desc(), b_wi = bpd.weights_iter_desc(), b_scratch = bpd.scratchpad_desc();
      b_dwl = bpd.diff_weights_layer_desc(), b_dwi = bpd.diff_weights_iter_desc();
      fwd_impl = fpd.impl_info_str(), bwd_impl = bpd.impl_info_str();
      break;
    }
    case Mode::gru: {
      const dnnl::lbr_gru_forward::desc fd(fwd_kind, dir, src_md, state_md, wl_any, wi_any, bias_md, dst_md, state_md);
      const dnnl::lbr_gru_forward::primitive_desc fpd(fd, attr, eng);
      const dnnl::lbr_gru_backward::desc bd(bwd_kind, dir, src_md, state_md, wl_any, wi_any, bias_md, dst_md, state_md,
                                            src_md, state_md, wl_any, wi_any, bias_md, dst_md, state_md);
      const dnnl::lbr_gru_backward::primitive_desc bpd(bd, attr, eng, fpd);
      net.fwd = dnnl::lbr_gru_forward(fpd);
      net.bwd = dnnl::lbr_gru_backward(bpd);
      f_wl = fpd.weights_layer_desc(), f_wi = fpd.weights_iter_desc(), f_scratch = fpd.scratchpad_desc();
      ws_md = fpd.workspace_desc();
      b_wl = bpd.weights_layer_desc(), b_wi = bpd.weights_iter_desc(), b_scratch = bpd.scratchpad_desc();
      b_dwl = bpd.diff_weights_layer_desc(), b_dwi = bpd.diff_weights_iter_desc();
      fwd_impl = fpd.impl_info_str(), bwd_impl = bpd.impl_info_str();
      break;
    }
    default: {
      const auto act = dnnl::algorithm::eltwise_tanh;
      const dnnl::vanilla_rnn_forward::desc fd(fwd_kind, act, dir, src_md, state_md, wl_any, wi_any, bias_md, dst_md,
                                               state_md);
      const dnnl::vanilla_rnn_forward::primitive_desc fpd(fd, attr, eng);
      const dnnl::vanilla_rnn_backward::desc bd(bwd_kind, act, dir, src_md, state_md, wl_any, wi_any, bias_md, dst_md,
                                                state_md, src_md, state_md, wl_any, wi_any, bias_md, dst_md, state_md);
      const dnnl::vanilla_rnn_backward::primitive_desc bpd(bd, attr, eng, fpd);
      net.fwd = dnnl::vanilla_rnn_forward(fpd);
      net.bwd = dnnl::vanilla_rnn_backward(bpd);
      f_wl = fpd.weights_layer_desc(), f_wi = fpd.weights_iter_desc(), f_scratch = fpd.scratchpad_desc();
      ws_md = fpd.workspace_desc();
      b_wl = bpd.weights_layer_desc(), b_wi = bpd.weights_iter_desc(), b_scratch = bpd.scratchpad_desc();
      b_dwl = bpd.diff_weights_layer_desc(), b_dwi = bpd.diff_weights_iter_desc();
      fwd_impl = fpd.impl_info_str(), bwd_impl = bpd.impl_info_str();
      break;
    }
  }
  net.impl = fwd_impl == bwd_impl ? fwd_impl : fwd_impl + "/" + bwd_impl;

  auto weights = [&](const memory::desc& want, std::vector<float>& user, const memory::dims& dims) {
    memory src(memory::desc(dims, f32, tag::ldigo), eng, user.data());
    if (want == src.get_desc()) return src;
    memory dst(want, eng);
    dnnl::reorder(src, dst).execute(strm, src, dst);
    strm.wait();
    return dst;
  };
  const memory bias(bias_md, eng, net.bias.data());
  const memory workspace(ws_md, eng);
  const memory m_x(src_md, eng, x), m_h0(state_md, eng, h0), m_c0(state_md, eng, c0), m_y(dst_md, eng, y);
  const memory m_hy(state_md, eng, hy), m_cy(state_md, eng, cy);
  net.fwd_args[DNNL_ARG_SRC_LAYER] = m_x;
  net.fwd_args[DNNL_ARG_SRC_ITER] = m_h0;
  net.fwd_args[DNNL_ARG_WEIGHTS_LAYER] = weights(f_wl, net.wl, {L, D, I, G, H});
  net.fwd_args[DNNL_ARG_WEIGHTS_ITER] = weights(f_wi, net.wi, {L, D, H, G, H});
  net.fwd_args[DNNL_ARG_BIAS] = bias;
  net.fwd_args[DNNL_ARG_DST_LAYER] = m_y;
  net.fwd_args[DNNL_ARG_DST_ITER] = m_hy;
  net.fwd_args[DNNL_ARG_WORKSPACE] = workspace;
  net.fwd_args[DNNL_ARG_SCRATCHPAD] = memory(f_scratch, eng);

  net.dwl = memory(b_dwl, eng);
  net.dwi = memory(b_dwi, eng);
  net.dbias = memory(bias_md, eng);
  net.bwd_args[DNNL_ARG_SRC_LAYER] = m_x;
  net.bwd_args[DNNL_ARG_SRC_ITER] = m_h0;
  net.bwd_args[DNNL_ARG_WEIGHTS_LAYER] = weights(b_wl, net.wl, {L, D, I, G, H});
  net.bwd_args[DNNL_ARG_WEIGHTS_ITER] = weights(b_wi, net.wi, {L, D, H, G, H});
  net.bwd_args[DNNL_ARG_BIAS] = bias;
  net.bwd_args[DNNL_ARG_DST_LAYER] = m_y;
  net.bwd_args[DNNL_ARG_DST_ITER] = m_hy;
  net.bwd_args[DNNL_ARG_DIFF_DST_LAYER] = memory(dst_md, eng, dy);
  net.bwd_args[DNNL_ARG_DIFF_DST_ITER] = memory(state_md, eng, dhy);
  net.bwd_args[DNNL_ARG_DIFF_SRC_LAYER] = memory(src_md, eng, dx);
  net.bwd_args[DNNL_ARG_DIFF_SRC_ITER] = memory(state_md, eng, dh0);
  net.bwd_args[DNNL_ARG_DIFF_WEIGHTS_LAYER] = net.dwl;
  net.bwd_args[DNNL_ARG_DIFF_WEIGHTS_ITER] = net.dwi;
  net.bwd_args[DNNL_ARG_DIFF_BIAS] = net.dbias;
  net.bwd_args[DNNL_ARG_WORKSPACE] = workspace;
  net.bwd_args[DNNL_ARG_SCRATCHPAD] = memory(b_scratch, eng);
  if (lstm) {
    net.fwd_args[DNNL_ARG_SRC_ITER_C] = m_c0;
    net.fwd_args[DNNL_ARG_DST_ITER_C] = m_cy;
    net.bwd_args[DNNL_ARG_SRC_ITER_C] = m_c0;
    net.bwd_args[DNNL_ARG_DST_ITER_C] = m_cy;
    net.bwd_args[DNNL_ARG_DIFF_DST_ITER_C] = memory(state_md, eng, dcy);
    net.bwd_args[DNNL_ARG_DIFF_SRC_ITER_C] = memory(state_md, eng, dc0);
  }
  return net;
}

// Reads a oneDNN memory (any layout) into a dense vector of `dims` in `want` layout.
std::vector<float> read_as(const dnnl::engine& eng, dnnl::stream& strm, const dnnl::memory& m,
                           const dnnl::memory::dims& dims, dnnl::memory::format_tag want) {
  std::size_t n = 1;
  for (dnnl::memory::dim d : dims) n *= static_cast<std::size_t>(d);
  std::vector<float> out(n);
  dnnl::memory dst(dnnl::memory::desc(dims, dnnl::memory::data_type::f32, want), eng, out.data());
  dnnl::memory src = m;
  dnnl::reorder(src, dst).execute(strm, src, dst);
  strm.wait();
  return out;
}

// 64-byte-aligned host memory for rnncore's buffers.
struct AlignedBuf {
  void* p = nullptr;
  std::size_t bytes = 0;
  explicit AlignedBuf(std::size_t n) : p(std::aligned_alloc(rnncore::kAlignment, (n / rnncore::kAlignment + 1) * rnncore::kAlignment)), bytes(n) {}
  ~AlignedBuf() { std::free(p); }
  AlignedBuf(const AlignedBuf&) = delete;
  AlignedBuf& operator=(const AlignedBuf&) = delete;
};

// One shape, training steps: rnncore's training forward (filling the reserve) + backward for dx, dh0,
// dc0 and the canonical weight gradients, against oneDNN's forward_training + backward with the same
// gradients (its weight gradients zeroed first: oneDNN accumulates into them, rnncore overwrites).
// Both get the same weights, x, h0, c0, dy, dhy (and dc0, dcy). Checks that the outputs and every
// gradient agree, then times them alternately.
Result run_shape_backward(const Shape& s, const Timing& tm, const dnnl::engine& eng, dnnl::stream& strm) {
  Result r;
  r.shape = s;
  const rnncore::RnnSpec spec = spec_of(s);
  // The forward's matrix products, and two more of the same size each in backward: the data
  // gradients (Rᵀ·dgates, Wᵀ·dgates) and the weight gradients (dgates·hᵀ, dgates·xᵀ).
  r.gflop = 3.0 * flops_per_run(spec, s.seq, s.batch) * 1e-9;

  std::vector<float> canonical(static_cast<std::size_t>(rnncore::param_count(spec)));
  Rng rng(static_cast<std::uint64_t>(s.hidden) * 7919 + static_cast<std::uint64_t>(s.mode) * 31 + s.layers);
  const float scale = 1.0f / std::sqrt(static_cast<float>(s.hidden));
  for (float& w : canonical) w = rng.next(scale);
  const int D = s.directions;
  const bool lstm = s.mode == Mode::lstm;
  const std::size_t n_x = static_cast<std::size_t>(s.seq) * s.batch * s.hidden;
  const std::size_t n_y = n_x * D, n_state = static_cast<std::size_t>(s.layers) * D * s.batch * s.hidden;
  auto random = [&](std::size_t n, float sc) {
    std::vector<float> v(n);
    for (float& e : v) e = rng.next(sc);
    return v;
  };
  std::vector<float> x = random(n_x, 1.0f), h0 = random(n_state, 0.5f), c0 = random(n_state, 0.5f);
  std::vector<float> dy = random(n_y, 1.0f), dhy = random(n_state, 1.0f), dcy = random(n_state, 1.0f);
  std::vector<float> y_rn(n_y), y_dn(n_y), hy_rn(n_state), hy_dn(n_state), cy_rn(n_state), cy_dn(n_state);
  std::vector<float> dx_rn(n_x), dx_dn(n_x), dh0_rn(n_state), dh0_dn(n_state), dc0_rn(n_state), dc0_dn(n_state);
  std::vector<float> dw_rn(canonical.size()), dw_dn(canonical.size());

  // rnncore: a training plan in caller buffers (and a pool of its own for threads > 1).
  rnncore::ThreadPool* pool = nullptr;
  struct PoolGuard {
    rnncore::ThreadPool*& p;
    ~PoolGuard() { rnncore::ThreadPool::destroy(p); }
  } pool_guard{pool};
  rnncore::PlanOptions opt;
  opt.max_batch = s.batch;
  opt.max_seq_len = s.seq;
  opt.threads = s.threads;
  opt.training = true;
  opt.weight_dtype = tm.rnncore_weights;
  rnncore::Status st = rnncore::Status::ok;
  if (s.threads > 1) st = rnncore::ThreadPool::create(s.threads, &pool);
  opt.thread_pool = pool;
  rnncore::Plan plan;
  if (st == rnncore::Status::ok) st = rnncore::Plan::create(spec, opt, &plan);
  if (st != rnncore::Status::ok) {
    r.error = std::string("rnncore: ") + rnncore::last_error_detail();
    return r;
  }
  AlignedBuf packed(plan.packed_weight_bytes()), ws(plan.workspace_bytes()), bws(plan.backward_workspace_bytes()),
      reserve(plan.reserve_bytes());
  if (!packed.p || !ws.p || !bws.p || !reserve.p) {
    r.error = "out of memory";
    return r;
  }
  if ((st = plan.pack_weights(canonical.data(), packed.p, packed.bytes)) != rnncore::Status::ok) {
    r.error = std::string("rnncore: ") + rnncore::last_error_detail();
    return r;
  }
  r.rn_kernel = std::string(plan.kernel_name()) + " (training) threads=" + std::to_string(plan.options().threads);
  rnncore::ForwardArgs fa;
  fa.batch = s.batch;
  fa.seq_len = s.seq;
  fa.x = x.data();
  fa.h0 = h0.data();
  fa.c0 = lstm ? c0.data() : nullptr;
  fa.y = y_rn.data();
  fa.hy = hy_rn.data();
  fa.cy = lstm ? cy_rn.data() : nullptr;
  fa.run_mode = rnncore::RunMode::training;
  fa.reserve = reserve.p;
  fa.reserve_bytes = reserve.bytes;
  rnncore::BackwardArgs ba;
  ba.forward = fa;
  ba.dy = dy.data();
  ba.dhy = dhy.data();
  ba.dcy = lstm ? dcy.data() : nullptr;
  ba.dx = dx_rn.data();
  ba.dh0 = dh0_rn.data();
  ba.dc0 = lstm ? dc0_rn.data() : nullptr;
  ba.dweights = dw_rn.data();

  OnednnTrain net;
  try {
    net = make_onednn_train(eng, strm, spec, canonical.data(), s.seq, s.batch, x.data(), h0.data(), c0.data(),
                            y_dn.data(), hy_dn.data(), cy_dn.data(), dy.data(), dhy.data(), dcy.data(), dx_dn.data(),
                            dh0_dn.data(), dc0_dn.data());
  } catch (const dnnl::error& e) {
    r.error = std::string("oneDNN: ") + e.what();
    return r;
  }
  r.dn_impl = net.impl;

  // One training step each; `timed` runs record the split between forward and backward.
  std::vector<double> rn_fwd, rn_bwd, dn_fwd, dn_bwd;
  auto run_rn = [&](bool timed) {
    const double t0 = now_s();
    rnncore::Status rs = plan.forward(packed.p, ws.p, ws.bytes, fa);
    const double t1 = now_s();
    if (rs == rnncore::Status::ok) rs = plan.backward(packed.p, bws.p, bws.bytes, ba);
    const double t2 = now_s();
    if (rs != rnncore::Status::ok) {
      r.error = std::string("rnncore: ") + rnncore::last_error_detail();
      return false;
    }
    if (timed) {
      rn_fwd.push_back(1e3 * (t1 - t0));
      rn_bwd.push_back(1e3 * (t2 - t1));
    }
    return true;
  };
  auto run_dn = [&](bool timed) {
    const double t0 = now_s();
    net.fwd.execute(strm, net.fwd_args);
    strm.wait();
    const double t1 = now_s();
    for (const dnnl::memory* m : {&net.dwl, &net.dwi, &net.dbias})
      std::memset(m->get_data_handle(), 0, m->get_desc().get_size());
    net.bwd.execute(strm, net.bwd_args);
    strm.wait();
    const double t2 = now_s();
    if (timed) {
      dn_fwd.push_back(1e3 * (t1 - t0));
      dn_bwd.push_back(1e3 * (t2 - t1));
    }
    return true;
  };

  try {
    // Warm-up (at least one run of each: the check below reads their results); the last warm-up
    // run of each library decides whether its timed runs get untimed runs before them.
    double rn_warm = 0, dn_warm = 0;
    for (int i = 0; i < std::max(1, tm.warmup); ++i) {
      double t0 = now_s();
      if (!run_rn(false)) return r;
      rn_warm = 1e3 * (now_s() - t0);
      t0 = now_s();
      run_dn(false);
      dn_warm = 1e3 * (now_s() - t0);
    }
    r.max_rel = std::max(max_rel_diff(y_rn, y_dn), max_rel_diff(hy_rn, hy_dn));
    if (lstm) r.max_rel = std::max(r.max_rel, max_rel_diff(cy_rn, cy_dn));
    const dnnl::memory::dim G = rnncore::num_gates(s.mode);
    const dnnl::memory::dims wl_dims = {s.layers, D, spec.input_size, G, s.hidden}, wi_dims = {s.layers, D, s.hidden, G, s.hidden};
    const std::vector<float> dwl = read_as(eng, strm, net.dwl, wl_dims, dnnl::memory::format_tag::ldigo);
    const std::vector<float> dwi = read_as(eng, strm, net.dwi, wi_dims, dnnl::memory::format_tag::ldigo);
    const std::vector<float> dbias(static_cast<const float*>(net.dbias.get_data_handle()),
                                   static_cast<const float*>(net.dbias.get_data_handle()) +
                                       net.dbias.get_desc().get_size() / sizeof(float));
    onednn_grads_to_canonical(spec, dwl, dwi, dbias, dw_dn.data());
    r.rel_dw = max_rel_diff(dw_rn, dw_dn);
    r.rel_dx = max_rel_diff(dx_rn, dx_dn);
    r.rel_dstate = max_rel_diff(dh0_rn, dh0_dn);
    if (lstm) r.rel_dstate = std::max(r.rel_dstate, max_rel_diff(dc0_rn, dc0_dn));

    const bool rn_prerun = !(tm.prerun_skip_ms > 0 && rn_warm > tm.prerun_skip_ms);
    const bool dn_prerun = !(tm.prerun_skip_ms > 0 && dn_warm > tm.prerun_skip_ms);
    std::vector<double> rn_ms, dn_ms;
    if (!time_alternating(tm, rn_prerun, dn_prerun, run_rn, run_dn, &r, &rn_ms, &dn_ms)) return r;
    r.rn_fwd_ms = median(rn_fwd);
    r.rn_bwd_ms = median(rn_bwd);
    r.dn_fwd_ms = median(dn_fwd);
    r.dn_bwd_ms = median(dn_bwd);
  } catch (const dnnl::error& e) {
    r.error = std::string("oneDNN: ") + e.what();
  }
  return r;
}

// ---- output ----

struct Context {
  std::string cpu, onednn_version, onednn_isa, command, date;
  int hw_threads = 0;
  bench::FmaPeak peaks[2];
  int n_peaks = 0;
  double peak = 0;  // best single-core GFLOP/s (0: not measured)
  Timing timing;
  std::set<std::string> rn_kernels, dn_impls;
  std::vector<std::string> notes;  // --note: e.g. the commit measured
};

std::string layers_text(const Shape& s) {
  return std::to_string(s.layers) + "x" + (s.directions == 2 ? "bi" : "uni");
}

double pct_of_peak(const Context& c, double gflop, double ms, int threads) {
  return c.peak > 0 ? 100.0 * gflop / (ms * 1e-3) / (c.peak * threads) : 0.0;
}

const char* kColumns[] = {"mode", "H", "B", "T", "thr", "layers", "rnncore ms", "oneDNN ms", "ratio",
                          "rnncore GFLOP/s", "oneDNN GFLOP/s", "rnncore %peak", "oneDNN %peak",
                          "rnncore cpu/wall", "oneDNN cpu/wall", "other load", "max rel diff"};
constexpr int kNumColumns = sizeof(kColumns) / sizeof(kColumns[0]);

// --backward: the forward columns with the medians of the two halves of a training step after the
// ratio, and the gradients' agreement after the outputs'.
const char* kBackwardColumns[] = {"mode", "H", "B", "T", "thr", "layers", "rnncore ms", "oneDNN ms", "ratio",
                                  "rnncore fwd+bwd ms", "oneDNN fwd+bwd ms", "rnncore GFLOP/s", "oneDNN GFLOP/s",
                                  "rnncore %peak", "oneDNN %peak", "rnncore cpu/wall", "oneDNN cpu/wall",
                                  "other load", "y rel diff", "dW rel diff", "dx rel diff", "dh0/dc0 rel diff"};
constexpr int kNumBackwardColumns = sizeof(kBackwardColumns) / sizeof(kBackwardColumns[0]);

std::vector<std::string> columns(const Context& c);

std::vector<std::string> forward_cells(const Context& c, const Result& r) {
  const Shape& s = r.shape;
  char buf[kNumColumns][64];
  std::snprintf(buf[0], 64, "%s", shape_mode(s).c_str());
  std::snprintf(buf[1], 64, "%d", s.hidden);
  std::snprintf(buf[2], 64, "%d", s.batch);
  std::snprintf(buf[3], 64, "%d", s.seq);
  std::snprintf(buf[4], 64, "%d", s.threads);
  std::snprintf(buf[5], 64, "%s", layers_text(s).c_str());
  std::vector<std::string> cells(buf, buf + 6);
  if (!r.error.empty()) {
    cells.push_back("failed: " + r.error);
    cells.resize(kNumColumns);
    return cells;
  }
  std::snprintf(buf[6], 64, "%.3f", r.rn_ms);
  std::snprintf(buf[7], 64, "%.3f", r.dn_ms);
  std::snprintf(buf[8], 64, "%.2f", r.dn_ms / r.rn_ms);
  std::snprintf(buf[9], 64, "%.1f", r.gflop / (r.rn_ms * 1e-3));
  std::snprintf(buf[10], 64, "%.1f", r.gflop / (r.dn_ms * 1e-3));
  if (c.peak > 0) {
    std::snprintf(buf[11], 64, "%.0f%%", pct_of_peak(c, r.gflop, r.rn_ms, s.threads));
    std::snprintf(buf[12], 64, "%.0f%%", pct_of_peak(c, r.gflop, r.dn_ms, s.threads));
  } else {
    std::snprintf(buf[11], 64, "-");
    std::snprintf(buf[12], 64, "-");
  }
  std::snprintf(buf[13], 64, "%.2f", r.rn_par);
  std::snprintf(buf[14], 64, "%.2f", r.dn_par);
  if (r.other_load >= 0) std::snprintf(buf[15], 64, "%.2f", r.other_load);
  else std::snprintf(buf[15], 64, "?");
  std::snprintf(buf[16], 64, "%.1e", r.max_rel);
  for (int i = 6; i < kNumColumns; ++i) cells.push_back(buf[i]);
  return cells;
}

std::vector<std::string> row_cells(const Context& c, const Result& r) {
  std::vector<std::string> x = forward_cells(c, r);
  if (!c.timing.backward) return x;
  if (!r.error.empty()) {
    x.resize(kNumBackwardColumns);
    return x;
  }
  auto fmt = [](const char* f, double a, double b) {
    char buf[64];
    std::snprintf(buf, sizeof buf, f, a, b);
    return std::string(buf);
  };
  std::vector<std::string> cells(x.begin(), x.begin() + 9);
  cells.push_back(fmt(r.rn_fwd_ms < 10 ? "%.3f+%.3f" : "%.1f+%.1f", r.rn_fwd_ms, r.rn_bwd_ms));
  cells.push_back(fmt(r.dn_fwd_ms < 10 ? "%.3f+%.3f" : "%.1f+%.1f", r.dn_fwd_ms, r.dn_bwd_ms));
  cells.insert(cells.end(), x.begin() + 9, x.end());  // ... other load, y (and hy, cy) diff
  for (double d : {r.rel_dw, r.rel_dx, r.rel_dstate}) cells.push_back(fmt("%.1e", d, 0));
  return cells;
}

std::vector<std::string> columns(const Context& c) {
  if (c.timing.backward) return std::vector<std::string>(kBackwardColumns, kBackwardColumns + kNumBackwardColumns);
  return std::vector<std::string>(kColumns, kColumns + kNumColumns);
}

// Geometric mean of the ratio per (threads, mode) over the unidirectional one-layer rows.
std::vector<std::string> summary_lines(const std::vector<Result>& results) {
  std::vector<std::string> lines;
  std::set<int> threads;
  for (const Result& r : results) threads.insert(r.shape.threads);
  for (int t : threads)
    for (Mode m : {Mode::lstm, Mode::gru, Mode::rnn_tanh}) {
      double log_sum = 0, lo = 1e300, hi = 0;
      int n = 0;
      for (const Result& r : results)
        if (r.error.empty() && r.shape.threads == t && r.shape.mode == m && r.shape.layers == 1 &&
            r.shape.directions == 1) {
          const double ratio = r.dn_ms / r.rn_ms;
          log_sum += std::log(ratio);
          lo = std::min(lo, ratio);
          hi = std::max(hi, ratio);
          ++n;
        }
      if (n == 0) continue;
      char buf[160];
      std::snprintf(buf, sizeof buf, "%s, %d thread(s): geometric mean ratio %.2f over %d shapes (min %.2f, max %.2f)",
                    mode_name(m), t, std::exp(log_sum / n), n, lo, hi);
      lines.push_back(buf);
    }
  return lines;
}

// --backward: the text table's column widths and names.
const int kBackwardWidths[kNumBackwardColumns] = {-8, 5, 4, 4, 3, 6, 11, 11, 6, 19, 17, 8, 8, 6, 6, 6, 6, 6, 8, 8, 8, 8};
const char* kBackwardTextNames[kNumBackwardColumns] = {
    "mode", "H", "B", "T", "thr", "layers", "rnncore_ms", "oneDNN_ms", "ratio", "rn_fwd+bwd", "dn_fwd+bwd", "rn_GF/s",
    "dn_GF/s", "rn_pk", "dn_pk", "rn_par", "dn_par", "other", "y_rel", "dW_rel", "dx_rel", "dst_rel"};

void print_backward_cells(std::FILE* f, const std::vector<std::string>& cells) {
  for (std::size_t i = 0; i < cells.size(); ++i)
    std::fprintf(f, "%s%*s", i ? " " : "", kBackwardWidths[i], cells[i].c_str());
  std::fprintf(f, "\n");
  std::fflush(f);
}

void print_text_header(std::FILE* f, const Context& c) {
  if (c.timing.backward) {
    print_backward_cells(f, std::vector<std::string>(kBackwardTextNames, kBackwardTextNames + kNumBackwardColumns));
    return;
  }
  std::fprintf(f, "%-8s %5s %4s %4s %3s %6s %11s %11s %6s %8s %8s %6s %6s %6s %6s %6s %9s\n", "mode", "H", "B",
               "T", "thr", "layers", "rnncore_ms", "oneDNN_ms", "ratio", "rn_GF/s", "dn_GF/s", "rn_pk", "dn_pk",
               "rn_par", "dn_par", "other", "max_rel");
}

void print_text_row(std::FILE* f, const Context& c, const Result& r) {
  const std::vector<std::string> x = row_cells(c, r);
  if (c.timing.backward && r.error.empty()) {
    print_backward_cells(f, x);
    return;
  }
  if (!r.error.empty()) {
    std::fprintf(f, "%-8s %5s %4s %4s %3s %6s  %s\n", x[0].c_str(), x[1].c_str(), x[2].c_str(), x[3].c_str(),
                 x[4].c_str(), x[5].c_str(), x[6].c_str());
    return;
  }
  std::fprintf(f, "%-8s %5s %4s %4s %3s %6s %11s %11s %6s %8s %8s %6s %6s %6s %6s %6s %9s\n", x[0].c_str(),
               x[1].c_str(), x[2].c_str(), x[3].c_str(), x[4].c_str(), x[5].c_str(), x[6].c_str(), x[7].c_str(),
               x[8].c_str(), x[9].c_str(), x[10].c_str(), x[11].c_str(), x[12].c_str(), x[13].c_str(), x[14].c_str(),
               x[15].c_str(), x[16].c_str());
  std::fflush(f);
}

std::string join(const std::set<std::string>& s) {
  std::string out;
  for (const std::string& x : s) out += (out.empty() ? "" : ", ") + x;
  return out;
}

std::string peak_text(const Context& c) {
  if (c.n_peaks == 0) return "not measured (no AVX2/AVX-512 on this CPU or build)";
  std::string out;
  for (int i = 0; i < c.n_peaks; ++i) {
    char buf[96];
    std::snprintf(buf, sizeof buf, "%s%s %.1f GFLOP/s", i ? ", " : "", c.peaks[i].isa, c.peaks[i].gflops);
    out += buf;
  }
  return out + " (one core, best of runs)";
}

void write_markdown(std::FILE* f, const Context& c, const std::vector<Result>& results) {
  for (const std::string& n : c.notes) std::fprintf(f, "- %s\n", n.c_str());
  std::fprintf(f, "- command: `%s`\n", c.command.c_str());
  std::fprintf(f, "- date: %s; CPU: %s, %d hardware threads\n", c.date.c_str(), c.cpu.c_str(), c.hw_threads);
  std::fprintf(f, "- fp32 FMA peak: %s\n", peak_text(c).c_str());
  std::fprintf(f, "- oneDNN %s (%s), implementations: %s\n", c.onednn_version.c_str(), c.onednn_isa.c_str(),
               join(c.dn_impls).c_str());
  std::fprintf(f, "- rnncore %s, kernels: %s\n", rnncore::version_string(), join(c.rn_kernels).c_str());
  std::fprintf(f,
               "- median of %d alternating repetitions after %d warm-up runs; per repetition and library: %.0f ms "
               "pause, untimed runs for at least %.0f ms (at least one), one timed run\n",
               c.timing.reps, c.timing.warmup, c.timing.gap_ms, c.timing.prerun_ms);
  if (c.timing.backward) {
    if (c.timing.prerun_skip_ms > 0)
      std::fprintf(f, "- no untimed runs before the timed runs of a library whose warm-up run took over %.0f ms\n",
                   c.timing.prerun_skip_ms);
    std::fprintf(f,
                 "- one run = one training step: rnncore: training forward (fills the reserve) + backward for dx, "
                 "dh0, dc0 and the weight gradients; oneDNN: forward_training + backward with the same gradients "
                 "(its weight gradients zeroed before each backward, inside the step: oneDNN accumulates into them); "
                 "fwd+bwd = medians of the two halves; GFLOP/s count 3x the forward's matrix-product flops\n");
    std::fprintf(f,
                 "- rel diff = max|rnncore - oneDNN| / max|oneDNN|: y (with hy, cy), the weight gradients (all "
                 "weights and biases, in the canonical layout), dx, dh0 (with dc0); limits: y %.0e, gradients %.0e\n",
                 agreement_limit(c.timing.rnncore_weights), grad_agreement_limit(c.timing.rnncore_weights));
  }
  std::fprintf(f,
               "- ratio = oneDNN ms / rnncore ms (> 1: rnncore faster); %%peak = GFLOP/s / (threads x one-core FMA "
               "peak); cpu/wall = process CPU time / wall time while that library ran; other load = cores kept busy "
               "by other processes during the shape (a shape above %.2f was measured again, up to %d times)\n\n",
               c.timing.busy_limit, c.timing.retries);
  const std::vector<std::string> names = columns(c);
  for (const std::string& name : names) std::fprintf(f, "| %s ", name.c_str());
  std::fprintf(f, "|\n");
  for (std::size_t i = 0; i < names.size(); ++i) std::fprintf(f, "|%s", i < 6 ? " --- " : " ---: ");
  std::fprintf(f, "|\n");
  for (const Result& r : results) {
    const std::vector<std::string> x = row_cells(c, r);
    for (std::size_t i = 0; i < names.size(); ++i) std::fprintf(f, "| %s ", x[i].c_str());
    std::fprintf(f, "|\n");
  }
  std::fprintf(f, "\n");
  for (const std::string& line : summary_lines(results)) std::fprintf(f, "- %s\n", line.c_str());
}

void write_csv(std::FILE* f, const Context& c, const std::vector<Result>& results) {
  std::fprintf(f,
               "mode,hidden,batch,seq,threads,layers,directions,rnncore_ms,onednn_ms,ratio,rnncore_min_ms,"
               "rnncore_max_ms,onednn_min_ms,onednn_max_ms,gflop_per_run,rnncore_gflops,onednn_gflops,"
               "rnncore_pct_peak,onednn_pct_peak,rnncore_cpu_per_wall,onednn_cpu_per_wall,other_load,attempts,"
               "max_rel_diff,rnncore_kernel,onednn_impl,peak_gflops_1core,%serror\n",
               c.timing.backward ? "rnncore_fwd_ms,rnncore_bwd_ms,onednn_fwd_ms,onednn_bwd_ms,rel_dw,rel_dx,rel_dstate," : "");
  for (const Result& r : results) {
    const Shape& s = r.shape;
    std::fprintf(f, "%s,%d,%d,%d,%d,%d,%d,", shape_mode(s).c_str(), s.hidden, s.batch, s.seq, s.threads, s.layers,
                 s.directions);
    if (r.error.empty()) {
      std::fprintf(f,
                   "%.4f,%.4f,%.4f,%.4f,%.4f,%.4f,%.4f,%.4f,%.2f,%.2f,%.1f,%.1f,%.3f,%.3f,%.3f,%d,%.3e,%s,%s,%.1f,",
                   r.rn_ms, r.dn_ms, r.dn_ms / r.rn_ms, r.rn_min, r.rn_max, r.dn_min, r.dn_max, r.gflop,
                   r.gflop / (r.rn_ms * 1e-3), r.gflop / (r.dn_ms * 1e-3), pct_of_peak(c, r.gflop, r.rn_ms, s.threads),
                   pct_of_peak(c, r.gflop, r.dn_ms, s.threads), r.rn_par, r.dn_par, r.other_load, r.attempts,
                   r.max_rel, r.rn_kernel.c_str(), r.dn_impl.c_str(), c.peak);
      if (c.timing.backward)
        std::fprintf(f, "%.4f,%.4f,%.4f,%.4f,%.3e,%.3e,%.3e,", r.rn_fwd_ms, r.rn_bwd_ms, r.dn_fwd_ms, r.dn_bwd_ms,
                     r.rel_dw, r.rel_dx, r.rel_dstate);
      std::fprintf(f, "\n");
    } else {
      std::string e = r.error;
      std::replace(e.begin(), e.end(), ',', ';');
      std::replace(e.begin(), e.end(), '\n', ' ');
      std::fprintf(f, ",,,,,,,,%.4f,,,,,,,,%d,,,,%.1f,%s%s\n", r.gflop, r.attempts, c.peak,
                   c.timing.backward ? ",,,,,,," : "", e.c_str());
    }
  }
}

// Rewritten after every shape, so an interrupted sweep leaves what it measured.
void write_file(const std::string& path, const Context& c, const std::vector<Result>& results, bool markdown) {
  if (path.empty() || path == "-") return;
  std::FILE* f = std::fopen(path.c_str(), "w");
  if (!f) {
    std::fprintf(stderr, "onednn_compare: cannot write %s\n", path.c_str());
    return;
  }
  if (markdown) write_markdown(f, c, results);
  else write_csv(f, c, results);
  std::fclose(f);
}

int usage_error(const std::string& what) {
  std::fprintf(stderr, "onednn_compare: %s\n\n%s", what.c_str(), kUsage);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<Mode> modes = {Mode::lstm, Mode::gru, Mode::rnn_tanh};
  std::vector<int> hidden = {128, 256, 512, 1024}, batch = {1, 16, 64}, threads = {1, 2};
  int seq = 100;
  int proj_div = 0;         // --proj-div K: LSTM shapes project to P = H/K
  bool peepholes = false;   // --peepholes
  bool extras = true, quick = false, reps_given = false, warmup_given = false, wait_given = false, retries_given = false;
  bool modes_given = false, hidden_given = false, threads_given = false, seq_given = false;
  int peak_runs = 7;
  Timing tm;
  std::string markdown_path, csv_path;
  Context ctx;
  ctx.command = "onednn_compare";

  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    // The options that shape the measurement make up the recorded command; output options do not.
    const bool record = a != "--note" && a != "--markdown" && a != "--csv";
    if (record) ctx.command += " " + a;
    auto value = [&](std::string* out) {
      if (i + 1 >= argc) return false;
      *out = argv[++i];
      if (record) ctx.command += " " + *out;
      return true;
    };
    std::string v;
    long n;
    if (a == "--help" || a == "-h") {
      std::fputs(kUsage, stdout);
      return 0;
    } else if (a == "--quick") {
      quick = true;
    } else if (a == "--no-extras") {
      extras = false;
    } else if (a == "--proj-div") {
      if (!value(&v) || !parse_int(v, 2, 1 << 16, &n)) return usage_error("--proj-div takes K >= 2 (P = H/K)");
      proj_div = static_cast<int>(n);
    } else if (a == "--peepholes") {
      peepholes = true;
    } else if (a == "--backward") {
      tm.backward = true;
    } else if (a == "--modes") {
      if (!value(&v)) return usage_error("--modes needs a value");
      modes.clear();
      modes_given = true;
      std::size_t at = 0;
      for (;;) {
        const std::size_t comma = v.find(',', at);
        Mode m;
        if (!parse_mode(v.substr(at, comma == std::string::npos ? std::string::npos : comma - at), &m))
          return usage_error("--modes takes lstm, gru, rnn_tanh (comma-separated)");
        modes.push_back(m);
        if (comma == std::string::npos) break;
        at = comma + 1;
      }
    } else if (a == "--hidden") {
      if (!value(&v) || !parse_int_list(v, 1, 16384, &hidden)) return usage_error("--hidden takes sizes, e.g. 128,512");
      hidden_given = true;
    } else if (a == "--batch") {
      if (!value(&v) || !parse_int_list(v, 1, 65536, &batch)) return usage_error("--batch takes sizes, e.g. 1,64");
    } else if (a == "--threads") {
      if (!value(&v) || !parse_int_list(v, 1, 1024, &threads)) return usage_error("--threads takes counts, e.g. 1,2");
      threads_given = true;
    } else if (a == "--seq") {
      if (!value(&v) || !parse_int(v, 1, 1 << 20, &n)) return usage_error("--seq takes a length");
      seq = static_cast<int>(n);
      seq_given = true;
    } else if (a == "--reps") {
      if (!value(&v) || !parse_int(v, 1, 100000, &n)) return usage_error("--reps takes a count >= 1");
      tm.reps = static_cast<int>(n);
      reps_given = true;
    } else if (a == "--warmup") {
      if (!value(&v) || !parse_int(v, 0, 1000, &n)) return usage_error("--warmup takes a count >= 0");
      tm.warmup = static_cast<int>(n);
      warmup_given = true;
    } else if (a == "--gap-ms") {
      if (!value(&v) || !parse_int(v, 0, 10000, &n)) return usage_error("--gap-ms takes milliseconds");
      tm.gap_ms = static_cast<double>(n);
    } else if (a == "--busy-limit") {
      if (!value(&v) || !parse_int(v, 0, 100000, &n)) return usage_error("--busy-limit takes hundredths of a core");
      tm.busy_limit = 0.01 * static_cast<double>(n);
    } else if (a == "--wait-quiet") {
      if (!value(&v) || !parse_int(v, 0, 100000, &n)) return usage_error("--wait-quiet takes seconds");
      tm.wait_quiet_s = static_cast<double>(n);
      wait_given = true;
    } else if (a == "--retries") {
      if (!value(&v) || !parse_int(v, 0, 100, &n)) return usage_error("--retries takes a count");
      tm.retries = static_cast<int>(n);
      retries_given = true;
    } else if (a == "--prerun-ms") {
      if (!value(&v) || !parse_int(v, 0, 100000, &n)) return usage_error("--prerun-ms takes milliseconds");
      tm.prerun_ms = static_cast<double>(n);
    } else if (a == "--peak-runs") {
      if (!value(&v) || !parse_int(v, 0, 1000, &n)) return usage_error("--peak-runs takes a count");
      peak_runs = static_cast<int>(n);
    } else if (a == "--rnncore-weights") {
      if (!value(&v) || (v != "f32" && v != "bf16" && v != "f16"))
        return usage_error("--rnncore-weights takes f32, bf16 or f16");
      tm.rnncore_weights = v == "bf16" ? rnncore::DType::bf16 : v == "f16" ? rnncore::DType::f16 : rnncore::DType::f32;
    } else if (a == "--note") {
      if (!value(&v)) return usage_error("--note needs a text");
      ctx.notes.push_back(v);
    } else if (a == "--markdown") {
      if (!value(&markdown_path)) return usage_error("--markdown needs a file name");
    } else if (a == "--csv") {
      if (!value(&csv_path)) return usage_error("--csv needs a file name");
    } else {
      return usage_error("unknown option " + a);
    }
  }

  // --backward: training steps; its own default sweep (LSTM and GRU, H up to 512, T = 50, one
  // thread, no stacked cases), fewer repetitions, and no untimed runs before runs over 250 ms.
  if (tm.backward) {
    if (!modes_given) modes = {Mode::lstm, Mode::gru};
    if (!hidden_given) hidden = {128, 256, 512};
    if (!threads_given) threads = {1};
    if (!seq_given) seq = 50;
    if (!reps_given) tm.reps = 5;
    if (!warmup_given) tm.warmup = 1;
    extras = false;
    tm.prerun_skip_ms = 250;
  }

  if ((proj_div > 0 || peepholes) && tm.backward) return usage_error("--proj-div and --peepholes time forward runs only");
  if (proj_div > 0) extras = false;  // oneDNN stacks need equal layer widths; P != H

  // The shapes: every (threads, mode, H, B) of the sweep, then the stacked cases per thread count.
  std::vector<Shape> shapes;
  auto add = [&](Mode m, int h, int b, int t, int layers, int dirs) {
    Shape s;
    s.mode = m, s.hidden = h, s.batch = b, s.seq = seq, s.threads = t, s.layers = layers, s.directions = dirs;
    if (m == Mode::lstm) {
      s.proj = proj_div > 0 ? std::max(1, h / proj_div) : 0;
      s.peepholes = peepholes;
    }
    shapes.push_back(s);
  };
  if (quick) {
    if (!reps_given) tm.reps = 3;
    if (!warmup_given) tm.warmup = 1;
    if (!wait_given) tm.wait_quiet_s = 0;
    if (!retries_given) tm.retries = 0;
    if (peak_runs > 3) peak_runs = 3;
  }
  if (quick && tm.backward) {  // every mode, one and two threads; T = 20 unless --seq
    if (!seq_given) seq = 20;
    add(Mode::lstm, 128, 1, 1, 1, 1);
    add(Mode::lstm, 256, 16, 1, 1, 1);
    add(Mode::gru, 128, 16, 1, 1, 1);
    add(Mode::rnn_tanh, 256, 16, 1, 1, 1);
    add(Mode::gru, 256, 16, 2, 1, 1);
  } else if (quick) {
    add(Mode::lstm, 128, 1, 1, 1, 1);
    add(Mode::lstm, 512, 64, 1, 1, 1);
    add(Mode::gru, 256, 16, 1, 1, 1);
    add(Mode::rnn_tanh, 256, 16, 1, 1, 1);
    add(Mode::lstm, 128, 16, 1, 1, 2);
    add(Mode::lstm, 128, 16, 1, 3, 1);
    add(Mode::gru, 256, 16, 2, 1, 1);
  } else {
    for (int t : threads) {
      for (Mode m : modes)
        for (int h : hidden)
          for (int b : batch) add(m, h, b, t, 1, 1);
      if (extras) {
        add(Mode::lstm, 512, 64, t, 1, 2);
        add(Mode::lstm, 512, 64, t, 3, 1);
      }
    }
  }

  // The machine and the libraries.
  ctx.cpu = cpu_model();
  ctx.hw_threads = static_cast<int>(std::thread::hardware_concurrency());
  {
    const dnnl_version_t* v = dnnl::version();
    char buf[64];
    std::snprintf(buf, sizeof buf, "%d.%d.%d", v->major, v->minor, v->patch);
    ctx.onednn_version = buf;
    switch (dnnl::get_effective_cpu_isa()) {
      case dnnl::cpu_isa::avx512_core_amx: ctx.onednn_isa = "isa avx512_core_amx"; break;
      case dnnl::cpu_isa::avx512_core_bf16: ctx.onednn_isa = "isa avx512_core_bf16"; break;
      case dnnl::cpu_isa::avx512_core_vnni: ctx.onednn_isa = "isa avx512_core_vnni"; break;
      case dnnl::cpu_isa::avx512_core: ctx.onednn_isa = "isa avx512_core"; break;
      case dnnl::cpu_isa::avx2_vnni: ctx.onednn_isa = "isa avx2_vnni"; break;
      case dnnl::cpu_isa::avx2: ctx.onednn_isa = "isa avx2"; break;
      default: ctx.onednn_isa = "isa other"; break;
    }
    ctx.onednn_isa += v->cpu_runtime == DNNL_RUNTIME_OMP ? ", OpenMP" : ", non-OpenMP runtime";
  }
  {
    const std::time_t t = std::time(nullptr);
    char buf[32];
    std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M UTC", std::gmtime(&t));
    ctx.date = buf;
  }
  ctx.timing = tm;
#ifndef BENCH_HAVE_OPENMP
  std::fprintf(stderr,
               "onednn_compare: warning: built without OpenMP: oneDNN's thread count cannot be set per "
               "configuration (it follows OMP_NUM_THREADS)\n");
#endif
  for (int t : threads)
    if (ctx.hw_threads > 0 && t > ctx.hw_threads)
      std::fprintf(stderr, "onednn_compare: warning: %d threads on %d hardware threads\n", t, ctx.hw_threads);

  std::fprintf(stderr, "measuring the FMA peak...\n");
  if (peak_runs > 0) {
    if (tm.wait_quiet_s > 0) wait_until_quiet(tm.busy_limit, tm.wait_quiet_s);
    ctx.n_peaks = bench::measure_fma_peaks(peak_runs, 0.2, ctx.peaks);
  }
  for (int i = 0; i < ctx.n_peaks; ++i) ctx.peak = std::max(ctx.peak, ctx.peaks[i].gflops);

  std::printf("# onednn_compare: rnncore vs oneDNN, f32 %s, input size = hidden size\n",
              tm.backward ? "training step (forward + backward: dx, dh0, dc0, weight gradients)" : "forward inference");
  for (const std::string& n : ctx.notes) std::printf("# %s\n", n.c_str());
  std::printf("# %s, %d hardware threads; %s\n", ctx.cpu.c_str(), ctx.hw_threads, ctx.date.c_str());
  std::printf("# fp32 FMA peak: %s\n", peak_text(ctx).c_str());
  std::printf("# oneDNN %s (%s); rnncore %s\n", ctx.onednn_version.c_str(), ctx.onednn_isa.c_str(),
              rnncore::version_string());
  std::printf("# median of %d alternating reps after %d warm-up, each: %.0f ms gap + %.0f ms of untimed runs + timed run; ratio = oneDNN ms / rnncore ms "
              "(> 1: rnncore faster); pk = %% of threads x 1-core peak; par = process CPU time / wall time\n",
              tm.reps, tm.warmup, tm.gap_ms, tm.prerun_ms);
  if (tm.backward)
    std::printf("# one run = one training step (fwd+bwd: medians of its two halves; GFLOP/s count 3x the forward's "
                "flops); no untimed runs before the timed runs of a library whose warm-up run took over %.0f ms; "
                "rel = max|rnncore - oneDNN| / max|oneDNN| of y (hy, cy), the weight gradients, dx, dh0 (dc0)\n",
                tm.prerun_skip_ms);
  print_text_header(stdout, ctx);

  dnnl::engine eng(dnnl::engine::kind::cpu, 0);
  dnnl::stream strm(eng);
  std::vector<Result> results;
  const double start = now_s();
  int current_threads = -1;
  for (std::size_t i = 0; i < shapes.size(); ++i) {
    const Shape& s = shapes[i];
    if (s.threads != current_threads) {  // before the primitives of this configuration are created
      set_onednn_threads(s.threads);
      current_threads = s.threads;
      std::fprintf(stderr, "threads = %d: oneDNN (OpenMP) max threads now %d\n", s.threads, onednn_max_threads());
    }
    std::fprintf(stderr, "[%3zu/%zu] %-8s H=%-4d B=%-3d T=%d threads=%d layers=%s  (%.0f s elapsed)\n", i + 1,
                 shapes.size(), shape_mode(s).c_str(), s.hidden, s.batch, s.seq, s.threads, layers_text(s).c_str(),
                 now_s() - start);
    if (tm.wait_quiet_s > 0) wait_until_quiet(tm.busy_limit, tm.wait_quiet_s);
    auto run = [&]() { return tm.backward ? run_shape_backward(s, tm, eng, strm) : run_shape(s, tm, eng, strm); };
    Result r = run();
    for (int attempt = 2; attempt <= 1 + tm.retries && r.error.empty() && r.other_load > tm.busy_limit; ++attempt) {
      std::fprintf(stderr, "          other processes kept %.2f cores busy (rnncore %.3f ms, oneDNN %.3f ms): measuring "
                   "again (%d/%d)\n", r.other_load, r.rn_ms, r.dn_ms, attempt, 1 + tm.retries);
      if (tm.wait_quiet_s > 0) wait_until_quiet(tm.busy_limit, tm.wait_quiet_s);
      Result again = run();
      again.attempts = attempt;
      if (!again.error.empty() || again.other_load < r.other_load) r = again;
      else r.attempts = attempt;
    }
    if (r.error.empty()) {
      ctx.rn_kernels.insert(r.rn_kernel);
      ctx.dn_impls.insert(r.dn_impl);
      std::fprintf(stderr, "          rnncore %.3f ms (%s), oneDNN %.3f ms (%s): ratio %.2f, max rel diff %.1e\n",
                   r.rn_ms, r.rn_kernel.c_str(), r.dn_ms, r.dn_impl.c_str(), r.dn_ms / r.rn_ms, r.max_rel);
      if (tm.backward)
        std::fprintf(stderr, "          gradients: max rel diff dW %.1e, dx %.1e, dh0/dc0 %.1e\n", r.rel_dw, r.rel_dx,
                     r.rel_dstate);
    } else {
      std::fprintf(stderr, "          failed: %s\n", r.error.c_str());
    }
    results.push_back(r);
    print_text_row(stdout, ctx, r);
    write_file(markdown_path, ctx, results, true);
    write_file(csv_path, ctx, results, false);
  }

  // The peak again: a neighbour may have been busy at the start. Keep the best of both measurements.
  if (peak_runs > 0 && ctx.n_peaks > 0) {
    if (tm.wait_quiet_s > 0) wait_until_quiet(tm.busy_limit, tm.wait_quiet_s);
    bench::FmaPeak again[2];
    const int n = bench::measure_fma_peaks(peak_runs, 0.2, again);
    for (int i = 0; i < n && i < ctx.n_peaks; ++i) ctx.peaks[i].gflops = std::max(ctx.peaks[i].gflops, again[i].gflops);
    const double before = ctx.peak;
    for (int i = 0; i < ctx.n_peaks; ++i) ctx.peak = std::max(ctx.peak, ctx.peaks[i].gflops);
    if (ctx.peak > before * 1.02)
      std::printf("# the FMA peak measured at the end is higher (%.1f vs %.1f GFLOP/s): %%peak above used the lower one; "
                  "the Markdown and CSV files use the higher\n", ctx.peak, before);
    write_file(markdown_path, ctx, results, true);
    write_file(csv_path, ctx, results, false);
  }
  std::printf("# fp32 FMA peak (best of start and end): %s\n", peak_text(ctx).c_str());
  std::printf("# rnncore plans: %s (kernel_name() and options().threads)\n",
              join(ctx.rn_kernels).c_str());
  std::printf("# oneDNN implementations: %s\n", join(ctx.dn_impls).c_str());
  for (const std::string& line : summary_lines(results)) std::printf("# %s\n", line.c_str());
  double worst = 0, worst_grad = 0;
  int failed = 0;
  for (const Result& r : results) {
    if (!r.error.empty()) ++failed;
    else worst = std::max(worst, r.max_rel);
    if (r.error.empty() && tm.backward) worst_grad = std::max({worst_grad, r.rel_dw, r.rel_dx, r.rel_dstate});
  }
  const double limit = agreement_limit(tm.rnncore_weights);
  const double grad_limit = grad_agreement_limit(tm.rnncore_weights);
  std::printf("# rnncore weights: %s (oneDNN: f32); agreement limit %.0e\n", rnncore::to_string(tm.rnncore_weights), limit);
  std::printf("# largest relative difference between the libraries' outputs: %.1e%s; %d shape(s) failed\n", worst,
              worst < limit ? " (agree)" : " (DISAGREE: the comparison is not valid)", failed);
  bool agree = worst < limit;
  if (tm.backward) {
    std::printf("# largest relative difference between the libraries' gradients (dW, dx, dh0/dc0): %.1e%s (limit %.0e)\n",
                worst_grad, worst_grad < grad_limit ? " (agree)" : " (DISAGREE: the comparison is not valid)",
                grad_limit);
    agree = agree && worst_grad < grad_limit;
  }
  std::fprintf(stderr, "done: %zu shapes in %.0f s\n", shapes.size(), now_s() - start);
  if (markdown_path == "-") write_markdown(stdout, ctx, results);
  if (csv_path == "-") write_csv(stdout, ctx, results);
  return failed == 0 && agree ? 0 : 1;
}
