// The support matrix (docs/support.md), produced by running every combination the library has:
// cell × backend × element type × direction × training × LSTM extension × wrapper × streaming.
// Each combination either agrees with the reference backend in f64 (stated tolerances) or is
// refused at plan time with a clean status (unsupported, backend_unavailable) and a detail line;
// anything else fails the test. The markdown it writes is compared with the committed
// docs/support.md, so the page cannot drift from what the library does.
//
//   build/tests/test_support_matrix                          check, and compare with docs/support.md
//   build/tests/test_support_matrix --write docs/support.md  regenerate the page
//   build/tests/test_support_matrix --print                  check, and print the page
//
// The page does not depend on the machine: the SIMD column is checked at every instruction set this
// build and CPU have and must agree across them (the f16 / bf16 weight rows state a per-ISA rule
// instead, checked on every ISA present). A build whose page cannot be the committed one (no SIMD
// kernels, or a GPU backend) checks every cell but skips the comparison, saying why.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "test_util.hpp"

#include "rnncore/gpu.hpp"
#include "rnncore/rnncore.hpp"

using namespace rnncore;

namespace {

constexpr int kT = 4, kB = 3, kI = 4, kH = 4, kP = 3, kLayers = 2;
const std::int32_t kLengths[kB] = {4, 1, 3};  // per-row lengths, not sorted
// Per-step state resets [T, B] of the resets rows: row 0 before steps 1 and 3, row 1 at t = 0 (a
// no-op) and at t = 2 (past its length: ignored), row 2 before step 2.
const std::uint8_t kResets[kT * kB] = {0, 1, 0, 1, 0, 0, 0, 1, 1, 1, 0, 0};
constexpr double kTolF32 = 1e-4;              // f32 (and f16 weights, rounded alike) against the f64 reference
constexpr double kTolBf16 = 3e-2;             // bf16 weights: x and h are rounded to bf16 in the products too
constexpr double kTolGradient = 1e-6;         // f64 gradients against central differences (relative)

int g_failures = 0;

void fail(const std::string& what) {
  std::fprintf(stderr, "FAIL: %s\n", what.c_str());
  ++g_failures;
}

// ---------------------------------------------------------------- inputs

std::uint64_t g_rng = 0;
void seed_rng(std::uint64_t s) { g_rng = s * 0x9E3779B97F4A7C15ull + 1; }
double uniform(double scale) {
  g_rng ^= g_rng >> 12;
  g_rng ^= g_rng << 25;
  g_rng ^= g_rng >> 27;
  return scale * (2.0 * static_cast<double>((g_rng * 0x2545F4914F6CDD1Dull) >> 11) * 0x1.0p-53 - 1.0);
}
std::vector<double> random_vector(std::size_t n, double scale) {
  std::vector<double> v(n);
  for (double& x : v) x = uniform(scale);
  return v;
}

// Rounding to the weight storage types (nearest even), so that the reference sees the same weights.
double round_bf16(double v) {
  float f = static_cast<float>(v);
  std::uint32_t u;
  std::memcpy(&u, &f, 4);
  u = (u + 0x7FFFu + ((u >> 16) & 1u)) & 0xFFFF0000u;
  std::memcpy(&f, &u, 4);
  return f;
}
double round_f16(double v) {
  if (v == 0.0) return 0.0;
  int e;
  std::frexp(v, &e);
  const double quantum = std::ldexp(1.0, std::max(e, -13) - 11);  // 11 significant bits; subnormals below 2^-14
  return std::nearbyint(v / quantum) * quantum;
}

// ---------------------------------------------------------------- one run

// What one combination is: the network, how it is planned and how it runs.
struct Case {
  StackSpec stack;
  DType weight_dtype = DType::f32;
  bool training = false;   // forward with a reserve, then backward
  RunMode run_mode = RunMode::inference;
  bool streaming = false;  // one step per call, the state carried in place
  bool resets = false;     // ForwardArgs::resets = kResets (a run's argument: refused by forward, not Plan::create)
};

// Outputs (and gradients) of one run, as doubles.
struct Result {
  Status status = Status::ok;
  std::string detail;
  bool planned = false;  // Plan::create succeeded (a refusal after it comes too late)
  std::vector<double> y, hy, cy, dx, dh0, dc0, dw;
};

// Host or device buffers, freed at the end of the run.
struct Buffers {
  bool device = false;
  std::vector<void*> owned;
  ~Buffers() {
    for (void* p : owned) device ? gpu_free(0, p) : std::free(p);
  }
  void* alloc(std::size_t bytes) {
    void* p = nullptr;
    if (device) {
      if (gpu_alloc(0, bytes, &p) != Status::ok) return nullptr;
    } else {
      p = std::aligned_alloc(kAlignment, (bytes + kAlignment - 1) / kAlignment * kAlignment + kAlignment);
      std::memset(p, 0, bytes);
    }
    owned.push_back(p);
    return p;
  }
  // `ids`: the values are token ids, put as int32 (the input of a stack with an embedding).
  void* put(const std::vector<double>& v, DType dtype, bool ids = false) {
    std::vector<unsigned char> bytes(v.size() * (ids ? 4 : dtype_size(dtype)));
    for (std::size_t i = 0; i < v.size(); ++i) {
      if (ids) {
        const std::int32_t id = static_cast<std::int32_t>(v[i]);
        std::memcpy(&bytes[i * 4], &id, 4);
      } else if (dtype == DType::f64) std::memcpy(&bytes[i * 8], &v[i], 8);
      else {
        const float f = static_cast<float>(v[i]);
        std::memcpy(&bytes[i * 4], &f, 4);
      }
    }
    void* p = alloc(bytes.size());
    if (p == nullptr) return nullptr;
    if (device) gpu_copy(p, bytes.data(), bytes.size(), GpuCopy::host_to_device);
    else std::memcpy(p, bytes.data(), bytes.size());
    return p;
  }
  std::vector<double> get(const void* p, std::size_t n, DType dtype) {
    std::vector<unsigned char> bytes(n * dtype_size(dtype));
    if (device) gpu_copy(bytes.data(), p, bytes.size(), GpuCopy::device_to_host);
    else std::memcpy(bytes.data(), p, bytes.size());
    std::vector<double> v(n);
    for (std::size_t i = 0; i < n; ++i) {
      if (dtype == DType::f64) std::memcpy(&v[i], &bytes[i * 8], 8);
      else {
        float f;
        std::memcpy(&f, &bytes[i * 4], 4);
        v[i] = f;
      }
    }
    return v;
  }
};

// The inputs of a case, the same for every backend and element type.
struct Inputs {
  std::vector<double> w, x, h0, c0, dy, dhy, dcy;
};

bool has_lstm(const StackSpec& st) {
  for (int l = 0; l < st.num_layers; ++l)
    if (st.layers[l].mode == Mode::lstm) return true;
  return false;
}
std::size_t y_elements(const StackSpec& st) {
  const std::size_t steps = st.head.out_features > 0 && st.head.last_step_only ? 1 : kT;
  return steps * kB * static_cast<std::size_t>(stack_output_size(st));
}

Inputs make_inputs(const StackSpec& st) {
  seed_rng(static_cast<std::uint64_t>(param_count(st)) * 31 + st.layers[0].hidden_size);
  Inputs in;
  in.w = random_vector(static_cast<std::size_t>(param_count(st)), 0.5);
  if (st.embedding.vocab_size > 0) {  // token ids (as doubles until they are put as int32)
    for (int i = 0; i < kT * kB; ++i) in.x.push_back(static_cast<double>((i * 7 + 3) % st.embedding.vocab_size));
  } else {
    in.x = random_vector(static_cast<std::size_t>(kT) * kB * st.input_size, 1.0);
  }
  in.h0 = random_vector(static_cast<std::size_t>(state_elements(st, kB)), 0.5);
  in.c0 = has_lstm(st) ? random_vector(static_cast<std::size_t>(cell_state_elements(st, kB)), 0.5) : std::vector<double>();
  in.dy = random_vector(y_elements(st), 1.0);
  in.dhy = random_vector(in.h0.size(), 1.0);
  in.dcy = random_vector(in.c0.size(), 1.0);
  return in;
}

ForwardArgs base_args(const Case& c) {
  ForwardArgs a;
  a.batch = kB;
  a.seq_len = kT;
  a.seq_lengths = kLengths;
  a.resets = c.resets ? kResets : nullptr;
  a.run_mode = c.run_mode;
  a.seed = 1234;
  a.step = 7;
  return a;
}

// Runs the step-by-step stream of a unidirectional case: T calls of one step, h0/c0 updated in place.
Status stream(const Plan& plan, const void* packed, void* ws, std::size_t ws_bytes, const Case& c, void* x, void* y,
              void* h, void* cst, std::size_t row_in, std::size_t row_out) {
  const std::size_t es = dtype_size(c.stack.dtype);
  for (int t = 0; t < kT; ++t) {
    std::int32_t len[kB];
    for (int b = 0; b < kB; ++b) len[b] = t < kLengths[b] ? 1 : 0;
    ForwardArgs a = base_args(c);
    a.seq_len = 1;
    a.seq_lengths = len;
    a.time_offset = static_cast<std::uint32_t>(t);
    a.x = static_cast<unsigned char*>(x) + t * kB * row_in * es;
    a.y = static_cast<unsigned char*>(y) + t * kB * row_out * es;
    a.h0 = a.hy = h;
    a.c0 = a.cy = cst;
    const Status s = plan.forward(packed, ws, ws_bytes, a);
    if (s != Status::ok) return s;
  }
  return Status::ok;
}

// Plans, packs and runs one case on one backend in one element type; weights `w` (canonical).
Result run(const Case& c, const Inputs& in, const std::vector<double>& w, Backend backend, Isa isa) {
  Result r;
  const StackSpec& st = c.stack;
  const DType dt = st.dtype;
  PlanOptions opt;
  opt.max_batch = kB;
  opt.max_seq_len = kT;
  opt.backend = backend;
  opt.max_isa = isa;
  opt.weight_dtype = c.weight_dtype;
  opt.training = c.training;
  Plan plan;
  r.status = Plan::create(st, opt, &plan);
  if (r.status != Status::ok) {
    r.detail = last_error_detail();
    return r;
  }
  r.planned = true;
  Buffers mem;
  mem.device = backend == Backend::gpu;
  const bool lstm = has_lstm(st);
  void* packed = mem.alloc(plan.packed_weight_bytes());
  void* ws = mem.alloc(plan.workspace_bytes());
  void* x = mem.put(in.x, dt, st.embedding.vocab_size > 0);
  void* y = mem.put(std::vector<double>(y_elements(st), -7.0), dt);
  void* h = mem.put(in.h0, dt);
  void* cst = lstm ? mem.put(in.c0, dt) : nullptr;
  void* hy = mem.put(std::vector<double>(in.h0.size(), -7.0), dt);
  void* cy = lstm ? mem.put(std::vector<double>(in.c0.size(), -7.0), dt) : nullptr;
  if (packed == nullptr || ws == nullptr || y == nullptr || hy == nullptr) {
    r.status = Status::out_of_memory;
    r.detail = "device memory";
    return r;
  }
  // pack_weights reads canonical weights from host memory on every backend.
  std::vector<unsigned char> host_w(w.size() * dtype_size(dt));
  for (std::size_t i = 0; i < w.size(); ++i) {
    if (dt == DType::f64) std::memcpy(&host_w[i * 8], &w[i], 8);
    else {
      const float f = static_cast<float>(w[i]);
      std::memcpy(&host_w[i * 4], &f, 4);
    }
  }
  r.status = plan.pack_weights(host_w.data(), packed, plan.packed_weight_bytes());
  if (r.status == Status::ok && c.streaming) {
    r.status = stream(plan, packed, ws, plan.workspace_bytes(), c, x, y, h, cst, static_cast<std::size_t>(st.input_size),
                      y_elements(st) / (kT * kB));
    hy = h;
    cy = cst;
  } else if (r.status == Status::ok) {
    ForwardArgs a = base_args(c);
    a.x = x;
    a.y = y;
    a.h0 = h;
    a.c0 = cst;
    a.hy = hy;
    a.cy = cy;
    if (c.training) {
      a.reserve = mem.alloc(plan.reserve_bytes());
      a.reserve_bytes = plan.reserve_bytes();
    }
    r.status = plan.forward(packed, ws, plan.workspace_bytes(), a);
    if (r.status == Status::ok && c.training) {
      BackwardArgs b;
      b.forward = a;
      b.dy = mem.put(in.dy, dt);
      b.dhy = mem.put(in.dhy, dt);
      b.dcy = lstm ? mem.put(in.dcy, dt) : nullptr;
      const bool ids = st.embedding.vocab_size > 0;  // token ids have no gradient (the table's is in dweights)
      b.dx = ids ? nullptr : mem.put(std::vector<double>(in.x.size(), -7.0), dt);
      b.dh0 = mem.put(std::vector<double>(in.h0.size(), -7.0), dt);
      b.dc0 = lstm ? mem.put(std::vector<double>(in.c0.size(), -7.0), dt) : nullptr;
      b.dweights = mem.put(std::vector<double>(w.size(), -7.0), dt);
      void* bws = mem.alloc(plan.backward_workspace_bytes());
      r.status = plan.backward(packed, bws, plan.backward_workspace_bytes(), b);
      if (r.status == Status::ok) {
        if (!ids) r.dx = mem.get(b.dx, in.x.size(), dt);
        r.dh0 = mem.get(b.dh0, in.h0.size(), dt);
        if (lstm) r.dc0 = mem.get(b.dc0, in.c0.size(), dt);
        r.dw = mem.get(b.dweights, w.size(), dt);
      }
    }
  }
  if (r.status != Status::ok) {
    r.detail = last_error_detail();
    return r;
  }
  if (backend == Backend::gpu) gpu_synchronize(nullptr);
  r.y = mem.get(y, y_elements(st), dt);
  r.hy = mem.get(hy, in.h0.size(), dt);
  if (lstm) r.cy = mem.get(cy, in.c0.size(), dt);
  return r;
}

// ---------------------------------------------------------------- checks

// Infinity-norm relative error max|a − b| / max|b|.
double rel_error(const std::vector<double>& a, const std::vector<double>& b) {
  if (a.size() != b.size()) return INFINITY;
  double num = 0, den = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const double d = std::fabs(a[i] - b[i]);
    num = std::isnan(d) ? INFINITY : std::max(num, d);
    den = std::max(den, std::fabs(b[i]));
  }
  return num / std::max(den, 1e-30);
}

