// `rnncore quantize` as a user runs it (io::quantize in src/io/quantize.cpp, its command
// tools/quantize.cpp; docs/int8.md "rnncore quantize"): a
// committed float LSTM quantized from committed calibration data, its scales checked against the
// rules, the int8 model run by `rnncore run` within a stated error of the float model; the same Keras
// LSTM, and a Keras stack of two, with their data quantized by TFLite's converter
// (tests/golden/make_quantize_tflite_golden.py) give the same quantization; the bundled two-layer
// PyTorch model; refusals with their exit codes; io::quantize called as a library function.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

#include "rnncore/int8.h"
#include "rnncore/io/npy.hpp"
#include "rnncore/io/quantize.hpp"
#include "rnncore/io/safetensors.hpp"
#include "src/io/int8_model.hpp"
#include "tests/tool_run.hpp"

using namespace rnncore;
using rnncore_test::Result;
using rnncore_test::run;
using rnncore_test::slurp;
using rnncore_test::temp_dir;

namespace {

std::string src(const std::string& rel) { return std::string(RNNCORE_SOURCE_DIR) + "/" + rel; }
const std::string kData = "tests/data/quantize/";

io::SafeTensors read_file(const std::string& path) {
  io::SafeTensors f;
  REQUIRE_MESSAGE(io::read_safetensors(path.c_str(), &f) == RNNCORE_OK, path);
  return f;
}

// A metadata value as the int8 loader reads it: strtod, then to float.
float meta_f32(const io::SafeTensors& f, const char* key) {
  const std::string* v = f.meta(key);
  REQUIRE_MESSAGE(v != nullptr, key);
  return static_cast<float>(std::strtod(v->c_str(), nullptr));
}
int meta_int(const io::SafeTensors& f, const char* key) {
  const std::string* v = f.meta(key);
  REQUIRE_MESSAGE(v != nullptr, key);
  return std::atoi(v->c_str());
}

std::vector<float> tensor_f32(const io::SafeTensors& f, const std::string& name) {
  io::Array a;
  REQUIRE_MESSAGE(f.array(name, &a) == RNNCORE_OK, name);
  std::vector<float> v;
  REQUIRE(io::to_f32(a, &v) == RNNCORE_OK);
  return v;
}

template <class T>
std::vector<T> tensor_of(const io::SafeTensors& f, const std::string& name, io::ElemType type) {
  io::Array a;
  REQUIRE_MESSAGE(f.array(name, &a) == RNNCORE_OK, name);
  REQUIRE(a.type == type);
  std::vector<T> v(a.bytes.size() / sizeof(T));
  std::memcpy(v.data(), a.bytes.data(), a.bytes.size());
  return v;
}

std::vector<float> npy_f32(const std::string& path, std::vector<std::int64_t>* shape = nullptr) {
  io::Array a;
  REQUIRE_MESSAGE(io::read_npy(path.c_str(), &a) == RNNCORE_OK, path);
  std::vector<float> v;
  REQUIRE(io::to_f32(a, &v) == RNNCORE_OK);
  if (shape != nullptr) *shape = a.shape;
  return v;
}

// The number after `key` on the line of stdout that contains `line`.
double printed(const std::string& out, const std::string& line, const std::string& key) {
  const std::size_t at = out.find(line);
  REQUIRE_MESSAGE(at != std::string::npos, line);
  const std::size_t k = out.find(key, at);
  REQUIRE(k != std::string::npos);
  REQUIRE(k < out.find('\n', at));
  return std::strtod(out.c_str() + k + key.size(), nullptr);
}

// Writes x [T, B, I] (time-major, as quantize reads it) to `path` as [B, T, I], the layout the int8
// model takes.
void write_batch_first(const std::string& path, const std::vector<float>& x, std::int64_t T, std::int64_t B, std::int64_t I) {
  std::vector<float> bf(x.size());
  for (std::int64_t t = 0; t < T; ++t)
    for (std::int64_t b = 0; b < B; ++b)
      for (std::int64_t i = 0; i < I; ++i) bf[(b * T + t) * I + i] = x[(t * B + b) * I + i];
  const std::int64_t shape[3] = {B, T, I};
  REQUIRE(io::write_npy(path.c_str(), io::ElemType::f32, shape, 3, bf.data()) == RNNCORE_OK);
}

// `rnncore run` of the int8 model `q` on x [T, B, I] (written batch-first into `dir`): its int8
// output, checked to be [B, T, H].
io::Array run_int8(const std::string& q, const std::vector<float>& x, std::int64_t T, std::int64_t B, std::int64_t I,
                   std::int64_t H, const std::string& dir) {
  write_batch_first(dir + "/xbf.npy", x, T, B, I);
  const Result rr = run("run --weights " + q + " --input " + dir + "/xbf.npy --output " + dir + "/yq.npy");
  INFO(rr.err);
  REQUIRE(rr.code == 0);
  io::Array yq;
  REQUIRE(io::read_npy((dir + "/yq.npy").c_str(), &yq) == RNNCORE_OK);
  REQUIRE(yq.type == io::ElemType::i8);
  REQUIRE(yq.shape == std::vector<std::int64_t>{B, T, H});
  return yq;
}

// The int8 output yq [B, T, H] of `rnncore run`, dequantized with scale `sy` and zero point `zy`,
// against the float output y [T, B, H].
struct OutputError {
  double max_abs = 0, rms = 0, snr_db = 0;
};
OutputError output_error(const io::Array& yq, const std::vector<float>& y, std::int64_t T, std::int64_t B, std::int64_t H,
                         float sy, int zy) {
  double max_abs = 0, err = 0, sig = 0;
  for (std::int64_t t = 0; t < T; ++t)
    for (std::int64_t b = 0; b < B; ++b)
      for (std::int64_t j = 0; j < H; ++j) {
        const float v = static_cast<float>(static_cast<std::int8_t>(yq.bytes[(b * T + t) * H + j]) - zy) * sy;
        const double want = y[(t * B + b) * H + j], e = static_cast<double>(v) - want;
        max_abs = std::max(max_abs, std::fabs(e));
        err += e * e;
        sig += want * want;
      }
  return {max_abs, std::sqrt(err / static_cast<double>(y.size())), 10 * std::log10(sig / err)};
}

// `rnncore run` of the int8 model `q` (file `f`, output width W) on held-out data x_file
// (time-major), dequantized, against the float output y_file (PyTorch's), within the stated bounds;
// quantize's own report `out` of the same comparison (against rnncore's float run) must agree.
void check_held_out(const std::string& out, const std::string& q, const io::SafeTensors& f, const std::string& x_file,
                    const std::string& y_file, std::int64_t I, std::int64_t W, const std::string& dir, double max_abs,
                    double rms, double snr_db) {
  std::vector<std::int64_t> shape;
  const std::vector<float> x = npy_f32(x_file, &shape);
  const std::int64_t T = shape[0], B = shape[1];
  const io::Array yq = run_int8(q, x, T, B, I, W, dir);
  const OutputError e = output_error(yq, npy_f32(y_file), T, B, W, meta_f32(f, "output_scale"), meta_int(f, "output_zp"));
  CHECK(e.max_abs < max_abs);
  CHECK(e.rms < rms);
  CHECK(e.snr_db > snr_db);
  CHECK(printed(out, "(evaluation data", "max_abs_err=") == doctest::Approx(e.max_abs).epsilon(1e-3));
  CHECK(printed(out, "(evaluation data", "snr_db=") == doctest::Approx(e.snr_db).epsilon(1e-3));
  CHECK(printed(out, "(calibration data", "snr_db=") > snr_db);
}

}  // namespace

