#include "knowledge/hub/vector_store_codec.h"

#include <cstring>

#include "json/reader.h"
#include "json/writer.h"

namespace rampart::knowledge::hub::internal {
namespace {

Status Corrupt(std::string_view what, const Status& status) {
  return Internal("the store holds a malformed vector store {}: {}", what, status.message());
}

}  // namespace

std::string EncodeFileAttributes(const FileAttributes& attributes) {
  json::Writer writer;
  writer.StartObject();
  for (const auto& [key, value] : attributes) {
    writer.Key(key);
    if (const auto* text = std::get_if<std::string>(&value)) {
      writer.String(*text);
    } else if (const auto* number = std::get_if<double>(&value)) {
      writer.Double(*number);
    } else {
      writer.Bool(std::get<bool>(value));
    }
  }
  writer.EndObject();
  return writer.Take();
}

Result<FileAttributes> DecodeFileAttributes(std::string_view text) {
  json::Parser parser;
  auto parsed = parser.Parse(text);
  if (!parsed.ok() || !parsed->IsObject()) {
    return Corrupt("attributes", parsed.ok() ? Internal("not an object") : parsed.status());
  }
  FileAttributes attributes;
  for (auto field : parsed->Object()) {
    const std::string key(field.key);
    const json::Value value(field.value);
    switch (value.kind()) {
      case json::Kind::kString: attributes[key] = std::string(*value.GetString(key)); break;
      case json::Kind::kBool: attributes[key] = *value.GetBool(key); break;
      case json::Kind::kNumber: attributes[key] = *value.GetDouble(key); break;
      default: return Corrupt("attributes", Internal("'{}' is not a scalar", key));
    }
  }
  return attributes;
}

std::string EncodeMetadata(const std::map<std::string, std::string>& metadata) {
  json::Writer writer;
  writer.StartObject();
  for (const auto& [key, value] : metadata) {
    writer.Key(key);
    writer.String(value);
  }
  writer.EndObject();
  return writer.Take();
}

Result<std::map<std::string, std::string>> DecodeMetadata(std::string_view text) {
  json::Parser parser;
  auto parsed = parser.Parse(text);
  if (!parsed.ok() || !parsed->IsObject()) {
    return Corrupt("metadata", parsed.ok() ? Internal("not an object") : parsed.status());
  }
  std::map<std::string, std::string> metadata;
  for (auto field : parsed->Object()) {
    const std::string key(field.key);
    auto value = json::Value(field.value).GetString(key);
    if (!value.ok()) return Corrupt("metadata", value.status());
    metadata[key] = std::string(*value);
  }
  return metadata;
}

std::string EncodeChunking(const ChunkingOptions& chunking) {
  json::Writer writer;
  writer.StartObject();
  writer.Key("type");
  writer.String(chunking.strategy == ChunkingStrategy::kAuto ? "auto" : "static");
  writer.Key("max_chunk_size_tokens");
  writer.Int64(chunking.max_chunk_size_tokens);
  writer.Key("chunk_overlap_tokens");
  writer.Int64(chunking.chunk_overlap_tokens);
  writer.EndObject();
  return writer.Take();
}

Result<ChunkingOptions> DecodeChunking(std::string_view text) {
  json::Parser parser;
  auto parsed = parser.Parse(text);
  if (!parsed.ok() || !parsed->IsObject()) {
    return Corrupt("chunking", parsed.ok() ? Internal("not an object") : parsed.status());
  }
  ChunkingOptions chunking;
  const auto type = parsed->Find("type");
  const auto size = parsed->Find("max_chunk_size_tokens");
  const auto overlap = parsed->Find("chunk_overlap_tokens");
  if (!type || !size || !overlap) return Corrupt("chunking", Internal("a field is missing"));
  chunking.strategy =
      *type->GetString("type") == "auto" ? ChunkingStrategy::kAuto : ChunkingStrategy::kStatic;
  const auto max_size = size->GetInt64("max_chunk_size_tokens");
  const auto overlap_size = overlap->GetInt64("chunk_overlap_tokens");
  if (!max_size.ok() || !overlap_size.ok()) return Corrupt("chunking", Internal("not a number"));
  chunking.max_chunk_size_tokens = static_cast<int>(*max_size);
  chunking.chunk_overlap_tokens = static_cast<int>(*overlap_size);
  return chunking;
}

IngestStatus ParseIngestStatus(std::string_view name) {
  if (name == "completed") return IngestStatus::kCompleted;
  if (name == "failed") return IngestStatus::kFailed;
  if (name == "cancelled") return IngestStatus::kCancelled;
  return IngestStatus::kInProgress;
}

std::string EncodeEmbedding(const std::vector<float>& values) {
  static_assert(std::endian::native == std::endian::little, "embeddings are kept little-endian");
  std::string bytes(values.size() * sizeof(float), '\0');
  if (!values.empty()) std::memcpy(bytes.data(), values.data(), bytes.size());
  return bytes;
}

std::vector<float> DecodeEmbedding(std::string_view bytes) {
  std::vector<float> values(bytes.size() / sizeof(float));
  if (!values.empty()) std::memcpy(values.data(), bytes.data(), values.size() * sizeof(float));
  return values;
}

Result<VectorStoreFileInfo> FileInfoFromRow(const store::VectorStoreFileRow& row) {
  VectorStoreFileInfo info;
  info.id = row.file_id;
  info.vector_store_id = row.store_id;
  info.filename = row.filename;
  info.created_at = row.created_unix;
  info.status = ParseIngestStatus(row.status);
  if (!row.error_code.empty()) info.last_error = IngestError{row.error_code, row.error_message};
  ASSIGN_OR_RETURN(info.attributes, DecodeFileAttributes(row.attributes));
  ASSIGN_OR_RETURN(info.chunking, DecodeChunking(row.chunking));
  info.usage_bytes = row.usage_bytes;
  info.redact_pii = row.redact_pii;
  return info;
}

}  // namespace rampart::knowledge::hub::internal