double dot(const std::vector<double>& a, const std::vector<double>& b) {
  double s = 0;
  for (std::size_t i = 0; i < a.size() && i < b.size(); ++i) s += a[i] * b[i];
  return s;
}

// L = Σ y·dy + Σ hy·dhy + Σ cy·dcy, the scalar whose gradients backward computes.
double loss(const Result& r, const Inputs& in) { return dot(r.y, in.dy) + dot(r.hy, in.dhy) + dot(r.cy, in.dcy); }

// The f64 reference's gradients against central differences along one random direction of
// (weights, x, h0, c0): (L(p + εv) − L(p − εv)) / 2ε = ⟨∇L, v⟩.
bool gradients_agree(const Case& c, const Inputs& in, const std::vector<double>& w, const Result& ref, std::string* why) {
  seed_rng(99);
  Inputs vin;
  const std::vector<double> vw = random_vector(w.size(), 1.0);
  vin.x = random_vector(in.x.size(), 1.0);
  if (c.stack.embedding.vocab_size > 0) vin.x.assign(in.x.size(), 0.0);  // token ids stay
  vin.h0 = random_vector(in.h0.size(), 1.0);
  vin.c0 = random_vector(in.c0.size(), 1.0);
  // Small, so that no relu pre-activation crosses 0 between the two runs (1e-5 did, in one case).
  const double eps = 1e-7;
  double side[2];
  for (int k = 0; k < 2; ++k) {
    const double e = k == 0 ? eps : -eps;
    Inputs p = in;
    std::vector<double> pw = w;
    for (std::size_t i = 0; i < pw.size(); ++i) pw[i] += e * vw[i];
    for (std::size_t i = 0; i < p.x.size(); ++i) p.x[i] += e * vin.x[i];
    for (std::size_t i = 0; i < p.h0.size(); ++i) p.h0[i] += e * vin.h0[i];
    for (std::size_t i = 0; i < p.c0.size(); ++i) p.c0[i] += e * vin.c0[i];
    Case f = c;
    f.training = false;
    const Result r = run(f, p, pw, Backend::reference, Isa::best);
    if (r.status != Status::ok) {
      *why = std::string("central difference run: ") + r.detail;
      return false;
    }
    side[k] = loss(r, in);
  }
  const double numeric = (side[0] - side[1]) / (2 * eps);
  const double analytic = dot(ref.dw, vw) + dot(ref.dx, vin.x) + dot(ref.dh0, vin.h0) + dot(ref.dc0, vin.c0);
  const double err = std::fabs(numeric - analytic) / std::max(std::fabs(analytic), 1e-12);
  if (err <= kTolGradient) return true;
  *why = "gradient " + std::to_string(analytic) + " vs central difference " + std::to_string(numeric);
  return false;
}