TEST_CASE("quantize: a PyTorch LSTM; the scales follow the rules; rnncore run stays within the stated error") {
  const std::string d = temp_dir(), q = d + "/q.safetensors";
  const Result r = run("quantize --weights " + src(kData + "lstm_I8_H24.safetensors") + " --calibration " +
                       src(kData + "calib.npy") + " --eval " + src(kData + "eval.npy") + " --output " + q);
  INFO(r.out);
  INFO(r.err);
  REQUIRE(r.code == 0);
  const io::SafeTensors f = read_file(q), m = read_file(src(kData + "lstm_I8_H24.safetensors"));
  CHECK(*f.meta("format") == "tflite_int8");
  CHECK(*f.meta("source") == "rnncore quantize");
  CHECK(*f.meta("float_model") == "lstm_I8_H24.safetensors");
  CHECK(*f.meta("calibration") == "calib.npy");
  CHECK(*f.meta("graph_input") == "float32");
  CHECK(*f.meta("graph_output") == "float32");
  CHECK(*f.meta("return_sequences") == "1");
  const int I = 8, H = 24;

  // Input: asymmetric int8 from the calibration's min and max (widened to 0), the zero point from
  // the end with the smaller error (TFLite's nudging).
  std::vector<std::int64_t> xshape;
  const std::vector<float> x = npy_f32(src(kData + "calib.npy"), &xshape);
  double lo = 0, hi = 0;
  for (float v : x) lo = std::min(lo, static_cast<double>(v)), hi = std::max(hi, static_cast<double>(v));
  const double sx = (hi - lo) / 255.0;
  const double zmin = -128 - lo / sx, zmax = 127 - hi / sx;
  const double zx = 128 + std::fabs(lo / sx) < 127 + std::fabs(hi / sx) ? zmin : zmax;
  CHECK(meta_f32(f, "input_scale") == static_cast<float>(sx));
  CHECK(meta_int(f, "input_zp") == static_cast<int>(std::round(zx)));
  CHECK(meta_int(f, "input_zp") != 0);  // the data are not centred: an asymmetric range

  // Weights: PyTorch's rows i, f, g, o are TFLite's gates i, f, c, o; per gate symmetric with
  // scale max|W|/127, values round(W / scale) in −127..127; biases (b_ih + b_hh) at s_W · s_x.
  const std::vector<float> wih = tensor_f32(m, "lstm.weight_ih_l0"), whh = tensor_f32(m, "lstm.weight_hh_l0"),
                           bih = tensor_f32(m, "lstm.bias_ih_l0"), bhh = tensor_f32(m, "lstm.bias_hh_l0");
  const char* gates[4] = {"i", "f", "c", "o"};
  for (int g = 0; g < 4; ++g) {
    INFO("gate " << gates[g]);
    for (const char* kind : {"w", "r"}) {
      const int cols = kind[0] == 'w' ? I : H;
      const float* W = (kind[0] == 'w' ? wih.data() : whh.data()) + static_cast<std::size_t>(g) * H * cols;
      double mx = 0;
      for (int k = 0; k < H * cols; ++k) mx = std::max(mx, std::fabs(static_cast<double>(W[k])));
      const double s = mx / 127.0;
      CHECK(meta_f32(f, (std::string(kind) + "_" + gates[g] + "_scale").c_str()) == static_cast<float>(s));
      const std::vector<std::int8_t> wq = tensor_of<std::int8_t>(f, std::string(kind) + "_" + gates[g], io::ElemType::i8);
      REQUIRE(wq.size() == static_cast<std::size_t>(H * cols));
      int wrong = 0, extreme = 0;
      for (int k = 0; k < H * cols; ++k) {
        wrong += wq[k] != static_cast<int>(std::round(W[k] / s));
        extreme += wq[k] == 127 || wq[k] == -127;
      }
      CHECK(wrong == 0);
      CHECK(extreme >= 1);  // the largest |W| maps to ±127
    }
    const double sb = static_cast<double>(meta_f32(f, (std::string("w_") + gates[g] + "_scale").c_str())) *
                      static_cast<double>(meta_f32(f, "input_scale"));
    CHECK(meta_f32(f, (std::string("b_") + gates[g] + "_scale").c_str()) == static_cast<float>(sb));
    const std::vector<std::int32_t> bq = tensor_of<std::int32_t>(f, std::string("b_") + gates[g], io::ElemType::i32);
    for (int j = 0; j < H; ++j)
      CHECK(bq[j] == static_cast<std::int32_t>(std::round((static_cast<double>(bih[g * H + j]) + bhh[g * H + j]) / sb)));
  }

  // Cell state: 2^(ceil(log2 max|c|) − 15); output state = output = hidden, asymmetric from h's range.
  const double c_abs = std::strtod(f.meta("calibration_c_absmax")->c_str(), nullptr);
  CHECK(c_abs > 1.0);
  const int k = static_cast<int>(std::ceil(std::log2(c_abs))) - 15;
  CHECK(meta_f32(f, "cell_scale") == std::ldexp(1.0f, k));
  CHECK(meta_f32(f, "cell_clip") == 0.0f);
  const double h_lo = std::strtod(f.meta("calibration_h_min")->c_str(), nullptr),
               h_hi = std::strtod(f.meta("calibration_h_max")->c_str(), nullptr);
  CHECK(h_lo < 0);
  CHECK(h_hi > 0);
  CHECK(meta_f32(f, "output_state_scale") == doctest::Approx((h_hi - h_lo) / 255.0).epsilon(1e-6));
  for (const char* key : {"output_scale", "hidden_scale"}) CHECK(meta_f32(f, key) == meta_f32(f, "output_state_scale"));
  for (const char* key : {"output_zp", "hidden_zp"}) CHECK(meta_int(f, key) == meta_int(f, "output_state_zp"));

  // rnncore run on the held-out data (float32 [B, T, I] for the int8 model), dequantized, against
  // PyTorch's own float output: the bound stated in docs/int8.md (measured: max 0.0167, RMS 0.00195,
  // SNR 37.4 dB).
  check_held_out(r.out, q, f, src(kData + "eval.npy"), src(kData + "eval_y.npy"), I, H, d, 0.03, 0.003, 35.0);

  // The file goes on to firmware as a converted one does (export-c's int8 header).
  const Result ex = run("export-c --weights " + q + " --name q --output " + d + "/q.h");
  INFO(ex.err);
  CHECK(ex.code == 0);
  CHECK(slurp(d + "/q.h").find("#define Q_HIDDEN_SIZE 24") != std::string::npos);

  // The same calibration laid out batch-first gives the same file.
  write_batch_first(d + "/calib.npy", x, xshape[0], xshape[1], I);
  const Result rb = run("quantize --weights " + src(kData + "lstm_I8_H24.safetensors") + " --calibration " + d +
                        "/calib.npy --batch-first --output " + d + "/q2.safetensors");
  REQUIRE(rb.code == 0);
  const std::string a = slurp(q), b2 = slurp(d + "/q2.safetensors");
  CHECK(a.size() == b2.size());
  const io::SafeTensors f2 = read_file(d + "/q2.safetensors");
  for (const io::TensorEntry& e : f.tensors) {
    const io::TensorEntry* e2 = f2.find(e.name);
    REQUIRE(e2 != nullptr);
    CHECK(std::memcmp(f.data(e), f2.data(*e2), e.end - e.begin) == 0);
  }
  for (const auto& kv : f.metadata)
    if (kv.first != "calibration_shape") CHECK_MESSAGE(*f2.meta(kv.first.c_str()) == kv.second, kv.first);
}

