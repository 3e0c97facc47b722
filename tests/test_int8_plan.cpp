// Integer stacks as a layer kind of Plan and Model (StackSpec::dtype i8):
//   * every committed LiteRT golden (tests/golden/tflite_int8/, converted/ and stacks/) whose
//     model a StackSpec holds, through Model::forward bit for bit: the output and the final states,
//     time- and batch-major, on 1 and 3 threads, with the fastest kernels and the portable ones;
//   * a sequence streamed in two chunks, state carried, equals one call;
//   * io::load_model loads the bundled int8 model into such a Model (LiteRT's bits), refusing
//     float-model hints;
//   * the packed layout: fixed-width words; a buffer of another kernel family refused with how to match;
//   * refusals, each with a detail line.
#include <doctest/doctest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "rnncore/io/int8_file.hpp"
#include "rnncore/io/model.hpp"
#include "rnncore/io/npy.hpp"
#include "rnncore/io/safetensors.hpp"
#include "rnncore/rnncore.hpp"
#include "src/internal/int8_layer.hpp"
#include "src/internal/plan_impl.hpp"
#include "src/io/int8_model.hpp"
#include "tests/golden_files.hpp"

using namespace rnncore;

namespace {

template <class T>
std::vector<T> tensor(const io::SafeTensors& f, const char* name) {
  const io::TensorEntry* e = f.find(name);
  if (e == nullptr) return {};
  std::vector<T> v((e->end - e->begin) / sizeof(T));
  std::memcpy(v.data(), f.data(*e), v.size() * sizeof(T));
  return v;
}

struct Case {
  std::string model, golden;
};

std::vector<Case> cases() {
  std::vector<Case> out;
  for (const std::string& m : rnncore_test::list_cases(rnncore_test::golden_dir("tflite_int8/converted")))
    out.push_back({m, rnncore_test::golden_dir("tflite_int8") + m.substr(m.find_last_of('/'))});
  for (const std::string& m : rnncore_test::list_cases(rnncore_test::golden_dir("tflite_int8/stacks")))
    if (m.find(".io.") == std::string::npos) out.push_back({m, m.substr(0, m.size() - 12) + ".io.safetensors"});
  return out;
}

struct Loaded {
  StackSpec spec;
  std::vector<unsigned char> canonical;
  std::string error;
  Status status = Status::ok;
};

Loaded load(const std::string& path) {
  Loaded l;
  io::SafeTensors f;
  REQUIRE(io::read_safetensors(path.c_str(), &f) == RNNCORE_OK);
  l.status = io::load_int8_spec(f, &l.spec, &l.canonical, &l.error);
  return l;
}

// x [B, T, w] (batch-major) as time-major [T, B, w].
template <class T>
std::vector<T> to_time_major(const std::vector<T>& x, int B, int Tn, int w) {
  std::vector<T> out(x.size());
  for (int b = 0; b < B; ++b)
    for (int t = 0; t < Tn; ++t)
      std::memcpy(&out[(static_cast<std::size_t>(t) * B + b) * w], &x[(static_cast<std::size_t>(b) * Tn + t) * w], w * sizeof(T));
  return out;
}

}  // namespace

