// The integer LSTM's C API (include/rnncore/int8.h) on LiteRT's goldens: every converted model of
// tests/golden/tflite_int8/converted/ prepared through the C API (biases folded into RAM, and
// again from an already-folded table as export-c writes it), run whole and streamed one step per
// call, and again with the weights interleaved (weight_layout 1); outputs and final states equal
// LiteRT's bit for bit. And its refusals, rnncore_int8_interleave4; and the int8 Dense
// layer's requantization (src/internal/int8_dense.hpp) on hand-computed cases. And the
// bidirectional goldens (tests/golden/tflite_int8/stacks/bidi_*), on a Model and as two C API LSTMs.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "rnncore/int8.h"
#include "rnncore/rnncore.h"
#include "rnncore/io/safetensors.hpp"
#include "rnncore/rnncore.hpp"
#include "src/internal/int8_dense.hpp"
#include "src/io/int8_model.hpp"
#include "tests/golden_files.hpp"

using namespace rnncore;

namespace {

template <class T>
std::vector<T> tensor(const io::SafeTensors& f, const char* name) {
  io::Array a;
  REQUIRE_MESSAGE(f.array(name, &a) == RNNCORE_OK, name << " in " << f.path);
  std::vector<std::int32_t> v;
  REQUIRE(io::to_i32(a, &v) == RNNCORE_OK);
  return std::vector<T>(v.begin(), v.end());
}

rnncore_int8_lstm_quantization to_c(const q8::Int8LstmQuantization& q) {
  rnncore_int8_lstm_quantization c{};
  c.input_scale = q.input_scale;
  c.input_zp = q.input_zp;
  for (int g = 0; g < 4; ++g) {
    c.w_scale[g] = q.w_scale[g];
    c.r_scale[g] = q.r_scale[g];
  }
  c.state_scale = q.state_scale;
  c.state_zp = q.state_zp;
  c.hidden_scale = q.hidden_scale;
  c.hidden_zp = q.hidden_zp;
  c.cell_scale = q.cell_scale;
  c.cell_clip = q.cell_clip;
  return c;
}

// A model's pointers as the C API takes them.
struct Pointers {
  const std::int8_t* w[4];
  const std::int8_t* r[4];
  const std::int32_t* b[4];
  explicit Pointers(const io::Int8Direction& m) {
    for (int g = 0; g < 4; ++g) {
      w[g] = m.w[g];
      r[g] = m.r[g];
      b[g] = m.b[g];
    }
  }
};

// A model's weights in the interleaved layout (rnncore_int8_interleave4 per gate, gates one after the
// other), held in int32 words so that every gate starts 4-byte aligned.
struct Interleaved {
  std::vector<std::int32_t> w_words, r_words;
  const std::int8_t* w[4];
  const std::int8_t* r[4];
  // i16: the int16 panel layout (rnncore_int8_interleave4_i16) instead
  explicit Interleaved(const io::Int8Direction& m, bool i16 = false) {
    const std::size_t wb = i16 ? RNNCORE_INT8_INTERLEAVED4_I16_BYTES(m.hidden_size, m.input_size)
                               : RNNCORE_INT8_INTERLEAVED4_BYTES(m.hidden_size, m.input_size);
    const std::size_t rb = i16 ? RNNCORE_INT8_INTERLEAVED4_I16_BYTES(m.hidden_size, m.hidden_size)
                               : RNNCORE_INT8_INTERLEAVED4_BYTES(m.hidden_size, m.hidden_size);
    const auto pack = i16 ? rnncore_int8_interleave4_i16 : rnncore_int8_interleave4;
    w_words.resize(wb), r_words.resize(rb);  // wb words: the 4 · wb bytes of 4 gates
    auto* wp = reinterpret_cast<std::int8_t*>(w_words.data());
    auto* rp = reinterpret_cast<std::int8_t*>(r_words.data());
    for (int g = 0; g < 4; ++g) {
      w[g] = wp + g * wb;
      r[g] = rp + g * rb;
      REQUIRE(pack(m.w[g], m.hidden_size, m.input_size, wp + g * wb) == RNNCORE_OK);
      REQUIRE(pack(m.r[g], m.hidden_size, m.hidden_size, rp + g * rb) == RNNCORE_OK);
    }
  }
};

// An int8 model file as a stack of int8 rows in and int8 out (io::load_int8_spec, less its float
// ends and go_backwards, as io::Int8Runner holds it); the file has no Embedding.
void load_rows(const io::SafeTensors& f, StackSpec* spec, std::vector<unsigned char>* canonical) {
  std::string err;
  REQUIRE_MESSAGE(io::load_int8_spec(f, spec, canonical, &err) == Status::ok, err);
  REQUIRE(spec->embedding.vocab_size == 0);
  spec->float_input = spec->float_output = spec->reverse_input = false;
}

// A held int8 stack (int8 rows in, int8 out) on a Model: y [B, T, W] batch-major, or [B, W] where
// the head takes the last step (the file's Dense head, or the spec's own where the file's model
// outputs its last step without one).
std::vector<std::int8_t> model_output(const StackSpec& spec, const std::vector<unsigned char>& canonical, int B, int T,
                                      const std::vector<std::int8_t>& x) {
  PlanOptions opt;
  opt.max_batch = B;
  opt.max_seq_len = T;
  Model model;
  REQUIRE_MESSAGE(Model::create(spec, opt, canonical.data(), &model) == Status::ok, last_error_detail());
  const std::size_t W = static_cast<std::size_t>(stack_output_size(spec));
  const bool head_last = spec.head.out_features > 0 && spec.head.last_step_only;
  std::vector<std::int8_t> y(static_cast<std::size_t>(B) * (head_last ? 1 : T) * W);
  ForwardArgs a;
  a.batch = B;
  a.seq_len = T;
  a.layout = Layout::batch_major;
  a.x = x.data();
  a.y = y.data();
  REQUIRE(model.forward(a) == Status::ok);
  return y;
}

}  // namespace

