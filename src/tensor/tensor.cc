#include "tensor/tensor.h"

#include <array>
#include <cstring>
#include <limits>

namespace rampart::tensor {
namespace {

struct TypeInfo {
  DataType type;
  std::string_view name;
  size_t size;
};

constexpr std::array<TypeInfo, 15> kTypes = {{
    {DataType::kInvalid, "INVALID", 0},
    {DataType::kBool, "BOOL", 1},
    {DataType::kUint8, "UINT8", 1},
    {DataType::kUint16, "UINT16", 2},
    {DataType::kUint32, "UINT32", 4},
    {DataType::kUint64, "UINT64", 8},
    {DataType::kInt8, "INT8", 1},
    {DataType::kInt16, "INT16", 2},
    {DataType::kInt32, "INT32", 4},
    {DataType::kInt64, "INT64", 8},
    {DataType::kFp16, "FP16", 2},
    {DataType::kFp32, "FP32", 4},
    {DataType::kFp64, "FP64", 8},
    {DataType::kBytes, "BYTES", 0},
    {DataType::kBf16, "BF16", 2},
}};

const TypeInfo& Info(DataType type) {
  const auto index = static_cast<size_t>(type);
  return index < kTypes.size() ? kTypes[index] : kTypes[0];
}

}  // namespace

std::string_view DataTypeName(DataType type) { return Info(type).name; }

std::optional<DataType> DataTypeFromName(std::string_view name) {
  for (const TypeInfo& info : kTypes) {
    if (info.type != DataType::kInvalid && info.name == name) return info.type;
  }
  return std::nullopt;
}

size_t DataTypeSize(DataType type) { return Info(type).size; }

std::optional<int64_t> ElementCount(const Shape& shape) {
  int64_t count = 1;
  for (int64_t dim : shape) {
    if (dim < 0) return std::nullopt;
    if (dim != 0 && count > std::numeric_limits<int64_t>::max() / dim) return std::nullopt;
    count *= dim;
  }
  return count;
}

std::string ShapeToString(const Shape& shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i > 0) out += ',';
    out += std::to_string(shape[i]);
  }
  out += ']';
  return out;
}

Status AppendBytesElement(std::string_view element, std::string& out) {
  if (element.size() > kMaxBytesElement) {
    return InvalidArgument(
        "a BYTES element of {} bytes is too long: its 4-byte length prefix says at most {}",
        element.size(), kMaxBytesElement);
  }
  const auto length = static_cast<uint32_t>(element.size());
  char prefix[4];
  // Little-endian regardless of host order.
  for (int i = 0; i < 4; ++i) prefix[i] = static_cast<char>((length >> (8 * i)) & 0xff);
  out.append(prefix, 4);
  out.append(element);
  return Status::Ok();
}

namespace {

// Calls `visit` with each element of a serialized BYTES buffer, in order. Fails when a length
// prefix runs past the end of the buffer.
template <typename Visit>
Status ForEachBytesElement(std::string_view data, Visit visit) {
  size_t offset = 0;
  while (offset < data.size()) {
    if (data.size() - offset < 4) {
      return InvalidArgument("BYTES element at offset {} has a truncated length prefix", offset);
    }
    uint32_t length = 0;
    for (int i = 0; i < 4; ++i) {
      length |= static_cast<uint32_t>(static_cast<unsigned char>(data[offset + i])) << (8 * i);
    }
    offset += 4;
    if (length > data.size() - offset) {
      return InvalidArgument("BYTES element at offset {} claims {} bytes but only {} remain",
                             offset - 4, length, data.size() - offset);
    }
    visit(data.substr(offset, length));
    offset += length;
  }
  return Status::Ok();
}

}  // namespace

Result<std::vector<std::string_view>> SplitBytesElements(std::string_view data) {
  std::vector<std::string_view> elements;
  RETURN_IF_ERROR(
      ForEachBytesElement(data, [&](std::string_view element) { elements.push_back(element); }));
  return elements;
}

std::optional<uint64_t> ByteSize(int64_t count, size_t element_size) {
  const auto elements = static_cast<uint64_t>(count);
  if (count < 0 ||
      (element_size > 0 && elements > std::numeric_limits<uint64_t>::max() / element_size)) {
    return std::nullopt;
  }
  return elements * element_size;
}

bool HasExpectedByteSize(DataType type, const Shape& shape, std::string_view data) {
  const std::optional<int64_t> count = ElementCount(shape);
  if (!count) return false;
  if (type != DataType::kBytes) {
    const size_t element_size = DataTypeSize(type);
    const std::optional<uint64_t> bytes = ByteSize(*count, element_size);
    return element_size > 0 && bytes && data.size() == *bytes;
  }
  int64_t elements = 0;
  const Status walked = ForEachBytesElement(data, [&](std::string_view) { ++elements; });
  return walked.ok() && elements == *count;
}

Status ValidateByteSize(std::string_view what, DataType type, const Shape& shape,
                        std::string_view data) {
  const std::optional<int64_t> count = ElementCount(shape);
  if (!count) {
    return InvalidArgument("{} has invalid shape {}", what, ShapeToString(shape));
  }
  if (type == DataType::kBytes) {
    auto elements = SplitBytesElements(data);
    if (!elements.ok()) return elements.status().WithContext(std::string(what));
    if (static_cast<int64_t>(elements->size()) != *count) {
      return InvalidArgument("{} holds {} BYTES elements but shape {} needs {}", what,
                             elements->size(), ShapeToString(shape), *count);
    }
    return Status::Ok();
  }
  const size_t element_size = DataTypeSize(type);
  if (element_size == 0) return InvalidArgument("{} has invalid datatype", what);
  const std::optional<uint64_t> expected = ByteSize(*count, element_size);
  if (!expected) {
    return InvalidArgument("{} has {} bytes but shape {} of {} needs more than 2^64", what,
                           data.size(), ShapeToString(shape), DataTypeName(type));
  }
  if (data.size() != *expected) {
    return InvalidArgument("{} has {} bytes but shape {} of {} needs {}", what, data.size(),
                           ShapeToString(shape), DataTypeName(type), *expected);
  }
  return Status::Ok();
}

}  // namespace rampart::tensor