TEST_CASE("quantize --per-channel: a scale per unit; rows of unequal size lose less; run, the C API and export-c take it") {
  // The committed PyTorch LSTM with its units' rows scaled unequally (0.05 .. 1 by unit), as
  // trained models often have them: per tensor the small rows get few int8 levels.
  const std::string d = temp_dir();
  const io::SafeTensors m = read_file(src(kData + "lstm_I8_H24.safetensors"));
  const int I = 8, H = 24;
  std::vector<float> wih = tensor_f32(m, "lstm.weight_ih_l0"), whh = tensor_f32(m, "lstm.weight_hh_l0");
  const std::vector<float> bih = tensor_f32(m, "lstm.bias_ih_l0"), bhh = tensor_f32(m, "lstm.bias_hh_l0");
  for (int row = 0; row < 4 * H; ++row) {
    const float f = 0.05f + 0.95f * static_cast<float>(row % 6) / 5.0f;
    for (int k = 0; k < I; ++k) wih[static_cast<std::size_t>(row) * I + k] *= f;
    for (int k = 0; k < H; ++k) whh[static_cast<std::size_t>(row) * H + k] *= f;
  }
  const std::string fm = d + "/uneven.safetensors";
  REQUIRE(io::write_safetensors(fm.c_str(),
                                {{"lstm.bias_hh_l0", io::ElemType::f32, {4 * H}, bhh.data()},
                                 {"lstm.bias_ih_l0", io::ElemType::f32, {4 * H}, bih.data()},
                                 {"lstm.weight_hh_l0", io::ElemType::f32, {4 * H, H}, whh.data()},
                                 {"lstm.weight_ih_l0", io::ElemType::f32, {4 * H, I}, wih.data()}},
                                {{"mode", "lstm"}}) == RNNCORE_OK);
  const std::string args = "quantize --weights " + fm + " --calibration " + src(kData + "calib.npy") + " --eval " +
                           src(kData + "eval.npy") + " --output ";
  const Result rt = run(args + d + "/qt.safetensors"), rc = run(args + d + "/qc.safetensors --per-channel");
  INFO(rc.out);
  INFO(rc.err);
  REQUIRE(rt.code == 0);
  REQUIRE(rc.code == 0);
  const double snr_t = printed(rt.out, "(evaluation data", "snr_db="), snr_c = printed(rc.out, "(evaluation data", "snr_db=");
  const char* gates[4] = {"i", "f", "c", "o"};
  // The weights themselves: the worst row's relative RMS error of the dequantized weights (what
  // per-channel scales improve: per tensor a row of 0.05 the largest gets 20x coarser steps); the
  // output, whose error the int8 h dominates, gains less (measured: 36.7 -> 37.3 dB).
  const auto weight_error = [&](const std::string& path, bool per_channel) {
    const io::SafeTensors q = read_file(path);
    double worst = 0;
    for (int g = 0; g < 4; ++g)
      for (const char* kind : {"w", "r"}) {
        const int cols = kind[0] == 'w' ? I : H;
        const std::string key = std::string(kind) + "_" + gates[g];
        const std::vector<std::int8_t> wq = tensor_of<std::int8_t>(q, key, io::ElemType::i8);
        std::vector<float> scales;
        if (per_channel) {
          std::stringstream ss(*q.meta((key + "_scales").c_str()));
          for (std::string item; std::getline(ss, item, ',');) scales.push_back(std::strtof(item.c_str(), nullptr));
        } else {
          scales.assign(static_cast<std::size_t>(H), meta_f32(q, (key + "_scale").c_str()));
        }
        for (int j = 0; j < H; ++j) {
          double err = 0, sig = 0;
          for (int k = 0; k < cols; ++k) {
            const double w = (kind[0] == 'w' ? wih : whh)[(static_cast<std::size_t>(g) * H + j) * cols + k];
            const double e = wq[static_cast<std::size_t>(j) * cols + k] * static_cast<double>(scales[static_cast<std::size_t>(j)]) - w;
            err += e * e;
            sig += w * w;
          }
          worst = std::max(worst, std::sqrt(err / sig));
        }
      }
    return worst;
  };
  const double we_t = weight_error(d + "/qt.safetensors", false), we_c = weight_error(d + "/qc.safetensors", true);
  MESSAGE("worst row's relative RMS weight error: per tensor " << we_t << ", per channel " << we_c << "; evaluation SNR: per tensor "
                                                     << snr_t << " dB, per channel " << snr_c << " dB");
  CHECK(we_c < 0.2 * we_t);
  CHECK(snr_c > snr_t);
  CHECK(rc.out.find("largest per-channel weight scales") != std::string::npos);

  // The file: per unit max|row|/127, the int8 rows at that scale, biases at the row's s_W · s_x.
  const io::SafeTensors f = read_file(d + "/qc.safetensors");
  for (int g = 0; g < 4; ++g) {
    INFO("gate " << gates[g]);
    CHECK(f.meta((std::string("w_") + gates[g] + "_scale").c_str()) == nullptr);
    for (const char* kind : {"w", "r"}) {
      const int cols = kind[0] == 'w' ? I : H;
      const std::string* list = f.meta((std::string(kind) + "_" + gates[g] + "_scales").c_str());
      REQUIRE(list != nullptr);
      std::vector<float> scales;
      std::stringstream ss(*list);
      for (std::string item; std::getline(ss, item, ',');) scales.push_back(std::strtof(item.c_str(), nullptr));
      REQUIRE(scales.size() == static_cast<std::size_t>(H));
      const std::vector<std::int8_t> wq = tensor_of<std::int8_t>(f, std::string(kind) + "_" + gates[g], io::ElemType::i8);
      int wrong = 0;
      for (int j = 0; j < H; ++j) {
        const float* W = (kind[0] == 'w' ? wih.data() : whh.data()) + (static_cast<std::size_t>(g) * H + j) * cols;
        double mx = 0;
        for (int k = 0; k < cols; ++k) mx = std::max(mx, std::fabs(static_cast<double>(W[k])));
        CHECK(scales[static_cast<std::size_t>(j)] == static_cast<float>(mx / 127.0));
        for (int k = 0; k < cols; ++k) wrong += wq[static_cast<std::size_t>(j) * cols + k] != static_cast<int>(std::round(W[k] / (mx / 127.0)));
      }
      CHECK(wrong == 0);
    }
  }

  // rnncore run gives the error quantize reported (the loader reads the per-unit scales).
  std::vector<std::int64_t> eshape;
  const std::vector<float> ev = npy_f32(src(kData + "eval.npy"), &eshape);
  const std::int64_t T = eshape[0], B = eshape[1];
  const io::Array yq = run_int8(d + "/qc.safetensors", ev, T, B, I, H, d);
  REQUIRE(run("run --weights " + fm + " --input " + src(kData + "eval.npy") + " --output " + d + "/yf.npy").code == 0);
  const OutputError e = output_error(yq, npy_f32(d + "/yf.npy"), T, B, H, meta_f32(f, "output_scale"), meta_int(f, "output_zp"));
  CHECK(e.snr_db == doctest::Approx(snr_c).epsilon(1e-3));

  // The C API as an exported header uses it: the scales, and prepare's storage (the folded biases
  // and the units' multipliers) as a folded table that stays in flash.
  StackSpec st;
  std::vector<unsigned char> canonical;
  std::string err;
  REQUIRE_MESSAGE(io::load_int8_spec(f, &st, &canonical, &err) == Status::ok, err);
  const io::Int8Direction l0 = io::int8_direction(st, canonical.data(), 0, 0);
  rnncore_int8_lstm_quantization q{};
  q.input_scale = l0.q.input_scale;
  q.input_zp = l0.q.input_zp;
  q.state_scale = l0.q.state_scale;
  q.state_zp = l0.q.state_zp;
  q.hidden_scale = l0.q.hidden_scale;
  q.hidden_zp = l0.q.hidden_zp;
  q.cell_scale = l0.q.cell_scale;
  q.cell_clip = l0.q.cell_clip;
  const std::int8_t* wp[4];
  const std::int8_t* rp[4];
  const std::int32_t* bp[4];
  for (int g = 0; g < 4; ++g) {
    q.w_scales[g] = l0.q.w_scales[g];
    q.r_scales[g] = l0.q.r_scales[g];
    wp[g] = l0.w[g], rp[g] = l0.r[g], bp[g] = l0.b[g];
  }
  std::vector<std::int32_t> storage(rnncore_int8_lstm_storage_words(&q, H));
  REQUIRE(storage.size() == 24u * H);
  rnncore_int8_lstm lstm;
  REQUIRE(rnncore_int8_lstm_prepare(&q, I, H, wp, rp, bp, storage.data(), storage.size(), &lstm) == RNNCORE_OK);
  CHECK(rnncore_int8_lstm_prepare_folded(&q, I, H, wp, rp, bp, storage.data(), storage.size(), &lstm) == RNNCORE_OK);
  const Result ex = run("export-c --weights " + d + "/qc.safetensors --name q --output " + d + "/q.h");
  INFO(ex.err);
  REQUIRE(ex.code == 0);
  const std::string h = slurp(d + "/q.h");
  CHECK(h.find("#define Q_BIAS_WORDS " + std::to_string(24 * H)) != std::string::npos);
  CHECK(h.find("static const float q_w_scales[96]") != std::string::npos);
  CHECK(h.find("    .r_scales = {q_r_scales, q_r_scales + 24, q_r_scales + 2 * 24, q_r_scales + 3 * 24},") != std::string::npos);
}