TEST_CASE("int8 bidirectional goldens: the loaded stack, and the C API's two LSTMs per layer, equal LiteRT") {
  // tests/golden/tflite_int8/stacks/bidi_*: Keras Bidirectional(LSTM) models (merge_mode concat; the
  // bidi_sum_*, bidi_mul_*, bidi_ave_* ones merge the directions by int8 ADD / MUL).
  // a Model runs every one (io::load_int8_spec; the one with two Dense layers as pre_head and
  // head); and a bidirectional first layer is two rnncore_int8_lstm_run
  // calls -- the forward LSTM on x, the backward one on x with each row's steps reversed, its output
  // reversed back -- whose outputs, side by side per step, are LiteRT's layer output byte for byte
  // (checked where that layer is the model: bidi_I5_H6_T7_B2_seq).
  int cases = 0;
  for (const std::string& path : rnncore_test::list_cases(rnncore_test::golden_dir("tflite_int8/stacks"))) {
    const std::string name = path.substr(path.find_last_of('/') + 1);
    // bidi_widths_*: directions of different widths, which no StackSpec holds (refused: test int8_plan).
    if (name.rfind("bidi", 0) != 0 || name.find(".io.") != std::string::npos || name.rfind("bidi_widths", 0) == 0) continue;
    CAPTURE(path);
    io::SafeTensors mf, gf;
    REQUIRE(io::read_safetensors(path.c_str(), &mf) == RNNCORE_OK);
    const std::string golden = path.substr(0, path.size() - 12) + ".io.safetensors";
    REQUIRE(io::read_safetensors(golden.c_str(), &gf) == RNNCORE_OK);
    StackSpec spec;
    std::vector<unsigned char> canonical;
    load_rows(mf, &spec, &canonical);
    REQUIRE(num_directions(spec.layers[0]) == 2);
    io::Array xa;
    REQUIRE(gf.array("x", &xa) == RNNCORE_OK);
    const int B = static_cast<int>(xa.shape[0]), T = static_cast<int>(xa.shape[1]);
    const std::vector<std::int8_t> x = tensor<std::int8_t>(gf, "x"), y_ref = tensor<std::int8_t>(gf, "y");
    const int dense = mf.meta("dense") != nullptr ? std::stoi(*mf.meta("dense")) : 0;  // the file's Dense layers
    CHECK(spec.num_pre_head == dense - (dense == 0 ? 0 : 1));
    CHECK(model_output(spec, canonical, B, T, x) == y_ref);
    ++cases;
    if (name != "bidi_I5_H6_T7_B2_seq.safetensors") continue;
    const io::Int8Direction fw = io::int8_direction(spec, canonical.data(), 0, 0);
    const io::Int8Direction bw = io::int8_direction(spec, canonical.data(), 0, 1);
    const int I = fw.input_size, Hf = fw.hidden_size, Hb = bw.hidden_size;
    std::vector<std::int8_t> xr(x.size()), yf(static_cast<std::size_t>(B) * T * Hf), yb(static_cast<std::size_t>(B) * T * Hb);
    for (int b = 0; b < B; ++b)
      for (int t = 0; t < T; ++t)
        std::copy_n(x.begin() + (static_cast<std::ptrdiff_t>(b) * T + t) * I, I,
                    xr.begin() + (static_cast<std::ptrdiff_t>(b) * T + T - 1 - t) * I);
    for (const io::Int8Direction* m : {&fw, &bw}) {
      const rnncore_int8_lstm_quantization q = to_c(m->q);
      const Pointers p(*m);
      std::vector<std::int32_t> folded(rnncore_int8_lstm_bias_words(m->hidden_size));
      rnncore_int8_lstm lstm;
      REQUIRE(rnncore_int8_lstm_prepare(&q, I, m->hidden_size, p.w, p.r, p.b, folded.data(), folded.size(), &lstm) ==
              RNNCORE_OK);
      std::vector<std::int8_t> h(static_cast<std::size_t>(B) * m->hidden_size, static_cast<std::int8_t>(q.state_zp));
      std::vector<std::int16_t> c(h.size(), 0);
      std::vector<std::int8_t> scratch(rnncore_int8_lstm_scratch_bytes(m->hidden_size));
      REQUIRE(rnncore_int8_lstm_run(&lstm, B, T, (m == &fw ? x : xr).data(), (m == &fw ? yf : yb).data(), h.data(),
                                    c.data(), scratch.data(), scratch.size()) == RNNCORE_OK);
    }
    int equal_rows = 0;
    for (int b = 0; b < B; ++b)
      for (int t = 0; t < T; ++t) {
        const auto row = y_ref.begin() + (static_cast<std::ptrdiff_t>(b) * T + t) * (Hf + Hb);
        equal_rows += std::equal(row, row + Hf, yf.begin() + (static_cast<std::ptrdiff_t>(b) * T + t) * Hf) &&
                      std::equal(row + Hf, row + Hf + Hb, yb.begin() + (static_cast<std::ptrdiff_t>(b) * T + T - 1 - t) * Hb);
      }
    CHECK(equal_rows == B * T);
  }
  CHECK(cases == 8);
}

