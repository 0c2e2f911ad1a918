#pragma once

// Ingesting one file of a vector store: its bytes from the Files API's storage, extraction (the
// type from the filename, else sniffed), PII redaction when the file is flagged (block by block,
// so the structure and byte ranges describe the redacted text), chunking, embedding in batches,
// and each chunk's text sealed when an envelope is configured. Internal to the vector store
// service.
//
// Threads: a pure function of its inputs; the embedder and storage are thread-safe.

#include <atomic>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "crypto/envelope.h"
#include "knowledge/hub/extract.h"
#include "knowledge/hub/file_storage.h"
#include "knowledge/hub/vector_store_index.h"
#include "knowledge/hub/vector_stores.h"
#include "store/store.h"

namespace rampart::knowledge::hub::internal {

struct IngestContext {
  store::Store* store = nullptr;
  FileStorage* files = nullptr;
  Embedder* embedder = nullptr;
  const crypto::Envelope* envelope = nullptr;  // null: chunks kept plain
  std::string seal_key;
  size_t embed_batch = 64;
  ExtractOptions extract;
  const std::atomic<bool>* stopping = nullptr;  // checked between batches
  // VectorStoreServiceOptions::redact: applied to a file flagged redact_pii (null: such a file
  // fails with server_error).
  std::function<Result<std::string>(const std::string& tenant, std::string_view text)> redact;
};

struct IngestOutcome {
  std::optional<IngestError> error;              // set: the file failed
  std::vector<store::VectorStoreChunkRow> rows;  // as stored
  std::vector<IndexedChunk> chunks;              // as indexed (plain text)
  int64_t usage_bytes = 0;
};

// Aborted when `stopping` was raised (the file is left for the next start); every other failure
// is the outcome's error.
Result<IngestOutcome> IngestFile(const IngestContext& context,
                                 const store::VectorStoreFileRow& file);

// The associated data a chunk's envelope binds: tenant (as the envelope's tenant), store, file
// and chunk index.
std::string ChunkSealClass(const std::string& store_id, const std::string& file_id, int64_t index);

// A stored chunk's text: opened when sealed. InvalidArgument when it does not open.
Result<std::string> OpenChunkText(const crypto::Envelope* envelope, const std::string& tenant,
                                  const store::VectorStoreChunkRow& row);

}  // namespace rampart::knowledge::hub::internal
