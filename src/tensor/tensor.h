#pragma once

// DataType, Shape and Tensor: the values that move between protocol front ends, the scheduler
// and backends.
//
// A Tensor owns its bytes, row-major and little-endian. BYTES tensors hold their elements in
// Triton's serialized form: each element is a 4-byte little-endian length followed by its bytes,
// so the same buffer travels unchanged through the binary HTTP extension and gRPC raw contents.
// Values; not synchronised.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace rampart::tensor {

// Numbers match Triton's inference.DataType so config values convert by cast.
enum class DataType : int {
  kInvalid = 0,
  kBool = 1,
  kUint8 = 2,
  kUint16 = 3,
  kUint32 = 4,
  kUint64 = 5,
  kInt8 = 6,
  kInt16 = 7,
  kInt32 = 8,
  kInt64 = 9,
  kFp16 = 10,
  kFp32 = 11,
  kFp64 = 12,
  kBytes = 13,
  kBf16 = 14,
};

// Wire name without the TYPE_ prefix: "FP32", "BYTES", ...; "INVALID" for kInvalid.
std::string_view DataTypeName(DataType type);
// Accepts wire names ("FP32", "BYTES"); nullopt otherwise.
std::optional<DataType> DataTypeFromName(std::string_view name);
// Bytes per element; 0 for BYTES (variable) and kInvalid.
size_t DataTypeSize(DataType type);

using Shape = std::vector<int64_t>;

// Product of dims; nullopt when a dim is negative or the product overflows.
std::optional<int64_t> ElementCount(const Shape& shape);
// The bytes `count` elements of `element_size` bytes take; nullopt when that overflows uint64
// (a shape of 2^61 INT64 elements would otherwise need "0 bytes").
std::optional<uint64_t> ByteSize(int64_t count, size_t element_size);
std::string ShapeToString(const Shape& shape);  // "[1,16]"

struct Tensor {
  std::string name;
  DataType datatype = DataType::kInvalid;
  Shape shape;
  std::string data;  // raw bytes; see the file comment for BYTES
};

// The longest BYTES element: its length prefix is 32 bits.
inline constexpr uint64_t kMaxBytesElement = 0xffffffffu;

// Appends one BYTES element (length prefix + bytes) to `out`. Errors: InvalidArgument for an
// element longer than kMaxBytesElement (its length would not fit the prefix); `out` is
// unchanged then.
Status AppendBytesElement(std::string_view element, std::string& out);

// Splits a serialized BYTES buffer into its elements (views into `data`). Fails when a length
// prefix runs past the end of the buffer.
Result<std::vector<std::string_view>> SplitBytesElements(std::string_view data);

// Checks that `data` is exactly what `shape` of `type` needs (for BYTES: that the buffer holds
// exactly ElementCount(shape) well-formed elements). `what` names the tensor in the error.
Status ValidateByteSize(std::string_view what, DataType type, const Shape& shape,
                        std::string_view data);

// The same check, answered without building a message.
bool HasExpectedByteSize(DataType type, const Shape& shape, std::string_view data);

// ValidateByteSize for per-request paths: `what` is formatted from `what_format` and `args` only
// when the check fails.
template <typename... Args>
Status ValidateByteSize(DataType type, const Shape& shape, std::string_view data,
                        fmt::format_string<Args...> what_format, Args&&... args) {
  if (HasExpectedByteSize(type, shape, data)) return Status::Ok();
  return ValidateByteSize(fmt::format(what_format, std::forward<Args>(args)...), type, shape, data);
}

}  // namespace rampart::tensor