TEST_CASE("int8 C API: LiteRT's goldens, whole and streamed, biases folded in RAM or read from a table") {
  const std::vector<std::string> models = rnncore_test::list_cases(rnncore_test::golden_dir("tflite_int8/converted"));
  REQUIRE(models.size() >= 9);
  for (const std::string& path : models) {
    CAPTURE(path);
    io::SafeTensors mf, gf;
    REQUIRE(io::read_safetensors(path.c_str(), &mf) == RNNCORE_OK);
    const std::string golden = rnncore_test::golden_dir("tflite_int8") + path.substr(path.find_last_of('/'));
    REQUIRE(io::read_safetensors(golden.c_str(), &gf) == RNNCORE_OK);
    StackSpec spec;
    std::vector<unsigned char> canonical;
    std::string err;
    REQUIRE_MESSAGE(io::load_int8_spec(mf, &spec, &canonical, &err) == Status::ok, err);
    REQUIRE(spec.num_layers == 1);
    REQUIRE(num_directions(spec.layers[0]) == 1);
    const bool return_sequences = spec.head.out_features == 0;  // else a last-step head of weights I
    const io::Int8Direction m = io::int8_direction(spec, canonical.data(), 0, 0);
    const int I = m.input_size, H = m.hidden_size;
    const int B = std::stoi(rnncore_test::meta(gf, "B")), T = std::stoi(rnncore_test::meta(gf, "T"));
    const std::vector<std::int8_t> x = tensor<std::int8_t>(gf, "x"), y_ref = tensor<std::int8_t>(gf, "y");
    const std::vector<std::int8_t> hn_ref = tensor<std::int8_t>(gf, "hn");
    const std::vector<std::int16_t> cn_ref = tensor<std::int16_t>(gf, "cn");

    const rnncore_int8_lstm_quantization q = to_c(m.q);
    const Pointers p(m);
    std::vector<std::int32_t> folded(rnncore_int8_lstm_bias_words(H));
    REQUIRE(folded.size() == 8u * H);
    rnncore_int8_lstm lstm, from_table;
    REQUIRE(rnncore_int8_lstm_prepare(&q, I, H, p.w, p.r, p.b, folded.data(), folded.size(), &lstm) == RNNCORE_OK);
    REQUIRE(rnncore_int8_lstm_prepare_folded(&q, I, H, p.w, p.r, p.b, folded.data(), folded.size(), &from_table) ==
            RNNCORE_OK);
    const std::string row_kernel = rnncore_int8_lstm_kernel_name(&lstm);  // i8_dot_<tile>__<isa>
    CHECK(row_kernel.rfind("i8_dot_", 0) == 0);
    CHECK(row_kernel.find("panels") == std::string::npos);
    std::vector<std::int8_t> scratch(rnncore_int8_lstm_scratch_bytes(H));
    REQUIRE(scratch.size() == static_cast<std::size_t>(H));
    CHECK(rnncore_int8_lstm_run_scratch_bytes(&lstm) == scratch.size());

    // The same weights interleaved (weight_layout 1), biases folded into RAM and from the row-major
    // table (the folded biases do not depend on the layout): the same bits below.
    rnncore_int8_lstm_quantization qi = q;
    qi.weight_layout = RNNCORE_INT8_WEIGHTS_INTERLEAVED4;
    const Interleaved pi(m);
    std::vector<std::int32_t> folded_i(folded.size());
    rnncore_int8_lstm panels, panels_from_table;
    REQUIRE(rnncore_int8_lstm_prepare(&qi, I, H, pi.w, pi.r, p.b, folded_i.data(), folded_i.size(), &panels) == RNNCORE_OK);
    CHECK(folded_i == folded);
    REQUIRE(rnncore_int8_lstm_prepare_folded(&qi, I, H, pi.w, pi.r, p.b, folded.data(), folded.size(),
                                             &panels_from_table) == RNNCORE_OK);
    CHECK(std::string(rnncore_int8_lstm_kernel_name(&panels)).rfind("i8_dot_panels_", 0) == 0);
    CHECK(rnncore_int8_lstm_run_scratch_bytes(&panels) == RNNCORE_INT8_LSTM_INTERLEAVED4_SCRATCH_BYTES(I, H));
    // And pre-widened to int16 panels (weight_layout 2): the same bits again.
    rnncore_int8_lstm_quantization q16 = q;
    q16.weight_layout = RNNCORE_INT8_WEIGHTS_INTERLEAVED4_I16;
    const Interleaved p16(m, true);
    std::vector<std::int32_t> folded_16(folded.size());
    rnncore_int8_lstm panels16;
    REQUIRE(rnncore_int8_lstm_prepare(&q16, I, H, p16.w, p16.r, p.b, folded_16.data(), folded_16.size(), &panels16) ==
            RNNCORE_OK);
    CHECK(folded_16 == folded);
    CHECK(std::string(rnncore_int8_lstm_kernel_name(&panels16)).rfind("i16_dot_panels_", 0) == 0);
    CHECK(rnncore_int8_lstm_run_scratch_bytes(&panels16) == RNNCORE_INT8_LSTM_INTERLEAVED4_SCRATCH_BYTES(I, H));

    for (const rnncore_int8_lstm* run : {&lstm, &from_table, &panels, &panels_from_table, &panels16}) {
      std::vector<std::int8_t> run_scratch(rnncore_int8_lstm_run_scratch_bytes(run));
      // Whole sequence.
      std::vector<std::int8_t> y(static_cast<std::size_t>(B) * T * H), h(static_cast<std::size_t>(B) * H,
                                                                          static_cast<std::int8_t>(q.state_zp));
      std::vector<std::int16_t> c(static_cast<std::size_t>(B) * H, 0);
      REQUIRE(rnncore_int8_lstm_run(run, B, T, x.data(), y.data(), h.data(), c.data(), run_scratch.data(),
                                    run_scratch.size()) == RNNCORE_OK);
      CHECK(h == hn_ref);
      CHECK(c == cn_ref);
      if (return_sequences) {
        CHECK(y == y_ref);
      } else {
        CHECK(h == y_ref);  // the last step's output is the final output state
      }
      // One step per call, each batch row on its own.
      for (int b = 0; b < B; ++b) {
        std::vector<std::int8_t> hs(static_cast<std::size_t>(H), static_cast<std::int8_t>(q.state_zp)), ys(H);
        std::vector<std::int16_t> cs(static_cast<std::size_t>(H), 0);
        int equal_steps = 0;
        for (int t = 0; t < T; ++t) {
          REQUIRE(rnncore_int8_lstm_run(run, 1, 1, x.data() + (static_cast<std::size_t>(b) * T + t) * I, ys.data(),
                                        hs.data(), cs.data(), run_scratch.data(), run_scratch.size()) == RNNCORE_OK);
          equal_steps += std::equal(ys.begin(), ys.end(), y.begin() + (static_cast<std::ptrdiff_t>(b) * T + t) * H);
        }
        CHECK(equal_steps == T);
        CHECK(std::equal(hs.begin(), hs.end(), hn_ref.begin() + static_cast<std::ptrdiff_t>(b) * H));
      }
    }
    {  // interleaved weights need the larger scratch: the row-major size is refused
      std::vector<std::int8_t> h(H), too_small(H);
      std::vector<std::int16_t> c(H);
      CHECK(rnncore_int8_lstm_run(&panels, 1, 1, x.data(), nullptr, h.data(), c.data(), too_small.data(),
                                  too_small.size()) == RNNCORE_ERR_BUFFER_TOO_SMALL);
    }

    // A folded table that does not belong to the model is refused, whichever word is wrong.
    for (std::size_t at : {std::size_t{0}, folded.size() / 2 - 1, folded.size() / 2, folded.size() - 1}) {
      std::vector<std::int32_t> bad = folded;
      bad[at] += 1;
      rnncore_int8_lstm refused;
      CHECK(rnncore_int8_lstm_prepare_folded(&q, I, H, p.w, p.r, p.b, bad.data(), bad.size(), &refused) ==
            RNNCORE_ERR_INVALID_SIZE);
      std::vector<std::int8_t> h(H);
      std::vector<std::int16_t> c(H);
      CHECK(rnncore_int8_lstm_run(&refused, 1, 1, x.data(), nullptr, h.data(), c.data(), scratch.data(),
                                  scratch.size()) == RNNCORE_ERR_WEIGHTS_NOT_PACKED);
    }
  }
}

