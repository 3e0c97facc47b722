// The integer LSTM's scalar reference (src/internal/int8_lstm.hpp, docs/int8.md):
//   * bit-exact against LiteRT's integer LSTM on the committed goldens (tests/golden/tflite_int8/,
//     made by tests/golden/make_tflite_int8_golden.py): every output element and the final states;
//   * streaming: one step per call with the state carried equals the whole sequence, bit for bit;
//   * refusals: zero, negative and non-finite scales, multipliers out of range, a cell scale that
//     is not a power of two (or outside 2^-30 .. 2^-9), each with its status;
//   * the fixed-point sigmoid and tanh against the real functions (sanity, not the contract);
//   * every matrix-vector kernel this build and CPU have (int8_dot_kernels) equals the scalar one
//     bit for bit on random and extreme shapes and values, and runs every golden bit-exactly.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "rnncore/io/safetensors.hpp"
#include "src/internal/int8_lstm.hpp"
#include "src/internal/int8_activations.hpp"
#include "src/internal/int8_elementwise.hpp"
#include "tests/int8_fixed_point_reference.hpp"
#include "tests/golden_files.hpp"

using namespace rnncore;
using namespace rnncore::q8;

namespace {

std::string golden_dir() { return rnncore_test::golden_dir("tflite_int8"); }
std::vector<std::string> list_cases() { return rnncore_test::list_cases(golden_dir()); }
using rnncore_test::meta;

float meta_f(const io::SafeTensors& f, const char* key) { return static_cast<float>(std::strtod(meta(f, key).c_str(), nullptr)); }
int meta_i(const io::SafeTensors& f, const char* key) { return std::atoi(meta(f, key).c_str()); }

template <class T>
std::vector<T> ints(const io::SafeTensors& f, const char* name, io::ElemType type) {
  const io::TensorEntry* e = f.find(name);
  REQUIRE_MESSAGE(e != nullptr, "tensor '" << name << "' missing in " << f.path);
  REQUIRE(e->type == type);
  io::Array a;
  REQUIRE(f.array(name, &a) == RNNCORE_OK);
  std::vector<std::int32_t> v;
  REQUIRE(io::to_i32(a, &v) == RNNCORE_OK);
  return std::vector<T>(v.begin(), v.end());
}

// One golden case: LiteRT's model and its int8 input, output and states.
struct Case {
  io::SafeTensors f;
  int I = 0, H = 0, T = 0, B = 0;
  bool sequences = true;
  Int8LstmQuantization q;
  std::vector<std::int8_t> w[kGates], r[kGates], x, y, h0, hn;
  std::vector<std::int32_t> b[kGates];
  std::vector<std::int16_t> c0, cn;
};

void load(const std::string& path, Case* c) {
  REQUIRE(io::read_safetensors(path.c_str(), &c->f) == RNNCORE_OK);
  const io::SafeTensors& f = c->f;
  REQUIRE(meta(f, "op") == "UNIDIRECTIONAL_SEQUENCE_LSTM");
  c->I = meta_i(f, "I");
  c->H = meta_i(f, "H");
  c->T = meta_i(f, "T");
  c->B = meta_i(f, "B");
  c->sequences = meta(f, "return_sequences") == "1";
  static const char* const kTf[kGates] = {"i", "f", "c", "o"};  // TFLite's name of gate g
  for (int g = 0; g < kGates; ++g) {
    const std::string wn = std::string("w_") + kTf[g], rn = std::string("r_") + kTf[g], bn = std::string("b_") + kTf[g];
    c->w[g] = ints<std::int8_t>(f, wn.c_str(), io::ElemType::i8);
    c->r[g] = ints<std::int8_t>(f, rn.c_str(), io::ElemType::i8);
    c->b[g] = ints<std::int32_t>(f, bn.c_str(), io::ElemType::i32);
    REQUIRE(c->w[g].size() == static_cast<std::size_t>(c->H * c->I));
    REQUIRE(c->r[g].size() == static_cast<std::size_t>(c->H * c->H));
    c->q.w_scale[g] = meta_f(f, (wn + "_scale").c_str());
    c->q.r_scale[g] = meta_f(f, (rn + "_scale").c_str());
  }
  c->q.input_scale = meta_f(f, "input_scale");
  c->q.input_zp = meta_i(f, "input_zp");
  c->q.state_scale = meta_f(f, "output_state_scale");
  c->q.state_zp = meta_i(f, "output_state_zp");
  c->q.hidden_scale = meta_f(f, "hidden_scale");
  c->q.hidden_zp = meta_i(f, "hidden_zp");
  c->q.cell_scale = meta_f(f, "cell_scale");
  c->q.cell_clip = meta_f(f, "cell_clip");
  // Without projection the op writes its output state as its output: one quantization for both.
  REQUIRE(meta_f(f, "output_scale") == c->q.state_scale);
  REQUIRE(meta_i(f, "output_zp") == c->q.state_zp);
  c->x = ints<std::int8_t>(f, "x", io::ElemType::i8);
  c->y = ints<std::int8_t>(f, "y", io::ElemType::i8);
  c->h0 = ints<std::int8_t>(f, "h0", io::ElemType::i8);
  c->hn = ints<std::int8_t>(f, "hn", io::ElemType::i8);
  c->c0 = ints<std::int16_t>(f, "c0", io::ElemType::i16);
  c->cn = ints<std::int16_t>(f, "cn", io::ElemType::i16);
  REQUIRE(c->x.size() == static_cast<std::size_t>(c->B * c->T * c->I));
  REQUIRE(c->y.size() == static_cast<std::size_t>(c->B * (c->sequences ? c->T : 1) * c->H));
}

struct Prepared {
  std::vector<std::int32_t> bias_storage;
  std::vector<std::int8_t> w[kGates], r[kGates];  // the weights interleaved, where q asks for that layout
  Int8LstmParams p;
};

// Prepares c's weights in q.weight_layout (interleaved by interleave4 from the golden's row-major).
Status prepare(const Case& c, const Int8LstmQuantization& q, Prepared* out) {
  const std::int8_t* w[kGates];
  const std::int8_t* r[kGates];
  const std::int32_t* b[kGates];
  for (int g = 0; g < kGates; ++g) {
    w[g] = c.w[g].data();
    r[g] = c.r[g].data();
    b[g] = c.b[g].data();
    if (q.weight_layout == Int8WeightLayout::interleaved4) {  // std::vector's storage is 4-byte aligned
      out->w[g].assign(interleaved4_bytes(c.H, c.I), 0x55);
      out->r[g].assign(interleaved4_bytes(c.H, c.H), 0x55);
      REQUIRE(interleave4(w[g], c.H, c.I, out->w[g].data()));
      REQUIRE(interleave4(r[g], c.H, c.H, out->r[g].data()));
      w[g] = out->w[g].data();
      r[g] = out->r[g].data();
    }
  }
  out->bias_storage.assign(int8_lstm_storage_words(q, c.H), 0);
  return int8_lstm_prepare(q, c.I, c.H, w, r, b, out->bias_storage.data(), out->bias_storage.size(), &out->p);
}

// Index of the first differing element, or -1.
template <class T>
long first_mismatch(const std::vector<T>& a, const std::vector<T>& b) {
  if (a.size() != b.size()) return 0;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (a[i] != b[i]) return static_cast<long>(i);
  return -1;
}

}  // namespace

