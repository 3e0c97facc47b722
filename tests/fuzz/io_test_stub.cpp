// Test-only stand-in for rnncore::detail::fail and rnncore_last_error_detail,
// whose real definitions live in src/status.cpp. Linked only into the I/O unit
// tests and the I/O fuzzer so that they do not depend on the rest of the library.
#include <cstdarg>
#include <cstdio>

#include "src/io/json.hpp"

namespace {
char g_last_detail[256] = "";
}  // namespace

namespace rnncore {
namespace detail {

rnncore_status fail(rnncore_status code, const char* fmt, ...) {
  va_list args;
  va_start(args, fmt);
  std::vsnprintf(g_last_detail, sizeof g_last_detail, fmt, args);
  va_end(args);
  return code;
}

}  // namespace detail
}  // namespace rnncore

extern "C" const char* rnncore_last_error_detail(void) { return g_last_detail; }