// The quantization of the small hand-made models below (weights ±1, I 3, H 5).
static rnncore_int8_lstm_quantization small_quantization() {
  rnncore_int8_lstm_quantization q{};
  q.input_scale = 0.02f;
  q.state_scale = q.hidden_scale = 1.0f / 128;
  q.cell_scale = 1.0f / 2048;
  for (int g = 0; g < 4; ++g) q.w_scale[g] = q.r_scale[g] = 0.01f;
  return q;
}

TEST_CASE("int8 C API: refusals") {
  rnncore_int8_lstm_quantization q = small_quantization();
  const int I = 3, H = 5;
  std::vector<std::int8_t> w(H * I, 1), r(H * H, -1);
  const std::int8_t* wp[4] = {w.data(), w.data(), w.data(), w.data()};
  const std::int8_t* rp[4] = {r.data(), r.data(), r.data(), r.data()};
  std::vector<std::int32_t> bias(rnncore_int8_lstm_bias_words(H));
  rnncore_int8_lstm lstm;
  REQUIRE(rnncore_int8_lstm_prepare(&q, I, H, wp, rp, nullptr, bias.data(), bias.size(), &lstm) == RNNCORE_OK);

  CHECK(rnncore_int8_lstm_bias_words(0) == 0);
  CHECK(rnncore_int8_lstm_scratch_bytes(70000) == 0);
  CHECK(rnncore_int8_lstm_prepare(nullptr, I, H, wp, rp, nullptr, bias.data(), bias.size(), &lstm) ==
        RNNCORE_ERR_NULL_POINTER);
  CHECK(rnncore_int8_lstm_prepare(&q, I, H, wp, rp, nullptr, bias.data(), bias.size() - 1, &lstm) ==
        RNNCORE_ERR_BUFFER_TOO_SMALL);
  rnncore_int8_lstm_quantization bad = q;
  bad.cell_scale = 0.001f;  // not a power of two
  CHECK(rnncore_int8_lstm_prepare(&bad, I, H, wp, rp, nullptr, bias.data(), bias.size(), &lstm) ==
        RNNCORE_ERR_UNSUPPORTED);
  CHECK(rnncore_int8_lstm_kernel_name(&lstm)[0] == '\0');  // a failed prepare leaves it unprepared
  bad = q;
  bad.w_scale[2] = -0.01f;
  CHECK(rnncore_int8_lstm_prepare(&bad, I, H, wp, rp, nullptr, bias.data(), bias.size(), &lstm) ==
        RNNCORE_ERR_INVALID_SIZE);

  REQUIRE(rnncore_int8_lstm_prepare(&q, I, H, wp, rp, nullptr, bias.data(), bias.size(), &lstm) == RNNCORE_OK);
  std::vector<std::int8_t> x(I), h(H), scratch(H);
  std::vector<std::int16_t> c(H);
  CHECK(rnncore_int8_lstm_run(&lstm, 1, 1, x.data(), nullptr, h.data(), c.data(), scratch.data(), H - 1) ==
        RNNCORE_ERR_BUFFER_TOO_SMALL);
  CHECK(rnncore_int8_lstm_run(&lstm, -1, 1, x.data(), nullptr, h.data(), c.data(), scratch.data(), H) ==
        RNNCORE_ERR_INVALID_SIZE);
  CHECK(rnncore_int8_lstm_run(&lstm, 1, 1, nullptr, nullptr, h.data(), c.data(), scratch.data(), H) ==
        RNNCORE_ERR_NULL_POINTER);
  CHECK(rnncore_int8_lstm_run(nullptr, 1, 1, x.data(), nullptr, h.data(), c.data(), scratch.data(), H) ==
        RNNCORE_ERR_NULL_POINTER);
  CHECK(rnncore_int8_lstm_run(&lstm, 0, 1, x.data(), nullptr, h.data(), c.data(), scratch.data(), H) == RNNCORE_OK);
}

