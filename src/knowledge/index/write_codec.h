#pragma once

// The binary forms the durable layer keeps on disk (docs/vector-indexes.md, "Durability"): a
// WriteOp as the write-ahead log frames it, and a record as a snapshot lists it. Integers are
// little-endian and fixed-width, floats are their raw IEEE-754 little-endian bytes, strings are a
// 4-byte length then the bytes, metadata values carry a type byte. An encoded WriteOp starts with
// kWriteCodecVersion, so a later format can be told apart.
//
// Decoding reads untrusted bytes (a file may be damaged): every length is checked against what
// is left, and a malformed input is InvalidArgument naming what was being read; it never reads
// past the input and never allocates more than the input could hold. Pure functions.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/status.h"
#include "knowledge/index/vector_types.h"

namespace rampart::knowledge {

inline constexpr uint8_t kWriteCodecVersion = 1;

// CRC-32C (Castagnoli), as iSCSI and ext4 use it; `crc` continues an earlier call's result.
uint32_t Crc32c(std::string_view data, uint32_t crc = 0);

// Appends little-endian fixed-width integers, raw floats and length-prefixed strings.
class ByteWriter {
 public:
  explicit ByteWriter(std::string& out) : out_(out) {}
  void U8(uint8_t value) { out_.push_back(static_cast<char>(value)); }
  void U32(uint32_t value);
  void U64(uint64_t value);
  void F64(double value);
  void Floats(const float* values, size_t count);  // raw bytes, no length
  void Bytes(std::string_view bytes) { out_.append(bytes); }
  void String(std::string_view text);  // U32 length, then the bytes

 private:
  std::string& out_;
};

// Reads what ByteWriter wrote; every read is bounds-checked (InvalidArgument "truncated <what>").
class ByteReader {
 public:
  explicit ByteReader(std::string_view input) : input_(input) {}
  Result<uint8_t> U8(std::string_view what);
  Result<uint32_t> U32(std::string_view what);
  Result<uint64_t> U64(std::string_view what);
  Result<double> F64(std::string_view what);
  Status Floats(float* values, size_t count, std::string_view what);
  Result<std::string_view> Bytes(size_t count, std::string_view what);
  Result<std::string_view> String(std::string_view what);
  // A count of items that each take at least `min_item_bytes`: InvalidArgument when the input
  // left could not hold that many (so a damaged count never drives a huge allocation).
  Result<uint32_t> Count(size_t min_item_bytes, std::string_view what);
  size_t remaining() const { return input_.size() - position_; }
  size_t position() const { return position_; }

 private:
  std::string_view input_;
  size_t position_ = 0;
};

void EncodeRecord(const VectorRecord& record, ByteWriter& writer);
Result<VectorRecord> DecodeRecord(ByteReader& reader);

// The version byte, the namespace, the kind (upsert, delete ids, delete all), then its payload.
void EncodeWriteOp(const WriteOp& op, std::string& out);
// InvalidArgument for an unknown version or kind, a malformed body, or bytes left over.
Result<WriteOp> DecodeWriteOp(std::string_view bytes);

}  // namespace rampart::knowledge
