// Importers and exporters: export → import round trips for every format, the documented layouts
// spelled out element by element for small cases, source dtypes, and every import error.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <string>

#include "src/shared/half.hpp"
#include "tests/test_util.hpp"

using namespace rnncore;
using namespace rnncore_test;

namespace {

// The tensors of a format, exported from a canonical buffer (owning their names and data).
struct Exported {
  std::vector<TensorInfo> info;
  std::vector<std::vector<double>> data;
  std::vector<TensorView> views() const {
    std::vector<TensorView> v(info.size());
    for (std::size_t i = 0; i < info.size(); ++i) {
      v[i].name = info[i].name;
      v[i].dtype = DType::f64;
      v[i].shape = info[i].shape;
      v[i].data = data[i].data();
    }
    return v;
  }
};

Exported export_all(const RnnSpec& s, WeightFormat f, const std::vector<double>& canonical, const char* prefix) {
  Exported e;
  const int n = format_tensor_count(s, f);
  e.info.resize(n);
  e.data.resize(n);
  for (int i = 0; i < n; ++i) {
    REQUIRE(format_tensor_info(s, f, i, prefix, &e.info[i]) == Status::ok);
    e.data[i].resize(e.info[i].shape.elements());
    REQUIRE(export_tensor(s, f, i, canonical.data(), e.data[i].data()) == Status::ok);
  }
  return e;
}

RnnSpec make(Mode m, int I, int H, int L, bool bi, GruVariant v = GruVariant::reset_after) {
  RnnSpec s;
  s.mode = m;
  s.gru_variant = v;
  s.input_size = I;
  s.hidden_size = H;
  s.num_layers = L;
  s.direction = bi ? Direction::bidirectional : Direction::unidirectional;
  s.dtype = DType::f64;
  return s;
}

const TensorInfo* find(const Exported& e, const char* name) {
  for (const TensorInfo& t : e.info)
    if (std::strcmp(t.name, name) == 0) return &t;
  return nullptr;
}

bool detail_has(const char* fragment) { return std::strstr(last_error_detail(), fragment) != nullptr; }

}  // namespace

TEST_CASE("export then import restores the canonical weights, every format") {
  Rng rng(21);
  for (Mode m : {Mode::lstm, Mode::gru, Mode::rnn_tanh, Mode::rnn_relu})
    for (GruVariant v : {GruVariant::reset_after, GruVariant::reset_before})
      for (WeightFormat f : {WeightFormat::canonical, WeightFormat::pytorch, WeightFormat::onnx, WeightFormat::keras,
                             WeightFormat::tensorflow}) {
        if (m != Mode::gru && v == GruVariant::reset_before) continue;
        const RnnSpec s = make(m, 3, 5, 2, true, v);
        const auto canonical = random_vector<double>(rng, param_count(s), 1.0);
        const Exported e = export_all(s, f, canonical, "net.");
        const auto views = e.views();
        std::vector<double> back(canonical.size());
        INFO(to_string(m) << " " << to_string(v) << " " << to_string(f));
        REQUIRE(import_weights(s, f, views.data(), views.size(), "net.", back.data()) == Status::ok);
        // Keras holds one bias (bW + bR) except for the reset-after GRU: compare the sums there. TF cells
        // likewise, except the n gate of CudnnCompatibleGRUCell (its input and hidden projection biases).
        const bool reset_after = m == Mode::gru && v == GruVariant::reset_after;
        auto folded = [&](int g) {
          return (f == WeightFormat::keras && !reset_after) || (f == WeightFormat::tensorflow && !(reset_after && g == 2));
        };
        for (int l = 0; l < 2; ++l)
          for (int d = 0; d < 2; ++d)
            for (int g = 0; g < num_gates(m); ++g) {
              for (ParamKind k : {ParamKind::input_weight, ParamKind::recurrent_weight}) {
                const std::int64_t o = canonical_offset(s, l, d, k, g);
                const std::int64_t n = (k == ParamKind::input_weight ? layer_input_size(s, l) : 5) * 5;
                for (std::int64_t i = 0; i < n; ++i) REQUIRE(back[o + i] == canonical[o + i]);
              }
              const std::int64_t bw = canonical_offset(s, l, d, ParamKind::input_bias, g);
              const std::int64_t br = canonical_offset(s, l, d, ParamKind::recurrent_bias, g);
              for (int u = 0; u < 5; ++u) {
                if (folded(g)) {
                  CHECK(back[bw + u] == doctest::Approx(canonical[bw + u] + canonical[br + u]).epsilon(1e-15));
                  CHECK(back[br + u] == 0.0);
                } else {
                  CHECK(back[bw + u] == canonical[bw + u]);
                  CHECK(back[br + u] == canonical[br + u]);
                }
              }
            }
      }
}