TEST_CASE("int8 C API: rnncore_int8_interleave4 writes the layout int8.h defines; interleaved weights' refusals") {
  // w [5, 6], w(j, k) = 10 j + k + 1 but w(0, 0) = −1: rows padded to 8, columns to 8; panels of 4
  // rows, 16 bytes for each 4 columns: words (rows 0 1, columns 0 2), (2 3, 0 2), (0 1, 1 3),
  // (2 3, 1 3), each (even row, c), (odd row, c), (even, c + 2), (odd, c + 2); an odd row's weight
  // less 1 where the even row's is negative (w(1, 0) = 11 is stored as 10).
  std::int8_t w[5 * 6];
  for (int j = 0; j < 5; ++j)
    for (int k = 0; k < 6; ++k) w[j * 6 + k] = static_cast<std::int8_t>(10 * j + k + 1);
  w[0] = -1;
  const std::int8_t expected[64] = {
      -1, 10, 3,  13, 21, 31, 23, 33, 2,  12, 4,  14, 22, 32, 24, 34,  // rows 0-3, columns 0-3
      5,  15, 0,  0,  25, 35, 0,  0,  6,  16, 0,  0,  26, 36, 0,  0,   // rows 0-3, columns 4-7
      41, 0,  43, 0,  0,  0,  0,  0,  42, 0,  44, 0,  0,  0,  0,  0,   // rows 4-7, columns 0-3
      45, 0,  0,  0,  0,  0,  0,  0,  46, 0,  0,  0,  0,  0,  0,  0,   // rows 4-7, columns 4-7
  };
  static_assert(RNNCORE_INT8_INTERLEAVED4_BYTES(5, 6) == sizeof expected, "8 rows of 8 columns");
  static_assert(RNNCORE_INT8_INTERLEAVED4_BYTES(1, 1) == 16 && RNNCORE_INT8_INTERLEAVED4_BYTES(4, 4) == 16, "a word");
  std::vector<std::int8_t> out(sizeof expected, 0x55);  // the padding must be written too
  REQUIRE(rnncore_int8_interleave4(w, 5, 6, out.data()) == RNNCORE_OK);
  CHECK(std::equal(out.begin(), out.end(), expected));
  CHECK(rnncore_int8_interleave4(nullptr, 5, 6, out.data()) == RNNCORE_ERR_NULL_POINTER);
  CHECK(rnncore_int8_interleave4(w, 5, 6, nullptr) == RNNCORE_ERR_NULL_POINTER);
  for (const auto& [rows, k] : {std::make_pair(0, 6), std::make_pair(5, 0), std::make_pair(-1, 6), std::make_pair(65537, 1),
                                std::make_pair(1, 65537)})
    CHECK(rnncore_int8_interleave4(w, rows, k, out.data()) == RNNCORE_ERR_INVALID_SIZE);
  // An odd row's −128 beside a negative weight of its even row has no such form.
  const std::int8_t odd_min[4] = {-1, 0, -128, 5};
  CHECK(rnncore_int8_interleave4(odd_min, 2, 2, out.data()) == RNNCORE_ERR_UNSUPPORTED);
  CHECK(std::string(rnncore_last_error_detail()).find("weight (1, 0) is -128") != std::string::npos);
  const std::int8_t even_min[4] = {-128, 0, -127, 5};  // −128 in an even row, −127 in an odd one: fine
  CHECK(rnncore_int8_interleave4(even_min, 2, 2, out.data()) == RNNCORE_OK);

  // A small model (I 3, H 5) in both layouts.
  rnncore_int8_lstm_quantization q = small_quantization();
  const int I = 3, H = 5;
  const std::size_t wb = RNNCORE_INT8_INTERLEAVED4_BYTES(H, I), rb = RNNCORE_INT8_INTERLEAVED4_BYTES(H, H);
  std::vector<std::int32_t> w_words(wb + 1), r_words(rb + 1);  // 4 gates and a spare word, 4-byte aligned
  auto* wi = reinterpret_cast<std::int8_t*>(w_words.data());
  auto* ri = reinterpret_cast<std::int8_t*>(r_words.data());
  std::vector<std::int8_t> wr(H * I, 3), rr(H * H, -2);
  for (int g = 0; g < 4; ++g) {
    REQUIRE(rnncore_int8_interleave4(wr.data(), H, I, wi + g * wb) == RNNCORE_OK);
    REQUIRE(rnncore_int8_interleave4(rr.data(), H, H, ri + g * rb) == RNNCORE_OK);
  }
  const std::int8_t* wp[4] = {wi, wi + wb, wi + 2 * wb, wi + 3 * wb};
  const std::int8_t* rp[4] = {ri, ri + rb, ri + 2 * rb, ri + 3 * rb};
  std::vector<std::int32_t> bias(rnncore_int8_lstm_bias_words(H));
  rnncore_int8_lstm lstm{};
  CHECK(rnncore_int8_lstm_run_scratch_bytes(nullptr) == 0);
  CHECK(rnncore_int8_lstm_run_scratch_bytes(&lstm) == 0);  // never prepared

  q.weight_layout = 7;
  CHECK(rnncore_int8_lstm_prepare(&q, I, H, wp, rp, nullptr, bias.data(), bias.size(), &lstm) == RNNCORE_ERR_INVALID_ENUM);
  CHECK(rnncore_int8_lstm_run_scratch_bytes(&lstm) == 0);  // a failed prepare leaves it unprepared
  q.weight_layout = RNNCORE_INT8_WEIGHTS_INTERLEAVED4;
  const std::int8_t* w_off[4] = {wp[0], wp[1], wp[2] + 1, wp[3]};  // one gate one byte off
  CHECK(rnncore_int8_lstm_prepare(&q, I, H, w_off, rp, nullptr, bias.data(), bias.size(), &lstm) == RNNCORE_ERR_MISALIGNED);
  const std::int8_t* r_off[4] = {rp[0] + 1, rp[1], rp[2], rp[3]};
  CHECK(rnncore_int8_lstm_prepare(&q, I, H, wp, r_off, nullptr, bias.data(), bias.size(), &lstm) == RNNCORE_ERR_MISALIGNED);
  CHECK(rnncore_int8_lstm_run_scratch_bytes(&lstm) == 0);
  q.weight_layout = RNNCORE_INT8_WEIGHTS_ROW_MAJOR;  // row-major weights may lie anywhere
  CHECK(rnncore_int8_lstm_prepare(&q, I, H, w_off, r_off, nullptr, bias.data(), bias.size(), &lstm) == RNNCORE_OK);
  CHECK(rnncore_int8_lstm_run_scratch_bytes(&lstm) == static_cast<std::size_t>(H));

  q.weight_layout = RNNCORE_INT8_WEIGHTS_INTERLEAVED4;
  REQUIRE(rnncore_int8_lstm_prepare(&q, I, H, wp, rp, nullptr, bias.data(), bias.size(), &lstm) == RNNCORE_OK);
  const std::size_t need = RNNCORE_INT8_LSTM_INTERLEAVED4_SCRATCH_BYTES(I, H);
  CHECK(need == 3 + 2 * (4 + 8));
  CHECK(rnncore_int8_lstm_run_scratch_bytes(&lstm) == need);
  std::vector<std::int8_t> x(I, 7), h(H, 0), scratch(need + 1);
  std::vector<std::int16_t> c(H, 0);
  CHECK(rnncore_int8_lstm_run(&lstm, 1, 1, x.data(), nullptr, h.data(), c.data(), scratch.data(),
                              rnncore_int8_lstm_scratch_bytes(H)) == RNNCORE_ERR_BUFFER_TOO_SMALL);
  CHECK(rnncore_int8_lstm_run(&lstm, 1, 1, x.data(), nullptr, h.data(), c.data(), scratch.data(), need - 1) ==
        RNNCORE_ERR_BUFFER_TOO_SMALL);
  // Exactly that many bytes at any alignment (run aligns the widened vectors inside it).
  CHECK(rnncore_int8_lstm_run(&lstm, 1, 1, x.data(), nullptr, h.data(), c.data(), scratch.data() + 1, need) == RNNCORE_OK);
}