TEST_CASE("every int8 golden a StackSpec holds runs through Model::forward bit for bit") {
  int run = 0, skipped = 0;
  for (const Case& c : cases()) {
    CAPTURE(c.model);
    const Loaded l = load(c.model);
    if (c.model.find("bidi_widths_") != std::string::npos) {  // a narrower backward LSTM: refused, naming the layer
      CHECK(l.status == Status::unsupported);
      CHECK_MESSAGE(l.error.find("layer 0 (bidirectional): directions of widths 6 and 4") != std::string::npos, l.error);
      ++skipped;
      continue;
    }
    REQUIRE_MESSAGE(l.status == Status::ok, l.error);
    io::SafeTensors g;
    REQUIRE(io::read_safetensors(c.golden.c_str(), &g) == RNNCORE_OK);
    const io::TensorEntry* xe = g.find("x");
    REQUIRE(xe != nullptr);
    const int B = static_cast<int>(xe->shape[0]), T = static_cast<int>(xe->shape[1]);
    const bool ids = l.spec.embedding.vocab_size > 0;
    const int I = l.spec.input_size, W = stack_output_size(l.spec);
    const std::vector<std::int8_t> x8 = ids ? std::vector<std::int8_t>() : tensor<std::int8_t>(g, "x");
    const std::vector<std::int32_t> x32 = ids ? tensor<std::int32_t>(g, "x") : std::vector<std::int32_t>();
    const std::vector<std::int8_t> y_ref = tensor<std::int8_t>(g, "y"), h0 = tensor<std::int8_t>(g, "h0"),
                                   hn = tensor<std::int8_t>(g, "hn");
    const std::vector<std::int16_t> c0 = tensor<std::int16_t>(g, "c0"), cn = tensor<std::int16_t>(g, "cn");
    const std::size_t states = static_cast<std::size_t>(state_elements(l.spec, B));
    REQUIRE(hn.size() == states);
    for (Layout layout : {Layout::batch_major, Layout::time_major})
      for (int threads : {1, 3})
        for (Isa isa : {Isa::best, Isa::none}) {
          CAPTURE(static_cast<int>(layout));
          CAPTURE(threads);
          CAPTURE(to_string(isa));
          PlanOptions opt;
          opt.max_batch = B;
          opt.max_seq_len = T;
          opt.threads = threads;
          opt.max_isa = isa;
          Model m;
          REQUIRE_MESSAGE(Model::create(l.spec, opt, l.canonical.data(), &m) == Status::ok, last_error_detail());
          const bool tm = layout == Layout::time_major;
          const std::vector<std::int8_t> x8l = tm && !ids ? to_time_major(x8, B, T, I) : x8;
          const std::vector<std::int32_t> x32l = tm && ids ? to_time_major(x32, B, T, 1) : x32;
          const bool seq = !l.spec.head.last_step_only;
          std::vector<std::int8_t> y(static_cast<std::size_t>(seq ? T : 1) * B * W), hy(states);
          std::vector<std::int16_t> cy(states);
          ForwardArgs a;
          a.batch = B;
          a.seq_len = T;
          a.layout = layout;
          a.x = ids ? static_cast<const void*>(x32l.data()) : x8l.data();
          a.h0 = h0.empty() ? nullptr : h0.data();
          a.c0 = c0.empty() ? nullptr : c0.data();
          a.y = y.data();
          a.hy = hy.data();
          a.cy = cy.data();
          REQUIRE_MESSAGE(m.forward(a) == Status::ok, last_error_detail());
          CHECK(hy == hn);
          CHECK(cy == cn);
          std::vector<std::int8_t> got = y;
          if (seq && tm) {
            got = to_time_major(y_ref, B, T, W);
            CHECK(y == got);
            continue;
          }
          CHECK(got == y_ref);
        }
    ++run;
  }
  MESSAGE(run << " goldens run, " << skipped << " refused");
  // With the 6 whose head is a chain of Dense layers (StackSpec::pre_head) and the 4 whose softmax
  // has a head of its own (no Dense layer before it, or an activated one); one refused.
  CHECK(run >= 40);
  CHECK(skipped == 1);
}

TEST_CASE("an int8 stack streams: two chunks with the state carried equal one call") {
  const Loaded l = load(rnncore_test::golden_dir("tflite_int8/stacks") + "/stack3_I4_H16_16_8_T12_B3_seq.safetensors");
  REQUIRE_MESSAGE(l.status == Status::ok, l.error);
  io::SafeTensors g;
  REQUIRE(io::read_safetensors((rnncore_test::golden_dir("tflite_int8/stacks") + "/stack3_I4_H16_16_8_T12_B3_seq.io.safetensors").c_str(), &g) == RNNCORE_OK);
  const std::vector<std::int8_t> x = tensor<std::int8_t>(g, "x"), y_ref = tensor<std::int8_t>(g, "y");
  const int B = 3, T = 12, I = 4, W = 8;
  PlanOptions opt;
  opt.max_batch = B;
  opt.max_seq_len = T;
  Model m;
  REQUIRE(Model::create(l.spec, opt, l.canonical.data(), &m) == Status::ok);
  const std::vector<std::int8_t> xt = to_time_major(x, B, T, I);
  const std::size_t states = static_cast<std::size_t>(state_elements(l.spec, B));
  std::vector<std::int8_t> h(states), y(static_cast<std::size_t>(T) * B * W);
  std::vector<std::int16_t> c(states);
  for (int t0 : {0, 5}) {
    const int n = t0 == 0 ? 5 : T - 5;
    ForwardArgs a;
    a.batch = B;
    a.seq_len = n;
    a.x = xt.data() + static_cast<std::size_t>(t0) * B * I;
    a.y = y.data() + static_cast<std::size_t>(t0) * B * W;
    a.h0 = t0 == 0 ? nullptr : h.data();
    a.c0 = t0 == 0 ? nullptr : c.data();
    a.hy = h.data();
    a.cy = c.data();
    REQUIRE(m.forward(a) == Status::ok);
  }
  CHECK(y == to_time_major(y_ref, B, T, W));
  CHECK(h == tensor<std::int8_t>(g, "hn"));
}