TEST_CASE("int8 LSTM: bit-exact with LiteRT's integer LSTM (8x8_16) on the goldens") {
  const std::vector<std::string> cases = list_cases();
  REQUIRE(cases.size() >= 9);
  for (const std::string& path : cases) {
    CAPTURE(path);
    Case c;
    load(path, &c);
    // Every kernel of both weight layouts: the row-major ones, then the interleaved ones; each with
    // the step's scalar code for the rest of the step and with each pair of step kernels.
    int nk = 0, np = 0, ns = 0;
    const DotRowsKernel* kernels = int8_dot_kernels(&nk);
    const DotPanelsKernel* panels = int8_panel_kernels(&np);
#if !defined(RNNCORE_NO_HEAP)
    const StepKernels* step_kernels = int8_step_kernels(&ns);
#endif
    for (int si = -1; si < ns; ++si) {
    for (int ki = 0; ki < nk + np; ++ki) {
    const bool interleaved = ki >= nk;
    const std::string kernel_name = interleaved ? panels[ki - nk].name : kernels[ki].name;
    CAPTURE(kernel_name);
    CAPTURE(si);
    Int8LstmQuantization q = c.q;
    q.weight_layout = interleaved ? Int8WeightLayout::interleaved4 : Int8WeightLayout::row_major;
    Prepared pr;
    INFO(last_error_detail());
    REQUIRE(prepare(c, q, &pr) == Status::ok);
    if (interleaved) {
      CHECK((pr.p.dot_panels == panels[np - 1].fn));
      pr.p.dot_panels = panels[ki - nk].fn;
    } else {
      CHECK((pr.p.dot == int8_best_dot_kernel().fn));
      pr.p.dot = kernels[ki].fn;
    }
#if !defined(RNNCORE_NO_HEAP)
    const StepKernels* best_step = int8_best_step_kernels();
    CHECK((pr.p.gate_activations == (best_step ? best_step->gate : nullptr)));
    CHECK((pr.p.cell_update == (best_step ? best_step->cell : nullptr)));
    pr.p.gate_activations = si < 0 ? nullptr : step_kernels[si].gate;
    pr.p.cell_update = si < 0 ? nullptr : step_kernels[si].cell;
#endif
    std::vector<std::int8_t> h = c.h0, y(static_cast<std::size_t>(c.B) * c.T * c.H);
    std::vector<std::int16_t> cs = c.c0;
    std::vector<std::int8_t> scratch(int8_lstm_scratch_bytes(pr.p));
    CHECK(scratch.size() == (interleaved ? 3 + 2 * ((c.I + 3) / 4 * 4 + (c.H + 3) / 4 * 4) : c.H));
    REQUIRE(int8_lstm_sequence(pr.p, c.B, c.T, c.x.data(), y.data(), h.data(), cs.data(), scratch.data(),
                               scratch.size()) == Status::ok);
    std::vector<std::int8_t> got = y;
    if (!c.sequences) {  // the model slices the last step
      got.resize(static_cast<std::size_t>(c.B) * c.H);
      for (int b = 0; b < c.B; ++b)
        for (int j = 0; j < c.H; ++j)
          got[static_cast<std::size_t>(b) * c.H + j] = y[(static_cast<std::size_t>(b) * c.T + (c.T - 1)) * c.H + j];
    }
    const long my = first_mismatch(got, c.y);
    CHECK_MESSAGE(my < 0, "y differs at " << my << ": " << int(got[my < 0 ? 0 : my]) << " vs LiteRT "
                                          << int(c.y[my < 0 ? 0 : my]));
    CHECK(first_mismatch(h, c.hn) < 0);
    CHECK(first_mismatch(cs, c.cn) < 0);
    }
    }
  }
}

