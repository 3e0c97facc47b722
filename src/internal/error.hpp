// Error reporting inside rnncore: every failure returns a status code and leaves a detail line
// for rnncore_last_error_detail(). TFLite-Micro-style ENSURE macros keep call sites short.
#ifndef RNNCORE_SRC_INTERNAL_ERROR_HPP
#define RNNCORE_SRC_INTERNAL_ERROR_HPP

#include "rnncore/rnncore.hpp"

namespace rnncore {
namespace detail {

// Records the detail line of the current failure (printf-style, truncated to 255 chars) and returns `code`.
rnncore_status fail(rnncore_status code, const char* fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

// Same, typed for the C++ API.
template <class... Args>
inline Status fail_status(Status code, const char* fmt, Args... args) {
  return static_cast<Status>(fail(static_cast<rnncore_status>(code), fmt, args...));
}

// Clears the detail line (called at the start of public entry points).
void clear_error();

}  // namespace detail
}  // namespace rnncore

// Returns `code` with a detail line when `cond` is false.
#define RNNCORE_ENSURE(cond, code, ...)                                   \
  do {                                                                     \
    if (!(cond)) return ::rnncore::detail::fail_status((code), __VA_ARGS__); \
  } while (0)

// Propagates a non-ok Status.
#define RNNCORE_RETURN_IF_ERROR(expr)                  \
  do {                                                 \
    const ::rnncore::Status rnncore_status_ = (expr);  \
    if (rnncore_status_ != ::rnncore::Status::ok) return rnncore_status_; \
  } while (0)

#endif  // RNNCORE_SRC_INTERNAL_ERROR_HPP