TEST_CASE("int8 stacks: kernels named under max_isa; refusals with a detail") {
  const Loaded l = load(rnncore_test::golden_dir("tflite_int8/converted") + "/lstm_I8_H16_T6_B2_seq.safetensors");
  REQUIRE_MESSAGE(l.status == Status::ok, l.error);
  PlanOptions opt;
  opt.max_batch = 2;
  opt.max_seq_len = 6;
  opt.max_isa = Isa::none;
  Plan p;
  REQUIRE(Plan::create(l.spec, opt, &p) == Status::ok);
  // No SIMD instruction set: the portable kernel, or on 32-bit ARM the DSP one (SMLAD is the base
  // ISA of ARMv7E-M / ARMv7-A, not a SIMD extension that max_isa caps).
  const std::string capped = p.kernel_name();
  CHECK_MESSAGE((capped == "i8_dot_1x1__scalar" || capped == "i8_dot_4x16__dsp"), capped);
  CHECK(p.isa() == Isa::none);
  CHECK(param_count(l.spec) == static_cast<std::int64_t>(l.canonical.size()));

  opt.max_isa = Isa::best;
  opt.backend = Backend::gpu;
  CHECK(Plan::create(l.spec, opt, &p) == Status::unsupported);
  CHECK(std::string(last_error_detail()).find("integer stack") != std::string::npos);
  opt.backend = Backend::auto_select;
  opt.training = true;
  CHECK(Plan::create(l.spec, opt, &p) == Status::unsupported);
  CHECK(std::string(last_error_detail()).find("training") != std::string::npos);
  opt.training = false;

  StackSpec bad = l.spec;
  bad.layers[0].mode = Mode::gru;
  CHECK(validate(bad) == Status::unsupported);
  CHECK(std::string(last_error_detail()).find("LSTM") != std::string::npos);
  bad = l.spec;
  bad.layers[0].int8[0].state.scale = 0.0f;
  CHECK(validate(bad) == Status::invalid_size);
  bad = l.spec;
  bad.layers[0].int8[0].cell_scale = 0.001f;  // not a power of two: prepare refuses it at pack time
  Model m;
  CHECK(Model::create(bad, opt, l.canonical.data(), &m) == Status::unsupported);
  CHECK(std::string(last_error_detail()).find("layers[0]") != std::string::npos);
  // (the wrapper's line carries the inner one, formatted apart from it: the two share no memory)
  CHECK(std::string(last_error_detail()).find("cell state scale 0.001 is not a power of two") != std::string::npos);
  StackSpec float_stack = l.spec;
  float_stack.dtype = DType::f32;
  float_stack.layers[0].direction = Direction::bidirectional;
  float_stack.layers[0].merge.mode = MergeMode::sum;
  CHECK(validate(float_stack) == Status::unsupported);

  REQUIRE(Model::create(l.spec, opt, l.canonical.data(), &m) == Status::ok);
  std::vector<std::int8_t> x(2 * 6 * 8), y(2 * 6 * 16);
  const std::int32_t lengths[2] = {6, 6};
  ForwardArgs a;
  a.batch = 2;
  a.seq_len = 6;
  a.x = x.data();
  a.y = y.data();
  a.seq_lengths = lengths;
  CHECK(m.forward(a) == Status::unsupported);
  CHECK(std::string(last_error_detail()).find("seq_lengths") != std::string::npos);
}

TEST_CASE("io::load_model loads a tflite_int8 file into an integer-stack Model") {
  const std::string m = std::string(RNNCORE_SOURCE_DIR) + "/examples/models/";
  io::Array x, y_ref;
  REQUIRE(io::read_npy((m + "lstm_int8_input.npy").c_str(), &x) == RNNCORE_OK);
  REQUIRE(io::read_npy((m + "lstm_int8_expected_y.npy").c_str(), &y_ref) == RNNCORE_OK);
  const int B = static_cast<int>(x.shape[0]), T = static_cast<int>(x.shape[1]);
  io::LoadOptions opt;
  opt.plan.max_batch = B;
  opt.plan.max_seq_len = T;
  opt.plan.threads = 2;
  Model model;
  io::LoadedModel info;
  std::string error;
  REQUIRE_MESSAGE(io::load_model(m + "lstm_int8.safetensors", opt, &model, &info, &error) == Status::ok, error);
  CHECK(info.stack.dtype == DType::i8);
  REQUIRE(!info.notes.empty());
  CHECK(info.notes[0].find("int8") != std::string::npos);
  std::vector<std::int8_t> y(y_ref.bytes.size());
  ForwardArgs a;
  a.batch = B;
  a.seq_len = T;
  a.layout = Layout::batch_major;
  a.x = x.bytes.data();
  a.y = y.data();
  REQUIRE(model.forward(a) == Status::ok);
  CHECK(std::memcmp(y.data(), y_ref.bytes.data(), y.size()) == 0);
  opt.hints.mode = "gru";  // a float model's hint does not apply
  CHECK(io::load_model(m + "lstm_int8.safetensors", opt, &model, &info, &error) == Status::unsupported);
  CHECK(error.find("do not apply") != std::string::npos);
}