TEST_CASE("quantize: a Keras LSTM and its representative data give TFLite's converter's quantization") {
  // keras_tflite.safetensors: TFLite 2.21's full-integer conversion of keras_lstm with keras_calib.npy
  // as 16 representative batches of 4 rows (its state runs on from batch to batch; cell clip 10).
  const std::string d = temp_dir(), q = d + "/qk.safetensors";
  const std::string base = "quantize --weights " + src(kData + "keras_lstm.safetensors") + " --calibration " +
                           src(kData + "keras_calib.npy") + " --batch-first --output " + q;
  Result r = run(base + " --carry-state 4 --cell-clip 10");
  INFO(r.out);
  INFO(r.err);
  REQUIRE(r.code == 0);
  const io::SafeTensors tfl = read_file(src(kData + "keras_tflite.safetensors"));
  const char* scales[] = {"input_scale", "output_scale", "output_state_scale", "hidden_scale", "cell_scale", "cell_clip",
                          "w_i_scale", "w_f_scale", "w_c_scale", "w_o_scale", "r_i_scale", "r_f_scale", "r_c_scale",
                          "r_o_scale", "b_i_scale", "b_f_scale", "b_c_scale", "b_o_scale"};
  const char* zps[] = {"input_zp", "output_zp", "output_state_zp", "hidden_zp"};
  {
    const io::SafeTensors f = read_file(q);
    for (const char* key : scales) CHECK_MESSAGE(meta_f32(f, key) == meta_f32(tfl, key), key);
    for (const char* key : zps) CHECK_MESSAGE(meta_int(f, key) == meta_int(tfl, key), key);
    CHECK(f.tensors.size() == tfl.tensors.size());
    for (const io::TensorEntry& e : tfl.tensors) {
      INFO(e.name);
      const io::TensorEntry* mine = f.find(e.name);
      REQUIRE(mine != nullptr);
      CHECK(mine->type == e.type);
      CHECK(mine->shape == e.shape);
      CHECK(std::memcmp(f.data(*mine), tfl.data(e), e.end - e.begin) == 0);  // every weight and bias
    }
  }
  // Both files run alike: the same int8 output on the calibration data.
  for (const std::string& model : {q, src(kData + "keras_tflite.safetensors")}) {
    const Result rr = run("run --weights " + model + " --input " + src(kData + "keras_calib.npy") + " --output " + d +
                          (model == q ? "/y_mine.npy" : "/y_tflite.npy"));
    REQUIRE(rr.code == 0);
  }
  CHECK(slurp(d + "/y_mine.npy") == slurp(d + "/y_tflite.npy"));

  // The default (every row from a zero state, the model's clip: none) differs only in h's range
  // (TFLite's 1.9609 against 1.9633 here) and the clip.
  r = run(base);
  REQUIRE(r.code == 0);
  const io::SafeTensors f = read_file(q);
  for (const char* key : scales) {
    const std::string k = key;
    if (k == "cell_clip") CHECK(meta_f32(f, key) == 0.0f);
    else if (k == "output_scale" || k == "output_state_scale" || k == "hidden_scale")
      CHECK(meta_f32(f, key) == doctest::Approx(meta_f32(tfl, key)).epsilon(2e-3));
    else
      CHECK_MESSAGE(meta_f32(f, key) == meta_f32(tfl, key), key);
  }
  CHECK(printed(r.out, "(calibration data", "snr_db=") > 35.0);
}

TEST_CASE("quantize: a Keras stack of two LSTMs (--config) gives TFLite's converter's quantization, layer by layer") {
  // keras_stack2_tflite.safetensors: TFLite 2.21's conversion of LSTM(20) then LSTM(12) with
  // keras_stack2_calib.npy as 16 representative batches of 4 rows (make_quantize_tflite_golden.py).
  // The widths differ, which the Keras weights alone do not say: --config gives them. With the
  // converter's rules (--carry-state 4, --cell-clip 10, --cell-range batch-end) every key derived
  // from x, the weights and |c| is the converter's; those derived from h's range (a layer's output
  // scales, the next layer's input and bias scales) may differ in the last bits of the float32,
  // since the converter's float LSTM is not rnncore's (here layer 0's output scale does, by one).
  const std::string d = temp_dir(), q = d + "/qk2.safetensors", config = d + "/stack.json";
  std::ofstream(config) << R"({"layers": [{"mode": "lstm", "hidden_size": 20}, {"mode": "lstm", "hidden_size": 12}]})";
  const Result r = run("quantize --weights " + src(kData + "keras_stack2_lstm.safetensors") + " --config " + config +
                       " --calibration " + src(kData + "keras_stack2_calib.npy") +
                       " --batch-first --carry-state 4 --cell-clip 10 --cell-range batch-end --output " + q);
  INFO(r.out);
  INFO(r.err);
  REQUIRE(r.code == 0);
  CHECK(r.out.find("model: LSTM, 2 unidirectional layers, input 6, hidden 20, 12") != std::string::npos);
  const io::SafeTensors f = read_file(q), tfl = read_file(src(kData + "keras_stack2_tflite.safetensors"));
  CHECK(*f.meta("layers") == "2");
  CHECK(*f.meta("source") == "rnncore quantize");
  int keys = 0;
  for (const auto& kv : tfl.metadata) {  // every key the converter's file has, the stack's and each layer's
    if (kv.first == "source" || kv.first == "tf_version") continue;
    INFO(kv.first);
    const std::string* mine = f.meta(kv.first.c_str());
    REQUIRE(mine != nullptr);
    const std::string& k = kv.first;
    const bool numeric = k.find("scale") != std::string::npos || k.find("clip") != std::string::npos;
    const bool from_h = k.find("output") != std::string::npos || k.find("hidden") != std::string::npos ||
                        (k.rfind("l0.", 0) != 0 && (k.find("input_scale") != std::string::npos || k.find(".b_") != std::string::npos));
    const float mine_v = meta_f32(f, k.c_str()), want_v = meta_f32(tfl, k.c_str());
    if (numeric && from_h) CHECK(std::fabs(mine_v - want_v) <= std::ldexp(std::fabs(want_v), -22));  // 2 ulp
    else if (numeric) CHECK(mine_v == want_v);
    else CHECK(*mine == kv.second);
    ++keys;
  }
  CHECK(keys > 60);
  CHECK(*f.meta("calibration_cell_range") == "batch-end");
  {  // every step (the default) sees the cell states between the batches' ends too
    const Result re = run("quantize --weights " + src(kData + "keras_stack2_lstm.safetensors") + " --config " + config +
                          " --calibration " + src(kData + "keras_stack2_calib.npy") +
                          " --batch-first --carry-state 4 --cell-clip 10 --output " + d + "/every.safetensors");
    REQUIRE(re.code == 0);
    const io::SafeTensors fe = read_file(d + "/every.safetensors");
    CHECK(*fe.meta("calibration_cell_range") == "every-step");
    for (const char* key : {"l0.calibration_c_absmax", "l1.calibration_c_absmax"}) {
      INFO(key);
      CHECK(std::strtod(fe.meta(key)->c_str(), nullptr) > std::strtod(f.meta(key)->c_str(), nullptr));  // 5.54 < 6.24, 9.10 < 10
    }
  }
  CHECK(f.tensors.size() == tfl.tensors.size());
  for (const io::TensorEntry& e : tfl.tensors) {  // every weight and bias of both layers
    INFO(e.name);
    const io::TensorEntry* mine = f.find(e.name);
    REQUIRE(mine != nullptr);
    CHECK(mine->type == e.type);
    CHECK(mine->shape == e.shape);
    CHECK(std::memcmp(f.data(*mine), tfl.data(e), e.end - e.begin) == 0);
  }
  for (const std::string& model : {q, src(kData + "keras_stack2_tflite.safetensors")}) {
    const Result rr = run("run --weights " + model + " --input " + src(kData + "keras_stack2_calib.npy") + " --output " + d +
                          (model == q ? "/y_mine.npy" : "/y_tflite.npy"));
    REQUIRE(rr.code == 0);
  }
  CHECK(slurp(d + "/y_mine.npy") == slurp(d + "/y_tflite.npy"));
  CHECK(printed(r.out, "(calibration data", "snr_db=") > 35.0);  // measured 37.4
}

