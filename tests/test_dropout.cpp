// Dropout and wrappers (docs/design.md §5–6). Most checks are exact: a training run must equal, bit for bit,
// inference runs of the same network with the masks of the documented mask function applied by
// hand (computed here from include/rnncore/philox.h, with sites composed by this test). Each check
// runs on the f32 reference and on every SIMD instruction set of the machine.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <string>

#include "rnncore/philox.h"
#include "tests/test_util.hpp"

using namespace rnncore;
using namespace rnncore_test;

namespace {

constexpr std::uint64_t kSeed = 0x123456789abcull;  // above 2^32: both key words matter
constexpr std::uint64_t kStep = (std::uint64_t{1} << 32) + 77;  // the mask function uses step mod 2^32

struct Backend_ {
  Backend backend;
  Isa isa;
  const char* name;
};

std::vector<Backend_> backends() {
  std::vector<Backend_> out = {{Backend::reference, Isa::best, "reference"}};
  for (Isa isa : isas_here()) out.push_back({Backend::simd, isa, to_string(isa)});
  return out;
}

StackSpec single(Mode mode, int I, int H, bool bi, std::initializer_list<Wrapper> wrappers) {
  StackSpec st;
  st.input_size = I;
  st.num_layers = 1;
  st.layers[0].mode = mode;
  st.layers[0].hidden_size = H;
  st.layers[0].direction = bi ? Direction::bidirectional : Direction::unidirectional;
  for (const Wrapper& w : wrappers) st.layers[0].wrappers[st.layers[0].num_wrappers++] = w;
  return st;
}

// The test's own reading of the mask function: the multiplier of one element.
float mask_value(std::uint32_t site, std::uint32_t t, std::uint32_t row, std::uint32_t unit, std::uint32_t width,
                 double keep, std::uint64_t seed = kSeed, std::uint64_t step = kStep) {
  rnncore_mask_params params;
  REQUIRE(rnncore_mask_params_init(&params, keep) == 1);
  return rnncore_mask_keep(seed, step, site, t, row, unit, width, &params) ? params.scale : 0.0f;
}

std::uint32_t site(int layer, int dir, int depth, std::uint32_t kind, bool variational = false) {
  return rnncore_mask_site(layer, dir, depth, kind, variational ? 1 : 0);
}

// Shared data of one small problem.
struct Problem {
  int T = 6, B = 5;
  std::vector<float> w, x, h0, c0;
  std::vector<std::int32_t> lengths;
  PlanOptions opt;
  Problem(const StackSpec& st, std::uint64_t seed, int T_ = 6, int B_ = 5) : T(T_), B(B_) {
    Rng rng(seed);
    w = random_vector<float>(rng, param_count(st), 0.5);
    x = random_vector<float>(rng, static_cast<std::size_t>(T) * B * st.input_size, 1.0);
    h0 = random_vector<float>(rng, state_elements(st, B), 0.5);
    c0 = random_vector<float>(rng, state_elements(st, B), 0.5);
    lengths.resize(B);
    for (int b = 0; b < B; ++b) lengths[b] = (b * 3 + 1) % (T + 1);  // unsorted, includes 0 and T
    opt.max_batch = B;
    opt.max_seq_len = T;
    for (int l = 0; l < st.num_layers; ++l) has_lstm = has_lstm || st.layers[l].mode == Mode::lstm;
  }
  bool has_lstm = false;
  ForwardArgs args(RunMode mode, bool with_lengths = true) const {
    ForwardArgs a;
    a.batch = B;
    a.seq_len = T;
    a.x = x.data();
    a.h0 = h0.data();
    a.c0 = has_lstm ? c0.data() : nullptr;
    a.seq_lengths = with_lengths ? lengths.data() : nullptr;
    a.run_mode = mode;
    a.seed = kSeed;
    a.step = kStep;
    return a;
  }
};

template <class F>
void for_each_backend(F&& f) {
  for (const Backend_& be : backends()) {
    INFO("backend " << std::string(be.name));
    f(be);
  }
}

PlanOptions with_backend(PlanOptions o, const Backend_& be) {
  o.backend = be.backend;
  o.max_isa = be.isa;
  return o;
}

void require_equal(const std::vector<float>& a, const std::vector<float>& b, const char* what) {
  REQUIRE(a.size() == b.size());
  std::size_t diff = 0, first = a.size();
  for (std::size_t i = 0; i < a.size(); ++i)
    if (std::memcmp(&a[i], &b[i], sizeof(float)) != 0) {
      ++diff;
      if (first == a.size()) first = i;
    }
  INFO(std::string(what) << ": " << diff << " of " << a.size() << " elements differ, first at " << first);
  CHECK(diff == 0);
}

}  // namespace

