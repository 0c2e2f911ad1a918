#pragma once

// How the vector store service keeps its values in the Store's TEXT columns (store.h's
// VectorStoreRow, VectorStoreFileRow): attributes, metadata and chunking options as JSON, status
// names, embeddings as little-endian float32 bytes, and the rows <-> the contract's infos.
// Internal to the knowledge hub. Decoders fail with Internal on text this build did not write.

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "knowledge/hub/vector_stores.h"
#include "store/store.h"

namespace rampart::knowledge::hub::internal {

std::string EncodeFileAttributes(const FileAttributes& attributes);
Result<FileAttributes> DecodeFileAttributes(std::string_view text);
std::string EncodeMetadata(const std::map<std::string, std::string>& metadata);
Result<std::map<std::string, std::string>> DecodeMetadata(std::string_view text);
std::string EncodeChunking(const ChunkingOptions& chunking);
Result<ChunkingOptions> DecodeChunking(std::string_view text);
IngestStatus ParseIngestStatus(std::string_view name);  // unknown: in_progress

std::string EncodeEmbedding(const std::vector<float>& values);
std::vector<float> DecodeEmbedding(std::string_view bytes);

Result<VectorStoreFileInfo> FileInfoFromRow(const store::VectorStoreFileRow& row);

}  // namespace rampart::knowledge::hub::internal
