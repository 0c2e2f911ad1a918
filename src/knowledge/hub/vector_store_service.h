#pragma once

// The vector store service: VectorStores (vector_stores.h) over the Store (stores, files,
// batches, chunks; store.h), the Files API's bytes (file_storage.h) and an Embedder, with the
// in-memory indexes of every store (vector_store_index.h). docs/knowledge-hub.md, "Vector
// stores", "Search" and "Scale-out", describes what it does.
//
//   - Ingestion: `workers` threads claim files in progress in the Store (a lease, so replicas
//     sharing a PostgreSQL store never ingest one file at once), ingest them
//     (vector_store_ingest.h) and write chunks and status in one transaction. A stop gives the
//     claim back; a crash leaves it to expire after `lease`.
//   - Following: the indexes are built from the Store at Start and follow its change sequence,
//     every `sync_interval` and right after each local write, so writes by another replica
//     appear here within one interval.
//
// Threads: thread-safe; Start and Stop from one owner thread. Every VectorStores call blocks on
// the Store (and Search on the embedder).

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "core/status.h"
#include "crypto/envelope.h"
#include "knowledge/hub/analyzer.h"
#include "knowledge/hub/extract.h"
#include "knowledge/hub/file_storage.h"
#include "knowledge/hub/vector_store_index.h"
#include "knowledge/hub/vector_stores.h"
#include "store/store.h"

namespace rampart::knowledge::hub {

struct VectorStoreServiceOptions {
  size_t workers = 1;       // ingestion threads, 1..16
  size_t embed_batch = 64;  // texts per Embed call, 1..2048
  std::chrono::milliseconds sync_interval{1000};
  std::chrono::seconds lease{300};  // how long a claim on a file lasts without its worker
  // The BM25 analyser of every store: English (Snowball) by default; kChinese for ICU words.
  AnalyzerLanguage language = AnalyzerLanguage::kEnglish;
  // The terms of Chinese text (kChinese, or kAuto on Chinese): ICU words, bigrams or both.
  ChineseTerms chinese_terms = ChineseTerms::kWordsAndBigrams;
  Fusion fusion = Fusion::kReciprocalRank;
  // A vector ranking's weight in hybrid search against the keyword ranking's 1 (0..100; 0 makes
  // hybrid rank as keyword alone).
  double vector_weight = 1;
  // The HNSW graphs' build-time breadth: the graphs are rebuilt from the store at every start,
  // where building dominates (docs/benchmarks.md), so lower than the engine's 200.
  size_t hnsw_ef_construction = 100;
  const crypto::Envelope* envelope = nullptr;  // set: chunk texts sealed at rest ...
  std::string seal_key;                        // ... under this keyring key
  std::string worker_id;                       // "" : host name, pid and a random suffix
  ExtractOptions extract;
  std::function<int64_t()> now_unix;  // null: the wall clock (tests move time for expiry)
  // PII redaction of a file added with redact_pii: the tenant and the extracted text (one block
  // at a time) -> the text with personal data replaced. The app builds it from the guard (a later
  // module: this is its hook). Called from the ingestion threads, so it must be thread-safe. An
  // InvalidArgument or PayloadTooLarge (a type the guard blocks, invalid UTF-8, too long a text)
  // fails the file with invalid_file and the error's message, any other error with server_error.
  // Null: no guard, and a flagged file fails with server_error, never ingested unredacted.
  std::function<Result<std::string>(const std::string& tenant, std::string_view text)> redact;
};

class VectorStoreService : public VectorStores {
 public:
  // Builds the indexes from the Store and starts the threads. Called once.
  virtual Status Start() = 0;
  // Stops the threads (a file being ingested is given back to the Store unfinished). Idempotent;
  // the destructor stops too.
  virtual void Stop() = 0;
  // Whether Stop was called (it may still be waiting for a worker).
  virtual bool stopping() const = 0;
  // Follows the change sequence now (tests; Start's threads do it every sync_interval).
  virtual Status SyncNow() = 0;
};

// `store`, `files` and `embedder` must outlive the service. InvalidArgument for options out of
// range.
Result<std::unique_ptr<VectorStoreService>> NewVectorStoreService(
    store::Store* store, FileStorage* files, Embedder* embedder,
    const VectorStoreServiceOptions& options);

}  // namespace rampart::knowledge::hub