TEST_CASE("int8 LSTM: a step per call with the state carried equals the whole sequence, bit for bit") {
  for (const std::string& path : list_cases()) {
    CAPTURE(path);
    Case c;
    load(path, &c);
    Prepared pr;
    REQUIRE(prepare(c, c.q, &pr) == Status::ok);
    std::vector<std::int8_t> scratch(int8_lstm_scratch_bytes(c.H));
    const std::size_t H = c.H, I = c.I, T = c.T, B = c.B;
    std::vector<std::int8_t> h_all = c.h0, y_all(B * T * H);
    std::vector<std::int16_t> c_all = c.c0;
    REQUIRE(int8_lstm_sequence(pr.p, c.B, c.T, c.x.data(), y_all.data(), h_all.data(), c_all.data(),
                               scratch.data(), scratch.size()) == Status::ok);
    // All rows of the batch advance together one step per call (time-major steps).
    std::vector<std::int8_t> h = c.h0, xt(B * I), y(B * T * H);
    std::vector<std::int16_t> cs = c.c0;
    for (std::size_t t = 0; t < T; ++t) {
      for (std::size_t b = 0; b < B; ++b)
        for (std::size_t k = 0; k < I; ++k) xt[b * I + k] = c.x[(b * T + t) * I + k];
      int8_lstm_step(pr.p, c.B, xt.data(), h.data(), cs.data(), scratch.data());
      for (std::size_t b = 0; b < B; ++b)
        for (std::size_t j = 0; j < H; ++j) y[(b * T + t) * H + j] = h[b * H + j];
    }
    CHECK(first_mismatch(y, y_all) < 0);
    CHECK(first_mismatch(h, h_all) < 0);
    CHECK(first_mismatch(cs, c_all) < 0);
    // Chunks: the first half of the sequence, then the rest from the carried state.
    if (c.T >= 2) {
      const int t1 = c.T / 2;
      std::vector<std::int8_t> h2 = c.h0, y2(B * T * H), xa(B * t1 * I), xb(B * (T - t1) * I);
      std::vector<std::int8_t> ya(B * t1 * H), yb(B * (T - t1) * H);
      std::vector<std::int16_t> c2 = c.c0;
      for (std::size_t b = 0; b < B; ++b)
        for (std::size_t t = 0; t < T; ++t)
          for (std::size_t k = 0; k < I; ++k) {
            const std::int8_t v = c.x[(b * T + t) * I + k];
            if (t < static_cast<std::size_t>(t1)) xa[(b * t1 + t) * I + k] = v;
            else xb[(b * (T - t1) + (t - t1)) * I + k] = v;
          }
      REQUIRE(int8_lstm_sequence(pr.p, c.B, t1, xa.data(), ya.data(), h2.data(), c2.data(), scratch.data(),
                                 scratch.size()) == Status::ok);
      REQUIRE(int8_lstm_sequence(pr.p, c.B, c.T - t1, xb.data(), yb.data(), h2.data(), c2.data(),
                                 scratch.data(), scratch.size()) == Status::ok);
      for (std::size_t b = 0; b < B; ++b)
        for (std::size_t t = 0; t < T; ++t)
          for (std::size_t j = 0; j < H; ++j)
            y2[(b * T + t) * H + j] = t < static_cast<std::size_t>(t1) ? ya[(b * t1 + t) * H + j]
                                                                       : yb[(b * (T - t1) + (t - t1)) * H + j];
      CHECK(first_mismatch(y2, y_all) < 0);
      CHECK(first_mismatch(h2, h_all) < 0);
      CHECK(first_mismatch(c2, c_all) < 0);
    }
  }
}

// Per-channel scales (rnncore's extension; LiteRT's integer LSTM has none to compare with): rows
// at their tensor's scale give the per-tensor bits; with scales of their own, each unit's step
// equals the per-tensor step of a model whose scales are that unit's (a unit reads only its own
// rows and multipliers, and the shared x and h).
struct RowScales {
  std::vector<float> w[kGates], r[kGates];
  Int8LstmQuantization apply(Int8LstmQuantization q) {
    for (int g = 0; g < kGates; ++g) {
      q.w_scales[g] = w[g].data();
      q.r_scales[g] = r[g].data();
      q.w_scale[g] = q.r_scale[g] = std::nanf("");  // per channel these are not read
    }
    return q;
  }
};

TEST_CASE("int8 LSTM: per-channel weight scales") {
  const std::vector<std::string> cases = list_cases();
  REQUIRE(!cases.empty());
  std::mt19937 rng(20261125);
  std::uniform_real_distribution<float> factor(0.5f, 2.0f);
  int units_compared = 0;
  for (const std::string& path : cases) {
    CAPTURE(path);
    Case c;
    load(path, &c);
    const auto run = [&c](const Int8LstmParams& p, std::vector<std::int8_t>* h, std::vector<std::int16_t>* cs, int steps) {
      std::vector<std::int8_t> y(static_cast<std::size_t>(c.B) * steps * c.H), scratch(int8_lstm_scratch_bytes(p));
      *h = c.h0;
      *cs = c.c0;
      // the first `steps` steps of every batch row
      std::vector<std::int8_t> x(static_cast<std::size_t>(c.B) * steps * c.I);
      for (int b = 0; b < c.B; ++b)
        std::copy_n(c.x.begin() + static_cast<std::ptrdiff_t>(b) * c.T * c.I, steps * c.I,
                    x.begin() + static_cast<std::ptrdiff_t>(b) * steps * c.I);
      REQUIRE(int8_lstm_sequence(p, c.B, steps, x.data(), y.data(), h->data(), cs->data(), scratch.data(),
                                 scratch.size()) == Status::ok);
      return y;
    };
    Prepared tensor;
    REQUIRE(prepare(c, c.q, &tensor) == Status::ok);
    std::vector<std::int8_t> h_t, h_c;
    std::vector<std::int16_t> c_t, c_c;
    const std::vector<std::int8_t> y_t = run(tensor.p, &h_t, &c_t, c.T);

    RowScales same;
    for (int g = 0; g < kGates; ++g) {
      same.w[g].assign(static_cast<std::size_t>(c.H), c.q.w_scale[g]);
      same.r[g].assign(static_cast<std::size_t>(c.H), c.q.r_scale[g]);
    }
    const Int8LstmQuantization q_same = same.apply(c.q);
    CHECK(int8_lstm_storage_words(q_same, c.H) == 24 * static_cast<std::size_t>(c.H));
    Prepared channel;
    INFO(last_error_detail());
    REQUIRE(prepare(c, q_same, &channel) == Status::ok);
    CHECK(first_mismatch(run(channel.p, &h_c, &c_c, c.T), y_t) < 0);
    CHECK(first_mismatch(h_c, h_t) < 0);
    CHECK(first_mismatch(c_c, c_t) < 0);

    // Scales of their own: one step, unit by unit against per-tensor models.
    RowScales own = same;
    for (int g = 0; g < kGates; ++g) {
      for (float& v : own.w[g]) v *= factor(rng);
      for (float& v : own.r[g]) v *= factor(rng);
    }
    const Int8LstmQuantization q_own = own.apply(c.q);
    // Interleaved weights with per-unit multipliers: the same bits as row-major ones.
    Int8LstmQuantization q_own_interleaved = q_own;
    q_own_interleaved.weight_layout = Int8WeightLayout::interleaved4;
    REQUIRE(prepare(c, q_own_interleaved, &channel) == Status::ok);
    std::vector<std::int8_t> h_i;
    std::vector<std::int16_t> c_i;
    const std::vector<std::int8_t> y_i = run(channel.p, &h_i, &c_i, c.T);
    REQUIRE(prepare(c, q_own, &channel) == Status::ok);
    CHECK(first_mismatch(run(channel.p, &h_c, &c_c, c.T), y_i) < 0);
    CHECK(first_mismatch(h_c, h_i) < 0);
    CHECK(first_mismatch(c_c, c_i) < 0);
    run(channel.p, &h_c, &c_c, 1);
    for (int j = 0; j < c.H; j += (c.H > 24 ? 5 : 1)) {
      Int8LstmQuantization qj = c.q;
      for (int g = 0; g < kGates; ++g) {
        qj.w_scale[g] = own.w[g][static_cast<std::size_t>(j)];
        qj.r_scale[g] = own.r[g][static_cast<std::size_t>(j)];
      }
      REQUIRE(prepare(c, qj, &tensor) == Status::ok);
      run(tensor.p, &h_t, &c_t, 1);
      for (int b = 0; b < c.B; ++b) {
        const std::size_t at = static_cast<std::size_t>(b) * c.H + j;
        CHECK(h_c[at] == h_t[at]);
        CHECK(c_c[at] == c_t[at]);
      }
      ++units_compared;
    }
    // Refusals: scales for some weights only, a zero row scale, too little storage, and a folded
    // table whose multipliers do not belong to the scales.
    Int8LstmQuantization bad = q_own;
    bad.r_scales[2] = nullptr;
    CHECK(prepare(c, bad, &channel) == Status::null_pointer);
    bad = q_own;
    own.w[1][0] = 0.0f;
    CHECK(prepare(c, bad, &channel) == Status::invalid_size);
    CHECK(std::string(last_error_detail()).find("gate f, unit 0") != std::string::npos);
    own.w[1][0] = same.w[1][0];
    const std::int8_t* w[kGates];
    const std::int8_t* r[kGates];
    const std::int32_t* bias[kGates];
    for (int g = 0; g < kGates; ++g) w[g] = c.w[g].data(), r[g] = c.r[g].data(), bias[g] = c.b[g].data();
    std::vector<std::int32_t> storage(int8_lstm_storage_words(q_own, c.H) - 1);
    Int8LstmParams p;
    CHECK(int8_lstm_prepare(q_own, c.I, c.H, w, r, bias, storage.data(), storage.size(), &p) == Status::buffer_too_small);
    storage.push_back(0);
    REQUIRE(int8_lstm_prepare(q_own, c.I, c.H, w, r, bias, storage.data(), storage.size(), &p) == Status::ok);
    Int8LstmParams folded;
    CHECK(int8_lstm_prepare_folded(q_own, c.I, c.H, w, r, bias, storage.data(), storage.size(), &folded) == Status::ok);
    CHECK(folded.x_mult_rows[3] == storage.data() + 8 * c.H + 6 * c.H);
    storage[16 * static_cast<std::size_t>(c.H) + 1] += 1;  // a recurrent shift of gate i, unit 0
    CHECK(int8_lstm_prepare_folded(q_own, c.I, c.H, w, r, bias, storage.data(), storage.size(), &folded) ==
          Status::invalid_size);
  }
  CHECK(units_compared > 50);
}

