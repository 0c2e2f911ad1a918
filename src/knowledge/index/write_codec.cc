#include "knowledge/index/write_codec.h"

#include <array>
#include <bit>
#include <cstring>
#include <type_traits>

namespace rampart::knowledge {
namespace {

static_assert(std::endian::native == std::endian::little,
              "the on-disk formats store raw little-endian bytes");

constexpr std::array<uint32_t, 256> MakeCrcTable() {
  std::array<uint32_t, 256> table{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t crc = i;
    for (int bit = 0; bit < 8; ++bit) crc = (crc & 1) ? (crc >> 1) ^ 0x82F63B78u : crc >> 1;
    table[i] = crc;
  }
  return table;
}
constexpr std::array<uint32_t, 256> kCrcTable = MakeCrcTable();

enum class OpKind : uint8_t { kUpsert = 1, kDeleteIds = 2, kDeleteAll = 3 };
enum class ValueKind : uint8_t { kString = 0, kNumber = 1, kBool = 2, kStringList = 3 };

}  // namespace

uint32_t Crc32c(std::string_view data, uint32_t crc) {
  crc = ~crc;
  for (const char c : data) crc = kCrcTable[(crc ^ static_cast<uint8_t>(c)) & 0xFF] ^ (crc >> 8);
  return ~crc;
}

void ByteWriter::U32(uint32_t value) {
  char bytes[4];
  std::memcpy(bytes, &value, 4);
  out_.append(bytes, 4);
}
void ByteWriter::U64(uint64_t value) {
  char bytes[8];
  std::memcpy(bytes, &value, 8);
  out_.append(bytes, 8);
}
void ByteWriter::F64(double value) { U64(std::bit_cast<uint64_t>(value)); }
void ByteWriter::Floats(const float* values, size_t count) {
  out_.append(reinterpret_cast<const char*>(values), count * sizeof(float));
}
void ByteWriter::String(std::string_view text) {
  U32(static_cast<uint32_t>(text.size()));
  out_.append(text);
}

Result<std::string_view> ByteReader::Bytes(size_t count, std::string_view what) {
  if (count > remaining()) {
    return InvalidArgument("truncated {} at byte {} (needs {}, {} left)", what, position_, count,
                           remaining());
  }
  std::string_view bytes = input_.substr(position_, count);
  position_ += count;
  return bytes;
}
Result<uint8_t> ByteReader::U8(std::string_view what) {
  ASSIGN_OR_RETURN(std::string_view bytes, Bytes(1, what));
  return static_cast<uint8_t>(bytes[0]);
}
Result<uint32_t> ByteReader::U32(std::string_view what) {
  ASSIGN_OR_RETURN(std::string_view bytes, Bytes(4, what));
  uint32_t value;
  std::memcpy(&value, bytes.data(), 4);
  return value;
}
Result<uint64_t> ByteReader::U64(std::string_view what) {
  ASSIGN_OR_RETURN(std::string_view bytes, Bytes(8, what));
  uint64_t value;
  std::memcpy(&value, bytes.data(), 8);
  return value;
}
Result<double> ByteReader::F64(std::string_view what) {
  ASSIGN_OR_RETURN(uint64_t bits, U64(what));
  return std::bit_cast<double>(bits);
}
Status ByteReader::Floats(float* values, size_t count, std::string_view what) {
  ASSIGN_OR_RETURN(std::string_view bytes, Bytes(count * sizeof(float), what));
  if (count > 0) std::memcpy(values, bytes.data(), bytes.size());
  return Status::Ok();
}
Result<std::string_view> ByteReader::String(std::string_view what) {
  ASSIGN_OR_RETURN(uint32_t length, U32(what));
  return Bytes(length, what);
}
Result<uint32_t> ByteReader::Count(size_t min_item_bytes, std::string_view what) {
  ASSIGN_OR_RETURN(uint32_t count, U32(what));
  if (min_item_bytes > 0 && count > remaining() / min_item_bytes) {
    return InvalidArgument("{} count {} at byte {} exceeds what the {} bytes left can hold", what,
                           count, position_ - 4, remaining());
  }
  return count;
}

void EncodeRecord(const VectorRecord& record, ByteWriter& writer) {
  writer.String(record.id);
  writer.U32(static_cast<uint32_t>(record.values.size()));
  writer.Floats(record.values.data(), record.values.size());
  writer.U32(static_cast<uint32_t>(record.sparse.indices.size()));
  for (const uint32_t index : record.sparse.indices) writer.U32(index);
  writer.Floats(record.sparse.values.data(), record.sparse.values.size());
  writer.U32(static_cast<uint32_t>(record.metadata.size()));
  for (const auto& [key, value] : record.metadata) {
    writer.String(key);
    if (const auto* text = std::get_if<std::string>(&value)) {
      writer.U8(static_cast<uint8_t>(ValueKind::kString));
      writer.String(*text);
    } else if (const auto* number = std::get_if<double>(&value)) {
      writer.U8(static_cast<uint8_t>(ValueKind::kNumber));
      writer.F64(*number);
    } else if (const auto* flag = std::get_if<bool>(&value)) {
      writer.U8(static_cast<uint8_t>(ValueKind::kBool));
      writer.U8(*flag ? 1 : 0);
    } else {
      const auto& list = std::get<std::vector<std::string>>(value);
      writer.U8(static_cast<uint8_t>(ValueKind::kStringList));
      writer.U32(static_cast<uint32_t>(list.size()));
      for (const std::string& item : list) writer.String(item);
    }
  }
}

Result<VectorRecord> DecodeRecord(ByteReader& reader) {
  VectorRecord record;
  ASSIGN_OR_RETURN(std::string_view id, reader.String("record id"));
  record.id = std::string(id);
  ASSIGN_OR_RETURN(uint32_t dimension, reader.Count(sizeof(float), "values"));
  record.values.resize(dimension);
  RETURN_IF_ERROR(reader.Floats(record.values.data(), dimension, "values"));
  ASSIGN_OR_RETURN(uint32_t sparse_count, reader.Count(2 * sizeof(uint32_t), "sparse values"));
  record.sparse.indices.resize(sparse_count);
  for (uint32_t& index : record.sparse.indices) {
    ASSIGN_OR_RETURN(index, reader.U32("sparse index"));
  }
  record.sparse.values.resize(sparse_count);
  RETURN_IF_ERROR(reader.Floats(record.sparse.values.data(), sparse_count, "sparse values"));
  ASSIGN_OR_RETURN(uint32_t field_count, reader.Count(5, "metadata fields"));
  record.metadata.reserve(field_count);
  for (uint32_t i = 0; i < field_count; ++i) {
    ASSIGN_OR_RETURN(std::string_view key, reader.String("metadata key"));
    ASSIGN_OR_RETURN(uint8_t kind, reader.U8("metadata type"));
    MetadataValue value;
    switch (static_cast<ValueKind>(kind)) {
      case ValueKind::kString: {
        ASSIGN_OR_RETURN(std::string_view text, reader.String("metadata string"));
        value = std::string(text);
        break;
      }
      case ValueKind::kNumber: {
        ASSIGN_OR_RETURN(double number, reader.F64("metadata number"));
        value = number;
        break;
      }
      case ValueKind::kBool: {
        ASSIGN_OR_RETURN(uint8_t flag, reader.U8("metadata bool"));
        if (flag > 1) return InvalidArgument("metadata bool of '{}' is {}, not 0 or 1", key, flag);
        value = flag == 1;
        break;
      }
      case ValueKind::kStringList: {
        ASSIGN_OR_RETURN(uint32_t count, reader.Count(4, "metadata list"));
        std::vector<std::string> list;
        list.reserve(count);
        for (uint32_t j = 0; j < count; ++j) {
          ASSIGN_OR_RETURN(std::string_view item, reader.String("metadata list item"));
          list.emplace_back(item);
        }
        value = std::move(list);
        break;
      }
      default:
        return InvalidArgument("metadata field '{}' has unknown type {} at byte {}", key, kind,
                               reader.position() - 1);
    }
    record.metadata.emplace_back(std::string(key), std::move(value));
  }
  return record;
}

void EncodeWriteOp(const WriteOp& op, std::string& out) {
  ByteWriter writer(out);
  writer.U8(kWriteCodecVersion);
  writer.String(op.name_space);
  if (const auto* upsert = std::get_if<UpsertOp>(&op.change)) {
    writer.U8(static_cast<uint8_t>(OpKind::kUpsert));
    writer.U32(static_cast<uint32_t>(upsert->records.size()));
    for (const VectorRecord& record : upsert->records) EncodeRecord(record, writer);
  } else if (const auto* deletion = std::get_if<DeleteIdsOp>(&op.change)) {
    writer.U8(static_cast<uint8_t>(OpKind::kDeleteIds));
    writer.U32(static_cast<uint32_t>(deletion->ids.size()));
    for (const std::string& id : deletion->ids) writer.String(id);
  } else {
    writer.U8(static_cast<uint8_t>(OpKind::kDeleteAll));
  }
}

Result<WriteOp> DecodeWriteOp(std::string_view bytes) {
  ByteReader reader(bytes);
  ASSIGN_OR_RETURN(uint8_t version, reader.U8("write version"));
  if (version != kWriteCodecVersion) {
    return InvalidArgument("write format version {} is not {} (written by a newer Rampart?)",
                           version, kWriteCodecVersion);
  }
  WriteOp op;
  ASSIGN_OR_RETURN(std::string_view name_space, reader.String("namespace"));
  op.name_space = std::string(name_space);
  ASSIGN_OR_RETURN(uint8_t kind, reader.U8("write kind"));
  switch (static_cast<OpKind>(kind)) {
    case OpKind::kUpsert: {
      // A record takes at least its id length, three counts: 16 bytes.
      ASSIGN_OR_RETURN(uint32_t count, reader.Count(16, "upserted records"));
      UpsertOp upsert;
      upsert.records.reserve(count);
      for (uint32_t i = 0; i < count; ++i) {
        ASSIGN_OR_RETURN(VectorRecord record, DecodeRecord(reader));
        upsert.records.push_back(std::move(record));
      }
      op.change = std::move(upsert);
      break;
    }
    case OpKind::kDeleteIds: {
      ASSIGN_OR_RETURN(uint32_t count, reader.Count(4, "deleted ids"));
      DeleteIdsOp deletion;
      deletion.ids.reserve(count);
      for (uint32_t i = 0; i < count; ++i) {
        ASSIGN_OR_RETURN(std::string_view id, reader.String("deleted id"));
        deletion.ids.emplace_back(id);
      }
      op.change = std::move(deletion);
      break;
    }
    case OpKind::kDeleteAll: op.change = DeleteAllOp{}; break;
    default: return InvalidArgument("unknown write kind {}", kind);
  }
  if (reader.remaining() != 0) {
    return InvalidArgument("{} bytes left over after the write", reader.remaining());
  }
  return op;
}

}  // namespace rampart::knowledge