TEST_CASE("int8 stacks: float input quantized as rnncore run quantizes it, float output dequantized") {
  // The golden's int8 x, and random floats around it: the plan's QUANTIZE gives the bytes
  // io::Int8Runner::quantize_input (the Python package's) gives, and y dequantized is scale · (q − zero point).
  const std::string path = rnncore_test::golden_dir("tflite_int8/converted") + "/lstm_I8_H16_T6_B2_seq.safetensors";
  Loaded l = load(path);
  REQUIRE_MESSAGE(l.status == Status::ok, l.error);
  io::SafeTensors f;
  REQUIRE(io::read_safetensors(path.c_str(), &f) == RNNCORE_OK);
  io::Int8Runner runner;
  std::string err;
  REQUIRE_MESSAGE(io::Int8Runner::load(f, &runner, &err) == Status::ok, err);
  const int B = 2, T = 6, I = 8, H = 16;
  std::vector<float> xf(static_cast<std::size_t>(B) * T * I);
  std::uint32_t lcg = 3;
  for (float& v : xf) v = (static_cast<float>((lcg = lcg * 1664525u + 1013904223u) >> 8) / 16777216.0f - 0.5f) * 12.0f;
  std::vector<std::int8_t> xq(xf.size());
  for (std::size_t i = 0; i < xf.size(); ++i) xq[i] = runner.quantize_input(xf[i]);
  PlanOptions opt;
  opt.max_batch = B;
  opt.max_seq_len = T;
  Model mi, mf;
  REQUIRE(Model::create(l.spec, opt, l.canonical.data(), &mi) == Status::ok);
  l.spec.float_input = l.spec.float_output = true;
  REQUIRE(Model::create(l.spec, opt, l.canonical.data(), &mf) == Status::ok);
  std::vector<std::int8_t> yq(static_cast<std::size_t>(B) * T * H);
  std::vector<float> yf(yq.size());
  ForwardArgs a;
  a.batch = B;
  a.seq_len = T;
  a.layout = Layout::batch_major;
  a.x = xq.data();
  a.y = yq.data();
  REQUIRE(mi.forward(a) == Status::ok);
  a.x = xf.data();
  a.y = yf.data();
  REQUIRE(mf.forward(a) == Status::ok);
  const QuantParams q = l.spec.layers[0].int8[0].state;
  int equal = 0;
  for (std::size_t i = 0; i < yq.size(); ++i) equal += yf[i] == q.scale * static_cast<float>(yq[i] - q.zero_point);
  CHECK(equal == static_cast<int>(yq.size()));
}

