// rnncore — host-side file formats: element types, in-memory arrays and the
// NumPy .npy format (read v1.0/2.0/3.0, write v1.0).
//
// Readers treat every byte as untrusted: lengths are checked against what is
// actually there, products of dimensions are checked for overflow, and
// allocations never exceed the size of the input.
#ifndef RNNCORE_IO_NPY_HPP
#define RNNCORE_IO_NPY_HPP

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "rnncore/status.h"

namespace rnncore {
namespace io {

/// Element types understood by the .npy and safetensors readers and writers.
enum class ElemType { f16, bf16, f32, f64, i8, u8, i16, i32, i64, boolean };

/// Safetensors spelling of a type: "F16", "BF16", "F32", "F64", "I8", "U8",
/// "I16", "I32", "I64", "BOOL" ("?" for a value outside the enum).
const char* elem_type_name(ElemType type);

/// Size of one element in bytes (0 for a value outside the enum).
std::size_t elem_type_size(ElemType type);

/// Looks up a safetensors dtype name (exact, case-sensitive). False if unknown.
bool elem_type_from_name(const std::string& name, ElemType* out);

/// Highest rank the readers accept and the writers produce.
constexpr std::size_t kMaxRank = 8;

/// A dense, row-major (C order), little-endian array.
struct Array {
  ElemType type = ElemType::f32;
  std::vector<std::int64_t> shape;  ///< rank 0..kMaxRank; rank 0 is a scalar
  std::vector<std::uint8_t> bytes;  ///< elements() * elem_type_size(type) bytes

  /// Product of the dimensions (1 for a scalar), or -1 when a dimension is
  /// negative or the product overflows.
  std::int64_t elements() const;
};

/// Byte count of a `rank`-dimensional array of `type`, checked: false when a
/// dimension is negative or the product of the non-zero dimensions times the
/// element size exceeds INT64_MAX (or SIZE_MAX).
bool shape_byte_count(const std::int64_t* shape, std::size_t rank, ElemType type, std::uint64_t* bytes);

/// "[4, 7]" style rendering of a shape for messages ("[]" for a scalar).
std::string shape_to_string(const std::int64_t* shape, std::size_t rank);

/// IEEE binary16 → binary32, exact (subnormals, infinities, NaN payloads kept).
float f16_to_f32(std::uint16_t bits);
/// bfloat16 → binary32, exact.
float bf16_to_f32(std::uint16_t bits);
/// binary32 → binary16, round to nearest even; overflow gives infinity, NaN stays NaN.
std::uint16_t f32_to_f16(float value);
/// binary32 → bfloat16, round to nearest even; NaN stays NaN.
std::uint16_t f32_to_bf16(float value);

/// Converting copy to float from F16, BF16, F32 or F64 (F64 rounds to nearest;
/// magnitudes beyond float range become infinities). RNNCORE_ERR_TENSOR_DTYPE
/// for other types, RNNCORE_ERR_INVALID_SIZE if `bytes` does not match `shape`.
rnncore_status to_f32(const Array& array, std::vector<float>* out);
/// Converting copy to double from F16, BF16, F32 or F64 (exact).
rnncore_status to_f64(const Array& array, std::vector<double>* out);
/// Converting copy to int32 from I8, U8, I16, I32, I64 or BOOL (as 0/1).
/// RNNCORE_ERR_TENSOR_DTYPE for floating-point arrays, RNNCORE_ERR_FORMAT when
/// an I64 value does not fit in int32.
rnncore_status to_i32(const Array& array, std::vector<std::int32_t>* out);

/// Parses an in-memory .npy file (format versions 1.0, 2.0 and 3.0). Accepted
/// descr values: <f2 <f4 <f8 |i1 <i2 <i4 <i8 |u1 |b1, also with '=' and, for
/// 1-byte types, '<' or '>'; big-endian ('>f4', ...) data is byte-swapped.
/// fortran_order True is rejected unless the layout is the same as C order
/// (at most one dimension longer than 1). Errors: RNNCORE_ERR_FORMAT (malformed,
/// truncated, trailing bytes, rank > 8), RNNCORE_ERR_TENSOR_DTYPE (unsupported
/// descr). `name_for_errors` (may be null) prefixes detail lines. `*out` is
/// written only on success.
rnncore_status parse_npy(const std::uint8_t* data, std::size_t size, const char* name_for_errors, Array* out);

/// Reads and parses a .npy file; RNNCORE_ERR_IO if it cannot be read.
rnncore_status read_npy(const char* path, Array* out);

/// Serialises an array as a version 1.0 .npy file into `*out` (header padded
/// with spaces so that the data starts at a multiple of 64 bytes, as NumPy
/// does). `data` holds the elements in C order. BF16 has no NumPy type and
/// gives RNNCORE_ERR_TENSOR_DTYPE; a bad shape gives RNNCORE_ERR_INVALID_SIZE.
rnncore_status encode_npy(ElemType type, const std::int64_t* shape, int rank, const void* data,
                          std::vector<std::uint8_t>* out);

/// encode_npy, then writes the bytes to `path` (RNNCORE_ERR_IO on failure).
rnncore_status write_npy(const char* path, ElemType type, const std::int64_t* shape, int rank, const void* data);

}  // namespace io
}  // namespace rnncore

#endif  // RNNCORE_IO_NPY_HPP
