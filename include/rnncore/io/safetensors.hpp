// rnncore — host-side file formats: the safetensors format.
//
// Layout: an 8-byte little-endian header length N, N bytes of UTF-8 JSON
// mapping tensor names to {"dtype", "shape", "data_offsets": [begin, end]}
// (offsets relative to the first byte after the header) plus an optional
// "__metadata__" object of strings, then the tensor data.
#ifndef RNNCORE_IO_SAFETENSORS_HPP
#define RNNCORE_IO_SAFETENSORS_HPP

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "rnncore/io/npy.hpp"  // ElemType, Array, converters

namespace rnncore {
namespace io {

/// Largest header the reader accepts (the limit of the reference implementation).
constexpr std::uint64_t kMaxSafetensorsHeaderBytes = 100000000;

/// One tensor described by a safetensors header.
struct TensorEntry {
  std::string name;
  ElemType type = ElemType::f32;
  std::vector<std::int64_t> shape;
  std::uint64_t begin = 0, end = 0;  ///< byte range relative to the start of the data section
};

/// A parsed safetensors file; it owns the file bytes, tensors point into them.
struct SafeTensors {
  std::string path;                                          ///< for error messages
  std::vector<std::uint8_t> file;                            ///< the whole file
  std::size_t data_start = 0;                                ///< offset of the data section in `file` (8 + N)
  std::vector<TensorEntry> tensors;                          ///< in header order
  std::vector<std::pair<std::string, std::string>> metadata; ///< "__metadata__", in header order

  /// Tensor named `name`, or nullptr if absent.
  const TensorEntry* find(const std::string& name) const;
  /// First data byte of `entry` (a pointer into `file`; no alignment guarantee).
  const std::uint8_t* data(const TensorEntry& entry) const;
  /// Metadata value for `key`, or nullptr if absent.
  const std::string* meta(const std::string& key) const;
  /// Copies tensor `name` out; RNNCORE_ERR_TENSOR_MISSING (with detail) if absent.
  rnncore_status array(const std::string& name, Array* out) const;
};

/// Parses a safetensors file held in memory (the vector is moved into `*out`).
/// Errors: RNNCORE_ERR_FORMAT (truncated, bad header length, invalid JSON,
/// duplicate names, missing/extra/mistyped fields, negative or overflowing
/// dims, rank > 8, data_offsets that disagree with the shape, fall outside the
/// data or overlap another tensor, non-string metadata), RNNCORE_ERR_TENSOR_DTYPE
/// (unknown dtype). Gaps between tensors are tolerated. `*out` is written only
/// on success.
rnncore_status parse_safetensors(std::vector<std::uint8_t> file, const char* name_for_errors, SafeTensors* out);

/// Reads and parses a safetensors file; RNNCORE_ERR_IO if it cannot be read.
rnncore_status read_safetensors(const char* path, SafeTensors* out);

/// One tensor for write_safetensors; `data` holds its elements in C order.
struct TensorToWrite {
  std::string name;
  ElemType type = ElemType::f32;
  std::vector<std::int64_t> shape;
  const void* data = nullptr;
};

/// Serialises tensors (in the given order, packed without gaps) and metadata
/// into `*out`. The header is compact JSON with "__metadata__" first, padded
/// with spaces so that the data section starts at a multiple of 8 bytes.
/// Errors: RNNCORE_ERR_FORMAT (duplicate or non-UTF-8 names, a tensor named
/// "__metadata__"), RNNCORE_ERR_INVALID_SIZE (bad shape), RNNCORE_ERR_NULL_POINTER
/// (missing data), RNNCORE_ERR_INVALID_ENUM (bad type).
rnncore_status encode_safetensors(const std::vector<TensorToWrite>& tensors,
                                  const std::vector<std::pair<std::string, std::string>>& metadata,
                                  std::vector<std::uint8_t>* out);

/// encode_safetensors, then writes the bytes to `path` (RNNCORE_ERR_IO on failure).
rnncore_status write_safetensors(const char* path, const std::vector<TensorToWrite>& tensors,
                                 const std::vector<std::pair<std::string, std::string>>& metadata);

}  // namespace io
}  // namespace rnncore

#endif  // RNNCORE_IO_SAFETENSORS_HPP