// The packed layout of an integer stack is 32-bit words only (offsets, not pointers), so a host
// packs, or export-c writes, what a 32-bit target reads: a direction's prepared parameters start
// with input_size, hidden_size, layout, ..., and W's offsets follow (src/int8_layer.cpp,
// PackedLstm: 6 words, 8 (x_mult) + 8 (h_mult) + 2 (hidden_mult), then w[4] at word 24).
TEST_CASE("int8 stacks: the packed layout is fixed-width words; another family's buffer is refused with how to match") {
  const Loaded l = load(rnncore_test::golden_dir("tflite_int8/converted") + "/lstm_I8_H16_T6_B2_seq.safetensors");
  REQUIRE_MESSAGE(l.status == Status::ok, l.error);
  PlanOptions opt;
  opt.max_batch = 2;
  opt.max_seq_len = 6;
  opt.max_isa = Isa::none;
  Plan scalar;
  REQUIRE(Plan::create(l.spec, opt, &scalar) == Status::ok);
  std::vector<unsigned char> storage(scalar.packed_weight_bytes() + kAlignment);
  unsigned char* packed = storage.data() + (kAlignment - reinterpret_cast<std::uintptr_t>(storage.data()) % kAlignment) % kAlignment;
  REQUIRE(scalar.pack_weights(l.canonical.data(), packed, scalar.packed_weight_bytes()) == Status::ok);
  const std::size_t at = detail::impl(scalar).i8.dir[0][0].params;
  std::int32_t words[30];
  std::memcpy(words, packed + at, sizeof words);
  CHECK(words[0] == 8);   // input_size
  CHECK(words[1] == 16);  // hidden_size
  CHECK(words[2] == 0);   // row-major
  for (int g = 0; g < 4; ++g) {  // W of gate g: H·I bytes, the canonical ones
    const auto w = static_cast<std::uint32_t>(words[24 + g]);
    REQUIRE(w > at);
    REQUIRE(w + 16 * 8 <= scalar.packed_weight_bytes());
    CHECK(std::memcmp(packed + w, l.canonical.data() + detail::int8_canonical_dir(l.spec, 0, 0).w + g * 16 * 8, 16 * 8) == 0);
  }

  // The interleaved family (as a Cortex-M DSP plan packs it; here the portable panel kernel): the
  // same output bit for bit; a row-major plan refuses its buffer, naming the family and how to
  // match, and the other way round.
  std::vector<std::int8_t> x(2 * 6 * 8), y_rows(2 * 6 * 16), y_panels(2 * 6 * 16);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<std::int8_t>((i * 37) % 256 - 128);
  ForwardArgs a;
  a.batch = 2;
  a.seq_len = 6;
  a.x = x.data();
  a.y = y_rows.data();
  std::vector<unsigned char> ws_storage(scalar.workspace_bytes() + 2 * kAlignment + 4096);
  unsigned char* ws = ws_storage.data() + (kAlignment - reinterpret_cast<std::uintptr_t>(ws_storage.data()) % kAlignment) % kAlignment;
  REQUIRE(scalar.forward(packed, ws, scalar.workspace_bytes(), a) == Status::ok);
  opt.int8_weights = Int8Weights::interleaved;
  Plan panels;
  REQUIRE(Plan::create(l.spec, opt, &panels) == Status::ok);
  CHECK(std::string(panels.kernel_name()) == "i8_dot_panels_1x1__scalar");
  std::vector<unsigned char> storage2(panels.packed_weight_bytes() + kAlignment);
  unsigned char* packed2 = storage2.data() + (kAlignment - reinterpret_cast<std::uintptr_t>(storage2.data()) % kAlignment) % kAlignment;
  REQUIRE(panels.pack_weights(l.canonical.data(), packed2, panels.packed_weight_bytes()) == Status::ok);
  std::memcpy(words, packed2 + detail::impl(panels).i8.dir[0][0].params, sizeof words);
  CHECK(words[2] == 1);  // interleaved
  std::vector<unsigned char> ws2_storage(panels.workspace_bytes() + kAlignment);
  unsigned char* ws2 = ws2_storage.data() + (kAlignment - reinterpret_cast<std::uintptr_t>(ws2_storage.data()) % kAlignment) % kAlignment;
  a.y = y_panels.data();
  REQUIRE(panels.forward(packed2, ws2, panels.workspace_bytes(), a) == Status::ok);
  CHECK(y_panels == y_rows);

  CHECK(scalar.forward(packed2, ws, scalar.workspace_bytes(), a) == Status::weights_not_packed);
  std::string detail = last_error_detail();
  CHECK_MESSAGE(detail.find("i8_dot_panels_1x1__scalar (interleaved weights)") != std::string::npos, detail);
  CHECK_MESSAGE(detail.find("int8_weights = interleaved (rnncore export-c --interleave)") != std::string::npos, detail);
  CHECK(panels.forward(packed, ws2, panels.workspace_bytes(), a) == Status::weights_not_packed);
  detail = last_error_detail();
  CHECK_MESSAGE(detail.find("int8_weights = row_major") != std::string::npos, detail);

  // The int16 panel family (PlanOptions::int8_weights = interleaved_i16): twice the weight bytes,
  // the same output; the other families refuse its buffer, and it theirs.
  opt.int8_weights = Int8Weights::interleaved_i16;
  Plan panels16;
  REQUIRE(Plan::create(l.spec, opt, &panels16) == Status::ok);
  CHECK(std::string(panels16.kernel_name()) == "i16_dot_panels_1x1__scalar");
  CHECK(panels16.packed_weight_bytes() > panels.packed_weight_bytes());
  std::vector<unsigned char> storage3(panels16.packed_weight_bytes() + kAlignment);
  unsigned char* packed3 = storage3.data() + (kAlignment - reinterpret_cast<std::uintptr_t>(storage3.data()) % kAlignment) % kAlignment;
  REQUIRE(panels16.pack_weights(l.canonical.data(), packed3, panels16.packed_weight_bytes()) == Status::ok);
  std::memcpy(words, packed3 + detail::impl(panels16).i8.dir[0][0].params, sizeof words);
  CHECK(words[2] == 2);  // int16 panels
  std::vector<std::int8_t> y_panels16(y_rows.size());
  std::vector<unsigned char> ws3_storage(panels16.workspace_bytes() + kAlignment);
  unsigned char* ws3 = ws3_storage.data() + (kAlignment - reinterpret_cast<std::uintptr_t>(ws3_storage.data()) % kAlignment) % kAlignment;
  a.y = y_panels16.data();
  REQUIRE(panels16.forward(packed3, ws3, panels16.workspace_bytes(), a) == Status::ok);
  CHECK(y_panels16 == y_rows);
  CHECK(panels.forward(packed3, ws2, panels.workspace_bytes(), a) == Status::weights_not_packed);
  detail = last_error_detail();
  CHECK_MESSAGE(detail.find("int8_weights = interleaved_i16 (rnncore export-c --interleave-i16)") != std::string::npos, detail);
  CHECK(panels16.forward(packed2, ws3, panels16.workspace_bytes(), a) == Status::weights_not_packed);
  detail = last_error_detail();
  CHECK_MESSAGE(detail.find("int8_weights = interleaved (rnncore export-c --interleave)") != std::string::npos, detail);

  opt.int8_weights = static_cast<Int8Weights>(7);
  CHECK(Plan::create(l.spec, opt, &panels) == Status::invalid_enum);
  CHECK(std::string(last_error_detail()).find("int8_weights") != std::string::npos);
}