TEST_CASE("int8 C API: per-channel weight scales, as the C++ prepare gives them") {
  rnncore_int8_lstm_quantization q{};
  q.input_scale = 0.02f;
  q.state_scale = q.hidden_scale = 1.0f / 128;
  q.cell_scale = 1.0f / 2048;
  const int I = 7, H = 19;
  std::mt19937 rng(11);
  std::uniform_int_distribution<int> byte(-128, 127);
  std::uniform_real_distribution<float> scale(0.002f, 0.02f);
  std::vector<std::int8_t> w(4 * H * I), r(4 * H * H), x(3 * I);
  for (auto& v : w) v = static_cast<std::int8_t>(byte(rng));
  for (auto& v : r) v = static_cast<std::int8_t>(byte(rng));
  for (auto& v : x) v = static_cast<std::int8_t>(byte(rng));
  std::vector<float> ws(4 * H), rs(4 * H);
  for (auto& v : ws) v = scale(rng);
  for (auto& v : rs) v = scale(rng);
  const std::int8_t* wp[4];
  const std::int8_t* rp[4];
  for (int g = 0; g < 4; ++g) {
    wp[g] = w.data() + g * H * I;
    rp[g] = r.data() + g * H * H;
    q.w_scales[g] = ws.data() + g * H;
    q.r_scales[g] = rs.data() + g * H;
  }
  CHECK(rnncore_int8_lstm_storage_words(&q, H) == 24u * H);
  CHECK(rnncore_int8_lstm_storage_words(nullptr, H) == 0);
  rnncore_int8_lstm_quantization per_tensor{};
  CHECK(rnncore_int8_lstm_storage_words(&per_tensor, H) == rnncore_int8_lstm_bias_words(H));
  std::vector<std::int32_t> storage(rnncore_int8_lstm_storage_words(&q, H));
  rnncore_int8_lstm lstm;
  CHECK(rnncore_int8_lstm_prepare(&q, I, H, wp, rp, nullptr, storage.data(), rnncore_int8_lstm_bias_words(H), &lstm) ==
        RNNCORE_ERR_BUFFER_TOO_SMALL);
  REQUIRE(rnncore_int8_lstm_prepare(&q, I, H, wp, rp, nullptr, storage.data(), storage.size(), &lstm) == RNNCORE_OK);
  // The same model through the C++ API.
  q8::Int8LstmQuantization qc;
  qc.input_scale = q.input_scale;
  qc.state_scale = q.state_scale;
  qc.hidden_scale = q.hidden_scale;
  qc.cell_scale = q.cell_scale;
  for (int g = 0; g < 4; ++g) qc.w_scales[g] = q.w_scales[g], qc.r_scales[g] = q.r_scales[g];
  std::vector<std::int32_t> storage_cpp(q8::int8_lstm_storage_words(qc, H));
  q8::Int8LstmParams p;
  REQUIRE(q8::int8_lstm_prepare(qc, I, H, wp, rp, nullptr, storage_cpp.data(), storage_cpp.size(), &p) == Status::ok);
  CHECK(storage == storage_cpp);
  std::vector<std::int8_t> h(H, 3), h_cpp(H, 3), y(3 * H), y_cpp(3 * H), scratch(H);
  std::vector<std::int16_t> c(H, 100), c_cpp(H, 100);
  REQUIRE(rnncore_int8_lstm_run(&lstm, 1, 3, x.data(), y.data(), h.data(), c.data(), scratch.data(), H) == RNNCORE_OK);
  REQUIRE(q8::int8_lstm_sequence(p, 1, 3, x.data(), y_cpp.data(), h_cpp.data(), c_cpp.data(), scratch.data(), H) ==
          Status::ok);
  CHECK(y == y_cpp);
  CHECK(c == c_cpp);
  // Folded ahead of time (export-c's table): accepted as it is, refused when a multiplier is off.
  rnncore_int8_lstm folded;
  CHECK(rnncore_int8_lstm_prepare_folded(&q, I, H, wp, rp, nullptr, storage.data(), storage.size(), &folded) ==
        RNNCORE_OK);
  storage[8 * H] ^= 1;
  CHECK(rnncore_int8_lstm_prepare_folded(&q, I, H, wp, rp, nullptr, storage.data(), storage.size(), &folded) ==
        RNNCORE_ERR_INVALID_SIZE);
}