// ---------------------------------------------------------------- outcomes

// What one combination gives: "✓", "unsupported", "unavailable", "not built", or "FAIL".
std::string outcome(const Case& c, Backend backend, Isa isa, DType dtype, const std::string& label) {
  Case k = c;
  k.stack.dtype = dtype;
  const Inputs in = make_inputs(k.stack);
  std::vector<double> w = in.w;
  for (double& v : w) v = k.weight_dtype == DType::bf16 ? round_bf16(v) : k.weight_dtype == DType::f16 ? round_f16(v) : v;
  const Result r = run(k, in, w, backend, isa);
  if (r.status == Status::unsupported || r.status == Status::backend_unavailable) {
    if (r.detail.empty() || r.detail.find('\n') != std::string::npos) fail(label + ": refused without a one-line detail");
    if (r.planned && !k.resets)
      fail(label + ": planned, then refused by a run (" + r.detail + "); Plan::create should refuse it");
    if (r.status == Status::unsupported) return "unsupported";
    return backend == Backend::gpu && std::strcmp(gpu_backend_kind(), "none") == 0 ? "not built" : "unavailable";
  }
  if (r.status != Status::ok) {
    fail(label + ": " + status_message(r.status) + ": " + r.detail);
    return "FAIL";
  }
  // The f64 reference of the same case (not streamed: the whole sequence in one call).
  Case ref_case = k;
  ref_case.stack.dtype = DType::f64;
  ref_case.weight_dtype = DType::f32;
  ref_case.streaming = false;
  const Result ref = run(ref_case, in, w, Backend::reference, Isa::best);
  if (ref.status != Status::ok) {
    fail(label + ": the f64 reference refused it: " + ref.detail);
    return "FAIL";
  }
  std::string why;
  if (k.training && !gradients_agree(ref_case, in, w, ref, &why)) {
    fail(label + ": f64 reference: " + why);
    return "FAIL";
  }
  const double tol = k.weight_dtype == DType::bf16 ? kTolBf16 : kTolF32;
  const std::pair<const char*, double> errs[] = {
      {"y", rel_error(r.y, ref.y)},   {"hy", rel_error(r.hy, ref.hy)},   {"cy", rel_error(r.cy, ref.cy)},
      {"dx", rel_error(r.dx, ref.dx)}, {"dh0", rel_error(r.dh0, ref.dh0)}, {"dc0", rel_error(r.dc0, ref.dc0)},
      {"dweights", rel_error(r.dw, ref.dw)}};
  for (const auto& e : errs) {
    if (e.second > tol) {
      fail(label + ": " + e.first + " differs from the f64 reference by " + std::to_string(e.second) + " (tolerance " +
           std::to_string(tol) + ")");
      return "FAIL";
    }
  }
  return "✓";
}