TEST_CASE("output dropout: y = y_inference ⊙ mask, exactly; states untouched") {
  const int H = 7;
  const StackSpec st = single(Mode::lstm, 5, H, true, {dropout_wrapper(1.0, 0.6, 1.0)});
  Problem pr(st, 1);
  for_each_backend([&](const Backend_& be) {
    Outputs<float> train, inf;
    REQUIRE(run_forward(st, with_backend(pr.opt, be), pr.w, pr.args(RunMode::training), &train) == Status::ok);
    REQUIRE(run_forward(st, with_backend(pr.opt, be), pr.w, pr.args(RunMode::inference), &inf) == Status::ok);
    std::vector<float> expect = inf.y;
    for (int t = 0; t < pr.T; ++t)
      for (int b = 0; b < pr.B; ++b)
        for (int d = 0; d < 2; ++d)
          for (int u = 0; u < H; ++u) {
            float& e = expect[(static_cast<std::size_t>(t) * pr.B + b) * 2 * H + d * H + u];
            if (t < pr.lengths[b]) e *= mask_value(site(0, d, 0, RNNCORE_SITE_WRAPPER_OUTPUT), t, b, u, H, 0.6);
          }
    require_equal(train.y, expect, "y");
    require_equal(train.hy, inf.hy, "hy");
    require_equal(train.cy, inf.cy, "cy");
  });
}

TEST_CASE("input dropout: equals inference on the masked input, exactly") {
  const int I = 5;
  for (Mode mode : {Mode::gru, Mode::rnn_tanh}) {
    const StackSpec st = single(mode, I, 6, false, {dropout_wrapper(0.7, 1.0, 1.0)});
    Problem pr(st, 2);
    Problem masked = pr;
    for (int t = 0; t < pr.T; ++t)
      for (int b = 0; b < pr.B; ++b)
        for (int i = 0; i < I; ++i)
          masked.x[(static_cast<std::size_t>(t) * pr.B + b) * I + i] *=
              mask_value(site(0, 0, 0, RNNCORE_SITE_WRAPPER_INPUT), t, b, i, I, 0.7);
    for_each_backend([&](const Backend_& be) {
      Outputs<float> train, inf;
      REQUIRE(run_forward(st, with_backend(pr.opt, be), pr.w, pr.args(RunMode::training), &train) == Status::ok);
      REQUIRE(run_forward(st, with_backend(pr.opt, be), pr.w, masked.args(RunMode::inference), &inf) == Status::ok);
      require_equal(train.y, inf.y, "y");
      require_equal(train.hy, inf.hy, "hy");
    });
  }
}