TEST_CASE("int8 Dense (after the LSTM): XNNPACK's requantization, hand-computed; refusals") {
  // One input, two outputs: acc = w · (x − z_x) + b; y = round_half_even(clamp(acc · s)) + z_y with
  // s = (s_x · s_w) / s_y in float32. s_x = 0.5, s_w = 0.25, s_y = 0.25: s = 0.5, so acc 5 → 2.5 → 2
  // (half to even) and acc 7 → 3.5 → 4.
  const std::int8_t w[2] = {1, -1};
  const std::int32_t b[2] = {0, 0};
  const float ws[1] = {0.25f};
  q8::Int8DenseQuantization q;
  q.input_scale = 0.5f;
  q.input_zp = 3;
  q.w_scales = ws;
  q.w_scale_count = 1;
  q.output_scale = 0.25f;
  q.output_zp = -10;
  std::int32_t bias_storage[2];
  float scale_storage[2];
  q8::Int8DenseParams p;
  REQUIRE(q8::int8_dense_prepare(q, 1, 2, w, b, bias_storage, scale_storage, &p) == Status::ok);
  std::int8_t y[2];
  const std::int8_t x5 = 8;  // x − z_x = 5
  q8::int8_dense(p, 1, &x5, y);
  CHECK(y[0] == 2 - 10);
  CHECK(y[1] == -2 - 10);  // −2.5 → −2
  const std::int8_t x7 = 10;
  q8::int8_dense(p, 1, &x7, y);
  CHECK(y[0] == 4 - 10);
  CHECK(y[1] == -4 - 10);
  const std::int8_t big = 127;  // ±124 · 0.5 = ±62: inside the int8 range on both sides
  q8::int8_dense(p, 1, &big, y);
  CHECK(y[0] == 62 - 10);
  CHECK(y[1] == -72);
  q.relu = true;  // RELU: nothing below the output zero point
  REQUIRE(q8::int8_dense_prepare(q, 1, 2, w, b, bias_storage, scale_storage, &p) == Status::ok);
  q8::int8_dense(p, 1, &x7, y);
  CHECK(y[0] == 4 - 10);
  CHECK(y[1] == -10);

  q.w_scale_count = 3;
  CHECK(q8::int8_dense_prepare(q, 1, 2, w, b, bias_storage, scale_storage, &p) == Status::invalid_size);
  q.w_scale_count = 1;
  q.output_scale = 0.0f;
  CHECK(q8::int8_dense_prepare(q, 1, 2, w, b, bias_storage, scale_storage, &p) == Status::invalid_size);
  q.output_scale = 0.25f;
  q.input_zp = 200;
  CHECK(q8::int8_dense_prepare(q, 1, 2, w, b, bias_storage, scale_storage, &p) == Status::invalid_size);
}

TEST_CASE("int8 C API: ADD and MUL equal LiteRT's on every operand pair; null pointers and bad scales are refused") {
  // tests/golden/tflite_int8/elementwise/: LiteRT's (XNNPACK's) output for all 65,536 (a, b) pairs.
  int files = 0;
  for (const std::string& path : rnncore_test::list_cases(rnncore_test::golden_dir("tflite_int8/elementwise"))) {
    CAPTURE(path);
    io::SafeTensors f;
    REQUIRE(io::read_safetensors(path.c_str(), &f) == RNNCORE_OK);
    const std::vector<std::int8_t> a = tensor<std::int8_t>(f, "a"), b = tensor<std::int8_t>(f, "b"), want = tensor<std::int8_t>(f, "y");
    const auto scale = [&](const char* k) { return std::stof(rnncore_test::meta(f, k)); };
    const auto zp = [&](const char* k) { return static_cast<std::int32_t>(std::stol(rnncore_test::meta(f, k))); };
    std::vector<std::int8_t> y(a.size());
    if (rnncore_test::meta(f, "op") == "ADD") {
      rnncore_int8_add add;
      REQUIRE(rnncore_int8_add_prepare(scale("a_scale"), zp("a_zp"), scale("b_scale"), zp("b_zp"), scale("y_scale"),
                                       zp("y_zp"), &add) == RNNCORE_OK);
      REQUIRE(rnncore_int8_add_run(&add, a.size(), a.data(), b.data(), y.data()) == RNNCORE_OK);
      CHECK(rnncore_int8_add_run(&add, a.size(), a.data(), nullptr, y.data()) == RNNCORE_ERR_NULL_POINTER);
    } else {
      rnncore_int8_mul mul;
      REQUIRE(rnncore_int8_mul_prepare(scale("a_scale"), zp("a_zp"), scale("b_scale"), zp("b_zp"), scale("y_scale"),
                                       zp("y_zp"), &mul) == RNNCORE_OK);
      REQUIRE(rnncore_int8_mul_run(&mul, a.size(), a.data(), b.data(), y.data()) == RNNCORE_OK);
      CHECK(rnncore_int8_mul_constant_run(nullptr, 1, a.data(), 0, y.data()) == RNNCORE_ERR_NULL_POINTER);
    }
    CHECK(y == want);
    ++files;
  }
  CHECK(files == 4);
  rnncore_int8_add add;
  CHECK(rnncore_int8_add_prepare(0.01f, 0, 0.01f, 0, 0.01f, 0, nullptr) == RNNCORE_ERR_NULL_POINTER);
  CHECK(rnncore_int8_add_prepare(-0.01f, 0, 0.01f, 0, 0.01f, 0, &add) == RNNCORE_ERR_INVALID_SIZE);
  CHECK(rnncore_int8_add_prepare(5.0f, 0, 0.01f, 0, 0.01f, 0, &add) == RNNCORE_ERR_UNSUPPORTED);
  CHECK(std::string(rnncore_last_error_detail()).find("XNNPACK") != std::string::npos);
}

