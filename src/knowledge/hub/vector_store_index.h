#pragma once

// One vector store in memory: its completed files (info, attributes) and their chunks, indexed
// for BM25 (bm25.h) and for vectors (an HNSW engine, knowledge/index/engine.h, cosine, one
// namespace, each chunk's file id as metadata), and the hybrid search over both with the
// caller's filter and access applied inside each index, so a file it refuses never takes a
// place in the top k. Internal to the vector store service (vector_store_service.cc), which
// keeps it in step with the Store.
//
// Threads: thread-safe; writers (ReplaceFile, RemoveFile, UpdateFile) exclude each other and
// searches, searches run concurrently.

#include <cstdint>
#include <map>
#include <memory>
#include <shared_mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/status.h"
#include "knowledge/hub/analyzer.h"
#include "knowledge/hub/bm25.h"
#include "knowledge/hub/vector_stores.h"
#include "knowledge/index/engine.h"

namespace rampart::knowledge::hub {

struct IndexedChunk {
  int chunk_index = 0;
  std::string text;
  std::string heading_path;
  int page = 0;
  size_t begin = 0;
  size_t end = 0;
  std::vector<float> embedding;
};

// One file of a StoreIndex as a snapshot carries it (vector_store_snapshot.h).
struct StoreIndexFile {
  VectorStoreFileInfo info;
  std::vector<ChunkId> chunks;
};

// A StoreIndex's contents at one moment (StoreIndex::Capture), to be written later on another
// thread while the index goes on changing. Chunks are shared with the index, not copied.
struct StoreIndexState {
  std::unique_ptr<EngineView> vectors;
  std::vector<StoreIndexFile> files;
  std::unordered_map<ChunkId, std::shared_ptr<const IndexedChunk>> chunks;  // no embeddings
  Bm25Contents bm25;
  ChunkId next_chunk = 1;
  uint64_t changes = 0;  // changed_chunks() when captured
};

enum class Fusion { kReciprocalRank, kLinear };

struct IndexSearch {
  std::vector<std::string> queries;
  std::vector<std::vector<float>> query_vectors;  // one per query unless ranker is kKeyword
  Ranker ranker = Ranker::kHybrid;
  Fusion fusion = Fusion::kReciprocalRank;
  // The weight of each vector list against each keyword list's 1 (fusion.h's weights).
  double vector_weight = 1;
  const AttributeFilter* filter = nullptr;
  const std::function<bool(const VectorStoreFileInfo&)>* may_read = nullptr;
  size_t max_results = 10;
  double score_threshold = 0;
};

class StoreIndex {
 public:
  static Result<std::unique_ptr<StoreIndex>> Create(size_t dimension,
                                                    std::shared_ptr<const Analyzer> analyzer,
                                                    size_t ef_construction = 100);

  // Replaces the file and its chunks whole (a file not yet known is added). InvalidArgument for
  // an embedding of the wrong dimension (nothing changes then).
  Status ReplaceFile(const VectorStoreFileInfo& info, std::vector<IndexedChunk> chunks);
  void RemoveFile(const std::string& file_id);
  // New attributes for a file already indexed (absent: nothing).
  void UpdateAttributes(const std::string& file_id, const FileAttributes& attributes);

  Result<SearchResults> Search(const IndexSearch& search) const;

  size_t chunk_count() const;
  size_t file_count() const;
  // Chunks added or removed since the index was made (snapshots are due after enough of them).
  uint64_t changed_chunks() const;

  // The contents now (under the shared lock: searches go on; writers wait while the engine's
  // graphs are copied).
  StoreIndexState Capture() const;
  // An index holding `files` and `chunks`, BM25 as `bm25` (as Capture exported it; the texts
  // are not analysed again) and `vectors`, an engine made with the same options as Create's and
  // holding each chunk's vector under its id. InvalidArgument when the parts disagree (a chunk
  // of no file or of two, counts that differ); nothing is kept then.
  static Result<std::unique_ptr<StoreIndex>> Restore(
      size_t dimension, std::shared_ptr<const Analyzer> analyzer,
      std::unique_ptr<IndexEngine> vectors, std::vector<StoreIndexFile> files,
      std::unordered_map<ChunkId, std::shared_ptr<const IndexedChunk>> chunks, Bm25Contents bm25,
      ChunkId next_chunk);

 private:
  struct FileEntry {
    VectorStoreFileInfo info;
    uint32_t ordinal = 0;  // the file's slot in an allowed-files mask
    std::vector<ChunkId> chunks;
  };
  struct ChunkEntry {
    uint32_t file_ordinal = 0;
    std::string file_id;
    std::shared_ptr<const IndexedChunk> chunk;  // shared with captures
  };

  StoreIndex(size_t dimension, std::unique_ptr<Bm25Index> bm25,
             std::unique_ptr<IndexEngine> vectors)
      : dimension_(dimension), bm25_(std::move(bm25)), vectors_(std::move(vectors)) {}
  void RemoveLocked(const std::string& file_id);

  const size_t dimension_;
  mutable std::shared_mutex mutex_;
  std::map<std::string, FileEntry> files_;          // guarded by mutex_
  std::unordered_map<ChunkId, ChunkEntry> chunks_;  // guarded by mutex_
  std::vector<uint32_t> free_ordinals_;             // guarded by mutex_
  uint32_t next_ordinal_ = 0;                       // guarded by mutex_
  ChunkId next_chunk_ = 1;                          // guarded by mutex_
  uint64_t changed_chunks_ = 0;                     // guarded by mutex_
  std::unique_ptr<Bm25Index> bm25_;
  std::unique_ptr<IndexEngine> vectors_;  // written under mutex_ held exclusively
};

}  // namespace rampart::knowledge::hub