TEST_CASE("quantize: the bundled PyTorch model (two layers) runs within the stated error of PyTorch's output") {
  const std::string d = temp_dir(), q = d + "/q.safetensors", model = src("examples/models/lstm_small.safetensors");
  const Result r = run("quantize --weights " + model + " --calibration " + src("examples/models/lstm_small_input.npy") +
                       " --output " + q);
  INFO(r.out);
  INFO(r.err);
  REQUIRE(r.code == 0);
  const io::SafeTensors f = read_file(q);
  // Layer 1 reads layer 0's int8 output as it is: the same quantization.
  CHECK(meta_f32(f, "l1.input_scale") == meta_f32(f, "l0.output_scale"));
  CHECK(meta_int(f, "l1.input_zp") == meta_int(f, "l0.output_zp"));
  CHECK(meta_f32(f, "input_scale") == meta_f32(f, "l0.input_scale"));
  CHECK(meta_f32(f, "output_scale") == meta_f32(f, "l1.output_scale"));

  // rnncore run (float32 [B, T, I]) against PyTorch's float output (measured: max 0.0019, SNR 40.6 dB).
  std::vector<std::int64_t> shape;
  const std::vector<float> x = npy_f32(src("examples/models/lstm_small_input.npy"), &shape);
  const std::int64_t T = shape[0], B = shape[1], I = shape[2], H = 32;
  const io::Array yq = run_int8(q, x, T, B, I, H, d);
  const std::vector<float> yf = npy_f32(src("examples/models/lstm_small_expected_y.npy"));
  const OutputError e = output_error(yq, yf, T, B, H, meta_f32(f, "output_scale"), meta_int(f, "output_zp"));
  CHECK(e.max_abs < 0.005);
  CHECK(e.snr_db > 35.0);

  // Calibrated on a quarter of the input, layer 1's max|c| is 0.38: the converter's rule gives
  // 2^-16, with which the integer LSTM (as LiteRT's) drops tanh of the cell and the output is lost
  // (SNR -10 dB on this model); quantize keeps 2^-15 and says so.
  std::vector<float> quarter(x);
  for (float& v : quarter) v *= 0.25f;
  REQUIRE(io::write_npy((d + "/quarter.npy").c_str(), io::ElemType::f32, shape.data(), 3, quarter.data()) == RNNCORE_OK);
  const Result rq = run("quantize --weights " + model + " --calibration " + d + "/quarter.npy --output " + q);
  INFO(rq.err);
  REQUIRE(rq.code == 0);
  CHECK(rq.err.find("(layer 1) would take the cell scale 2^-16 (TFLite's converter's choice)") != std::string::npos);
  CHECK(meta_f32(read_file(q), "l1.cell_scale") == std::ldexp(1.0f, -15));
  CHECK(printed(rq.out, "(calibration data", "snr_db=") > 35.0);  // measured 43.0
}

// The int8 weights of one gate of `kind` ("w" or "r") of layer prefix `at` ("l0.fw." ...) against
// PyTorch's float rows g·H .. (g+1)·H of `W` (per gate: round(W / scale) at the file's scale).
int wrong_weights(const io::SafeTensors& f, const std::string& at, const char* kind, const char* gate, int g,
                  const std::vector<float>& W, int H, int cols) {
  const std::vector<std::int8_t> wq = tensor_of<std::int8_t>(f, at + kind + "_" + gate, io::ElemType::i8);
  REQUIRE(wq.size() == static_cast<std::size_t>(H * cols));
  const double s = meta_f32(f, (at + kind + "_" + gate + "_scale").c_str());
  int wrong = 0;
  for (int k = 0; k < H * cols; ++k) wrong += wq[k] != static_cast<int>(std::round(W[g * H * cols + k] / s));
  return wrong;
}

TEST_CASE("quantize: a PyTorch Linear head (every step; softmax on the last step) runs within one output step of PyTorch") {
  // tests/golden/pytorch_head: nn.LSTM → nn.Linear, PyTorch's float64 output; calibrated on its input.
  for (const char* name : {"lstm2_linear_every_step", "bilstm_linear_last_step_softmax"}) {
    CAPTURE(name);
    const std::string d = temp_dir(), q = d + "/q.safetensors", model = src("tests/golden/pytorch_head/") + name + ".safetensors";
    const io::SafeTensors g = read_file(model);
    const std::vector<float> x = tensor_f32(g, "input"), y = tensor_f32(g, "expected.y");
    const io::TensorEntry* xe = g.find("input");
    const std::int64_t T = xe->shape[0], B = xe->shape[1], I = xe->shape[2];
    REQUIRE(io::write_npy((d + "/x.npy").c_str(), io::ElemType::f32, xe->shape.data(), 3, x.data()) == RNNCORE_OK);
    const Result r = run("quantize --weights " + model + " --calibration " + d + "/x.npy --output " + q);
    INFO(r.out);
    INFO(r.err);
    REQUIRE(r.code == 0);
    const io::SafeTensors f = read_file(q);
    const bool softmax = std::string(name).find("softmax") != std::string::npos;
    const std::int64_t F = softmax ? 4 : 3, steps = softmax ? 1 : T;
    CHECK(meta_int(f, "dense") == 1);
    CHECK(meta_int(f, "fc0.in") == (softmax ? 12 : 8));
    CHECK(meta_int(f, "fc0.out") == F);
    CHECK(*f.meta("fc0.activation") == "none");
    CHECK(meta_int(f, "return_sequences") == (softmax ? 0 : 1));
    // The Dense layer reads the last layer's int8 output as it is.
    const std::string last = softmax ? "l0.fw." : "l1.";
    CHECK(meta_f32(f, "fc0.input_scale") == meta_f32(f, (last + "output_scale").c_str()));
    CHECK(meta_int(f, "fc0.input_zp") == meta_int(f, (last + "output_zp").c_str()));
    float sy = meta_f32(f, "fc0.output_scale");
    int zy = meta_int(f, "fc0.output_zp");
    if (softmax) {  // TFLite's softmax output: 1/256, zero point −128, its input the Dense layer's output
      CHECK(meta_f32(f, "softmax.input_scale") == sy);
      sy = meta_f32(f, "softmax.output_scale");
      zy = meta_int(f, "softmax.output_zp");
      CHECK(sy == 1.0f / 256.0f);
      CHECK(zy == -128);
    }
    write_batch_first(d + "/xbf.npy", x, T, B, I);
    const Result rr = run("run --weights " + q + " --input " + d + "/xbf.npy --output " + d + "/yq.npy");
    INFO(rr.err);
    REQUIRE(rr.code == 0);
    io::Array yq;
    REQUIRE(io::read_npy((d + "/yq.npy").c_str(), &yq) == RNNCORE_OK);
    REQUIRE(yq.type == io::ElemType::i8);
    REQUIRE(yq.shape == (softmax ? std::vector<std::int64_t>{B, F} : std::vector<std::int64_t>{B, T, F}));
    const OutputError e = output_error(yq, y, steps, B, F, sy, zy);
    CHECK(e.max_abs <= sy);  // measured: 0.0007 of a step 0.00095; 0.0017 of 1/256
  }
}

TEST_CASE("quantize: a head's relu, sigmoid and tanh: TFLite's output scales; within one output step of the float model") {
  const std::string d = temp_dir(), q = d + "/q.safetensors";
  const io::SafeTensors g = read_file(src("tests/golden/pytorch_head/lstm2_linear_every_step.safetensors"));
  const io::TensorEntry* xe = g.find("input");
  const std::vector<float> x = tensor_f32(g, "input");
  REQUIRE(io::write_npy((d + "/x.npy").c_str(), io::ElemType::f32, xe->shape.data(), 3, x.data()) == RNNCORE_OK);
  std::vector<io::TensorToWrite> weights;
  for (const io::TensorEntry& e : g.tensors)
    if (e.name.compare(0, 5, "lstm.") == 0 || e.name.compare(0, 3, "fc.") == 0) weights.push_back({e.name, e.type, e.shape, g.data(e)});
  for (const char* act : {"relu", "sigmoid", "tanh"}) {
    CAPTURE(act);
    REQUIRE(io::write_safetensors((d + "/m.safetensors").c_str(), weights, {{"head_activation", act}}) == RNNCORE_OK);
    const Result r = run("quantize --weights " + d + "/m.safetensors --calibration " + d + "/x.npy --output " + q);
    INFO(r.out);
    INFO(r.err);
    REQUIRE(r.code == 0);
    const io::SafeTensors f = read_file(q);
    CHECK(*f.meta("fc0.activation") == act);
    const float sy = meta_f32(f, "fc0.output_scale");
    if (std::string(act) == "sigmoid") CHECK((sy == 1.0f / 256.0f && meta_int(f, "fc0.output_zp") == -128));
    if (std::string(act) == "tanh") CHECK((sy == 1.0f / 128.0f && meta_int(f, "fc0.output_zp") == 0));
    // quantize's own comparison: the int8 run against the float model's, one output step at most
    // (measured: sigmoid 0.0020 of 1/256, tanh 0.0040 of 1/128); relu's range is 0.04, a step
    // 0.00016, below the layers' own error there: two steps (measured 0.00022).
    CHECK(printed(r.out, "(calibration data", "max_abs_err=") <= (std::string(act) == "relu" ? 2 : 1) * sy);
  }
}