// One sub-combination of a table cell: a name (used when the cell's outcomes differ) and the case.
struct Sub {
  std::string name;
  Case c;
  DType dtype = DType::f32;
  bool exists = true;  // false: the combination does not exist ("n/a")
};

// The outcomes of every sub-combination, merged: one word when they agree, else "word (names) · ...".
std::string merge(const std::vector<std::pair<std::string, std::string>>& outcomes) {
  std::vector<std::string> words;
  std::vector<std::string> names;
  for (const auto& o : outcomes) {
    std::size_t i = 0;
    while (i < words.size() && words[i] != o.second) ++i;
    if (i == words.size()) {
      words.push_back(o.second);
      names.emplace_back();
    }
    names[i] += (names[i].empty() ? "" : ", ") + o.first;
  }
  if (words.size() == 1) return words[0];
  std::string out;
  for (std::size_t i = 0; i < words.size(); ++i) out += (i ? " · " : "") + words[i] + " (" + names[i] + ")";
  return out;
}

std::vector<Isa> g_isas;  // the SIMD instruction sets of this build and CPU, under RNNCORE_MAX_ISA

// A per-ISA rule for the SIMD column (f16 / bf16 weights): the outcome expected at each ISA and the
// text written, so that the page is the same on every machine.
struct IsaRule {
  std::function<std::string(Isa)> expect;
  std::string text;
};

