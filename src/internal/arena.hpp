// Buffer layouts as a sequence of aligned regions: the one allocator-free "bump" used by every
// backend's plan (src/plan.cpp for the CPU, src/gpu/host/plan.hpp for the GPU).
#ifndef RNNCORE_SRC_INTERNAL_ARENA_HPP
#define RNNCORE_SRC_INTERNAL_ARENA_HPP

#include <cstddef>
#include <cstdint>

#include "rnncore/rnncore.hpp"

namespace rnncore {
namespace detail {

/// Largest buffer a plan may request: keeps every offset computation far from overflow, and every
/// size representable in std::size_t on 32-bit targets.
constexpr std::uint64_t kMaxBufferBytes = sizeof(std::size_t) >= 8 ? std::uint64_t{1} << 46 : std::uint64_t{1} << 31;

/// Appends regions to a buffer, each starting at a multiple of kAlignment (or of a smaller
/// alignment the layout asks for: an integer stack's one-thread workspace); records overflow
/// (a region or total beyond kMaxBufferBytes) instead of wrapping.
class Arena {
 public:
  /// Regions start at multiples of `align` (kAlignment, or less where nothing needs more).
  explicit Arena(std::uint64_t start, std::uint64_t align = kAlignment) : size_(start), align_(align) {}
  /// Offset of a new region of `count` elements of `elem_bytes` bytes.
  std::size_t take(std::uint64_t count, std::uint64_t elem_bytes) {
    if (count != 0 && elem_bytes > kMaxBufferBytes / count) overflow_ = true;
    const std::uint64_t bytes = overflow_ ? 0 : count * elem_bytes;
    const std::uint64_t at = size_;
    size_ = (size_ + bytes + align_ - 1) / align_ * align_;
    if (size_ > kMaxBufferBytes) overflow_ = true;
    return static_cast<std::size_t>(at);
  }
  /// Bytes so far (meaningless once overflow() is true).
  std::size_t size() const { return static_cast<std::size_t>(size_); }
  bool overflow() const { return overflow_; }

 private:
  std::uint64_t size_;
  std::uint64_t align_;
  bool overflow_ = false;
};

}  // namespace detail
}  // namespace rnncore

#endif  // RNNCORE_SRC_INTERNAL_ARENA_HPP