TEST_CASE("quantize: Embedding → LSTM → Linear (tanh): the table as layer 0's input; run on token ids within one step of PyTorch") {
  // tests/golden/head_grad/embed_lstm_linear_tanh: the module's state_dict, its token ids [T, B]
  // and PyTorch's float64 output.
  const std::string d = temp_dir(), q = d + "/q.safetensors";
  const io::SafeTensors g = read_file(src("tests/golden/head_grad/embed_lstm_linear_tanh.safetensors"));
  std::vector<io::TensorToWrite> weights;
  for (const io::TensorEntry& e : g.tensors)
    if (e.name.compare(0, 5, "lstm.") == 0 || e.name.compare(0, 3, "fc.") == 0 || e.name.compare(0, 10, "embedding.") == 0)
      weights.push_back({e.name, e.type, e.shape, g.data(e)});
  REQUIRE(io::write_safetensors((d + "/m.safetensors").c_str(), weights, {{"head_activation", "tanh"}}) == RNNCORE_OK);
  io::Array ids;
  REQUIRE(g.array("input", &ids) == RNNCORE_OK);
  const std::int64_t T = ids.shape[0], B = ids.shape[1], F = 3;
  REQUIRE(io::write_npy((d + "/ids.npy").c_str(), ids.type, ids.shape.data(), 2, ids.bytes.data()) == RNNCORE_OK);
  const Result r = run("quantize --weights " + d + "/m.safetensors --calibration " + d + "/ids.npy --output " + q);
  INFO(r.out);
  INFO(r.err);
  REQUIRE(r.code == 0);
  CHECK(r.out.find("an Embedding 7 x 4, token ids [B, T]") != std::string::npos);
  const io::SafeTensors f = read_file(q);
  CHECK(*f.meta("graph_input") == "token_ids");
  CHECK(meta_int(f, "embedding.V") == 7);
  CHECK(meta_int(f, "embedding.E") == 4);
  CHECK(meta_f32(f, "embedding.scale") == meta_f32(f, "l0.input_scale"));  // the rows are layer 0's input
  CHECK(meta_int(f, "embedding.zp") == meta_int(f, "l0.input_zp"));
  // Each table value quantized at that scale (the table's range: its ends are −128 and 127 ± 1).
  const std::vector<std::int8_t> table = tensor_of<std::int8_t>(f, "embedding.table", io::ElemType::i8);
  const std::vector<float> want = tensor_f32(g, "embedding.weight");
  const float se = meta_f32(f, "embedding.scale");
  const int ze = meta_int(f, "embedding.zp");
  for (std::size_t k = 0; k < table.size(); ++k) CHECK(std::fabs((table[k] - ze) * se - want[k]) <= 0.5f * se + 1e-6f);
  // rnncore run on the ids [B, T] against PyTorch's output (measured 0.0045; a step is 1/128).
  std::vector<std::int32_t> bf(static_cast<std::size_t>(T * B));
  std::vector<std::int32_t> tm(bf.size());
  std::memcpy(tm.data(), ids.bytes.data(), tm.size() * sizeof(std::int32_t));
  for (std::int64_t t = 0; t < T; ++t)
    for (std::int64_t b = 0; b < B; ++b) bf[static_cast<std::size_t>(b * T + t)] = tm[static_cast<std::size_t>(t * B + b)];
  const std::int64_t bf_shape[2] = {B, T};
  REQUIRE(io::write_npy((d + "/ids_bf.npy").c_str(), io::ElemType::i32, bf_shape, 2, bf.data()) == RNNCORE_OK);
  const Result rr = run("run --weights " + q + " --input " + d + "/ids_bf.npy --output " + d + "/yq.npy");
  INFO(rr.err);
  REQUIRE(rr.code == 0);
  io::Array yq;
  REQUIRE(io::read_npy((d + "/yq.npy").c_str(), &yq) == RNNCORE_OK);
  REQUIRE(yq.shape == (std::vector<std::int64_t>{B, T, F}));
  const OutputError e = output_error(yq, tensor_f32(g, "expected.y"), T, B, F, meta_f32(f, "fc0.output_scale"), meta_int(f, "fc0.output_zp"));
  CHECK(e.max_abs <= 1.0 / 128.0);
}

TEST_CASE("quantize: a PyTorch bidirectional LSTM stack (concat); both directions share h's quantization; run, export-c") {
  // lstm_bi2_I5_H10.safetensors: nn.LSTM(5, 10, num_layers=2, bidirectional=True) (PyTorch's output
  // at each step is [forward h, backward h], 20 wide; layer 1 reads layer 0's); make_quantize_data.py.
  const std::string d = temp_dir(), q = d + "/qb.safetensors", w = src(kData + "lstm_bi2_I5_H10.safetensors");
  const std::string args = "quantize --weights " + w + " --calibration " + src(kData + "bidi_calib.npy") + " --eval " +
                           src(kData + "bidi_eval.npy");
  const Result r = run(args + " --output " + q);
  INFO(r.out);
  INFO(r.err);
  REQUIRE(r.code == 0);
  CHECK(r.out.find("model: LSTM, 2 bidirectional layers, input 5, hidden 10, 10") != std::string::npos);
  const io::SafeTensors f = read_file(q), m = read_file(w);
  CHECK(*f.meta("layers") == "2");
  CHECK(meta_int(f, "I") == 5);
  CHECK(meta_int(f, "H") == 20);
  const int H = 10;
  for (int l = 0; l < 2; ++l) {
    const std::string at = "l" + std::to_string(l) + ".";
    INFO(at);
    CHECK(*f.meta((at + "bidirectional").c_str()) == "concat");
    CHECK(meta_int(f, (at + "I").c_str()) == (l == 0 ? 5 : 20));
    CHECK(meta_int(f, (at + "H").c_str()) == 20);
    // The concatenation copies both directions' bytes: one quantization for both output states,
    // asymmetric int8 over the union of their calibrated h ranges.
    double lo = 0, hi = 0;
    for (const char* dir : {"fw.", "bw."}) {
      const std::string p = at + dir;
      for (const char* key : {"output_state_scale", "output_scale", "hidden_scale"})
        CHECK(meta_f32(f, (p + key).c_str()) == meta_f32(f, (at + "output_scale").c_str()));
      for (const char* key : {"output_state_zp", "output_zp", "hidden_zp"})
        CHECK(meta_int(f, (p + key).c_str()) == meta_int(f, (at + "output_zp").c_str()));
      CHECK(meta_f32(f, (p + "input_scale").c_str()) == meta_f32(f, (at + "input_scale").c_str()));
      lo = std::min(lo, std::strtod(f.meta((p + "calibration_h_min").c_str())->c_str(), nullptr));
      hi = std::max(hi, std::strtod(f.meta((p + "calibration_h_max").c_str())->c_str(), nullptr));
      // each direction's cell scale from its own max|c|
      const double c_abs = std::strtod(f.meta((p + "calibration_c_absmax").c_str())->c_str(), nullptr);
      CHECK(meta_f32(f, (p + "cell_scale").c_str()) == std::ldexp(1.0f, std::max(-15, static_cast<int>(std::ceil(std::log2(c_abs))) - 15)));
    }
    CHECK(meta_f32(f, (at + "output_scale").c_str()) == doctest::Approx((hi - lo) / 255.0).epsilon(1e-6));
    CHECK(std::strtod(f.meta((at + "fw.calibration_h_max").c_str())->c_str(), nullptr) !=
          std::strtod(f.meta((at + "bw.calibration_h_max").c_str())->c_str(), nullptr));
    // Weights: the forward direction's from weight_*_l<k>, the backward one's from weight_*_l<k>_reverse.
    const char* gates[4] = {"i", "f", "c", "o"};
    for (const char* dir : {"fw.", "bw."}) {
      const std::string suffix = "_l" + std::to_string(l) + (dir[0] == 'b' ? "_reverse" : "");
      const std::vector<float> wih = tensor_f32(m, "lstm.weight_ih" + suffix), whh = tensor_f32(m, "lstm.weight_hh" + suffix);
      for (int g = 0; g < 4; ++g) {
        CHECK(wrong_weights(f, at + dir, "w", gates[g], g, wih, H, l == 0 ? 5 : 20) == 0);
        CHECK(wrong_weights(f, at + dir, "r", gates[g], g, whh, H, H) == 0);
      }
    }
  }
  // Layer 1 reads layer 0's concatenation as it is.
  CHECK(meta_f32(f, "l1.input_scale") == meta_f32(f, "l0.output_scale"));
  CHECK(meta_int(f, "l1.input_zp") == meta_int(f, "l0.output_zp"));
  CHECK(meta_f32(f, "output_scale") == meta_f32(f, "l1.output_scale"));

  // rnncore run on the held-out data against PyTorch's own float output (measured: max 0.0150, RMS
  // 0.00125, SNR 40.4 dB).
  check_held_out(r.out, q, f, src(kData + "bidi_eval.npy"), src(kData + "bidi_eval_y.npy"), 5, 20, d, 0.03, 0.0025, 35.0);
  const Result ex = run("export-c --weights " + q + " --name q --output " + d + "/qb.h");
  INFO(ex.err);
  CHECK(ex.code == 0);
  CHECK(slurp(d + "/qb.h").find("#define Q_L0_BIDIRECTIONAL 1") != std::string::npos);

  // --per-channel on both directions (measured: SNR 40.6 dB on the held-out data).
  const Result rc = run(args + " --per-channel --output " + d + "/qbc.safetensors");
  INFO(rc.err);
  REQUIRE(rc.code == 0);
  const io::SafeTensors fc = read_file(d + "/qbc.safetensors");
  for (const char* key : {"l0.fw.w_i_scales", "l0.bw.w_i_scales", "l1.fw.r_o_scales", "l1.bw.b_c_scales"})
    CHECK_MESSAGE(fc.meta(key) != nullptr, key);
  check_held_out(rc.out, d + "/qbc.safetensors", fc, src(kData + "bidi_eval.npy"), src(kData + "bidi_eval_y.npy"), 5, 20,
                 d, 0.03, 0.0025, 35.0);
  const Result exc = run("export-c --weights " + d + "/qbc.safetensors --name q --output " + d + "/qbc.h");
  INFO(exc.err);
  CHECK(exc.code == 0);
}