std::string column(const std::string& row, const std::vector<Sub>& subs, Backend backend, bool training,
                   const IsaRule* rule) {
  auto evaluate = [&](Isa isa, const std::string& where) {
    std::vector<std::pair<std::string, std::string>> outcomes;
    for (const Sub& s : subs) {
      Case c = s.c;
      c.training = training;
      std::string word = "n/a";
      if (s.exists) word = outcome(c, backend, isa, s.dtype, row + " [" + s.name + ", " + where + "]");
      outcomes.emplace_back(s.name, word);
    }
    return merge(outcomes);
  };
  const std::string mode = training ? " training" : "";
  if (backend != Backend::simd) return evaluate(Isa::best, std::string(to_string(backend)) + mode);
  if (g_isas.empty()) return "not built";
  std::string first;
  for (Isa isa : g_isas) {
    const std::string got = evaluate(isa, std::string("simd ") + to_string(isa) + mode);
    if (rule != nullptr && got != rule->expect(isa))
      fail(row + " [simd " + to_string(isa) + mode + "]: " + got + ", the page states " + rule->expect(isa));
    if (rule == nullptr && !first.empty() && got != first)
      fail(row + " [simd" + mode + "]: " + to_string(g_isas[0]) + " gives " + first + ", " + to_string(isa) + " " + got);
    if (first.empty()) first = got;
  }
  return rule != nullptr ? rule->text : first;
}

// ---------------------------------------------------------------- the networks

struct CellKind {
  const char* name;
  Mode mode;
  GruVariant variant;
};
const CellKind kCells[] = {
    {"LSTM", Mode::lstm, GruVariant::reset_after},
    {"GRU, reset after", Mode::gru, GruVariant::reset_after},
    {"GRU, reset before", Mode::gru, GruVariant::reset_before},
    {"RNN tanh", Mode::rnn_tanh, GruVariant::reset_after},
    {"RNN relu", Mode::rnn_relu, GruVariant::reset_after},
};
const char* kCellShort[] = {"lstm", "gru-ra", "gru-rb", "tanh", "relu"};

// Two layers of one cell, I = H (so that a residual wrapper fits layer 0).
StackSpec two_layers(const CellKind& cell, Direction dir) {
  StackSpec st;
  st.input_size = kI;
  st.num_layers = kLayers;
  for (int l = 0; l < kLayers; ++l) {
    st.layers[l].mode = cell.mode;
    st.layers[l].gru_variant = cell.variant;
    st.layers[l].hidden_size = kH;
    st.layers[l].direction = dir;
  }
  return st;
}

// Every cell in both directions, each changed by `edit` (which may mark it as not existing).
std::vector<Sub> every_cell(const std::function<void(Sub*)>& edit, DType dtype = DType::f32, bool bidi = true) {
  std::vector<Sub> subs;
  for (int i = 0; i < 5; ++i)
    for (Direction d : {Direction::unidirectional, Direction::bidirectional}) {
      if (d == Direction::bidirectional && !bidi) continue;
      Sub s;
      s.name = std::string(kCellShort[i]) + (d == Direction::bidirectional ? " bi" : " uni");
      s.c.stack = two_layers(kCells[i], d);
      s.dtype = dtype;
      edit(&s);
      subs.push_back(s);
    }
  return subs;
}

// ---------------------------------------------------------------- the page

struct Row {
  std::string name;
  std::vector<Sub> subs;
  const IsaRule* rule = nullptr;
  bool training = true;  // also the training columns
};

const Backend kBackends[] = {Backend::reference, Backend::simd, Backend::gpu};

void table(std::ostringstream& md, const char* first_header, const std::vector<Row>& rows, bool training_columns) {
  md << "| " << first_header << " | reference | SIMD | GPU |";
  if (training_columns) md << " training: reference | SIMD | GPU |";
  md << "\n|---|---|---|---|" << (training_columns ? "---|---|---|" : "") << "\n";
  for (const Row& r : rows) {
    md << "| " << r.name;
    for (Backend b : kBackends) md << " | " << column(r.name, r.subs, b, false, r.rule);
    if (training_columns)
      for (Backend b : kBackends) md << " | " << (r.training ? column(r.name, r.subs, b, true, r.rule) : "n/a");
    md << " |\n";
  }
  md << "\n";
}

std::vector<Row> cell_rows() {
  std::vector<Row> rows;
  for (int i = 0; i < 5; ++i) {
    Row r;
    r.name = kCells[i].name;
    for (Direction d : {Direction::unidirectional, Direction::bidirectional}) {
      Sub s;
      s.name = d == Direction::bidirectional ? "bidirectional" : "unidirectional";
      s.c.stack = two_layers(kCells[i], d);
      r.subs.push_back(s);
    }
    rows.push_back(r);
  }
  return rows;
}

std::vector<Row> dtype_rows() {
  std::vector<Row> rows;
  const auto nothing = [](Sub*) {};
  rows.push_back({"f32", every_cell(nothing, DType::f32)});
  rows.push_back({"f64", every_cell(nothing, DType::f64)});
  rows.push_back({"f16 weights (f32 activations)", every_cell([](Sub* s) { s->c.weight_dtype = DType::f16; })});
  rows.push_back({"bf16 weights (f32 activations)", every_cell([](Sub* s) { s->c.weight_dtype = DType::bf16; })});
  return rows;
}

std::vector<Row> extension_rows() {
  struct Ext {
    const char* name;
    std::function<void(LayerSpec*)> set;
  };
  const Ext exts[] = {
      {"projection (P < H)", [](LayerSpec* l) { l->proj_size = kP; }},
      {"peepholes", [](LayerSpec* l) { l->peepholes = true; }},
      {"cell clip", [](LayerSpec* l) { l->cell_clip = 0.3; }},
      {"projection clip", [](LayerSpec* l) { l->proj_size = kP; l->proj_clip = 0.2; }},
      {"all four", [](LayerSpec* l) { l->proj_size = kP; l->peepholes = true; l->cell_clip = 0.3; l->proj_clip = 0.2; }},
  };
  std::vector<Row> rows;
  for (const Ext& e : exts) {
    Row r;
    r.name = e.name;
    for (Direction d : {Direction::unidirectional, Direction::bidirectional}) {
      Sub s;
      s.name = d == Direction::bidirectional ? "bidirectional" : "unidirectional";
      s.c.stack = two_layers(kCells[0], d);
      for (int l = 0; l < kLayers; ++l) e.set(&s.c.stack.layers[l]);
      r.subs.push_back(s);
    }
    rows.push_back(r);
  }
  return rows;
}

