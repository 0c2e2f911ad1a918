#pragma once

// VectorStores: OpenAI's vector stores (docs/knowledge-hub.md): named collections of uploaded
// files (the Files API), each file extracted (extract.h), chunked (chunker.h), embedded
// (Embedder) and indexed twice, for BM25 (bm25.h) and for vectors (knowledge/index), so that a
// search fuses both (fusion.h) with the caller's filters and access applied inside each.
//
// Ownership: a store, its files and batches belong to one tenant; every call names the tenant and
// sees only its stores (another tenant's store is NotFound, like an unknown id).
//
// Durability: everything is kept in the Store (SQLite, or PostgreSQL shared by replicas): stores,
// their files with status and attributes, batches, and each chunk with its text (sealed with the
// keyring when configured) and embedding. The in-memory indexes are built from it at start and
// follow its change sequence, so a replica sharing a PostgreSQL store catches up with writes made
// by another. A call that changes state returns only once the change is committed.
//
// Ingestion runs in the background on the service's own threads: AddFile and CreateBatch return
// at once with status "in_progress"; the file moves to "completed", or "failed" with last_error
// (unsupported_file, invalid_file, server_error), or "cancelled". Work left unfinished by a stop
// or a crash resumes at the next start (a file's chunks are replaced whole, never doubled).
//
// Threads: thread-safe. Every method may block on the store, the disk or the embedder: call it
// from a worker thread, never from an I/O thread.

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "core/status.h"
#include "knowledge/hub/chunker.h"

namespace rampart::knowledge::hub {

// A file's attributes (OpenAI: at most 16; keys of 1..64 bytes; a string value at most 512
// bytes, or a number, or a boolean). Per-document access control reads them too (tenant,
// department, classification, owner).
using AttributeValue = std::variant<std::string, double, bool>;
using FileAttributes = std::map<std::string, AttributeValue>;

// InvalidArgument naming the offending key or value.
Status ValidateFileAttributes(const FileAttributes& attributes);

// OpenAI's search filters: a comparison {type: eq|ne|gt|gte|lt|lte|in|nin, key, value} or a
// compound {type: and|or, filters: [...]}. A comparison of a missing key is false (ne and nin
// too); gt/gte/lt/lte compare numbers with numbers and strings with strings, false otherwise.
struct AttributeFilter {
  enum class Op { kEq, kNe, kGt, kGte, kLt, kLte, kIn, kNin, kAnd, kOr };
  Op op = Op::kEq;
  std::string key;                       // comparisons
  AttributeValue value;                  // eq .. lte
  std::vector<AttributeValue> values;    // in, nin
  std::vector<AttributeFilter> filters;  // and, or (at least one)
};

// InvalidArgument for an empty key, an empty compound, a nesting deeper than 8 levels, or more
// than 1000 values or filters in all.
Status ValidateFilter(const AttributeFilter& filter);
bool FilterMatches(const AttributeFilter& filter, const FileAttributes& attributes);

enum class IngestStatus { kInProgress, kCompleted, kCancelled, kFailed };
std::string_view IngestStatusName(IngestStatus status);  // "in_progress", "completed", ...

struct FileCounts {
  int64_t in_progress = 0;
  int64_t completed = 0;
  int64_t failed = 0;
  int64_t cancelled = 0;
  int64_t total = 0;