TEST_CASE("quantize: a stack mixing directions (--config): a unidirectional layer, then a bidirectional one") {
  // PyTorch's nn.LSTM(6, 9) and then nn.LSTM(9, 7, bidirectional=True) on its output
  // (make_quantize_data.py): calibrated layer by layer, layer 1 reading layer 0's output
  // quantization; measured against PyTorch's output: max 0.0078, RMS 0.0010, SNR 44.8 dB.
  const std::string d = temp_dir(), q = d + "/qm.safetensors";
  const Result r = run("quantize --weights " + src(kData + "lstm_uni_bi_I6_H9_7.safetensors") + " --config " +
                       src(kData + "mixed_stack.json") + " --calibration " + src(kData + "mixed_calib.npy") + " --eval " +
                       src(kData + "mixed_eval.npy") + " --output " + q);
  INFO(r.out);
  INFO(r.err);
  REQUIRE(r.code == 0);
  const io::SafeTensors f = read_file(q);
  CHECK(f.meta("l0.bidirectional") == nullptr);
  REQUIRE(f.meta("l1.bidirectional") != nullptr);
  CHECK(*f.meta("l1.bidirectional") == "concat");
  CHECK(meta_f32(f, "l1.input_scale") == meta_f32(f, "l0.output_scale"));
  CHECK(meta_int(f, "l1.input_zp") == meta_int(f, "l0.output_zp"));
  CHECK(meta_f32(f, "l1.fw.output_state_scale") == meta_f32(f, "l1.bw.output_state_scale"));
  check_held_out(r.out, q, f, src(kData + "mixed_eval.npy"), src(kData + "mixed_eval_y.npy"), 6, 14, d, 0.02, 0.002, 38.0);
}

TEST_CASE("quantize: a single bidirectional layer is written as a one-layer stack file") {
  // The loader reads a bidirectional layer only under a prefix: layers = 1, l0.fw. / l0.bw.
  const std::string d = temp_dir(), q = d + "/q1.safetensors";
  const std::int64_t T = 12, B = 3, I = 17, shape[3] = {T, B, I};
  std::vector<float> x(static_cast<std::size_t>(T * B * I));
  for (std::size_t k = 0; k < x.size(); ++k) x[k] = static_cast<float>(std::sin(0.37 * static_cast<double>(k)) + 0.2);
  REQUIRE(io::write_npy((d + "/x.npy").c_str(), io::ElemType::f32, shape, 3, x.data()) == RNNCORE_OK);
  const Result r = run("quantize --weights " + src("tests/golden/pytorch/lstm_l1_bi_full_I17_H33_bf_h0.safetensors") +
                       " --calibration " + d + "/x.npy --output " + q);
  INFO(r.out);
  INFO(r.err);
  REQUIRE(r.code == 0);
  CHECK(r.out.find("model: LSTM, one bidirectional layer, input 17, hidden 33") != std::string::npos);
  const io::SafeTensors f = read_file(q);
  CHECK(*f.meta("layers") == "1");
  CHECK(*f.meta("l0.bidirectional") == "concat");
  CHECK(meta_int(f, "H") == 66);
  CHECK(meta_f32(f, "l0.fw.output_state_scale") == meta_f32(f, "l0.bw.output_state_scale"));
  CHECK(printed(r.out, "(calibration data", "snr_db=") > 30.0);
  const io::Array yq = run_int8(q, x, T, B, I, 66, d);
  CHECK(yq.bytes.size() == static_cast<std::size_t>(B * T * 66));
}

TEST_CASE("quantize: models the int8 LSTM cannot run and bad calibration data are refused") {
  const std::string d = temp_dir(), out = d + "/refused.safetensors";
  const std::string cal = " --calibration " + src(kData + "calib.npy") + " --output " + out;
  auto refused = [&](const std::string& args, int code, const std::string& fragment) {
    std::remove(out.c_str());
    const Result r = run(args);
    INFO(args);
    INFO(r.err);
    CHECK(r.code == code);
    CHECK(r.err.find(fragment) != std::string::npos);
    if (code == 1) {
      CHECK(r.err.compare(0, 16, "rnncore: error: ") == 0);
      CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
    }
    CHECK(std::ifstream(out).good() == false);  // nothing written
  };
  const char* kinds[][2] = {
      {"tests/golden/pytorch/gru_l1_uni_full_I3_H33_h0.safetensors",
       "a GRU; rnncore quantize takes LSTM layers (unidirectional or bidirectional)"},
      {"tests/golden/keras/rnn_tanh_l1_uni_I3_H33_B3_T1_nobias.safetensors", "an Elman RNN (rnn_tanh)"},
      {"tests/golden/pytorch/gru_l2_bi_full_I33_H17_h0.safetensors", "a GRU (layer 0)"},
      {"tests/golden/pytorch_proj/lstm_proj_l1_h0.safetensors", "an LSTM with a projection (proj_size 2)"},
      {"tests/golden/tf/lstm_peep_len.model.safetensors", "an LSTM with peepholes"},
      {"tests/data/quantize/keras_tflite.safetensors", "already an int8 LSTM model"},
  };
  for (const auto& k : kinds) refused("quantize --weights " + src(k[0]) + cal, 1, k[1]);

  {  // a weight that is not finite
    const std::vector<float> wih(8, 0.0f), whh(16, 0.0f), bhh(8, 0.0f);
    std::vector<float> b(8, 0.0f);
    b[3] = NAN;
    REQUIRE(io::write_safetensors((d + "/nan.safetensors").c_str(),
                                  {{"lstm.weight_ih_l0", io::ElemType::f32, {8, 1}, wih.data()},
                                   {"lstm.weight_hh_l0", io::ElemType::f32, {8, 2}, whh.data()},
                                   {"lstm.bias_ih_l0", io::ElemType::f32, {8}, b.data()},
                                   {"lstm.bias_hh_l0", io::ElemType::f32, {8}, bhh.data()}},
                                  {{"mode", "lstm"}}) == RNNCORE_OK);
    refused("quantize --weights " + d + "/nan.safetensors" + cal, 1, "a weight is nan; a model to quantize must be finite");
  }
  const std::string w = "quantize --weights " + src(kData + "lstm_I8_H24.safetensors") + " --output " + out + " --calibration ";
  const std::int64_t wrong_i[3] = {5, 2, 7}, empty[3] = {0, 4, 8}, rank2[2] = {5, 8}, ok[3] = {5, 2, 8};
  std::vector<float> zeros(80, 0.0f);
  REQUIRE(io::write_npy((d + "/i7.npy").c_str(), io::ElemType::f32, wrong_i, 3, zeros.data()) == RNNCORE_OK);
  refused(w + d + "/i7.npy", 1, "expected shape [T, B, 8] (time-major; --batch-first for [B, T, I]), found [5, 2, 7]");
  refused(w + d + "/i7.npy --batch-first", 1, "expected shape [B, T, 8] (batch-first), found [5, 2, 7]");
  REQUIRE(io::write_npy((d + "/empty.npy").c_str(), io::ElemType::f32, empty, 3, zeros.data()) == RNNCORE_OK);
  refused(w + d + "/empty.npy", 1, "no data (shape [0, 4, 8])");
  REQUIRE(io::write_npy((d + "/r2.npy").c_str(), io::ElemType::f32, rank2, 2, zeros.data()) == RNNCORE_OK);
  refused(w + d + "/r2.npy", 1, "found [5, 8]");
  std::vector<std::int8_t> ints(80, 0);
  REQUIRE(io::write_npy((d + "/int.npy").c_str(), io::ElemType::i8, ok, 3, ints.data()) == RNNCORE_OK);
  refused(w + d + "/int.npy", 1, "expected float32 input");
  zeros[17] = NAN;
  REQUIRE(io::write_npy((d + "/nan.npy").c_str(), io::ElemType::f32, ok, 3, zeros.data()) == RNNCORE_OK);
  refused(w + d + "/nan.npy", 1, "element 17 is nan; calibration data must be finite");
  refused(w + d + "/missing.npy", 1, "missing.npy");
  refused(w + src(kData + "calib.npy") + " --eval " + d + "/i7.npy", 1, "i7.npy: expected shape [T, B, 8]");

  // usage errors: exit 2
  refused("quantize --weights " + src(kData + "lstm_I8_H24.safetensors") + " --output " + out, 2, "--calibration is required");
  refused(w + src(kData + "calib.npy") + " --carry-state 3", 2, "--carry-state 3 does not divide the calibration's 4 rows");
  refused(w + src(kData + "calib.npy") + " --cell-clip -1", 2, "--cell-clip");
  const Result help = run("quantize --help");
  CHECK(help.code == 0);
  for (const char* option : {"--weights M.safetensors REQUIRED", "--calibration X.npy REQUIRED", "--output Q.safetensors REQUIRED",
                             "--eval X2.npy", "--batch-first", "--carry-state N=0", "--cell-clip", "--format"})
    CHECK_MESSAGE(help.out.find(option) != std::string::npos, option);
  CHECK(run("help quantize").out == help.out);
  CHECK(run("help").out.find("quantize") != std::string::npos);
}