TEST_CASE("state dropout: a step-by-step replay with masked states gives the same run; filters select h and c") {
  const int H = 5;
  struct Variant {
    Mode mode;
    StateFilter filter;
    bool drops_h, drops_c;
  };
  const Variant variants[] = {{Mode::lstm, StateFilter::default_filter, true, false},
                              {Mode::lstm, StateFilter::h_and_c, true, true},
                              {Mode::lstm, StateFilter::c_only, false, true},
                              {Mode::lstm, StateFilter::none, false, false},
                              {Mode::gru, StateFilter::default_filter, true, false}};
  for (const Variant& v : variants) {
    INFO("mode " << std::string(to_string(v.mode)) << " filter " << static_cast<int>(v.filter));
    const StackSpec st = single(v.mode, 3, H, false, {dropout_wrapper(1.0, 1.0, 0.6, false, false, v.filter)});
    Problem pr(st, 3);
    const bool lstm = v.mode == Mode::lstm;
    for_each_backend([&](const Backend_& be) {
      Outputs<float> train;
      REQUIRE(run_forward(st, with_backend(pr.opt, be), pr.w, pr.args(RunMode::training), &train) == Status::ok);
      // Replay: one inference step at a time, dropping the carried state by hand.
      std::vector<float> h = pr.h0, c = pr.c0, y(train.y.size());
      PlanOptions one = with_backend(pr.opt, be);
      one.max_seq_len = 1;
      for (int t = 0; t < pr.T; ++t) {
        std::vector<std::int32_t> active(pr.B);
        for (int b = 0; b < pr.B; ++b) active[b] = t < pr.lengths[b] ? 1 : 0;
        ForwardArgs a;
        a.batch = pr.B;
        a.seq_len = 1;
        a.x = pr.x.data() + static_cast<std::size_t>(t) * pr.B * 3;
        a.h0 = h.data();
        a.c0 = lstm ? c.data() : nullptr;
        a.seq_lengths = active.data();
        Outputs<float> s;
        REQUIRE(run_forward(st, one, pr.w, a, &s) == Status::ok);
        std::memcpy(y.data() + static_cast<std::size_t>(t) * pr.B * H, s.y.data(), sizeof(float) * pr.B * H);
        for (int b = 0; b < pr.B; ++b)
          for (int u = 0; u < H; ++u) {
            const std::size_t i = static_cast<std::size_t>(b) * H + u;
            h[i] = s.hy[i];
            if (lstm) c[i] = s.cy[i];
            if (!active[b]) continue;
            if (v.drops_h) h[i] *= mask_value(site(0, 0, 0, RNNCORE_SITE_STATE_H), t, b, u, H, 0.6);
            if (v.drops_c) c[i] *= mask_value(site(0, 0, 0, RNNCORE_SITE_STATE_C), t, b, u, H, 0.6);
          }
      }
      require_equal(train.y, y, "y");
      require_equal(train.hy, h, "final h (the dropped state)");
      if (lstm) require_equal(train.cy, c, "final c");
    });
  }
}

TEST_CASE("inter-layer dropout: layer 2 sees layer 1's output ⊙ mask (width D·H), exactly") {
  const int I = 4, H = 3;
  StackSpec st;
  st.input_size = I;
  st.num_layers = 2;
  st.dropout = 0.3;
  for (int l = 0; l < 2; ++l) {
    st.layers[l].mode = Mode::lstm;
    st.layers[l].hidden_size = H;
    st.layers[l].direction = Direction::bidirectional;
  }
  Problem pr(st, 4);
  const StackSpec first = single(Mode::lstm, I, H, true, {});
  const StackSpec second = single(Mode::lstm, 2 * H, H, true, {});
  const std::vector<float> w1(pr.w.begin(), pr.w.begin() + param_count(first));
  const std::vector<float> w2(pr.w.begin() + param_count(first), pr.w.end());
  REQUIRE(w2.size() == static_cast<std::size_t>(param_count(second)));
  for_each_backend([&](const Backend_& be) {
    Outputs<float> train;
    REQUIRE(run_forward(st, with_backend(pr.opt, be), pr.w, pr.args(RunMode::training), &train) == Status::ok);
    ForwardArgs a = pr.args(RunMode::inference);
    Outputs<float> o1, o2;
    REQUIRE(run_forward(first, with_backend(pr.opt, be), w1, a, &o1) == Status::ok);
    for (int t = 0; t < pr.T; ++t)
      for (int b = 0; b < pr.B; ++b)
        for (int u = 0; u < 2 * H; ++u)
          o1.y[(static_cast<std::size_t>(t) * pr.B + b) * 2 * H + u] *=
              mask_value(site(0, 0, 0, RNNCORE_SITE_INTER_LAYER), t, b, u, 2 * H, 1.0 - 0.3);
    a.x = o1.y.data();
    a.h0 = pr.h0.data() + 2 * pr.B * H;
    a.c0 = pr.c0.data() + 2 * pr.B * H;
    REQUIRE(run_forward(second, with_backend(pr.opt, be), w2, a, &o2) == Status::ok);
    require_equal(train.y, o2.y, "y");
    const std::vector<float> hy2(train.hy.begin() + 2 * pr.B * H, train.hy.end());
    require_equal(hy2, o2.hy, "layer 2 final h");
  });
}

