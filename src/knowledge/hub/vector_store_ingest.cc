#include "knowledge/hub/vector_store_ingest.h"

#include <fmt/format.h>

#include "knowledge/hub/chunker.h"
#include "knowledge/hub/vector_store_codec.h"

namespace rampart::knowledge::hub::internal {
namespace {

IngestOutcome Failed(std::string code, std::string message) {
  IngestOutcome outcome;
  outcome.error = IngestError{std::move(code), std::move(message)};
  return outcome;
}

// What an extraction or chunking error says about the file.
IngestOutcome FailedFor(const Status& status) {
  if (status.message().starts_with("unsupported file type")) {
    return Failed("unsupported_file", std::string(status.message()));
  }
  if (status.code() == StatusCode::kInvalidArgument ||
      status.code() == StatusCode::kPayloadTooLarge) {
    return Failed("invalid_file", std::string(status.message()));
  }
  return Failed("server_error", std::string(status.message()));
}

Status Aborted() { return Status(StatusCode::kCancelled, "the service is stopping"); }

// `extracted` rebuilt from its blocks, each block's text redacted, so that every later step
// (chunks, embeddings, keyword terms, citations' byte ranges) sees only the redacted text.
Result<ExtractedText> RedactBlocks(const IngestContext& context, const std::string& tenant,
                                   const ExtractedText& extracted) {
  BlockWriter writer(extracted.type);
  for (const Block& block : extracted.blocks) {
    ASSIGN_OR_RETURN(std::string redacted, context.redact(tenant, extracted.BlockText(block)));
    writer.Add(block.kind, redacted, block.level, block.page);
  }
  ExtractedText result = std::move(writer).Finish();
  result.page_count = extracted.page_count;
  return result;
}

}  // namespace

std::string ChunkSealClass(const std::string& store_id, const std::string& file_id, int64_t index) {
  return fmt::format("vector_store_chunk:{}:{}:{}", store_id, file_id, index);
}

Result<std::string> OpenChunkText(const crypto::Envelope* envelope, const std::string& tenant,
                                  const store::VectorStoreChunkRow& row) {
  if (row.sealing.empty()) return row.text;
  if (envelope == nullptr) {
    return InvalidArgument("chunk {} of file '{}' is sealed and no keyring is configured",
                           row.chunk_index, row.file_id);
  }
  const std::string data_class = ChunkSealClass(row.store_id, row.file_id, row.chunk_index);
  return envelope->Open(row.text, {.tenant = tenant, .region = "", .data_class = data_class});
}

Result<IngestOutcome> IngestFile(const IngestContext& context,
                                 const store::VectorStoreFileRow& file) {
  auto stored = context.store->GetFile(file.tenant, file.file_id);
  if (!stored.ok()) return Failed("server_error", std::string(stored.status().message()));
  if (!stored->has_value()) {
    return Failed("invalid_file", fmt::format("file '{}' is no longer stored", file.file_id));
  }
  auto reader = context.files->Open(file.tenant, file.file_id, (*stored)->sealing);
  if (!reader.ok()) return Failed("server_error", std::string(reader.status().message()));
  std::string bytes;
  while (true) {
    auto piece = (*reader)->Next();
    if (!piece.ok()) return Failed("server_error", std::string(piece.status().message()));
    if (piece->empty()) break;
    if (bytes.size() + piece->size() > context.extract.max_input_bytes) {
      return Failed("invalid_file", "the file is over the size limit");
    }
    bytes += *piece;
  }
  if (bytes.empty()) return Failed("invalid_file", "the file is empty");

  std::optional<DocumentType> declared;
  if (auto by_name = DocumentTypeFromFilename(file.filename); by_name.ok()) declared = *by_name;
  if (!declared.has_value() && !SniffDocumentType(bytes).has_value()) {
    return Failed("unsupported_file",
                  fmt::format("unsupported file type: '{}' is none of text, Markdown, HTML, PDF",
                              file.filename));
  }
  auto extracted = ExtractAuto(bytes, declared, context.extract);
  if (!extracted.ok()) return FailedFor(extracted.status());
  bytes = std::string();
  if (file.redact_pii) {
    if (!context.redact) {
      return Failed("server_error", "PII redaction is required but no guard is configured");
    }
    auto redacted = RedactBlocks(context, file.tenant, *extracted);
    if (!redacted.ok()) {
      // The text's fault (a blocked type, invalid UTF-8, a block over the guard's size limit),
      // else the guard's.
      const bool invalid = redacted.status().code() == StatusCode::kInvalidArgument ||
                           redacted.status().code() == StatusCode::kPayloadTooLarge;
      return Failed(invalid ? "invalid_file" : "server_error",
                    std::string(redacted.status().message()));
    }
    *extracted = std::move(*redacted);
  }
  if (extracted->text.find_first_not_of(" \n\t") == std::string::npos) {
    return Failed("invalid_file", "the file holds no text");
  }
  auto chunking = DecodeChunking(file.chunking);
  if (!chunking.ok()) return Failed("server_error", std::string(chunking.status().message()));
  auto chunks = ChunkText(*extracted, *chunking);
  if (!chunks.ok()) return FailedFor(chunks.status());
  if (chunks->empty()) return Failed("invalid_file", "the file holds no text");

  IngestOutcome outcome;
  for (size_t start = 0; start < chunks->size(); start += context.embed_batch) {
    if (context.stopping != nullptr && context.stopping->load()) return Aborted();
    const size_t end = std::min(chunks->size(), start + context.embed_batch);
    std::vector<std::string> texts;
    for (size_t i = start; i < end; ++i) texts.push_back((*chunks)[i].text);
    auto vectors = context.embedder->Embed(texts);
    if (context.stopping != nullptr && context.stopping->load()) return Aborted();
    if (!vectors.ok()) {
      return Failed("server_error",
                    fmt::format("embedding failed: {}", vectors.status().message()));
    }
    if (vectors->size() != texts.size()) {
      return Failed("server_error", "the embedder answered a wrong number of vectors");
    }
    for (size_t i = start; i < end; ++i) {
      Chunk& chunk = (*chunks)[i];
      std::vector<float>& vector = (*vectors)[i - start];
      if (vector.size() != context.embedder->dimension()) {
        return Failed("server_error", "the embedder answered a wrong dimension");
      }
      store::VectorStoreChunkRow row;
      row.store_id = file.store_id;
      row.file_id = file.file_id;
      row.chunk_index = static_cast<int64_t>(i);
      if (context.envelope != nullptr) {
        const std::string data_class = ChunkSealClass(file.store_id, file.file_id, row.chunk_index);
        auto sealed =
            context.envelope->Seal(context.seal_key, chunk.text,
                                   {.tenant = file.tenant, .region = "", .data_class = data_class});
        if (!sealed.ok()) return Failed("server_error", std::string(sealed.status().message()));
        row.text = std::move(*sealed);
        row.sealing = "envelope";
      } else {
        row.text = chunk.text;
      }
      row.heading_path = chunk.heading_path;
      row.page = chunk.page;
      row.begin = static_cast<int64_t>(chunk.begin);
      row.end = static_cast<int64_t>(chunk.end);
      row.embedding = EncodeEmbedding(vector);
      outcome.usage_bytes += static_cast<int64_t>(chunk.text.size());
      outcome.rows.push_back(std::move(row));
      outcome.chunks.push_back(IndexedChunk{.chunk_index = static_cast<int>(i),
                                            .text = std::move(chunk.text),
                                            .heading_path = std::move(chunk.heading_path),
                                            .page = chunk.page,
                                            .begin = chunk.begin,
                                            .end = chunk.end,
                                            .embedding = std::move(vector)});
    }
  }
  return outcome;
}

}  // namespace rampart::knowledge::hub::internal