// RAM in firmware (issue 30, item 3): a stack whose layers all run one direction runs step-major
// (each step through every layer; a layer's output is its state), so its workspace holds one step
// whatever max_seq_len; a bidirectional stack keeps whole only the outputs a later layer reads
// (before a last-step head, the last layer keeps each row's final outputs); the Embedding's rows
// are read from the packed table in place. The outputs are the goldens' (the cases above).
TEST_CASE("int8 stacks: the workspace holds one step of a one-direction stack, one layer's output of a bidirectional one") {
  const auto workspace = [](const Loaded& l, int B, int T) {
    PlanOptions opt;
    opt.max_batch = B;
    opt.max_seq_len = T;
    Plan plan;
    REQUIRE(Plan::create(l.spec, opt, &plan) == Status::ok);
    return plan.workspace_bytes();
  };
  const std::string dir = rnncore_test::golden_dir("tflite_int8");
  for (const char* name : {"/converted/lstm_I16_H32_T50_B4_seq.safetensors", "/stacks/backwards_stack2_I5_H16_8_T9_B2_last.safetensors"}) {
    CAPTURE(name);
    const Loaded l = load(dir + name);
    REQUIRE(l.status == Status::ok);
    CHECK(workspace(l, 4, 1) == workspace(l, 4, 1000));
  }
  // Two bidirectional layers of 8 and 6 units, the last step's outputs: layer 0's [T, B, 16] only.
  const Loaded bidi = load(dir + "/stacks/bidi_stack2_I6_H8_6_T8_B2_last.safetensors");
  REQUIRE(bidi.status == Status::ok);
  const std::size_t grows = workspace(bidi, 2, 1001) - workspace(bidi, 2, 1);
  CHECK(grows >= 1000u * 2 * 16);
  CHECK(grows <= 1000u * 2 * 16 + 2 * kAlignment);
}

TEST_CASE("io::load_weights: a last-step int8 model with no Dense layer gives [B, H], as rnncore run writes") {
  // The spec's own head (weights I at scale 1, last_step_only) picks the last step; it copies.
  const std::string dir = rnncore_test::golden_dir("tflite_int8");
  io::LoadedModel m;
  std::string err;
  REQUIRE_MESSAGE(io::load_weights(dir + "/converted/lstm_I16_H32_T8_B2_last.safetensors", io::ModelHints(), nullptr, &m,
                                   &err) == Status::ok, err);
  CHECK(m.stack.head.out_features == 32);
  CHECK(m.stack.head.last_step_only);
  CHECK(m.stack.head.activation == Activation::none);
  CHECK(io::int8_describe(m.stack, m.canonical.data()).size() == 1);  // no "then Dense" line for it
  io::SafeTensors g;
  REQUIRE(io::read_safetensors((dir + "/lstm_I16_H32_T8_B2_last.safetensors").c_str(), &g) == RNNCORE_OK);
  const std::vector<std::int8_t> x = tensor<std::int8_t>(g, "x"), y_ref = tensor<std::int8_t>(g, "y");
  const int B = 2, T = 8;
  REQUIRE(y_ref.size() == static_cast<std::size_t>(B) * 32);
  PlanOptions opt;
  opt.max_batch = B;
  opt.max_seq_len = T;
  Model model;
  REQUIRE(Model::create(m.stack, opt, m.canonical.data(), &model) == Status::ok);
  std::vector<std::int8_t> y(y_ref.size());
  ForwardArgs a;
  a.batch = B;
  a.seq_len = T;
  a.layout = Layout::batch_major;
  a.x = x.data();
  a.y = y.data();
  REQUIRE(model.forward(a) == Status::ok);
  CHECK(y == y_ref);
}