TEST_CASE("wrapper nesting has TF's meaning: Dropout(Residual(cell)) and Residual(Dropout(cell))") {
  const int H = 6;
  const Wrapper drop = dropout_wrapper(0.7, 0.8, 1.0);
  const StackSpec plain = single(Mode::gru, H, H, false, {});
  for (bool dropout_outside : {true, false}) {
    INFO((dropout_outside ? "Dropout(Residual(cell))" : "Residual(Dropout(cell))"));
    const StackSpec st = dropout_outside ? single(Mode::gru, H, H, false, {residual_wrapper(), drop})
                                         : single(Mode::gru, H, H, false, {drop, residual_wrapper()});
    Problem pr(st, 5);
    Problem masked = pr;  // x ⊙ m_in: what the cell sees in both nestings
    for (int t = 0; t < pr.T; ++t)
      for (int b = 0; b < pr.B; ++b)
        for (int i = 0; i < H; ++i)
          masked.x[(static_cast<std::size_t>(t) * pr.B + b) * H + i] *=
              mask_value(site(0, 0, 0, RNNCORE_SITE_WRAPPER_INPUT), t, b, i, H, 0.7);
    for_each_backend([&](const Backend_& be) {
      Outputs<float> train, cell;
      REQUIRE(run_forward(st, with_backend(pr.opt, be), pr.w, pr.args(RunMode::training), &train) == Status::ok);
      REQUIRE(run_forward(plain, with_backend(pr.opt, be), pr.w, masked.args(RunMode::inference), &cell) == Status::ok);
      std::vector<float> expect(cell.y.size());
      for (int t = 0; t < pr.T; ++t)
        for (int b = 0; b < pr.B; ++b)
          for (int u = 0; u < H; ++u) {
            const std::size_t i = (static_cast<std::size_t>(t) * pr.B + b) * H + u;
            const float m_out = mask_value(site(0, 0, 0, RNNCORE_SITE_WRAPPER_OUTPUT), t, b, u, H, 0.8);
            if (t >= pr.lengths[b]) expect[i] = 0.0f;
            else if (dropout_outside) expect[i] = (masked.x[i] + cell.y[i]) * m_out;  // drop(x_d + cell(x_d))
            else expect[i] = pr.x[i] + cell.y[i] * m_out;                              // x + drop(cell(x_d))
          }
      require_equal(train.y, expect, "y");
      require_equal(train.hy, cell.hy, "hy");
    });
  }
}

TEST_CASE("two dropout wrappers: depths 0 and 1, a wrapper's own seed") {
  const int H = 5;
  Wrapper inner = dropout_wrapper(1.0, 0.8, 1.0);
  inner.dropout.has_seed = true;
  inner.dropout.seed = 11;
  const StackSpec st = single(Mode::rnn_tanh, 3, H, false, {inner, dropout_wrapper(1.0, 0.5, 1.0)});
  Problem pr(st, 6);
  for_each_backend([&](const Backend_& be) {
    Outputs<float> train, inf;
    REQUIRE(run_forward(st, with_backend(pr.opt, be), pr.w, pr.args(RunMode::training), &train) == Status::ok);
    REQUIRE(run_forward(st, with_backend(pr.opt, be), pr.w, pr.args(RunMode::inference), &inf) == Status::ok);
    std::vector<float> expect = inf.y;
    for (int t = 0; t < pr.T; ++t)
      for (int b = 0; b < pr.B; ++b)
        for (int u = 0; u < H; ++u) {
          if (t >= pr.lengths[b]) continue;
          float& e = expect[(static_cast<std::size_t>(t) * pr.B + b) * H + u];
          e *= mask_value(site(0, 0, 0, RNNCORE_SITE_WRAPPER_OUTPUT), t, b, u, H, 0.8, 11);
          e *= mask_value(site(0, 0, 1, RNNCORE_SITE_WRAPPER_OUTPUT), t, b, u, H, 0.5);
        }
    require_equal(train.y, expect, "y");
  });
}