Wrapper dropout(double in, double out, double state, bool variational, bool per_sequence, StateFilter filter) {
  Wrapper w;
  w.kind = WrapperKind::dropout;
  w.dropout.input_keep = in;
  w.dropout.output_keep = out;
  w.dropout.state_keep = state;
  w.dropout.variational = variational;
  w.dropout.per_sequence = per_sequence;
  w.dropout.state_filter = filter;
  return w;
}

// A custom residual function: input − output / 2.
void residual_f32(const float* input, const float* output, float* result, std::int32_t width, void*) {
  for (std::int32_t i = 0; i < width; ++i) result[i] = input[i] - 0.5f * output[i];
}
void residual_f64(const double* input, const double* output, double* result, std::int32_t width, void*) {
  for (std::int32_t i = 0; i < width; ++i) result[i] = input[i] - 0.5 * output[i];
}

// Wrappers on every layer (a residual only on layer 0, whose input width is H), in a training run
// so that dropout acts.
std::vector<Sub> wrapped(const std::function<void(StackSpec*)>& wrap) {
  return every_cell([&](Sub* s) {
    s->c.run_mode = RunMode::training;
    wrap(&s->c.stack);
  });
}
std::function<void(StackSpec*)> on_every_layer(Wrapper w) {
  return [w](StackSpec* st) {
    for (int l = 0; l < st->num_layers; ++l) st->layers[l].wrappers[st->layers[l].num_wrappers++] = w;
  };
}

std::vector<Row> wrapper_rows() {
  std::vector<Row> rows;
  const StateFilter def = StateFilter::default_filter;
  rows.push_back({"DropoutWrapper: input, output, state", wrapped(on_every_layer(dropout(0.8, 0.7, 0.6, false, false, def)))});
  rows.push_back({"DropoutWrapper: variational (TF, batch-shared)",
                  wrapped(on_every_layer(dropout(0.8, 0.7, 0.6, true, false, def)))});
  rows.push_back({"DropoutWrapper: variational per sequence (Keras)",
                  wrapped(on_every_layer(dropout(0.8, 0.7, 0.6, true, true, def)))});
  for (StateFilter f : {StateFilter::h_and_c, StateFilter::c_only, StateFilter::none}) {
    const char* name = f == StateFilter::h_and_c ? "state filter: h and c" : f == StateFilter::c_only ? "state filter: c only"
                                                                                                       : "state filter: none";
    rows.push_back({std::string("DropoutWrapper, ") + name, wrapped(on_every_layer(dropout(1.0, 1.0, 0.6, false, false, f)))});
  }
  rows.push_back({"inter-layer dropout (CudnnLSTM)", wrapped([](StackSpec* st) { st->dropout = 0.3; })});
  Wrapper res;
  res.kind = WrapperKind::residual;
  rows.push_back({"ResidualWrapper (add)", wrapped([res](StackSpec* st) { st->layers[0].wrappers[st->layers[0].num_wrappers++] = res; })});
  Wrapper custom = res;
  custom.residual.f32 = residual_f32;
  custom.residual.f64 = residual_f64;
  rows.push_back({"ResidualWrapper, custom function",
                  wrapped([custom](StackSpec* st) { st->layers[0].wrappers[st->layers[0].num_wrappers++] = custom; })});
  Wrapper drop = dropout(0.8, 0.7, 0.6, true, false, def);
  rows.push_back({"residual around dropout, inter-layer dropout", wrapped([res, drop](StackSpec* st) {
                    on_every_layer(drop)(st);
                    st->layers[0].wrappers[st->layers[0].num_wrappers++] = res;
                    st->dropout = 0.3;
                  })});
  Row mc{"Monte-Carlo dropout (inference run)", wrapped(on_every_layer(dropout(0.8, 0.7, 0.6, false, false, def)))};
  for (Sub& s : mc.subs) s.c.run_mode = RunMode::monte_carlo;
  mc.training = false;
  rows.push_back(mc);
  return rows;
}

std::vector<Row> streaming_rows() {
  std::vector<Row> rows;
  const auto streamed = [](Sub* s) { s->c.streaming = true; };
  rows.push_back({"one step per call, every cell", every_cell(streamed, DType::f32, false), nullptr, false});
  rows.push_back({"the same with dropout (time_offset)", every_cell([&](Sub* s) {
                    streamed(s);
                    s->c.run_mode = RunMode::training;
                    on_every_layer(dropout(0.8, 0.7, 0.6, false, false, StateFilter::default_filter))(&s->c.stack);
                    s->c.stack.dropout = 0.3;
                  }, DType::f32, false),
                  nullptr, false});
  Row ext{"LSTM with all four extensions", {}, nullptr, false};
  Sub s;
  s.name = "lstm uni";
  s.c.stack = two_layers(kCells[0], Direction::unidirectional);
  s.c.streaming = true;
  for (int l = 0; l < kLayers; ++l) {
    s.c.stack.layers[l].proj_size = kP;
    s.c.stack.layers[l].peepholes = true;
    s.c.stack.layers[l].cell_clip = 0.3;
    s.c.stack.layers[l].proj_clip = 0.2;
  }
  ext.subs.push_back(s);
  rows.push_back(ext);
  Row bidi{"bidirectional", every_cell([](Sub* b) { b->exists = false; }), nullptr, false};
  for (Sub& b : bidi.subs) b.exists = false;
  rows.push_back(bidi);
  return rows;
}