TEST_CASE("int8 LSTM: the cell clip bounds the int16 cell state to [-clip, clip]") {
  const std::vector<std::string> cases = list_cases();
  REQUIRE(!cases.empty());
  for (const std::string& path : cases) {
    CAPTURE(path);
    Case c;
    load(path, &c);
    // The converter writes cell_clip 10 for Keras LSTMs; the goldens run with it (test above),
    // and lstm_I4_H8_T24_B1_seq_clip reaches it (20480 at 2^-11). Here a clip far below.
    Int8LstmQuantization q = c.q;
    q.cell_clip = 0.01f;
    Prepared pr;
    REQUIRE(prepare(c, q, &pr) == Status::ok);
    const int clip = static_cast<int>(0.01f / q.cell_scale);
    CHECK(pr.p.cell_clip == clip);
    std::vector<std::int8_t> h = c.h0, xt(static_cast<std::size_t>(c.B) * c.I);
    std::vector<std::int16_t> cs = c.c0;
    std::vector<std::int8_t> scratch(int8_lstm_scratch_bytes(c.H));
    int at_clip = 0;
    for (int t = 0; t < c.T; ++t) {
      for (int b = 0; b < c.B; ++b)
        for (int k = 0; k < c.I; ++k)
          xt[static_cast<std::size_t>(b) * c.I + k] = c.x[(static_cast<std::size_t>(b) * c.T + t) * c.I + k];
      int8_lstm_step(pr.p, c.B, xt.data(), h.data(), cs.data(), scratch.data());
      for (std::int16_t v : cs) {
        CHECK(std::abs(static_cast<int>(v)) <= clip);
        at_clip += std::abs(static_cast<int>(v)) == clip;
      }
    }
    CHECK(at_clip > 0);
  }
}