TEST_CASE("variational masks: one per run, shared by the batch (TF) or per sequence") {
  const int H = 9;
  for (bool per_sequence : {false, true}) {
    INFO((per_sequence ? "per sequence" : "shared"));
    const StackSpec st = single(Mode::rnn_tanh, 4, H, false, {dropout_wrapper(1.0, 0.5, 1.0, true, per_sequence)});
    Problem pr(st, 7);
    for_each_backend([&](const Backend_& be) {
      Outputs<float> train, inf;
      REQUIRE(run_forward(st, with_backend(pr.opt, be), pr.w, pr.args(RunMode::training, false), &train) == Status::ok);
      REQUIRE(run_forward(st, with_backend(pr.opt, be), pr.w, pr.args(RunMode::inference, false), &inf) == Status::ok);
      int differing_rows = 0;
      for (int b = 0; b < pr.B; ++b)
        for (int u = 0; u < H; ++u) {
          const float m = mask_value(site(0, 0, 0, RNNCORE_SITE_WRAPPER_OUTPUT, true), 0, per_sequence ? b : 0, u, H, 0.5);
          if (m != mask_value(site(0, 0, 0, RNNCORE_SITE_WRAPPER_OUTPUT, true), 0, 0, u, H, 0.5)) ++differing_rows;
          for (int t = 0; t < pr.T; ++t) {  // the same multiplier at every step
            const std::size_t i = (static_cast<std::size_t>(t) * pr.B + b) * H + u;
            CHECK(train.y[i] == inf.y[i] * m);
          }
        }
      if (per_sequence) CHECK(differing_rows > 0);
    });
  }
}

TEST_CASE("keep rate and scaling over many elements") {
  const int H = 256, T = 40, B = 32;
  const double keep = 0.7;
  const StackSpec st = single(Mode::rnn_tanh, 8, H, false, {dropout_wrapper(1.0, keep, 1.0)});
  Problem pr(st, 8, T, B);
  Outputs<float> train, inf;
  REQUIRE(run_forward(st, pr.opt, pr.w, pr.args(RunMode::training, false), &train) == Status::ok);
  REQUIRE(run_forward(st, pr.opt, pr.w, pr.args(RunMode::inference, false), &inf) == Status::ok);
  std::size_t n = 0, kept = 0;
  for (std::size_t i = 0; i < inf.y.size(); ++i) {
    if (inf.y[i] == 0.0f) continue;
    ++n;
    if (train.y[i] != 0.0f) {
      ++kept;
      CHECK(train.y[i] == inf.y[i] * static_cast<float>(1.0 / keep));
    }
  }
  // Binomial(n, keep): the kept fraction lies within 6 standard deviations of keep.
  const double sigma = std::sqrt(keep * (1 - keep) / static_cast<double>(n));
  const double rate = static_cast<double>(kept) / static_cast<double>(n);
  INFO("n = " << n << ", kept fraction " << rate);
  CHECK(n > 300000);
  CHECK(std::fabs(rate - keep) < 6 * sigma);
}

