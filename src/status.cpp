// Status messages and the per-thread detail line.
#include <cstdarg>
#include <cstdio>
#include <cstring>

#include "src/internal/error.hpp"

namespace {

// The detail of the last failure. Terse builds (RNNCORE_TERSE_ERRORS, the firmware default) keep
// the message template itself, e.g. "forward: batch = %d, plan max_batch = %d": no printf, which
// in newlib-nano also drags in malloc. Others format it into a line.
#if defined(RNNCORE_TERSE_ERRORS)
using Detail = const char*;
#else
using Detail = char[256];
#endif
// Builds without threads keep one; hosts keep one per thread.
#if defined(RNNCORE_NO_THREADS)
Detail g_detail;
#else
thread_local Detail g_detail;
#endif

}  // namespace

extern "C" const char* rnncore_status_message(rnncore_status status) {
  switch (status) {
    case RNNCORE_OK: return "ok";
    case RNNCORE_ERR_NULL_POINTER: return "a required pointer argument is null";
    case RNNCORE_ERR_INVALID_ENUM: return "an enum argument is out of range";
    case RNNCORE_ERR_INVALID_SIZE: return "a size is zero, negative or too large";
    case RNNCORE_ERR_SKIP_NEEDS_EQUAL_SIZES: return "input_mode skip needs input_size == hidden_size";
    case RNNCORE_ERR_UNSUPPORTED: return "this combination is not supported by the chosen backend or build";
    case RNNCORE_ERR_BATCH_TOO_LARGE: return "batch exceeds the plan's max_batch";
    case RNNCORE_ERR_SEQ_TOO_LONG: return "seq_len exceeds the plan's max_seq_len";
    case RNNCORE_ERR_BAD_LENGTH: return "a sequence length is negative or exceeds seq_len";
    case RNNCORE_ERR_BUFFER_TOO_SMALL: return "a buffer is smaller than the plan requires";
    case RNNCORE_ERR_MISALIGNED: return "a buffer is not aligned to 64 bytes";
    case RNNCORE_ERR_WEIGHTS_NOT_PACKED: return "the packed-weight buffer was not packed for this plan";
    case RNNCORE_ERR_TENSOR_MISSING: return "a tensor is missing";
    case RNNCORE_ERR_TENSOR_SHAPE: return "a tensor has the wrong shape";
    case RNNCORE_ERR_TENSOR_DTYPE: return "a tensor has an unsupported element type";
    case RNNCORE_ERR_TENSOR_UNEXPECTED: return "a tensor does not belong to the model";
    case RNNCORE_ERR_BAD_PROBABILITY: return "a keep or dropout probability is out of range";
    case RNNCORE_ERR_WIDTH_MISMATCH: return "a residual connection joins tensors of different widths";
    case RNNCORE_ERR_BACKEND_UNAVAILABLE: return "the requested backend is not available";
    case RNNCORE_ERR_IO: return "a file could not be read or written";
    case RNNCORE_ERR_FORMAT: return "a file is truncated or malformed";
    case RNNCORE_ERR_OUT_OF_MEMORY: return "out of memory";
    case RNNCORE_ERR_INTERNAL: return "internal error (a bug in rnncore)";
    case RNNCORE_ERR_DEVICE: return "the GPU runtime reported an error";
    case RNNCORE_STATUS_COUNT_: break;
  }
  return "unknown status code";
}

#if defined(RNNCORE_TERSE_ERRORS)
extern "C" const char* rnncore_last_error_detail(void) { return g_detail != nullptr ? g_detail : ""; }
#else
extern "C" const char* rnncore_last_error_detail(void) { return g_detail; }
#endif

namespace rnncore {
namespace detail {

#if defined(RNNCORE_TERSE_ERRORS)
rnncore_status fail(rnncore_status code, const char* fmt, ...) {
  g_detail = fmt;
  return code;
}

void clear_error() { g_detail = nullptr; }
#else
// Formatted into a line of its own first: a caller may pass the last detail as an argument
// (a wrapping "…: %s" of an inner failure), which vsnprintf must not read while writing over it.
rnncore_status fail(rnncore_status code, const char* fmt, ...) {
  Detail line;
  va_list args;
  va_start(args, fmt);
  std::vsnprintf(line, sizeof line, fmt, args);
  va_end(args);
  std::memcpy(g_detail, line, sizeof line);
  return code;
}

void clear_error() { g_detail[0] = '\0'; }
#endif

}  // namespace detail
}  // namespace rnncore