TEST_CASE("int8 LSTM: bad quantization parameters are refused with their status") {
  const std::vector<std::string> cases = list_cases();
  REQUIRE(!cases.empty());
  Case c;
  load(cases.front(), &c);
  Prepared pr;
  auto expect = [&](const Int8LstmQuantization& q, Status s, const char* needle) {
    const Status got = prepare(c, q, &pr);
    CHECK(got == s);
    const std::string detail = last_error_detail();
    CHECK_MESSAGE(detail.find(needle) != std::string::npos, "detail: " << detail);
  };
  SUBCASE("zero and negative scales") {
    Int8LstmQuantization q = c.q;
    q.input_scale = 0.0f;
    expect(q, Status::invalid_size, "input scale");
    q = c.q;
    q.state_scale = -0.01f;
    expect(q, Status::invalid_size, "output state scale");
    q = c.q;
    q.w_scale[1] = 0.0f;
    expect(q, Status::invalid_size, "input weight scale of gate f");
    q = c.q;
    q.r_scale[3] = -1.0f;
    expect(q, Status::invalid_size, "recurrent weight scale of gate o");
    q = c.q;
    q.hidden_scale = std::nanf("");
    expect(q, Status::invalid_size, "hidden scale");
    q = c.q;
    q.cell_scale = 0.0f;
    expect(q, Status::invalid_size, "cell state scale");
  }
  SUBCASE("multipliers that overflow or underflow") {
    Int8LstmQuantization q = c.q;
    q.hidden_scale = 1e-30f;  // 2^-30 / 1e-30 is far above 2^30
    expect(q, Status::invalid_size, "effective hidden scale");
    q = c.q;
    q.w_scale[2] = 1e30f;
    expect(q, Status::invalid_size, "effective input scale of gate g");
    q = c.q;
    q.r_scale[0] = 1e-30f;  // below 2^-32: every product would round to zero
    expect(q, Status::invalid_size, "effective recurrent scale of gate i");
  }
  SUBCASE("cell state scale: power of two, 2^-30 .. 2^-9") {
    Int8LstmQuantization q = c.q;
    q.cell_scale = 3.0f / 65536.0f;
    expect(q, Status::unsupported, "not a power of two");
    q.cell_scale = 1.0f / 256.0f;  // 2^-8: tanh would need 7 integer bits
    expect(q, Status::unsupported, "outside");
    q.cell_scale = 1.0f / 2147483648.0f;  // 2^-31: the shift 30 + k of i·g would be negative
    expect(q, Status::unsupported, "outside");
    // 2^-16 .. 2^-30 are accepted: LiteRT runs them (with the input gate in place of tanh(c))
    q.cell_scale = 1.0f / 65536.0f;
    CHECK(prepare(c, q, &pr) == Status::ok);
    CHECK(pr.p.cell_log2 == -16);
  }
  SUBCASE("zero points and sizes") {
    Int8LstmQuantization q = c.q;
    q.input_zp = 128;
    expect(q, Status::invalid_size, "zero points");
    std::vector<std::int32_t> small(3);
    const std::int8_t* w[kGates] = {c.w[0].data(), c.w[1].data(), c.w[2].data(), c.w[3].data()};
    const std::int8_t* r[kGates] = {c.r[0].data(), c.r[1].data(), c.r[2].data(), c.r[3].data()};
    Int8LstmParams p;
    CHECK(int8_lstm_prepare(c.q, c.I, c.H, w, r, nullptr, small.data(), small.size(), &p) == Status::buffer_too_small);
    CHECK(int8_lstm_prepare(c.q, 0, c.H, w, r, nullptr, small.data(), small.size(), &p) == Status::invalid_size);
    CHECK(int8_lstm_prepare(c.q, c.I, c.H, w, r, nullptr, nullptr, 0, &p) == Status::null_pointer);
    CHECK(int8_lstm_prepare(c.q, 65537, c.H, w, r, nullptr, small.data(), small.size(), &p) == Status::invalid_size);
  }
  SUBCASE("an effective bias beyond int32") {
    int row_sum = 0;
    for (int k = 0; k < c.I; ++k) row_sum += c.w[0][static_cast<std::size_t>(k)];
    REQUIRE(row_sum != 0);
    Int8LstmQuantization q = c.q;
    q.input_zp = row_sum > 0 ? -1 : 1;  // -z_x * row sum > 0
    Case big = c;
    big.b[0][0] = 2147483647;
    const Status got = prepare(big, q, &pr);
    CHECK(got == Status::invalid_size);
    CHECK(std::string(last_error_detail()).find("effective input bias of gate i, unit 0") != std::string::npos);
  }
}

TEST_CASE("int8 LSTM: quantize_multiplier and the fixed-point activations") {
  QuantizedMultiplier m;
  REQUIRE(quantize_multiplier(0.5, "x", &m) == Status::ok);
  CHECK(m.multiplier == (1 << 30));
  CHECK(m.shift == 0);
  CHECK(multiply_by_quantized_multiplier(7, m) == 4);    // 3.5: the high multiply rounds half up
  CHECK(multiply_by_quantized_multiplier(-7, m) == -3);  // -3.5 likewise (TFLite's double rounding)
  REQUIRE(quantize_multiplier(0.25, "x", &m) == Status::ok);
  CHECK(m.shift == -1);
  CHECK(multiply_by_quantized_multiplier(-6, m) == -2);  // -1.5: the rounding shift rounds away from zero
  REQUIRE(quantize_multiplier(3.0, "x", &m) == Status::ok);
  CHECK(multiply_by_quantized_multiplier(1000, m) == 3000);
  REQUIRE(quantize_multiplier(std::ldexp(1.0, -20) * 1.25, "x", &m) == Status::ok);
  CHECK(multiply_by_quantized_multiplier(1 << 22, m) == 5);
  CHECK(quantize_multiplier(0.0, "x", &m) == Status::invalid_size);
  CHECK(quantize_multiplier(-1.0, "x", &m) == Status::invalid_size);
  CHECK(quantize_multiplier(std::ldexp(1.0, 31), "x", &m) == Status::invalid_size);

  CHECK(sigmoid_q3_12(0) == 16384);
  CHECK(tanh_q(0, 3) == 0);
  double worst_s = 0, worst_t = 0;
  for (int v = -32768; v <= 32767; ++v) {
    const std::int16_t x = static_cast<std::int16_t>(v);
    const double s = sigmoid_q3_12(x) / 32768.0;
    worst_s = std::max(worst_s, std::fabs(s - 1.0 / (1.0 + std::exp(-v / 4096.0))));
    for (int ib = 0; ib <= 6; ++ib) {
      const double t = tanh_q(x, ib) / 32768.0;
      worst_t = std::max(worst_t, std::fabs(t - std::tanh(std::ldexp(static_cast<double>(v), ib - 15))));
    }
    // odd / complementary symmetry where the raw value can be negated
    if (v > -32768) {
      CHECK(tanh_q(static_cast<std::int16_t>(-v), 3) == -tanh_q(x, 3));
    }
  }
  // gemmlowp's 16-bit functions are accurate to a few units in the last place (measured: 6.4 for
  // the sigmoid, 12 for tanh, in units of 2^-15)
  CHECK(worst_s < 7.0 / 32768);
  CHECK(worst_t < 13.0 / 32768);
}

// src/internal/int8_fixed_point.hpp computes the activations and the rescaling with fewer instructions than a
// literal transcription of gemmlowp's and TFLite's arithmetic (tests/int8_fixed_point_reference.hpp,
// the version that first matched LiteRT). The activations are functions of one int16: equal on
// every input, for every integer_bits tanh accepts (and 0 outside 0..6, as before).
TEST_CASE("int8 LSTM: the fixed-point activations equal the reference on every int16 input") {
  long sigmoid_diffs = 0, tanh_diffs = 0;
  for (int v = -32768; v <= 32767; ++v) {
    const std::int16_t x = static_cast<std::int16_t>(v);
    if (sigmoid_q3_12(x) != reference::sigmoid_q3_12(x)) {
      if (++sigmoid_diffs <= 5) FAIL_CHECK("sigmoid_q3_12(" << v << ") = " << sigmoid_q3_12(x) << ", reference " << reference::sigmoid_q3_12(x));
    }
    for (int ib = -1; ib <= 7; ++ib) {
      if (tanh_q(x, ib) != reference::tanh_q(x, ib)) {
        if (++tanh_diffs <= 5) FAIL_CHECK("tanh_q(" << v << ", " << ib << ") = " << tanh_q(x, ib) << ", reference " << reference::tanh_q(x, ib));
      }
    }
  }
  CHECK(sigmoid_diffs == 0);
  CHECK(tanh_diffs == 0);
}