namespace {

rnncore_quant to_c(const QuantParams& q) { return rnncore_quant{q.scale, q.zero_point}; }

void to_c(const DenseSpec& d, rnncore_dense_spec* c) {
  c->out_features = d.out_features;
  c->activation = static_cast<std::int32_t>(d.activation);
  c->int8_per_channel = d.int8_per_channel ? 1 : 0;
  c->int8_w_scale = d.int8_w_scale;
  c->int8_linear = to_c(d.int8_linear);
  c->int8_output = to_c(d.int8_output);
}

}  // namespace

TEST_CASE("int8 C API: LiteRT's Dense chains (pre_head, then the head) through rnncore.h equal LiteRT") {
  // tests/golden/tflite_int8/stacks/dense_*: LSTMs, then two Dense layers (relu, sigmoid or tanh on
  // the first; a softmax after the second on some), their spec written into rnncore_stack_spec.
  int cases = 0;
  for (const std::string& path : rnncore_test::list_cases(rnncore_test::golden_dir("tflite_int8/stacks"))) {
    const std::string name = path.substr(path.find_last_of('/') + 1);
    if (name.rfind("dense", 0) != 0 || name.find(".io.") != std::string::npos) continue;
    CAPTURE(path);
    io::SafeTensors mf, gf;
    REQUIRE(io::read_safetensors(path.c_str(), &mf) == RNNCORE_OK);
    REQUIRE(io::read_safetensors((path.substr(0, path.size() - 12) + ".io.safetensors").c_str(), &gf) == RNNCORE_OK);
    StackSpec spec;
    std::vector<unsigned char> canonical;
    load_rows(mf, &spec, &canonical);
    if (spec.num_pre_head == 0 || num_directions(spec.layers[0]) != 1) continue;
    rnncore_stack_spec c;
    rnncore_stack_init(&c);
    c.dtype = RNNCORE_I8;
    c.input_size = spec.input_size;
    c.input_quant = to_c(spec.input_quant);
    c.num_layers = spec.num_layers;
    for (int l = 0; l < spec.num_layers; ++l) {
      const Int8LstmQuant& q = spec.layers[l].int8[0];
      rnncore_int8_layer_quant& cq = c.layers[l].int8[0];
      c.layers[l].mode = RNNCORE_MODE_LSTM;
      c.layers[l].hidden_size = spec.layers[l].hidden_size;
      for (int g = 0; g < 4; ++g) {
        cq.w_scale[g] = q.w_scale[g];
        cq.r_scale[g] = q.r_scale[g];
      }
      cq.per_channel = q.per_channel ? 1 : 0;
      cq.state = to_c(q.state);
      cq.hidden = to_c(q.hidden);
      cq.cell_scale = q.cell_scale;
      cq.cell_clip = q.cell_clip;
    }
    c.num_pre_head = spec.num_pre_head;
    for (int k = 0; k < spec.num_pre_head; ++k) to_c(spec.pre_head[k], &c.pre_head[k]);
    rnncore_dense_spec head;
    to_c(spec.head, &head);
    c.head_out_features = head.out_features;
    c.head_activation = head.activation;
    c.head_last_step_only = spec.head.last_step_only ? 1 : 0;
    c.head_int8_per_channel = head.int8_per_channel;
    c.head_int8_w_scale = head.int8_w_scale;
    c.head_int8_linear = head.int8_linear;
    c.head_int8_output = head.int8_output;
    c.head_int8_softmax_beta = spec.head.int8_softmax_beta;
    REQUIRE(rnncore_stack_validate(&c) == RNNCORE_OK);
    REQUIRE(rnncore_stack_param_count(&c) == static_cast<std::int64_t>(canonical.size()));
    const std::vector<std::int8_t> x = tensor<std::int8_t>(gf, "x"), y_ref = tensor<std::int8_t>(gf, "y");
    io::Array xa;
    REQUIRE(gf.array("x", &xa) == RNNCORE_OK);
    const int B = static_cast<int>(xa.shape[0]), T = static_cast<int>(xa.shape[1]);
    rnncore_plan_options o;
    rnncore_plan_options_init(&o);
    o.max_batch = B;
    o.max_seq_len = T;
    rnncore_model* model = nullptr;
    REQUIRE(rnncore_model_create_stack(&c, &o, canonical.data(), &model) == RNNCORE_OK);
    std::vector<std::int8_t> y(y_ref.size());
    rnncore_forward_args a;
    rnncore_forward_args_init(&a);
    a.batch = B;
    a.seq_len = T;
    a.layout = RNNCORE_BATCH_MAJOR;
    a.x = x.data();
    a.y = y.data();
    CHECK(rnncore_model_forward(model, &a) == RNNCORE_OK);
    CHECK(y == y_ref);
    rnncore_model_destroy(model);
    ++cases;
  }
  CHECK(cases >= 4);
}