std::vector<Row> reset_rows() {
  std::vector<Row> rows;
  const auto reset = [](Sub* s) { s->c.resets = true; };
  rows.push_back({"every cell, unidirectional", every_cell(reset, DType::f32, false)});
  rows.push_back({"with DropoutWrapper and inter-layer dropout (training run)", every_cell([&](Sub* s) {
                    reset(s);
                    s->c.run_mode = RunMode::training;
                    on_every_layer(dropout(0.8, 0.7, 0.6, false, false, StateFilter::h_and_c))(&s->c.stack);
                    s->c.stack.dropout = 0.3;
                  }, DType::f32, false)});
  rows.push_back({"with a variational DropoutWrapper and a ResidualWrapper (training run)", every_cell([&](Sub* s) {
                    reset(s);
                    s->c.run_mode = RunMode::training;
                    on_every_layer(dropout(0.8, 0.7, 0.6, true, true, StateFilter::default_filter))(&s->c.stack);
                    Wrapper res;
                    res.kind = WrapperKind::residual;
                    s->c.stack.layers[0].wrappers[s->c.stack.layers[0].num_wrappers++] = res;
                  }, DType::f32, false)});
  rows.push_back({"bf16 weights (f32 activations)", every_cell([&](Sub* s) {
                    reset(s);
                    s->c.weight_dtype = DType::bf16;
                  }, DType::f32, false)});
  Row ext{"LSTM with all four extensions", {}, nullptr, true};
  Sub e;
  e.name = "lstm uni";
  e.c.stack = two_layers(kCells[0], Direction::unidirectional);
  e.c.resets = true;
  for (int l = 0; l < kLayers; ++l) {
    e.c.stack.layers[l].proj_size = kP;
    e.c.stack.layers[l].peepholes = true;
    e.c.stack.layers[l].cell_clip = 0.3;
    e.c.stack.layers[l].proj_clip = 0.2;
  }
  ext.subs.push_back(e);
  rows.push_back(ext);
  Row bidi{"bidirectional", {}, nullptr, true};
  for (const Sub& s : every_cell(reset))
    if (s.c.stack.layers[0].direction == Direction::bidirectional) bidi.subs.push_back(s);
  rows.push_back(bidi);
  return rows;
}

std::vector<Row> ends_rows() {
  std::vector<Row> rows;
  const Activation acts[] = {Activation::none, Activation::relu, Activation::sigmoid, Activation::tanh,
                             Activation::softmax};
  for (bool last : {false, true}) {
    Row r{last ? "Dense head on the last step" : "Dense head on every step", {}, nullptr, true};
    for (Activation a : acts)
      for (Sub& s : every_cell([&](Sub* c) {
             c->c.stack.head.out_features = 3;
             c->c.stack.head.activation = a;
             c->c.stack.head.last_step_only = last;
           })) {
        s.name += std::string(" ") + to_string(a);
        r.subs.push_back(s);
      }
    rows.push_back(r);
  }
  rows.push_back({"Embedding (vocabulary 5)", every_cell([](Sub* s) { s->c.stack.embedding.vocab_size = 5; }), nullptr,
                  true});
  rows.push_back({"Embedding, then a softmax head on the last step", every_cell([](Sub* s) {
                    s->c.stack.embedding.vocab_size = 5;
                    s->c.stack.head = DenseSpec();
                    s->c.stack.head.out_features = 3;
                    s->c.stack.head.activation = Activation::softmax;
                    s->c.stack.head.last_step_only = true;
                  }), nullptr, true});
  rows.push_back({"Two Dense layers (relu, tanh) before a softmax head on every step", every_cell([](Sub* s) {
                    StackSpec& st = s->c.stack;
                    st.head.out_features = 3;
                    st.head.activation = Activation::softmax;
                    st.num_pre_head = 2;
                    st.pre_head[0].out_features = 5;
                    st.pre_head[0].activation = Activation::relu;
                    st.pre_head[1].out_features = 4;
                    st.pre_head[1].activation = Activation::tanh;
                  }), nullptr, true});
  return rows;
}