TEST_CASE("reproducible: same seed and step give identical bits; batch splits with row ids change nothing") {
  // A 3-layer GNMT-like stack: residuals from layer 2 on, every kind of dropout, lengths.
  StackSpec st;
  st.input_size = 6;
  st.num_layers = 3;
  st.dropout = 0.25;
  for (int l = 0; l < 3; ++l) {
    LayerSpec& ls = st.layers[l];
    ls.mode = l == 1 ? Mode::gru : Mode::lstm;
    ls.hidden_size = 6;
    ls.wrappers[ls.num_wrappers++] = dropout_wrapper(0.9, 0.8, 0.7, l == 0, l == 0);
    if (l >= 1) ls.wrappers[ls.num_wrappers++] = residual_wrapper();
  }
  st.layers[0].direction = Direction::unidirectional;
  const int B = 6;
  Problem pr(st, 9, 7, B);
  std::vector<std::uint32_t> ids(B);
  for (int b = 0; b < B; ++b) ids[b] = 1000 + 17 * b;
  for_each_backend([&](const Backend_& be) {
    ForwardArgs a = pr.args(RunMode::training);
    a.row_ids = ids.data();
    Outputs<float> full, again;
    REQUIRE(run_forward(st, with_backend(pr.opt, be), pr.w, a, &full) == Status::ok);
    REQUIRE(run_forward(st, with_backend(pr.opt, be), pr.w, a, &again) == Status::ok);
    require_equal(full.y, again.y, "second run");

    // Rows 0..2 and 3..5 as two runs, with their row ids.
    const int H = 6, half = 3;
    std::vector<float> y(full.y.size()), hy(full.hy.size());
    for (int part = 0; part < 2; ++part) {
      std::vector<float> x, h0, c0;
      for (int t = 0; t < pr.T; ++t)
        for (int b = part * half; b < (part + 1) * half; ++b)
          x.insert(x.end(), pr.x.begin() + (t * B + b) * 6, pr.x.begin() + (t * B + b + 1) * 6);
      for (int slot = 0; slot < 3; ++slot)
        for (int b = part * half; b < (part + 1) * half; ++b) {
          h0.insert(h0.end(), pr.h0.begin() + (slot * B + b) * H, pr.h0.begin() + (slot * B + b + 1) * H);
          c0.insert(c0.end(), pr.c0.begin() + (slot * B + b) * H, pr.c0.begin() + (slot * B + b + 1) * H);
        }
      ForwardArgs p = a;
      p.batch = half;
      p.x = x.data();
      p.h0 = h0.data();
      p.c0 = c0.data();
      p.seq_lengths = pr.lengths.data() + part * half;
      p.row_ids = ids.data() + part * half;
      Outputs<float> o;
      REQUIRE(run_forward(st, with_backend(pr.opt, be), pr.w, p, &o) == Status::ok);
      for (int t = 0; t < pr.T; ++t)
        for (int b = 0; b < half; ++b)
          std::memcpy(&y[(t * B + part * half + b) * H], &o.y[(t * half + b) * H], sizeof(float) * H);
      for (int slot = 0; slot < 3; ++slot)
        for (int b = 0; b < half; ++b)
          std::memcpy(&hy[(slot * B + part * half + b) * H], &o.hy[(slot * half + b) * H], sizeof(float) * H);
    }
    require_equal(full.y, y, "split batch y");
    require_equal(full.hy, hy, "split batch hy");

    // Another step or seed gives other masks.
    Outputs<float> other;
    a.step = kStep + 1;
    REQUIRE(run_forward(st, with_backend(pr.opt, be), pr.w, a, &other) == Status::ok);
    CHECK(rel_error(other.y.data(), full.y.data(), full.y.size()) > 1e-3);
    a.step = kStep + (std::uint64_t{1} << 32);  // step mod 2^32 is what counts
    REQUIRE(run_forward(st, with_backend(pr.opt, be), pr.w, a, &other) == Status::ok);
    require_equal(full.y, other.y, "step + 2^32");
    a.step = kStep;
    a.seed = kSeed + 1;
    REQUIRE(run_forward(st, with_backend(pr.opt, be), pr.w, a, &other) == Status::ok);
    CHECK(rel_error(other.y.data(), full.y.data(), full.y.size()) > 1e-3);
  });
}

TEST_CASE("every SIMD path agrees with the reference on dropout stacks; FMA paths agree bit for bit") {
  StackSpec st;
  st.input_size = 10;
  st.num_layers = 2;
  st.dropout = 0.2;
  st.layers[0].mode = Mode::lstm;
  st.layers[0].hidden_size = 17;
  st.layers[0].direction = Direction::bidirectional;
  st.layers[0].wrappers[st.layers[0].num_wrappers++] = dropout_wrapper(0.8, 0.9, 0.6, false, false, StateFilter::h_and_c);
  st.layers[1].mode = Mode::gru;
  st.layers[1].gru_variant = GruVariant::reset_before;
  st.layers[1].hidden_size = 34;
  st.layers[1].wrappers[st.layers[1].num_wrappers++] = dropout_wrapper(0.7, 1.0, 0.5, true, true);
  st.layers[1].wrappers[st.layers[1].num_wrappers++] = residual_wrapper();
  Problem pr(st, 10);
  StackSpec st64 = st;
  st64.dtype = DType::f64;
  const std::vector<double> w64(pr.w.begin(), pr.w.end()), x64(pr.x.begin(), pr.x.end()), h64(pr.h0.begin(), pr.h0.end()),
      c64(pr.c0.begin(), pr.c0.end());
  ForwardArgs a = pr.args(RunMode::training);
  a.x = x64.data();
  a.h0 = h64.data();
  a.c0 = c64.data();
  Outputs<double> ref;
  PlanOptions o = pr.opt;
  o.backend = Backend::reference;
  REQUIRE(run_forward(st64, o, w64, a, &ref) == Status::ok);
  std::vector<Outputs<float>> fma_runs;
  for_each_backend([&](const Backend_& be) {
    Outputs<float> got;
    REQUIRE(run_forward(st, with_backend(pr.opt, be), pr.w, pr.args(RunMode::training), &got) == Status::ok);
    CHECK(rel_error(got.y.data(), ref.y.data(), ref.y.size()) < 1e-5);
    CHECK(rel_error(got.hy.data(), ref.hy.data(), ref.hy.size()) < 1e-5);
    CHECK(rel_error(got.cy.data(), ref.cy.data(), ref.cy.size()) < 1e-5);
    for (std::size_t i = 0; i < ref.y.size(); ++i) REQUIRE((got.y[i] == 0.0f) == (ref.y[i] == 0.0));  // same drops
    if (be.backend == Backend::simd && be.isa != Isa::sse2) fma_runs.push_back(got);
  });
  for (std::size_t i = 1; i < fma_runs.size(); ++i) require_equal(fma_runs[0].y, fma_runs[i].y, "FMA paths");
}