// PlanOptions::int8_token_table: layer 0's input parts tabled per token ([vocab][4H] int16, in
// place of W and the Embedding's table) give LiteRT's bits on every golden that starts with an
// Embedding, in each weight layout (the panel layouts on their portable kernels here), batch- and
// time-major, with the host's step kernels and without; the buffer is smaller where V·4H·2 < W's bytes + V·E; refusals.
TEST_CASE("int8 token tables: every Embedding golden bit for bit, in each weight layout") {
  int run = 0;
  for (const Case& c : cases()) {
    CAPTURE(c.model);
    const Loaded l = load(c.model);
    if (l.status != Status::ok || l.spec.embedding.vocab_size == 0 || l.spec.layers[0].int8[0].per_channel) continue;
    io::SafeTensors g;
    REQUIRE(io::read_safetensors(c.golden.c_str(), &g) == RNNCORE_OK);
    const io::TensorEntry* xe = g.find("x");
    REQUIRE(xe != nullptr);
    const int B = static_cast<int>(xe->shape[0]), T = static_cast<int>(xe->shape[1]), W = stack_output_size(l.spec);
    const std::vector<std::int32_t> x = tensor<std::int32_t>(g, "x");
    const std::vector<std::int8_t> y_ref = tensor<std::int8_t>(g, "y"), h0 = tensor<std::int8_t>(g, "h0"),
                                   hn = tensor<std::int8_t>(g, "hn");
    const std::vector<std::int16_t> c0 = tensor<std::int16_t>(g, "c0"), cn = tensor<std::int16_t>(g, "cn");
    const std::size_t states = static_cast<std::size_t>(state_elements(l.spec, B));
    const bool seq = !l.spec.head.last_step_only;
    for (Int8Weights w : {Int8Weights::row_major, Int8Weights::interleaved, Int8Weights::interleaved_i16})
      for (Layout layout : {Layout::batch_major, Layout::time_major})
        for (Isa isa : {Isa::best, Isa::none}) {  // the host's step kernels, and the step's C loops
          CAPTURE(static_cast<int>(w));
          CAPTURE(static_cast<int>(layout));
          CAPTURE(to_string(isa));
          PlanOptions opt;
          opt.max_isa = isa;
          opt.max_batch = B;
          opt.max_seq_len = T;
          opt.int8_weights = w;
          opt.int8_token_table = true;
          Model m;
          REQUIRE_MESSAGE(Model::create(l.spec, opt, l.canonical.data(), &m) == Status::ok, last_error_detail());
          const bool tm = layout == Layout::time_major;
          const std::vector<std::int32_t> xl = tm ? to_time_major(x, B, T, 1) : x;
          std::vector<std::int8_t> y(static_cast<std::size_t>(seq ? T : 1) * B * W), hy(states);
          std::vector<std::int16_t> cy(states);
          ForwardArgs a;
          a.batch = B;
          a.seq_len = T;
          a.layout = layout;
          a.x = xl.data();
          a.h0 = h0.empty() ? nullptr : h0.data();
          a.c0 = c0.empty() ? nullptr : c0.data();
          a.y = y.data();
          a.hy = hy.data();
          a.cy = cy.data();
          REQUIRE_MESSAGE(m.forward(a) == Status::ok, last_error_detail());
          CHECK(hy == hn);
          CHECK(cy == cn);
          CHECK(y == (seq && tm ? to_time_major(y_ref, B, T, W) : y_ref));
        }
    ++run;
  }
  MESSAGE(run << " Embedding goldens run with token tables");
  CHECK(run >= 3);
}