TEST_CASE("format layouts, element by element") {
  // A canonical buffer whose every element is its own index makes each layout visible.
  const RnnSpec s = make(Mode::lstm, 2, 3, 1, true);
  std::vector<double> canonical(param_count(s));
  for (std::size_t i = 0; i < canonical.size(); ++i) canonical[i] = static_cast<double>(i);
  auto W = [&](int d, int g, int u, int k) { return canonical[canonical_offset(s, 0, d, ParamKind::input_weight, g) + u * 2 + k]; };
  auto bW = [&](int d, int g, int u) { return canonical[canonical_offset(s, 0, d, ParamKind::input_bias, g) + u]; };
  auto bR = [&](int d, int g, int u) { return canonical[canonical_offset(s, 0, d, ParamKind::recurrent_bias, g) + u]; };

  const Exported pt = export_all(s, WeightFormat::pytorch, canonical, "");
  const TensorInfo* wr = find(pt, "weight_ih_l0_reverse");
  REQUIRE(wr != nullptr);
  CHECK(wr->shape.dims[0] == 12);
  CHECK(wr->shape.dims[1] == 2);
  const auto& wr_data = pt.data[wr - pt.info.data()];
  CHECK(wr_data[(2 * 3 + 1) * 2 + 0] == W(1, 2, 1, 0));  // PyTorch row g·H + u: gate order i, f, g, o

  const Exported onnx = export_all(s, WeightFormat::onnx, canonical, "");
  const TensorInfo* ow = find(onnx, "W");
  REQUIRE(ow != nullptr);
  CHECK(ow->shape.ndim == 3);
  const auto& ow_data = onnx.data[ow - onnx.info.data()];
  // ONNX gate order i, o, f, c: ONNX gate 1 is canonical gate 3 (o); direction 1 is the second block.
  CHECK(ow_data[(1 * 12 + 1 * 3 + 2) * 2 + 1] == W(1, 3, 2, 1));
  const TensorInfo* ob = find(onnx, "B");
  const auto& ob_data = onnx.data[ob - onnx.info.data()];
  CHECK(ob_data[0 * 24 + 2 * 3 + 0] == bW(0, 1, 0));       // Wb of ONNX gate 2 = f (canonical 1)
  CHECK(ob_data[1 * 24 + 12 + 3 * 3 + 1] == bR(1, 2, 1));  // Rb of ONNX gate 3 = c (canonical 2), reverse

  const Exported keras = export_all(s, WeightFormat::keras, canonical, "");
  const TensorInfo* kk = find(keras, "kernel_l0_reverse");
  REQUIRE(kk != nullptr);
  CHECK(kk->shape.dims[0] == 2);
  CHECK(kk->shape.dims[1] == 12);
  const auto& kk_data = keras.data[kk - keras.info.data()];
  CHECK(kk_data[1 * 12 + 2 * 3 + 1] == W(1, 2, 1, 1));  // transposed: [k][g·H + u], gate order i, f, c, o
  const TensorInfo* kb = find(keras, "bias_l0");
  CHECK(keras.data[kb - keras.info.data()][3 + 2] == bW(0, 1, 2) + bR(0, 1, 2));

  // Keras GRU: z, r, h order; reset-after keeps both biases as rows [2, 3H].
  const RnnSpec g = make(Mode::gru, 2, 3, 1, false);
  std::vector<double> gc(param_count(g));
  for (std::size_t i = 0; i < gc.size(); ++i) gc[i] = static_cast<double>(i);
  const Exported kg = export_all(g, WeightFormat::keras, gc, "");
  const TensorInfo* gb = find(kg, "bias");
  REQUIRE(gb != nullptr);
  CHECK(gb->shape.ndim == 2);
  CHECK(kg.data[gb - kg.info.data()][0 * 9 + 0 * 3 + 1] == gc[canonical_offset(g, 0, 0, ParamKind::input_bias, 1) + 1]);
  CHECK(kg.data[gb - kg.info.data()][1 * 9 + 1 * 3 + 2] == gc[canonical_offset(g, 0, 0, ParamKind::recurrent_bias, 0) + 2]);
  const RnnSpec gb4 = make(Mode::gru, 2, 3, 1, false, GruVariant::reset_before);
  const Exported kg2 = export_all(gb4, WeightFormat::keras, gc, "");
  CHECK(find(kg2, "bias")->shape.ndim == 1);

  // Multi-layer ONNX names carry the layer; single-layer Keras accepts the _l0 alias on import.
  const Exported onnx2 = export_all(make(Mode::rnn_tanh, 2, 3, 2, false), WeightFormat::onnx,
                                    std::vector<double>(param_count(make(Mode::rnn_tanh, 2, 3, 2, false))), "");
  CHECK(find(onnx2, "R_l1") != nullptr);
}