TEST_CASE("inference is deterministic and drop-free; Monte-Carlo runs drop like training") {
  const StackSpec st = single(Mode::lstm, 4, 4, false, {dropout_wrapper(0.5, 0.5, 0.5), residual_wrapper()});
  StackSpec no_dropout = st;
  no_dropout.layers[0].num_wrappers = 0;
  no_dropout.layers[0].wrappers[no_dropout.layers[0].num_wrappers++] = residual_wrapper();
  Problem pr(st, 11);
  Outputs<float> inf, plain, train, mc;
  REQUIRE(run_forward(st, pr.opt, pr.w, pr.args(RunMode::inference), &inf) == Status::ok);
  REQUIRE(run_forward(no_dropout, pr.opt, pr.w, pr.args(RunMode::inference), &plain) == Status::ok);
  require_equal(inf.y, plain.y, "inference vs no dropout wrapper");
  REQUIRE(run_forward(st, pr.opt, pr.w, pr.args(RunMode::training), &train) == Status::ok);
  REQUIRE(run_forward(st, pr.opt, pr.w, pr.args(RunMode::monte_carlo), &mc) == Status::ok);
  require_equal(train.y, mc.y, "monte carlo vs training");
  CHECK(rel_error(train.y.data(), inf.y.data(), inf.y.size()) > 1e-3);
}

TEST_CASE("custom residual function through the C-compatible callback") {
  struct Scale {
    float factor;
  } user{3.0f};
  Wrapper res = residual_wrapper();
  res.residual.f32 = [](const float* in, const float* out, float* result, std::int32_t width, void* u) {
    const float f = static_cast<Scale*>(u)->factor;
    for (int i = 0; i < width; ++i) result[i] = f * in[i] - out[i];
  };
  res.residual.user_data = &user;
  const StackSpec st = single(Mode::gru, 5, 5, false, {res});
  const StackSpec plain = single(Mode::gru, 5, 5, false, {});
  Problem pr(st, 12);
  for_each_backend([&](const Backend_& be) {
    Outputs<float> got, cell;
    REQUIRE(run_forward(st, with_backend(pr.opt, be), pr.w, pr.args(RunMode::inference), &got) == Status::ok);
    REQUIRE(run_forward(plain, with_backend(pr.opt, be), pr.w, pr.args(RunMode::inference), &cell) == Status::ok);
    for (int t = 0; t < pr.T; ++t)
      for (int b = 0; b < pr.B; ++b)
        for (int u = 0; u < 5; ++u) {
          const std::size_t i = (static_cast<std::size_t>(t) * pr.B + b) * 5 + u;
          CHECK(got.y[i] == (t < pr.lengths[b] ? 3.0f * pr.x[i] - cell.y[i] : 0.0f));
        }
  });
  StackSpec st64 = st;
  st64.dtype = DType::f64;
  Plan plan;
  CHECK(Plan::create(st64, PlanOptions{}, &plan) == Status::unsupported);  // no f64 variant given
  CHECK(std::string(last_error_detail()).find("no f64 variant") != std::string::npos);
}