// The rescaling: every multiplier shift quantize_multiplier produces (-31..30), multipliers at
// and between the ends of [2^30, 2^31), and accumulators random, near 0, near the int32 ends and
// at the rounding ties of each shift.
TEST_CASE("int8 LSTM: tanh with IB > 3 integer bits is tanh with 3 at the argument scaled, saturated") {
  // The firmware's activation tables (meson option int8_activation_tables) hold tanh for 3 integer
  // bits only and read it at x · 2^(IB − 3), saturated to int16, for the cell state's IB 4..6: the
  // same real argument, and the same fixed-point result on every int16 input (checked here, and
  // on the emulated core by tests/cross/int8_kernels_baremetal.cpp with the tables built in).
  for (int ib = 4; ib <= 6; ++ib) {
    long differ = 0;
    for (std::int32_t x = -32768; x <= 32767; ++x) {
      const std::int32_t y = std::clamp<std::int32_t>(x * (1 << (ib - 3)), -32768, 32767);
      differ += tanh_q(static_cast<std::int16_t>(x), ib) != tanh_q(static_cast<std::int16_t>(y), 3);
    }
    CHECK_MESSAGE(differ == 0, "integer bits " << ib);
  }
}

TEST_CASE("int8 LSTM: multiply_by_quantized_multiplier equals the reference") {
  std::mt19937 rng(2026);
  std::uniform_int_distribution<std::int32_t> any(std::numeric_limits<std::int32_t>::min(),
                                                  std::numeric_limits<std::int32_t>::max());
  std::uniform_int_distribution<std::int32_t> mult(1 << 30, std::numeric_limits<std::int32_t>::max());
  long diffs = 0, checked = 0;
  const auto check = [&](std::int32_t x, QuantizedMultiplier m) {
    ++checked;
    const std::int32_t got = multiply_by_quantized_multiplier(x, m), want = reference::multiply_by_quantized_multiplier(x, m);
    if (got != want && ++diffs <= 5) {
      FAIL_CHECK("x " << x << " multiplier " << m.multiplier << " shift " << m.shift << ": " << got << ", reference " << want);
    }
  };
  const std::int32_t kMin = std::numeric_limits<std::int32_t>::min(), kMax = std::numeric_limits<std::int32_t>::max();
  for (int shift = -31; shift <= 30; ++shift) {
    const std::int32_t multipliers[] = {1 << 30, (1 << 30) + 1, 1518500250, kMax - 1, kMax, mult(rng), mult(rng)};
    for (const std::int32_t mm : multipliers) {
      const QuantizedMultiplier m{mm, shift};
      for (std::int32_t x = -300; x <= 300; ++x) check(x, m);
      for (std::int32_t d = 0; d < 64; ++d) {
        check(kMin + d, m);
        check(kMax - d, m);
      }
      for (int e = 0; e <= 31; ++e) {  // around ±2^e: ties of the rounding shifts
        const std::int64_t t = std::int64_t{1} << e;
        for (int d = -2; d <= 2; ++d) {
          if (t + d <= kMax) check(static_cast<std::int32_t>(t + d), m);
          check(static_cast<std::int32_t>(-t + d), m);
        }
      }
      for (int k = 0; k < 2000; ++k) check(any(rng), m);
    }
  }
  // the multiplier −2^31 (not one quantize_multiplier makes): the one saturating product
  for (int shift = -3; shift <= 3; ++shift) {
    for (const std::int32_t x : {kMin, kMin + 1, -1, 0, 1, kMax}) check(x, QuantizedMultiplier{kMin, shift});
  }
  CHECK(checked > 1000000);
  CHECK(diffs == 0);
}

