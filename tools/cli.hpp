// Command-line parsing for the rnncore tool, on CLI11: each command is a CLI::App of its own
// (`rnncore run`, `rnncore bench`, ...) whose options bind to typed variables with their checks.
// A usage error prints one line naming the problem and a hint where the options are, and exits 2;
// --help prints the command's options with their defaults and exits 0.
#ifndef RNNCORE_TOOLS_CLI_HPP
#define RNNCORE_TOOLS_CLI_HPP

#include <CLI/CLI.hpp>

#include "rnncore/io/model.hpp"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

namespace rnncore {
namespace tools {

constexpr int kUsageError = 2;
constexpr int kError = 1;

/// A usage error of `rnncore <command>`: one line naming the problem, one with the hint.
inline int usage_error(const std::string& command, const std::string& what) {
  std::fprintf(stderr, "rnncore %s: %s\nrun 'rnncore %s --help' for the options\n", command.c_str(), what.c_str(),
               command.c_str());
  return kUsageError;
}

/// Any other error: one line, exit 1.
inline int error(const std::string& line) {
  std::fprintf(stderr, "rnncore: error: %s\n", line.c_str());
  return kError;
}

/// The app of `rnncore <command>`: defaults shown in --help, an option given twice is an error.
inline void setup_app(CLI::App& app) {
  app.option_defaults()->always_capture_default()->multi_option_policy(CLI::MultiOptionPolicy::Throw);
  app.get_formatter()->column_width(40);
}

/// Parses argv[2..] for `rnncore <command>` (argv[1]); returns -1 to go on, else the exit status
/// (0 after printing --help, kUsageError after a usage error).
inline int parse_command(CLI::App& app, const std::string& command, int argc, char** argv) {
  try {
    app.parse(argc - 1, argv + 1);  // argv[1], the command, stands for the program name
  } catch (const CLI::CallForHelp&) {
    std::fputs(app.help().c_str(), stdout);
    return 0;
  } catch (const CLI::ParseError& e) {
    return usage_error(command, e.what());
  }
  return -1;
}

/// Whether option `name` ("--seed") was given.
inline bool given(const CLI::App& app, const char* name) { return app.count(name) > 0; }

/// Refuses `--threads N` above the machine's core count (std::thread::hardware_concurrency; not
/// checked where it is unknown) unless --oversubscribe: the team of a run meets at a spin barrier
/// every step, so a thread without a core of its own stalls every step for a scheduler time slice
/// (4 threads on 2 cores: 11 ms per run instead of 0.005 ms). Returns -1 to go on, else kUsageError.
inline int check_threads(const std::string& command, long long threads, bool oversubscribe) {
  const unsigned cores = std::thread::hardware_concurrency();
  if (oversubscribe || cores == 0 || threads <= static_cast<long long>(cores)) return -1;
  return usage_error(command, "--threads " + std::to_string(threads) + " is more than the " + std::to_string(cores) +
                                  " cores of this machine: the threads meet at a barrier every step, so a thread "
                                  "without a core stalls every step (4 threads on 2 cores: 11 ms per run instead of "
                                  "0.005 ms); use --threads " + std::to_string(cores) +
                                  " or fewer, or add --oversubscribe to run anyway");
}

/// An integer in [lo, hi] (CLI11's Range, with the range in the option's description instead of
/// its type column).
inline CLI::Validator int_range(long long lo, long long hi) {
  return CLI::Validator(
      [lo, hi](std::string& s) -> std::string {
        char* end = nullptr;
        errno = 0;
        const long long v = std::strtoll(s.c_str(), &end, 10);
        if (s.empty() || *end != '\0' || errno != 0 || v < lo || v > hi)
          return "needs an integer in " + std::to_string(lo) + ".." + std::to_string(hi) + ", got '" + s + "'";
        return std::string();
      },
      "");
}

/// A non-negative integer up to 2^64 - 1, decimal or 0x hexadecimal (seeds, step counters).
inline CLI::Validator unsigned_64() {
  return CLI::Validator(
      [](std::string& s) -> std::string {
        char* end = nullptr;
        errno = 0;
        (void)std::strtoull(s.c_str(), &end, 0);
        if (s.empty() || s[0] == '-' || *end != '\0' || errno != 0)
          return "needs a non-negative integer, got '" + s + "'";
        return std::string();
      },
      "");
}

/// A real number in [lo, hi] (`open_hi`: [lo, hi); `open_lo`: (lo, hi]).
inline CLI::Validator real_range(double lo, double hi, bool open_lo = false, bool open_hi = false) {
  return CLI::Validator(
      [=](std::string& s) -> std::string {
        char* end = nullptr;
        const double v = std::strtod(s.c_str(), &end);
        const bool ok = !s.empty() && *end == '\0' && (open_lo ? v > lo : v >= lo) && (open_hi ? v < hi : v <= hi);
        if (ok) return std::string();
        char range[96];
        std::snprintf(range, sizeof range, "%c%g, %g%c", open_lo ? '(' : '[', lo, hi, open_hi ? ')' : ']');
        return std::string("needs a number in ") + range + ", got '" + s + "'";
      },
      "");
}

/// One of `names` (the list is in the option's type column, e.g. "lstm|gru|rnn_tanh|rnn_relu").
inline CLI::Validator one_of(std::vector<std::string> names) {
  return CLI::Validator(
      [names](std::string& s) -> std::string {
        for (const std::string& n : names)
          if (s == n) return std::string();
        std::string list;
        for (const std::string& n : names) list += (list.empty() ? "" : ", ") + n;
        return "needs one of " + list + ", got '" + s + "'";
      },
      "");
}

/// The options that say how to read a model file (run, grad, export-c): empty means inferred.
/// Binds --format, --prefix, --mode, --gru, --forget-bias and --input-mode to the loader's hints; after parsing,
/// model_hints() completes them with what only the parse knows.
inline void add_model_hint_options(CLI::App& app, io::ModelHints& o) {
  const char* g = "model (inferred from tensor names, shapes and safetensors metadata unless given)";
  app.add_option("--format", o.format, "weight layout (default: detected)")
      ->check(one_of({"pytorch", "onnx", "keras", "tensorflow", "canonical"}))
      ->type_name("pytorch|onnx|keras|tensorflow|canonical")
      ->group(g);
  app.add_option("--prefix", o.prefix, "tensor-name prefix, ending with its separator\n(default: detected)")
      ->type_name("NAME.")
      ->group(g);
  app.add_option("--mode", o.mode, "cell (default: metadata 'mode', else the gate count)")
      ->check(one_of({"lstm", "gru", "rnn_tanh", "rnn_relu"}))
      ->type_name("lstm|gru|rnn_tanh|rnn_relu")
      ->group(g);
  app.add_option("--gru", o.gru, "GRU variant (default: metadata, else the format's own)")
      ->check(one_of({"reset-after", "reset-before"}))
      ->type_name("reset-after|reset-before")
      ->group(g);
  app.add_option("--forget-bias", o.forget_bias,
                 "TF LSTMCell forget_bias added to the f gate\n(tensorflow format; default: metadata, else 0)")
      ->type_name("X")
      ->group(g);
  app.add_option("--input-mode", o.input_mode, "check layer 0's input mode (canonical files)")
      ->check(one_of({"linear", "skip", "auto_select"}))
      ->type_name("linear|skip|auto_select")
      ->group(g);
}

/// The hints after parsing: an empty --prefix given on purpose differs from no --prefix.
inline io::ModelHints model_hints(const CLI::App& app, io::ModelHints hints) {
  hints.prefix_given = given(app, "--prefix");
  return hints;
}

/// --threads N and --oversubscribe (check_threads decides after parsing).
inline void add_thread_options(CLI::App& app, long long& threads, bool& oversubscribe, const char* group) {
  app.add_option("--threads", threads, "worker threads, at most the machine's cores (1..1024)")
      ->check(int_range(1, 1024))
      ->type_name("N")
      ->group(group);
  app.add_flag("--oversubscribe", oversubscribe, "allow --threads above the machine's core count")->group(group);
}

}  // namespace tools
}  // namespace rnncore

#endif  // RNNCORE_TOOLS_CLI_HPP