  void Add(IngestStatus status);  // one more file in `status`
};

// OpenAI's last_error: code "server_error", "unsupported_file" or "invalid_file".
struct IngestError {
  std::string code;
  std::string message;
};

// expires_after: {anchor: "last_active_at", days: 1..365}.
struct ExpiryPolicy {
  int64_t days = 0;
};

struct VectorStoreInfo {
  std::string id;  // "vs_" and 24 of [0-9a-z]
  std::string tenant;
  std::string name;
  std::map<std::string, std::string> metadata;  // OpenAI's: 16 pairs, keys 64, values 512 bytes
  int64_t created_at = 0;                       // unix seconds
  int64_t last_active_at = 0;
  std::optional<ExpiryPolicy> expires_after;
  std::optional<int64_t> expires_at;
  std::string status;  // "in_progress" while any file is, "expired", else "completed"
  FileCounts file_counts;
  int64_t usage_bytes = 0;  // the stored chunks' text
};

struct VectorStoreFileInfo {
  std::string id;  // the file's id ("file-...")
  std::string vector_store_id;
  std::string filename;  // from the Files API
  int64_t created_at = 0;
  IngestStatus status = IngestStatus::kInProgress;
  std::optional<IngestError> last_error;
  FileAttributes attributes;
  ChunkingOptions chunking;
  int64_t usage_bytes = 0;
  bool redact_pii = false;  // the text was (or is to be) redacted before chunking
};

struct FileBatchInfo {
  std::string id;  // "vsfb_" and 24 of [0-9a-z]
  std::string vector_store_id;
  int64_t created_at = 0;
  IngestStatus status = IngestStatus::kInProgress;
  FileCounts file_counts;
};

// OpenAI's list paging: by creation (ties by id), `limit` 1..100, after/before an id of the list.
struct PageRequest {
  int limit = 20;
  bool descending = true;
  std::string after;
  std::string before;
};

template <typename T>
struct Page {
  std::vector<T> items;
  bool has_more = false;
};

struct CreateStoreRequest {
  std::string name;
  std::map<std::string, std::string> metadata;
  std::optional<ExpiryPolicy> expires_after;
  std::vector<std::string> file_ids;  // added at once, ingested in the background
  ChunkingOptions chunking = ChunkingOptions::Auto();
  bool redact_pii = false;  // file_ids' text redacted, as AddFileRequest::redact_pii
};

struct ModifyStoreRequest {
  std::optional<std::string> name;
  std::optional<std::map<std::string, std::string>> metadata;
  std::optional<std::optional<ExpiryPolicy>> expires_after;  // set, or cleared with nullopt
};

struct AddFileRequest {
  std::string file_id;
  FileAttributes attributes;
  ChunkingOptions chunking = ChunkingOptions::Auto();
  // The extracted text goes through the service's redact hook (VectorStoreServiceOptions) before
  // chunking, so that chunks, embeddings, keyword terms and citations only hold the redacted
  // text; without a hook the file fails rather than being ingested as it is. Kept with the file.
  bool redact_pii = false;
};

struct CreateBatchRequest {
  std::vector<AddFileRequest> files;  // 1..500
};

enum class Ranker { kHybrid, kKeyword, kVector };

struct SearchRequest {
  std::vector<std::string> queries;  // one or more; hits of each are fused
  std::optional<AttributeFilter> filter;
  int max_num_results = 10;    // 1..50
  double score_threshold = 0;  // 0..1, on the normalised score
  Ranker ranker = Ranker::kHybrid;
  // Per-document access: whether the caller may read a file of the store. Runs on each
  // candidate file before ranking, inside both indexes, so a file it refuses never takes a
  // place, a score or a count. Null: every file.
  std::function<bool(const VectorStoreFileInfo&)> may_read;
};

// One passage found: the chunk's text and where it is, for citations.
struct SearchHit {
  std::string file_id;
  std::string filename;
  double score = 0;  // 0..1
  FileAttributes attributes;
  std::string text;
  int chunk_index = 0;       // in the file
  std::string heading_path;  // "Install > Debian"
  int page = 0;              // PDF page, 0 otherwise
  size_t begin = 0;          // byte range in the extracted text
  size_t end = 0;
};

struct SearchResults {
  std::vector<SearchHit> hits;  // best first, at most max_num_results
};

// Text -> vectors. Implementations: the gateway's embedding targets (the local example model or
// an upstream); tests use a deterministic fake.
class Embedder {
 public:
  virtual ~Embedder() = default;
  // One vector per text, every vector of dimension(). Blocking (called from worker threads).
  virtual Result<std::vector<std::vector<float>>> Embed(const std::vector<std::string>& texts) = 0;
  virtual size_t dimension() const = 0;
  virtual std::string name() const = 0;  // recorded with each store (a change re-embeds)
};

class VectorStores {
 public:
  virtual ~VectorStores() = default;

  // Errors for all: NotFound (unknown or another tenant's store, file or batch), InvalidArgument
  // naming the field, FailedPrecondition for a file id the Files API does not hold.
  virtual Result<VectorStoreInfo> CreateStore(const std::string& tenant,
                                              const CreateStoreRequest& request) = 0;
  virtual Result<VectorStoreInfo> GetStore(const std::string& tenant, const std::string& id) = 0;
  virtual Result<Page<VectorStoreInfo>> ListStores(const std::string& tenant,
                                                   const PageRequest& page) = 0;
  virtual Result<VectorStoreInfo> ModifyStore(const std::string& tenant, const std::string& id,
                                              const ModifyStoreRequest& request) = 0;
  // Removes the store, its files' chunks from every index, and its batches.
  virtual Status DeleteStore(const std::string& tenant, const std::string& id) = 0;

  // Adding a file already in the store answers it as it is.
  virtual Result<VectorStoreFileInfo> AddFile(const std::string& tenant,
                                              const std::string& store_id,
                                              const AddFileRequest& request) = 0;
  virtual Result<VectorStoreFileInfo> GetFile(const std::string& tenant,
                                              const std::string& store_id,
                                              const std::string& file_id) = 0;
  // `status`, `batch_id`: only those files.
  virtual Result<Page<VectorStoreFileInfo>> ListFiles(const std::string& tenant,
                                                      const std::string& store_id,
                                                      const PageRequest& page,
                                                      std::optional<IngestStatus> status,
                                                      const std::string& batch_id) = 0;
  virtual Result<VectorStoreFileInfo> UpdateFileAttributes(const std::string& tenant,
                                                           const std::string& store_id,
                                                           const std::string& file_id,
                                                           const FileAttributes& attributes) = 0;
  // Removes the file from the store and its chunks from both indexes, durably.
  virtual Status RemoveFile(const std::string& tenant, const std::string& store_id,
                            const std::string& file_id) = 0;
  // The file's chunks in order (GET .../files/{id}/content).
  virtual Result<std::vector<std::string>> FileContent(const std::string& tenant,
                                                       const std::string& store_id,
                                                       const std::string& file_id) = 0;
  // The Files API deleted the file: removed from every store of the tenant.
  virtual Status ForgetFile(const std::string& tenant, const std::string& file_id) = 0;

  virtual Result<FileBatchInfo> CreateBatch(const std::string& tenant, const std::string& store_id,
                                            const CreateBatchRequest& request) = 0;
  virtual Result<FileBatchInfo> GetBatch(const std::string& tenant, const std::string& store_id,
                                         const std::string& batch_id) = 0;
  // Files of the batch not yet ingested become "cancelled".
  virtual Result<FileBatchInfo> CancelBatch(const std::string& tenant, const std::string& store_id,
                                            const std::string& batch_id) = 0;

  // Embeds the queries (not for kKeyword), searches both indexes with the filter and may_read
  // applied inside each, fuses, and keeps hits with score >= score_threshold.
  virtual Result<SearchResults> Search(const std::string& tenant, const std::string& store_id,
                                       const SearchRequest& request) = 0;
};

}  // namespace rampart::knowledge::hub