#if !defined(RNNCORE_NO_HEAP)
TEST_CASE("int8 step kernels: whole sequences equal the step's scalar code on random models") {
  int nk = 0;
  const StepKernels* kernels = int8_step_kernels(&nk);
  std::mt19937 rng(20261128);
  std::uniform_int_distribution<int> weight(-127, 127), byte(-128, 127);
  std::uniform_real_distribution<float> factor(0.5f, 2.0f);
  long units = 0;
  int trial = 0;
  // H around the lane count and the block; cell scales 2^-16 (o · i) .. 2^-9; per tensor and per
  // channel; weight scales that give left shifts (an effective scale above 1) and right ones
  for (const int H : {3, 8, 13, 32, 37, 70}) {
    for (const int cell_log2 : {-16, -15, -13, -11, -9}) {
      for (const bool per_channel : {false, true}) {
        ++trial;
        const int I = 1 + trial % 19, T = 5, B = 2;
        CAPTURE(H);
        CAPTURE(cell_log2);
        CAPTURE(per_channel);
        Int8LstmQuantization q;
        q.input_scale = trial % 3 == 0 ? 1.0f / 16 : 1.0f / 128;  // 1/16 with the weights' 1/64: a left shift of 2
        q.input_zp = byte(rng) / 4;
        q.state_scale = q.hidden_scale = 1.0f / 128;
        q.state_zp = q.hidden_zp = byte(rng) / 8;
        q.cell_scale = std::ldexp(1.0f, cell_log2);
        q.cell_clip = trial % 4 == 0 ? 0.5f * std::ldexp(32768.0f, cell_log2) : 0.0f;
        RowScales rows;
        for (int g = 0; g < kGates; ++g) {
          q.w_scale[g] = trial % 3 == 0 ? 1.0f / 64 : factor(rng) / 512;
          q.r_scale[g] = factor(rng) / 512;
          for (int u = 0; u < H; ++u) {
            rows.w[g].push_back(q.w_scale[g] * factor(rng));
            rows.r[g].push_back(q.r_scale[g] * factor(rng));
          }
        }
        if (per_channel) q = rows.apply(q);
        std::vector<std::int8_t> w[kGates], r[kGates];
        std::vector<std::int32_t> b[kGates];
        const std::int8_t* wp[kGates];
        const std::int8_t* rp[kGates];
        const std::int32_t* bp[kGates];
        for (int g = 0; g < kGates; ++g) {
          for (int k = 0; k < H * I; ++k) w[g].push_back(static_cast<std::int8_t>(weight(rng)));
          for (int k = 0; k < H * H; ++k) r[g].push_back(static_cast<std::int8_t>(weight(rng)));
          for (int u = 0; u < H; ++u) b[g].push_back(256 * byte(rng));
          wp[g] = w[g].data();
          rp[g] = r[g].data();
          bp[g] = b[g].data();
        }
        std::vector<std::int32_t> storage(int8_lstm_storage_words(q, H));
        Int8LstmParams p;
        INFO(last_error_detail());
        REQUIRE(int8_lstm_prepare(q, I, H, wp, rp, bp, storage.data(), storage.size(), &p) == Status::ok);
        std::vector<std::int8_t> x(static_cast<std::size_t>(B) * T * I);
        for (std::int8_t& v : x) v = static_cast<std::int8_t>(byte(rng));
        const auto run = [&](GateActivationsFn gate, CellUpdateFn cell, std::vector<std::int8_t>* y, std::vector<std::int16_t>* c) {
          Int8LstmParams pk = p;
          pk.gate_activations = gate;
          pk.cell_update = cell;
          std::vector<std::int8_t> h(static_cast<std::size_t>(B) * H, static_cast<std::int8_t>(q.state_zp)),
              scratch(int8_lstm_scratch_bytes(pk));
          y->assign(static_cast<std::size_t>(B) * T * H, 0);
          c->assign(static_cast<std::size_t>(B) * H, 0);
          REQUIRE(int8_lstm_sequence(pk, B, T, x.data(), y->data(), h.data(), c->data(), scratch.data(), scratch.size()) ==
                  Status::ok);
        };
        std::vector<std::int8_t> want_y;
        std::vector<std::int16_t> want_c;
        run(nullptr, nullptr, &want_y, &want_c);
        for (int ki = 0; ki < nk; ++ki) {
          CAPTURE(kernels[ki].gate_name);
          std::vector<std::int8_t> y;
          std::vector<std::int16_t> c;
          run(kernels[ki].gate, kernels[ki].cell, &y, &c);
          CHECK(first_mismatch(y, want_y) < 0);
          CHECK(first_mismatch(c, want_c) < 0);
          units += B * T * H;
        }
      }
    }
  }
  MESSAGE(units << " unit steps of " << nk << " step kernel pairs compared with the scalar code");
}
#endif

TEST_CASE("int8 LSTM: an unknown weight layout and misaligned interleaved weights are refused") {
  const std::vector<std::string> cases = list_cases();
  REQUIRE(!cases.empty());
  Case c;
  load(cases[0], &c);
  Prepared pr;
  Int8LstmQuantization q = c.q;
  q.weight_layout = static_cast<Int8WeightLayout>(3);
  CHECK(prepare(c, q, &pr) == Status::invalid_enum);
  q.weight_layout = Int8WeightLayout::interleaved4;
  REQUIRE(prepare(c, q, &pr) == Status::ok);
  // The same bytes one byte further on: refused, not read with a faulting LDM.
  std::vector<std::int8_t> shifted(pr.w[1].size() + 1);
  std::copy(pr.w[1].begin(), pr.w[1].end(), shifted.begin() + 1);
  const std::int8_t* w[kGates] = {pr.w[0].data(), shifted.data() + 1, pr.w[2].data(), pr.w[3].data()};
  const std::int8_t* r[kGates] = {pr.r[0].data(), pr.r[1].data(), pr.r[2].data(), pr.r[3].data()};
  const std::int32_t* b[kGates] = {c.b[0].data(), c.b[1].data(), c.b[2].data(), c.b[3].data()};
  std::vector<std::int32_t> storage(int8_lstm_storage_words(q, c.H));
  Int8LstmParams p;
  CHECK(int8_lstm_prepare(q, c.I, c.H, w, r, b, storage.data(), storage.size(), &p) == Status::misaligned);
  CHECK(std::string(last_error_detail()).find("gate f") != std::string::npos);
  // A scratch of the row-major size is too small for interleaved weights.
  std::vector<std::int8_t> h = c.h0, scratch(int8_lstm_scratch_bytes(c.H));
  std::vector<std::int16_t> cs = c.c0;
  CHECK(int8_lstm_sequence(pr.p, 1, 1, c.x.data(), nullptr, h.data(), cs.data(), scratch.data(), scratch.size()) ==
        Status::buffer_too_small);
  // A token table's layer (only a plan makes one) is refused: the sequence's step has no token-table copy.
  Int8LstmParams tokens = pr.p;
  tokens.token_gates = true;
  std::vector<std::int8_t> big(int8_lstm_scratch_bytes(pr.p));
  CHECK(int8_lstm_sequence(tokens, 1, 1, c.x.data(), nullptr, h.data(), cs.data(), big.data(), big.size()) ==
        Status::unsupported);
  CHECK(std::string(last_error_detail()).find("token table") != std::string::npos);
}

TEST_CASE("int8 ADD and MUL equal LiteRT's (XNNPACK) on every pair of operands") {
  // tests/golden/tflite_int8/elementwise/<op>_<k>.safetensors: all 65,536 (a, b) pairs and LiteRT's y.
  const auto files = rnncore_test::list_cases(golden_dir() + "/elementwise");
  REQUIRE(files.size() == 4);
  int adds = 0, muls = 0;
  for (const std::string& path : files) {
    INFO(path);
    io::SafeTensors f;
    REQUIRE(io::read_safetensors(path.c_str(), &f) == RNNCORE_OK);
    const std::vector<std::int8_t> a = ints<std::int8_t>(f, "a", io::ElemType::i8), b = ints<std::int8_t>(f, "b", io::ElemType::i8),
                                   want = ints<std::int8_t>(f, "y", io::ElemType::i8);
    REQUIRE((a.size() == 65536 && b.size() == 65536 && want.size() == 65536));
    const Int8Quant qa{meta_f(f, "a_scale"), meta_i(f, "a_zp")}, qb{meta_f(f, "b_scale"), meta_i(f, "b_zp")},
        qy{meta_f(f, "y_scale"), meta_i(f, "y_zp")};
    std::vector<std::int8_t> got(a.size()), got_const(a.size());
    if (meta(f, "op") == "ADD") {
      Int8AddParams p;
      REQUIRE(int8_add_prepare(qa, qb, qy, &p) == Status::ok);
      int8_add(p, a.size(), a.data(), b.data(), got.data());
      ++adds;
    } else {
      Int8MulParams p;
      REQUIRE(int8_mul_prepare(qa, qb, qy, &p) == Status::ok);
      int8_mul(p, a.size(), a.data(), b.data(), got.data());
      // The constant operand (Keras merge_mode ave's 0.5): each block of 256 has one b.
      for (std::size_t i = 0; i < a.size(); i += 256) int8_mul_constant(p, 256, a.data() + i, b[i], got_const.data() + i);
      CHECK(got_const == want);
      ++muls;
    }
    CHECK(got == want);
  }
  CHECK((adds == 2 && muls == 2));
}

