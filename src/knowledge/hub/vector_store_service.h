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
//   - Following: the indexes are made at Start (below) and follow the Store's change sequence,
//     every `sync_interval` and right after each local write, so writes by another replica
//     appear here within one interval.
//   - Snapshots (when `snapshot_directory` is set; vector_store_snapshot.h): Start loads each
//     store's snapshot and replays the changes after it, and rebuilds from the Store's chunks a
//     store whose snapshot is missing or does not load (logged). A thread rewrites a store's
//     snapshot once enough of its chunks changed, and Stop writes those changed since.
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
  // The HNSW graphs' build-time breadth: a start without snapshots rebuilds the graphs from the
  // store, where building dominates (docs/benchmarks.md), so lower than the engine's 200.
  size_t hnsw_ef_construction = 100;
  // The folder of the stores' index snapshots, made when absent (the server's data dir +
  // "/vector-stores"); "": none, every start rebuilds the indexes from the Store.
  std::string snapshot_directory;
  // A store's snapshot is rewritten once this many of its chunks were added or removed since the
  // last one, or a quarter of its chunks, whichever is more; the thread looks every interval.
  size_t snapshot_min_changes = 1000;
  std::chrono::milliseconds snapshot_interval{10000};
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

// How Start found the indexes (logged too; tests and the start benchmark read it).
struct StartSummary {
  size_t stores_loaded = 0;   // from their snapshots
  size_t stores_rebuilt = 0;  // from the Store's chunks (no snapshot, or one that did not load)
  size_t changes_replayed = 0;
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
  // Writes the snapshot of every store changed since its last one (or without one), and
  // deletes the snapshots of stores that are gone. OK without a snapshot_directory. Tests; the
  // snapshot thread and Stop do it themselves.
  virtual Status SnapshotNow() = 0;
  // Valid once Start returned.
  virtual StartSummary start_summary() const = 0;
};

// `store`, `files` and `embedder` must outlive the service. InvalidArgument for options out of
// range.
Result<std::unique_ptr<VectorStoreService>> NewVectorStoreService(
    store::Store* store, FileStorage* files, Embedder* embedder,
    const VectorStoreServiceOptions& options);

}  // namespace rampart::knowledge::hub