TEST_CASE("Model counts steps for counted dropout runs") {
  const StackSpec st = single(Mode::rnn_relu, 3, 4, false, {dropout_wrapper(1.0, 0.5, 1.0)});
  Problem pr(st, 13);
  Model m;
  REQUIRE(Model::create(st, pr.opt, pr.w.data(), &m) == Status::ok);
  std::vector<float> y0(pr.T * pr.B * 4), y1(y0.size()), e0(y0.size()), e1(y0.size());
  ForwardArgs a = pr.args(RunMode::training);
  a.count_steps = true;
  a.y = y0.data();
  REQUIRE(m.forward(a) == Status::ok);
  a.y = y1.data();
  REQUIRE(m.forward(a) == Status::ok);
  CHECK(m.step() == 2);
  std::vector<float> scratch(y0.size());
  a.run_mode = RunMode::inference;
  a.y = scratch.data();
  REQUIRE(m.forward(a) == Status::ok);
  CHECK(m.step() == 2);  // inference draws no masks and does not count
  a.run_mode = RunMode::training;
  a.count_steps = false;
  a.step = 0;
  a.y = e0.data();
  REQUIRE(m.forward(a) == Status::ok);
  a.step = 1;
  a.y = e1.data();
  REQUIRE(m.forward(a) == Status::ok);
  require_equal(y0, e0, "counted step 0");
  require_equal(y1, e1, "counted step 1");

  Plan plan;
  REQUIRE(Plan::create(st, pr.opt, &plan) == Status::ok);
  AlignedBuffer packed(plan.packed_weight_bytes()), ws(plan.workspace_bytes());
  REQUIRE(plan.pack_weights(pr.w.data(), packed.ptr, packed.size) == Status::ok);
  a.count_steps = true;
  CHECK(plan.forward(packed.ptr, ws.ptr, ws.size, a) == Status::unsupported);
  CHECK(std::string(last_error_detail()).find("count_steps needs a Model") != std::string::npos);
}

TEST_CASE("invalid dropout arguments are rejected with their message") {
  Plan plan;
  auto create = [&](const StackSpec& st) { return Plan::create(st, PlanOptions{}, &plan); };
  for (double bad : {0.0, -0.5, 1.5, std::nan("")}) {
    CHECK(create(single(Mode::lstm, 4, 4, false, {dropout_wrapper(bad, 1.0, 1.0)})) == Status::bad_probability);
    CHECK(std::string(last_error_detail()).find("layers[0].wrappers[0].input_keep") != std::string::npos);
    CHECK(create(single(Mode::lstm, 4, 4, false, {dropout_wrapper(1.0, bad, 1.0)})) == Status::bad_probability);
    CHECK(create(single(Mode::lstm, 4, 4, false, {dropout_wrapper(1.0, 1.0, bad)})) == Status::bad_probability);
  }
  StackSpec st = single(Mode::lstm, 4, 4, false, {});
  for (double p : {1.0, -0.1, std::nan("")}) {
    st.dropout = p;
    CHECK(create(st) == Status::bad_probability);
    CHECK(std::string(last_error_detail()).find("stack.dropout") != std::string::npos);
  }
  RnnSpec r;
  r.input_size = r.hidden_size = 4;
  r.dropout = 1.0;
  CHECK(Plan::create(r, PlanOptions{}, &plan) == Status::bad_probability);
  CHECK(create(single(Mode::gru, 5, 4, false, {residual_wrapper()})) == Status::width_mismatch);
  CHECK(std::string(last_error_detail()).find("input width (5) to equal its hidden size (4)") != std::string::npos);
  Wrapper bad_filter = dropout_wrapper(1.0, 1.0, 0.5);
  bad_filter.dropout.state_filter = static_cast<StateFilter>(9);
  CHECK(create(single(Mode::lstm, 4, 4, false, {bad_filter})) == Status::invalid_enum);
  StackSpec many = single(Mode::lstm, 4, 4, false, {});
  many.layers[0].num_wrappers = kMaxWrappers + 1;
  CHECK(create(many) == Status::invalid_size);

  const StackSpec ok = single(Mode::lstm, 4, 4, false, {dropout_wrapper(0.5, 1.0, 1.0)});
  Problem pr(ok, 14);
  ForwardArgs a = pr.args(RunMode::training);
  a.run_mode = static_cast<RunMode>(7);
  Outputs<float> o;
  CHECK(run_forward(ok, pr.opt, pr.w, a, &o) == Status::invalid_enum);
}