TEST_CASE("int8 ADD and MUL refuse what XNNPACK would not take, and bad quantization") {
  Int8AddParams add;
  Int8MulParams mul;
  const Int8Quant q{0.01f, 3};
  CHECK(int8_add_prepare(q, q, q, &add) == Status::ok);
  CHECK(int8_mul_prepare(q, q, Int8Quant{0.0001f, 0}, &mul) == Status::ok);
  // An operand's scale over the output's outside [2^-10, 2^8); a product scale outside [2^-16, 2^8).
  CHECK(int8_add_prepare(Int8Quant{0.01f / 1500.0f, 0}, q, q, &add) == Status::unsupported);
  CHECK(std::string(last_error_detail()).find("XNNPACK") != std::string::npos);
  CHECK(int8_add_prepare(q, Int8Quant{3.0f, 0}, q, &add) == Status::unsupported);
  CHECK(int8_mul_prepare(q, q, Int8Quant{10.0f, 0}, &mul) == Status::unsupported);  // 1e-5 < 2^-16
  CHECK(int8_mul_prepare(Int8Quant{1.0f, 0}, Int8Quant{1.0f, 0}, Int8Quant{0.001f, 0}, &mul) == Status::unsupported);
  // Scales not finite and positive; zero points outside int8.
  for (const float bad : {0.0f, -0.5f, std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN()}) {
    CHECK(int8_add_prepare(Int8Quant{bad, 0}, q, q, &add) == Status::invalid_size);
    CHECK(int8_mul_prepare(q, q, Int8Quant{bad, 0}, &mul) == Status::invalid_size);
  }
  CHECK(int8_add_prepare(q, Int8Quant{0.01f, 128}, q, &add) == Status::invalid_size);
  CHECK(int8_mul_prepare(Int8Quant{0.01f, -129}, q, q, &mul) == Status::invalid_size);
}

TEST_CASE("int8 softmax: refuses bad parameters; rows of equal inputs share the probability") {
  q8::Int8SoftmaxParams p;
  CHECK(q8::int8_softmax_prepare(0.0f, 1.0f, 1.0f / 256, -128, &p) == Status::invalid_size);
  CHECK(q8::int8_softmax_prepare(0.05f, std::nanf(""), 1.0f / 256, -128, &p) == Status::invalid_size);
  CHECK(q8::int8_softmax_prepare(0.05f, 1.0f, -1.0f, -128, &p) == Status::invalid_size);
  CHECK(q8::int8_softmax_prepare(0.05f, 1.0f, 1.0f / 256, 200, &p) == Status::invalid_size);
  REQUIRE(q8::int8_softmax_prepare(0.05f, 1.0f, 1.0f / 256, -128, &p) == Status::ok);
  // Four equal inputs: each 1/4 = 64/256, i.e. -128 + 64; one dominant input: 255/256 or more -> 127.
  const std::int8_t x[8] = {3, 3, 3, 3, 127, -128, -128, -128};
  std::int8_t y[8] = {};
  q8::int8_softmax(p, 2, 4, x, y);
  for (int j = 0; j < 4; ++j) CHECK(y[j] == -64);
  CHECK(y[4] == 127);
  for (int j = 5; j < 8; ++j) CHECK(y[j] == -128);
}

TEST_CASE("int8 sigmoid and tanh tables: refuse bad parameters; fixed points and symmetry") {
  std::int8_t t[256];
  CHECK(q8::int8_activation_table(q8::TableActivation::sigmoid, 0.0f, 0, 1.0f / 256, -128, t) == Status::invalid_size);
  CHECK(q8::int8_activation_table(q8::TableActivation::tanh, 0.1f, 300, 1.0f / 128, 0, t) == Status::invalid_size);
  REQUIRE(q8::int8_activation_table(q8::TableActivation::sigmoid, 0.1f, 5, 1.0f / 256, -128, t) == Status::ok);
  CHECK(t[5 + 128] == 0);       // sigmoid(0) = 1/2 = 128/256
  CHECK(t[127 + 128] == 127);   // sigmoid(12.2) rounds to 256/256, clamped
  CHECK(t[-128 + 128] == -128); // sigmoid(-13.3) rounds to 0
  REQUIRE(q8::int8_activation_table(q8::TableActivation::tanh, 0.02f, 0, 1.0f / 128, 0, t) == Status::ok);
  for (int v = 1; v <= 127; ++v) CHECK(t[v + 128] == -t[-v + 128]);  // tanh is odd; rounding is symmetric
  // A tiny output scale saturates every output instead of overflowing the rounding.
  REQUIRE(q8::int8_activation_table(q8::TableActivation::sigmoid, 0.1f, 0, 1e-30f, 0, t) == Status::ok);
  for (int v = 0; v < 256; ++v) CHECK(t[v] == 127);
  q8::Int8SoftmaxParams sp;
  REQUIRE(q8::int8_softmax_prepare(0.1f, 1.0f, 1e-30f, 0, &sp) == Status::ok);
  const std::int8_t sx[2] = {5, 5};
  std::int8_t sy[2] = {};
  q8::int8_softmax(sp, 1, 2, sx, sy);
  CHECK(sy[0] == 127);
  CHECK(sy[1] == 127);
  REQUIRE(q8::int8_activation_table(q8::TableActivation::tanh, 0.02f, 0, 1.0f / 128, 0, t) == Status::ok);
  std::int8_t x[3] = {0, 10, -10}, y[3];
  q8::int8_lookup(t, 3, x, y);
  CHECK(y[0] == 0);
  CHECK(y[1] == t[138]);
  CHECK(y[2] == -y[1]);
}
