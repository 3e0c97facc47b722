// rnncore — post-training quantization of a float LSTM (one layer or a stack, unidirectional or
// bidirectional layers, and a Dense head after them, as io::load_weights reads them) to the integer LSTM file that
// io::Int8Runner and `rnncore run` run (format tflite_int8, docs/int8.md): calibrates the ranges
// on data, chooses the scales as TFLite's converter does for a Keras LSTM, writes the file and
// measures the accuracy lost against the float model. `rnncore quantize` is this function.
//
//   rnncore::io::QuantizeOptions o;
//   o.weights = "lstm.safetensors"; o.calibration = "calib.npy"; o.output = "q.safetensors";
//   rnncore::io::QuantizeReport report;
//   std::string err;
//   if (rnncore::io::quantize(o, &report, &err) != rnncore::Status::ok) ...
//   report.calibration_accuracy.snr_db ...
#ifndef RNNCORE_IO_QUANTIZE_HPP
#define RNNCORE_IO_QUANTIZE_HPP

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "rnncore/rnncore.hpp"
#include "rnncore/io/model.hpp"

namespace rnncore {
namespace io {

/// What to quantize and how.
struct QuantizeOptions {
  ModelHints hints;         ///< how to read the float model (empty fields: inferred)
  std::string weights;      ///< the float model (safetensors)
  std::string calibration;  ///< calibration input .npy: float [T, B, I] (time-major) or [B, T, I] (batch_first)
  std::string output;       ///< the int8 model file to write
  std::string eval;         ///< held-out input laid out as the calibration's ("": none)
  std::string config;       ///< the float model's stack configuration (docs/config.md; "": from the weights)
  bool batch_first = false;   ///< the .npy inputs are [B, T, I]
  long long carry_state = 0;  ///< 0: every calibration row from a zero state; N: groups of N rows carry it
  bool set_cell_clip = false;  ///< replace every layer's cell clip by `cell_clip` (the float model calibrates with it)
  double cell_clip = 0.0;      ///< with set_cell_clip; 0: none
  std::string cell_range = "every-step";  ///< every-step | batch-end: the steps whose |c| sets the cell scale
  bool per_channel = false;  ///< a weight scale per unit (row) instead of per gate (rnncore's extension)
  /// Called with each note (a default chosen, a scale kept in range), one line without newline; may be empty.
  std::function<void(const std::string&)> note;
  /// Called every 2 s of a long run with a progress line; may be empty.
  std::function<void(const std::string&)> progress;
};

/// The error of the int8 model's dequantized output against the float model's on one data set.
struct QuantizeAccuracy {
  std::string data;              ///< the .npy
  std::int64_t T = 0, B = 0, H = 0;  ///< y's steps, rows and width
  std::size_t values = 0;        ///< T·B·H
  double max_abs = 0, rms = 0;   ///< largest and root-mean-square error
  double range = 0;              ///< max − min of the float output
  double snr_db = 0;             ///< 10·log10(Σ y² / Σ error²); infinite without error
};

/// What quantize did.
struct QuantizeReport {
  /// The float model: "LSTM, one unidirectional layer, input 8, hidden 24 (pytorch weights, prefix 'lstm.')".
  std::string model;
  /// The calibration: "calib.npy, T=.. B=.. (.. steps of a row), 0.012 s: x in [lo, hi], h in [..], max|c| ..".
  std::string calibration;
  /// The quantization chosen, two lines per layer and direction (scales, zero points, cell scale, clip).
  std::vector<std::string> quantization;
  /// The file written: "wrote q.safetensors: int8 LSTM (format tflite_int8), float32 input [B, T, I] ...".
  std::string written;
  QuantizeAccuracy calibration_accuracy;  ///< on the calibration data
  bool has_eval = false;                  ///< eval_accuracy holds the eval data's
  QuantizeAccuracy eval_accuracy;
  /// On failure: the options do not fit the model or the data (a command line's usage error), as
  /// opposed to a file that cannot be read, a model the int8 LSTM cannot hold, ...
  bool option_error = false;
};

/// Quantizes options.weights to options.output. On failure returns the status and puts one line in
/// *error (the file, the tensor or option, expected vs found); a file written with a quantization
/// the integer LSTM refuses is removed again.
Status quantize(const QuantizeOptions& options, QuantizeReport* report, std::string* error);

}  // namespace io
}  // namespace rnncore

#endif  // RNNCORE_IO_QUANTIZE_HPP