TEST_CASE("import accepts f32, f64, f16 and bf16 sources; missing optional biases read as zero") {
  const RnnSpec s = make(Mode::rnn_tanh, 2, 2, 1, false);
  // PyTorch tensors without biases (bias=False).
  const float w_ih[4] = {0.5f, -1.0f, 2.0f, 0.25f};
  std::uint16_t w_hh16[4], w_hh_bf[4];
  const float w_hh[4] = {1.5f, -0.75f, 0.125f, 3.0f};
  for (int i = 0; i < 4; ++i) {
    w_hh16[i] = detail::f32_to_f16(w_hh[i]);
    w_hh_bf[i] = detail::f32_to_bf16(w_hh[i]);
  }
  for (DType hh_type : {DType::f16, DType::bf16}) {
    TensorView v[2];
    v[0].name = "weight_ih_l0";
    v[0].dtype = DType::f32;
    v[0].shape.ndim = 2;
    v[0].shape.dims[0] = v[0].shape.dims[1] = 2;
    v[0].data = w_ih;
    v[1] = v[0];
    v[1].name = "weight_hh_l0";
    v[1].dtype = hh_type;
    v[1].data = hh_type == DType::f16 ? static_cast<const void*>(w_hh16) : static_cast<const void*>(w_hh_bf);
    std::vector<double> c(param_count(s), 99.0);
    REQUIRE(import_weights(s, WeightFormat::pytorch, v, 2, "", c.data()) == Status::ok);
    for (int i = 0; i < 4; ++i) {
      CHECK(c[canonical_offset(s, 0, 0, ParamKind::input_weight, 0) + i] == w_ih[i]);
      CHECK(c[canonical_offset(s, 0, 0, ParamKind::recurrent_weight, 0) + i] == w_hh[i]);  // exact in both
    }
    for (int u = 0; u < 2; ++u) {
      CHECK(c[canonical_offset(s, 0, 0, ParamKind::input_bias, 0) + u] == 0.0);
      CHECK(c[canonical_offset(s, 0, 0, ParamKind::recurrent_bias, 0) + u] == 0.0);
    }
  }
}

TEST_CASE("import errors name the tensor and the expected and found shapes") {
  const RnnSpec s = make(Mode::lstm, 3, 4, 2, false);
  Rng rng(2);
  const auto canonical = random_vector<double>(rng, param_count(s), 1.0);
  Exported e = export_all(s, WeightFormat::pytorch, canonical, "m.");
  std::vector<double> out(canonical.size());

  {  // missing required tensor
    auto v = e.views();
    v.erase(v.begin() + 1);  // weight_hh_l0
    CHECK(import_weights(s, WeightFormat::pytorch, v.data(), v.size(), "m.", out.data()) == Status::tensor_missing);
    CHECK(detail_has("'m.weight_hh_l0' [16, 4] is missing"));
  }
  {  // wrong shape
    auto v = e.views();
    v[0].shape.dims[1] = 5;
    CHECK(import_weights(s, WeightFormat::pytorch, v.data(), v.size(), "m.", out.data()) == Status::tensor_shape);
    CHECK(detail_has("tensor 'm.weight_ih_l0': expected shape [16, 3], found [16, 5]"));
  }
  {  // a layer the spec does not have
    auto v = e.views();
    TensorView extra = v[0];
    extra.name = "m.weight_ih_l2";
    v.push_back(extra);
    CHECK(import_weights(s, WeightFormat::pytorch, v.data(), v.size(), "m.", out.data()) == Status::tensor_unexpected);
    CHECK(detail_has("'m.weight_ih_l2' is not a pytorch parameter"));
  }
  {  // tensors outside the prefix, or not named like parameters, are ignored
    auto v = e.views();
    TensorView other = v[0];
    other.name = "fc.weight";
    v.push_back(other);
    other.name = "m.num_batches_tracked";
    v.push_back(other);
    CHECK(import_weights(s, WeightFormat::pytorch, v.data(), v.size(), "m.", out.data()) == Status::ok);
  }
  {  // duplicate
    auto v = e.views();
    v.push_back(v[0]);
    CHECK(import_weights(s, WeightFormat::pytorch, v.data(), v.size(), "m.", out.data()) == Status::tensor_unexpected);
    CHECK(detail_has("appears twice"));
  }
  {  // element type
    auto v = e.views();
    v[2].dtype = static_cast<DType>(42);
    CHECK(import_weights(s, WeightFormat::pytorch, v.data(), v.size(), "m.", out.data()) == Status::tensor_dtype);
  }
  {  // formats that cannot express skip input
    RnnSpec skip = make(Mode::lstm, 4, 4, 1, false);
    skip.input_mode = InputMode::skip;
    auto v = e.views();
    CHECK(import_weights(skip, WeightFormat::onnx, v.data(), v.size(), "", out.data()) == Status::unsupported);
    TensorInfo info;
    CHECK(format_tensor_info(skip, WeightFormat::pytorch, 0, "", &info) == Status::unsupported);
    CHECK(format_tensor_count(skip, WeightFormat::canonical) == 4 + 4 + 4);  // R, bW, bR only
  }
  CHECK(import_weights(s, WeightFormat::pytorch, nullptr, 0, "", out.data()) == Status::tensor_missing);
  CHECK(import_weights(s, WeightFormat::pytorch, nullptr, 0, "", nullptr) == Status::null_pointer);
  CHECK(import_weights(s, static_cast<WeightFormat>(7), nullptr, 0, "", out.data()) == Status::invalid_enum);
  TensorInfo info;
  CHECK(format_tensor_info(s, WeightFormat::onnx, 6, "", &info) == Status::invalid_size);
  CHECK(export_tensor(s, WeightFormat::onnx, 0, canonical.data(), nullptr) == Status::null_pointer);
}

