// Running the `rnncore` tool from a test as a user runs it: its exit status and what it printed.
// For the tests meson gives RNNCORE_TOOL (and RNNCORE_TOOL_WRAPPER, the emulator of a cross build,
// e.g. "qemu-aarch64 -L /usr/aarch64-linux-gnu"; empty on a native build).
#ifndef RNNCORE_TESTS_TOOL_RUN_HPP
#define RNNCORE_TESTS_TOOL_RUN_HPP

#include <sys/wait.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include <doctest/doctest.h>

namespace rnncore_test {

/// A scratch directory of this test process, made on first use.
inline std::string temp_dir() {
  static std::string dir;
  if (dir.empty()) {
    char tmpl[] = "/tmp/rnncore_test_XXXXXX";
    REQUIRE(mkdtemp(tmpl) != nullptr);
    dir = tmpl;
  }
  return dir;
}

/// A whole file as a string ("" if it cannot be read).
inline std::string slurp(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

/// What a run of the tool gave.
struct Result {
  int code = -1;  ///< exit status; 128 + the signal if one ended it
  std::string out, err;
};

/// Runs `rnncore <args>` (args as a shell would split them).
inline Result run(const std::string& args) {
  const char* tool = std::getenv("RNNCORE_TOOL");
  REQUIRE_MESSAGE(tool != nullptr, "RNNCORE_TOOL is not set (meson sets it)");
  const char* wrapper = std::getenv("RNNCORE_TOOL_WRAPPER");
  const std::string out = temp_dir() + "/stdout.txt", err = temp_dir() + "/stderr.txt";
  const std::string cmd = (wrapper != nullptr && *wrapper != '\0' ? std::string(wrapper) + " " : std::string()) + tool +
                          " " + args + " >" + out + " 2>" + err;
  const int status = std::system(cmd.c_str());
  Result r;
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.out = slurp(out);
  r.err = slurp(err);
  return r;
}

}  // namespace rnncore_test

#endif  // RNNCORE_TESTS_TOOL_RUN_HPP