// The page: one table per dimension. A new feature (a layer kind, an element type) is a function
// returning its rows (each row: sub-cases that differ only in what the row names) and one table()
// call here; its outcomes then come from the library like every other cell's.
std::string page() {
  std::ostringstream md;
  md << "# What works with what\n\n"
        "<!-- Generated by tests/test_support_matrix.cpp; do not edit. Regenerate with\n"
        "     build/tests/test_support_matrix --write docs/support.md -->\n\n"
        "Every cell below is a run of the library, made by `tests/test_support_matrix.cpp` (the\n"
        "`support_matrix` test), which fails when this page differs from what the build produces.\n\n"
        "- **✓** — the combination runs and agrees with the reference backend in f64: outputs y, hy, cy within\n"
        "  1e-4 (relative, infinity norm; 3e-2 with bf16 weights, whose products round x, h and dpre to bf16 too),\n"
        "  and in the training columns the gradients dx, dh0, dc0 and dweights within the same tolerance. The\n"
        "  f64 reference's own gradients are checked against central differences (1e-6); its outputs are\n"
        "  checked against PyTorch, ONNX and TensorFlow by the golden tests (tests/golden/).\n"
        "- **unsupported** — `Plan::create` refuses it with `Status::unsupported` and a one-line detail.\n"
        "- **unavailable** — `Plan::create` refuses it with `Status::backend_unavailable`: the backend does not\n"
        "  compute this element type.\n"
        "- **not built** — the GPU backend exists only in builds configured with `-Dgpu=cuda` or `-Dgpu=hip`\n"
        "  ([gpu.md](gpu.md)). This page is a default build's, where the GPU backend refuses with\n"
        "  `Status::backend_unavailable`; its **unsupported** cells are refusals made before the backend is\n"
        "  looked for, the same in every build. A GPU build checks its column the same way, on its device,\n"
        "  but does not compare its page with this one.\n"
        "- **n/a** — the combination does not exist.\n"
        "- Where the sub-cases of a cell differ, the cell lists each outcome with the sub-cases it holds for.\n\n"
        "Networks: two layers, input 4, hidden 4 (projection 3), batch 3 with per-row lengths 4, 1, 3,\n"
        "sequence 4, given initial states, one thread; each cell is run unidirectional and bidirectional\n"
        "(named uni / bi with the cell where outcomes differ: lstm, gru-ra / gru-rb for the GRU's reset\n"
        "after / before, tanh, relu). The SIMD column is checked at every instruction set the build and CPU\n"
        "have (`PlanOptions::max_isa`) and states what they all give.\n"
        "Training is a forward with a reserve followed by `Plan::backward`.\n\n";
  md << "## Cells\n\nf32, inference and training; unidirectional and bidirectional.\n\n";
  table(md, "cell", cell_rows(), true);
  md << "## Element types\n\nEvery cell, both directions. f16 and bf16 are storage types of the packed weights\n"
        "(`PlanOptions::weight_dtype`); activations are f32 and the reference runs the same rounded weights.\n\n";
  table(md, "element type", dtype_rows(), true);
  md << "## LSTM extensions\n\nTF `LSTMCell`'s `num_proj`, `use_peepholes`, `cell_clip`, `proj_clip` and PyTorch's\n"
        "`proj_size` ([weights.md](weights.md), \"LSTM extensions\"); f32, both directions. They are LSTM features:\n"
        "`validate` refuses them on other cells (`Status::invalid_size`).\n\n";
  table(md, "LSTM with", extension_rows(), true);
  md << "## Wrappers and dropout\n\nTensorFlow's `DropoutWrapper` and `ResidualWrapper` on every layer (the residual on\n"
        "layer 0, whose input has the hidden size), and `CudnnLSTM`'s inter-layer dropout; every cell, both\n"
        "directions, f32, in training runs (`RunMode::training`, so that dropout acts; the masks are the mask\n"
        "function's, the same on every backend: [dropout.md](dropout.md)).\n\n";
  table(md, "wrapper", wrapper_rows(), true);
  md << "## Streaming\n\nA sequence fed one step per call, the final state of each call the initial state of the\n"
        "next (`hy` = `h0`, in place) and `ForwardArgs::time_offset` = the step, compared with one\n"
        "whole-sequence run; every cell, unidirectional, f32. A bidirectional layer's reverse direction needs\n"
        "the whole sequence before its first output, so it does not stream.\n\n";
  table(md, "streaming", streaming_rows(), false);
  md << "## State resets\n\n`ForwardArgs::resets` ([design.md](design.md), \"Per-step state resets\"): before a step,\n"
        "chosen rows start again from their initial state (row 0 before steps 1 and 3, row 2 before step 2;\n"
        "one reset at t = 0 and one past a row's length); every cell, f32, with lengths and given initial\n"
        "states. Resets are an argument of the run, so `forward` (not `Plan::create`) refuses them where\n"
        "they do not run.\n\n";
  table(md, "resets", reset_rows(), true);
  md << "## Around the stack\n\nAn Embedding before layer 0 (`StackSpec::embedding`: the input is int32 token ids) and a\n"
        "Dense head after the last layer (`StackSpec::head`, PyTorch's `nn.Linear`, Keras' `Dense`) with each\n"
        "activation (none, relu, sigmoid, tanh, softmax), and Dense layers before the head (`StackSpec::pre_head`);\n"
        "every cell, both directions, f32.\n\n";
  table(md, "around the stack", ends_rows(), true);
  return md.str();
}

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::ostringstream s;
  s << f.rdbuf();
  return f ? s.str() : std::string();
}

}  // namespace

int main(int argc, char** argv) {
  g_isas = rnncore_test::isas_here();
  const std::string md = page();
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "--print") std::fputs(md.c_str(), stdout);
  if (mode == "--write" && argc > 2) {
    std::ofstream(argv[2], std::ios::binary) << md;
    std::printf("wrote %s\n", argv[2]);
  } else if (mode.empty()) {
    const std::string committed_path = std::string(RNNCORE_SOURCE_DIR) + "/docs/support.md";
    if (g_isas.empty() || std::strcmp(gpu_backend_kind(), "none") != 0) {
      std::printf("not compared with docs/support.md: the page is a default build's (SIMD kernels, no GPU backend); "
                  "here the SIMD backend %s (RNNCORE_MAX_ISA=none, or a build without kernels) and the GPU backend "
                  "is '%s'\n", g_isas.empty() ? "does not run" : "runs", gpu_backend_kind());
    } else if (read_file(committed_path) != md) {
      fail("docs/support.md differs from what this build produces; regenerate it with "
           "build/tests/test_support_matrix --write docs/support.md (and review the diff)");
    }
  }
  if (g_failures > 0) {
    std::fprintf(stderr, "%d failure(s)\n", g_failures);
    return 1;
  }
  if (mode != "--print") std::printf("support matrix: every combination agrees with the reference or is refused cleanly\n");
  return 0;
}
