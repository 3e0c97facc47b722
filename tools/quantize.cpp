// `rnncore quantize` (tools/quantize.hpp): options in, io::quantize, its report out.
#include "quantize.hpp"

#include <cstdio>
#include <string>

namespace rnncore {
namespace tools {

namespace {

void print_accuracy(const char* label, const io::QuantizeAccuracy& a) {
  std::printf("accuracy on %s (%s, y [T=%lld, B=%lld, H=%lld], %zu values): max_abs_err=%.4g rms_err=%.4g "
              "max_err/range=%.4g (range %.4g) snr_db=%.2f\n",
              a.data.c_str(), label, static_cast<long long>(a.T), static_cast<long long>(a.B), static_cast<long long>(a.H),
              a.values, a.max_abs, a.rms, a.range > 0 ? a.max_abs / a.range : 0.0, a.range, a.snr_db);
}

// What the quantization reported, as far as it went (a failure after the calibration has the
// model's and the calibration's lines).
void print_report(const io::QuantizeReport& r) {
  if (!r.model.empty()) std::printf("model: %s\n", r.model.c_str());
  if (!r.calibration.empty()) std::printf("calibration: %s\n", r.calibration.c_str());
  for (const std::string& line : r.quantization) std::printf("%s\n", line.c_str());
  if (r.written.empty()) return;
  std::printf("%s\n", r.written.c_str());
  print_accuracy("calibration data", r.calibration_accuracy);
  if (r.has_eval) print_accuracy("evaluation data", r.eval_accuracy);
}

}  // namespace

void define_quantize(CLI::App& app, io::QuantizeOptions& o) {
  setup_app(app);
  app.description(
      "Post-training quantization of a float LSTM (one layer or a stack of layers, unidirectional\n"
      "or bidirectional (PyTorch's bidirectional=True: the directions' h concatenated), without\n"
      "projection or peepholes, in any layout `rnncore run` loads) to an int8 LSTM model file\n"
      "(format tflite_int8, LiteRT's 8x8_16 integer LSTM) that `rnncore run` runs. Runs the float\n"
      "model on the calibration data a step at a time, takes the ranges of x and of each layer's h\n"
      "and |c| (a bidirectional layer's per direction: layer by layer, the backward direction on its\n"
      "input reversed in time), and chooses the quantization as TFLite's converter does for a Keras\n"
      "LSTM: x and h asymmetric int8 (a layer's input is the previous layer's output; a\n"
      "bidirectional layer's two directions share one h quantization over both ranges, as the\n"
      "concatenation copies their bytes; each direction has its own weights and cell scale),\n"
      "weights symmetric int8 per gate (max|W|/127; --per-channel: per unit), int32 biases, the\n"
      "cell state int16 with scale 2^(ceil(log2 max|c|) - 15) (kept in 2^-15 .. 2^-9: finer, the\n"
      "integer LSTM computes no tanh of the cell). Then runs\n"
      "both models on the calibration data (and --eval) and prints the error of the int8 output\n"
      "against the float output. The int8 model takes float32 input [B, T, I] (batch-major, as\n"
      "the TFLite op) and gives int8 y [B, T, H] (bidirectional: [B, T, 2H]); docs/int8.md.");
  add_model_hint_options(app, o.hints);
  app.add_option("--config", o.config,
                 "the float model's stack (the JSON schema: docs/config.md), where\nthe weights alone do not say it "
                 "(a Keras stack whose layers\ndiffer in width); the weights must match it")
      ->type_name("STACK.json")
      ->excludes(app.get_option("--mode"))
      ->excludes(app.get_option("--gru"))
      ->group("model (inferred from tensor names, shapes and safetensors metadata unless given)");
  const char* io = "inputs and outputs";
  app.add_option("--weights", o.weights, "the float model (LSTM layers, and a Linear/Dense head;\ntensor names and shapes say what it is)")
      ->required()
      ->type_name("M.safetensors")
      ->group(io);
  app.add_option("--calibration", o.calibration,
                 "calibration input x [T, B, I] (time-major, as `rnncore run`\ntakes it) or [B, T, I] (--batch-first); after an Embedding,\ntoken ids [T, B] (or [B, T])")
      ->required()
      ->type_name("X.npy")
      ->group(io);
  app.add_option("--output", o.output, "the int8 model to write (format tflite_int8)")
      ->required()
      ->type_name("Q.safetensors")
      ->group(io);
  app.add_option("--eval", o.eval, "also report the error on this input (held-out data,\nlaid out as --calibration)")
      ->type_name("X2.npy")
      ->group(io);
  app.add_flag("--batch-first", o.batch_first, "the .npy inputs are [B, T, I] (default: time-major)")->group(io);
  app.add_option("--carry-state", o.carry_state,
                 "calibrate as TFLite's converter does with a representative\n"
                 "dataset of N-row batches: the rows in groups of N, each group\n"
                 "starting from the previous group's final h and c (default 0:\n"
                 "every row from a zero state, as the model runs); B % N == 0")
      ->check(int_range(0, 1 << 24))
      ->type_name("N")
      ->group("calibration");
  app.add_option("--cell-clip", o.cell_clip,
                 "the int8 model's cell clip, which the float model also\n"
                 "calibrates with (default: the float model's, else none;\n"
                 "TFLite's converter writes 10 for a Keras LSTM; 0: none)")
      ->check(real_range(0.0, 1e30))
      ->type_name("C")
      ->default_str("the model's")
      ->group("calibration");
  app.add_flag("--per-channel", o.per_channel,
               "a weight scale per unit (each row of each gate's input and\n"
               "recurrent weights: max|row|/127) instead of per gate; rnncore's\n"
               "extension (TFLite's integer LSTM is per tensor): the file runs in\n"
               "`rnncore run`, the C API and export-c, not in LiteRT")
      ->group("calibration");
  app.add_option("--cell-range", o.cell_range,
                 "the steps whose |c| sets the cell scale: every step (the\n"
                 "default: no calibrated cell state saturates), or the last\n"
                 "step of each group of rows run together (--carry-state N;\n"
                 "else of the whole calibration), as TFLite's converter takes it:\n"
                 "its calibration sees the LSTM's cell state once per batch")
      ->check(one_of({"every-step", "batch-end"}))
      ->type_name("every-step|batch-end")
      ->group("calibration");
}

int cmd_quantize(int argc, char** argv) {
  CLI::App app{"", "rnncore quantize"};
  io::QuantizeOptions o;
  define_quantize(app, o);
  if (const int rc = parse_command(app, "quantize", argc, argv); rc >= 0) return rc;
  o.hints = model_hints(app, o.hints);
  o.set_cell_clip = given(app, "--cell-clip");
  o.note = [](const std::string& line) { std::fprintf(stderr, "rnncore: note: %s\n", line.c_str()); };
  o.progress = [](const std::string& line) { std::fprintf(stderr, "rnncore quantize: %s\n", line.c_str()); };
  io::QuantizeReport report;
  std::string err;
  const Status s = io::quantize(o, &report, &err);
  print_report(report);
  if (s == Status::ok) return 0;
  return report.option_error ? usage_error("quantize", err) : error(err);
}

}  // namespace tools
}  // namespace rnncore