TEST_CASE("quantize: a cell scale outside 2^-15 .. 2^-9 is clamped with a note; an all-zero input range") {
  // nn.LSTM(1, 2) with zero weights: the gates are their biases. i = g ≈ 1 and f ≈ 1 make c grow by
  // about 1 a step (|c| ≈ 100 after 100 steps: 2^-8 wanted, 2^-9 the coarsest); i ≈ 0 keeps
  // |c| ≈ 2e-7 (2^-37 wanted, 2^-15 the finest that keeps tanh of the cell). The calibration input
  // is all zeros: scale 1, zero point −128, as TFLite's quantizer gives an empty range.
  const std::string d = temp_dir();
  const int H = 2, T = 100, B = 1;
  const std::vector<float> wih(4 * H, 0.0f), whh(4 * H * H, 0.0f), bhh(4 * H, 0.0f);
  std::vector<float> x(T * B, 0.0f);
  const std::int64_t xshape[3] = {T, B, 1};
  REQUIRE(io::write_npy((d + "/zeros.npy").c_str(), io::ElemType::f32, xshape, 3, x.data()) == RNNCORE_OK);
  for (const float bi : {20.0f, -20.0f}) {
    INFO("input gate bias " << bi);
    std::vector<float> bih = {bi, bi, 20.0f, 20.0f, 20.0f, 20.0f, 0.0f, 0.0f};  // i, f, g, o
    const std::string w = d + "/grow.safetensors", q = d + "/grow_q.safetensors";
    REQUIRE(io::write_safetensors(w.c_str(),
                                  {{"lstm.weight_ih_l0", io::ElemType::f32, {4 * H, 1}, wih.data()},
                                   {"lstm.weight_hh_l0", io::ElemType::f32, {4 * H, H}, whh.data()},
                                   {"lstm.bias_ih_l0", io::ElemType::f32, {4 * H}, bih.data()},
                                   {"lstm.bias_hh_l0", io::ElemType::f32, {4 * H}, bhh.data()}},
                                  {{"mode", "lstm"}}) == RNNCORE_OK);
    const Result r = run("quantize --weights " + w + " --calibration " + d + "/zeros.npy --output " + q);
    INFO(r.out);
    INFO(r.err);
    REQUIRE(r.code == 0);
    const io::SafeTensors f = read_file(q);
    CHECK(meta_f32(f, "input_scale") == 1.0f);
    CHECK(meta_int(f, "input_zp") == -128);
    if (bi > 0) {
      CHECK(meta_f32(f, "cell_scale") == std::ldexp(1.0f, -9));
      CHECK(r.err.find("would take the cell scale 2^-8; the integer LSTM takes 2^-30 .. 2^-9, so it is 2^-9 "
                       "(cell states beyond 64 saturate)") != std::string::npos);
    } else {  // finer than 2^-15 the integer LSTM (as LiteRT's) computes no tanh of the cell
      CHECK(meta_f32(f, "cell_scale") == std::ldexp(1.0f, -15));
      CHECK(r.err.find("would take the cell scale 2^-37 (TFLite's converter's choice); finer than 2^-15 the integer "
                       "LSTM computes no tanh of the cell (LiteRT takes the input gate in its place), so it is 2^-15") !=
            std::string::npos);
    }
    CHECK(r.out.find("accuracy on ") != std::string::npos);
  }
}

TEST_CASE("quantize: io::quantize, called as a library function, writes the command's file and reports what it prints") {
  const std::string d = temp_dir(), m = src("examples/models/");
  const Result r = run("quantize --weights " + m + "lstm_small.safetensors --calibration " + m +
                       "lstm_small_input.npy --eval " + m + "lstm_small_input.npy --output " + d + "/cmd.safetensors");
  REQUIRE(r.code == 0);
  io::QuantizeOptions o;
  o.weights = m + "lstm_small.safetensors";
  o.calibration = o.eval = m + "lstm_small_input.npy";
  o.output = d + "/lib.safetensors";
  int notes = 0;
  o.note = [&notes](const std::string&) { ++notes; };
  io::QuantizeReport report;
  std::string err;
  REQUIRE_MESSAGE(io::quantize(o, &report, &err) == Status::ok, err);
  CHECK(slurp(d + "/lib.safetensors") == slurp(d + "/cmd.safetensors"));  // the same bytes
  CHECK(r.out.find("model: " + report.model + "\n") != std::string::npos);
  CHECK(report.quantization.size() == 4);  // two lines for each of the two layers
  for (const std::string& line : report.quantization) CHECK(r.out.find(line + "\n") != std::string::npos);
  REQUIRE(report.has_eval);
  const io::QuantizeAccuracy& a = report.calibration_accuracy;
  CHECK(a.values == static_cast<std::size_t>(a.T * a.B * a.H));
  CHECK(a.H == 32);
  CHECK(printed(r.out, "(calibration data", "snr_db=") == doctest::Approx(a.snr_db).epsilon(1e-3));
  CHECK(printed(r.out, "(calibration data", "max_abs_err=") == doctest::Approx(a.max_abs).epsilon(1e-3));
  CHECK(report.eval_accuracy.snr_db == a.snr_db);  // the same data
  CHECK(a.snr_db > 30.0);
  CHECK(notes == 0);
  // a bad option is an option error (the command's exit 2), a model it cannot hold is not
  o.carry_state = 3;
  CHECK(io::quantize(o, &report, &err) != Status::ok);
  CHECK(report.option_error);
  CHECK(err == "--carry-state 3 does not divide the calibration's 4 rows");
  o.carry_state = 0;
  o.weights = d + "/lib.safetensors";
  CHECK(io::quantize(o, &report, &err) == Status::unsupported);
  CHECK(!report.option_error);
  CHECK(err.find("already an int8 LSTM model") != std::string::npos);
}