TEST_CASE("f16 and bf16 conversions are exact where representable and round to nearest even") {
  CHECK(detail::f16_to_f32(0x3c00) == 1.0f);
  CHECK(detail::f16_to_f32(0x0001) == 0x1.0p-24f);           // smallest subnormal
  CHECK(detail::f16_to_f32(0x7bff) == 65504.0f);             // largest finite
  CHECK(std::isinf(detail::f16_to_f32(0x7c00)));
  CHECK(std::isnan(detail::f16_to_f32(0x7e00)));
  CHECK(detail::f32_to_f16(1.0f + 0x1.0p-11f) == 0x3c00);    // tie → even
  CHECK(detail::f32_to_f16(1.0f + 0x1.8p-11f) == 0x3c01);
  CHECK(detail::f32_to_f16(65520.0f) == 0x7c00);             // rounds to inf
  CHECK(detail::f32_to_f16(0x1.0p-25f) == 0x0000);           // tie below the smallest subnormal → 0
  CHECK(detail::f32_to_f16(0x1.8p-25f) == 0x0001);
  for (std::uint32_t h = 0; h < 0x7c00; ++h) REQUIRE(detail::f32_to_f16(detail::f16_to_f32(static_cast<std::uint16_t>(h))) == h);
  CHECK(detail::bf16_to_f32(0x3f80) == 1.0f);
  CHECK(detail::f32_to_bf16(1.0f + 0x1.0p-8f) == 0x3f80);    // tie → even
  CHECK(detail::f32_to_bf16(1.0f + 0x1.8p-8f) == 0x3f81);
  // round_to_bf16 (and f32_to_bf16, its top half) against the nearest bf16 found by comparing the
  // distances to the two on either side in double (ties to the even one; past the largest finite,
  // infinity counts as 2^128): every sign and exponent with mantissas at and around the ties, NaNs
  // (quieted: bit 22 set) and infinities.
  auto magnitude = [](std::uint32_t b) {
    b &= 0x7fffffffu;
    if (b == 0x7f800000u) return std::ldexp(1.0, 128);
    float x;
    std::memcpy(&x, &b, 4);
    return static_cast<double>(x);
  };
  auto nearest = [&](std::uint32_t bits) {
    if ((bits & 0x7fffffffu) > 0x7f800000u) return (bits & 0xffff0000u) | 0x400000u;
    const std::uint32_t lo = bits & 0xffff0000u, hi = lo + 0x10000u;  // toward and away from zero
    if (lo == bits) return lo;
    const double d_lo = magnitude(bits) - magnitude(lo), d_hi = magnitude(hi) - magnitude(bits);
    return d_lo < d_hi || (d_lo == d_hi && (lo & 0x10000u) == 0) ? lo : hi;
  };
  const std::uint32_t mantissas[] = {0, 1, 0x7fff, 0x8000, 0x8001, 0x18000, 0x7f7fff, 0x7f8000, 0x7fffff, 0x400001};
  for (std::uint32_t top = 0; top < 0x200; ++top)
    for (std::uint32_t m : mantissas) {
      const std::uint32_t bits = top << 23 | m, want_bits = nearest(bits);
      float f, want, got;
      std::memcpy(&f, &bits, 4);
      std::memcpy(&want, &want_bits, 4);
      got = detail::round_to_bf16(f);
      REQUIRE(detail::f32_to_bf16(f) == want_bits >> 16);
      REQUIRE(std::memcmp(&want, &got, 4) == 0);
    }
}