TEST_CASE("int8 token tables: the packed bytes, a buffer without them refused, refusals with a detail") {
  Loaded l;
  for (const Case& c : cases()) {
    l = load(c.model);
    if (l.status == Status::ok && l.spec.embedding.vocab_size > 0 && !l.spec.layers[0].int8[0].per_channel) break;
  }
  REQUIRE(l.spec.embedding.vocab_size > 0);
  const StackSpec& st = l.spec;
  PlanOptions opt;
  opt.int8_weights = Int8Weights::row_major;
  Plan plain, tabled;
  REQUIRE(Plan::create(st, opt, &plain) == Status::ok);
  opt.int8_token_table = true;
  REQUIRE(Plan::create(st, opt, &tabled) == Status::ok);
  // W (4H·E) and the Embedding's table (V·E) leave, the token tables (per direction V·4H int16) come.
  const std::int64_t V = st.embedding.vocab_size, E = st.input_size, H = st.layers[0].hidden_size;
  const std::int64_t D = num_directions(st.layers[0]);
  const std::int64_t change = D * (2 * V * 4 * H - 4 * H * E) - V * E;
  const std::int64_t diff = static_cast<std::int64_t>(tabled.packed_weight_bytes()) - static_cast<std::int64_t>(plain.packed_weight_bytes());
  CHECK(diff >= change - 64 * (2 * D + 1));  // (each region rounded up to 64 bytes)
  CHECK(diff <= change + 64 * (2 * D + 1));
  std::vector<unsigned char> a(plain.packed_weight_bytes() + 64), b(tabled.packed_weight_bytes() + 64);
  unsigned char* pa = a.data() + (64 - reinterpret_cast<std::uintptr_t>(a.data()) % 64) % 64;
  unsigned char* pb = b.data() + (64 - reinterpret_cast<std::uintptr_t>(b.data()) % 64) % 64;
  REQUIRE(plain.pack_weights(l.canonical.data(), pa, plain.packed_weight_bytes()) == Status::ok);
  REQUIRE(tabled.pack_weights(l.canonical.data(), pb, tabled.packed_weight_bytes()) == Status::ok);
  std::vector<unsigned char> ws(tabled.workspace_bytes() + 64);
  std::vector<std::int32_t> ids(1, 0);
  std::vector<std::int8_t> y(static_cast<std::size_t>(stack_output_size(st)));
  ForwardArgs fa;
  fa.batch = 1;
  fa.seq_len = 1;
  fa.x = ids.data();
  fa.y = y.data();
  unsigned char* w = ws.data() + (64 - reinterpret_cast<std::uintptr_t>(ws.data()) % 64) % 64;
  CHECK(tabled.forward(pa, w, tabled.workspace_bytes(), fa) == Status::weights_not_packed);
  CHECK(tabled.forward(pb, w, tabled.workspace_bytes(), fa) == Status::ok);
  // Without an Embedding: nothing to table.
  const Loaded plain_in = load(rnncore_test::golden_dir("tflite_int8/converted") + "/lstm_I8_H16_T6_B2_seq.safetensors");
  REQUIRE(plain_in.status == Status::ok);
  Plan p;
  CHECK(Plan::create(plain_in.spec, opt, &p) == Status::unsupported);
  CHECK(std::string(last_error_detail()).find("int8_token_table needs an Embedding") != std::string::npos);
}

TEST_CASE("int8 stacks: a bidirectional run of no steps passes h0 and c0 to hy and cy") {
  // The layer-major walk keeps a direction's h in its output rows; with no step there is no row,
  // and the state goes through the step's scratch instead.
  const Loaded l = load(rnncore_test::golden_dir("tflite_int8") + "/stacks/bidi_stack2_I6_H8_6_T8_B2_last.safetensors");
  REQUIRE(l.status == Status::ok);
  const int B = 2;
  PlanOptions opt;
  opt.max_batch = B;
  opt.max_seq_len = 8;
  Model m;
  REQUIRE(Model::create(l.spec, opt, l.canonical.data(), &m) == Status::ok);
  const std::size_t hs = static_cast<std::size_t>(state_elements(l.spec, B)), cs = static_cast<std::size_t>(cell_state_elements(l.spec, B));
  std::vector<std::int8_t> h0(hs), hy(hs, 0), x(static_cast<std::size_t>(B) * l.spec.input_size, 0);
  std::vector<std::int16_t> c0(cs), cy(cs, 0);
  for (std::size_t i = 0; i < hs; ++i) h0[i] = static_cast<std::int8_t>(static_cast<int>(i * 37 % 251) - 125);
  for (std::size_t i = 0; i < cs; ++i) c0[i] = static_cast<std::int16_t>(static_cast<int>(i * 4099 % 65521) - 32760);
  std::vector<std::int8_t> y(static_cast<std::size_t>(B) * stack_output_size(l.spec));
  ForwardArgs a;
  a.batch = B;
  a.seq_len = 0;
  a.x = x.data();
  a.y = y.data();
  a.h0 = h0.data();
  a.c0 = c0.data();
  a.hy = hy.data();
  a.cy = cy.data();
  REQUIRE(m.forward(a) == Status::ok);
  CHECK(hy == h0);
  CHECK(cy == c0);
}
