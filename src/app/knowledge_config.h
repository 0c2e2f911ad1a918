#pragma once

// The `knowledge:` section of the YAML config file (docs/vector-indexes.md,
// docs/configuration.md): vector indexes served with Pinecone's API under /pinecone. The
// section present turns them on (an empty map, `knowledge: {}`, takes every default):
//
//   knowledge:
//     enabled: true
//     indexes_dir: ./data/indexes    # default: <data-dir>/indexes
//     read_only: false               # serve the indexes there read-only (a replica)
//     public_url: ""                 # the address clients reach, for index descriptions' host
//     max_memory_mb: 0               # per index; 0: no limit
//     hnsw_m: 16                     # HNSW links per node
//     ef_construction: 200           # HNSW build-time breadth
//     default_ef: 100                # HNSW query breadth (at least topK)
//     compaction_ratio: 0.25         # rebuild a namespace's graph once this share is stale
//     snapshot_every_records: 200000 # a snapshot after this many logged records ...
//     snapshot_every_mb: 512         # ... or this much log
//     segment_mb: 64                 # a new log segment once the current one is this large
//     max_pending_writes: 100000     # writes waiting for the log; more are refused (429)
//     replica_poll_ms: 2000          # how often a read-only replica looks for a new snapshot
//     seal_snapshots: false          # encrypt snapshots with the keyring (needs a master key)
//     worker_threads: 4              # threads serving reads and parsing requests
//     max_queued_requests: 256       # requests waiting for them; more get 429
//     vector_stores:                 # OpenAI's Vector Stores API under /v1/vector_stores
//       enabled: true
//       embedding_target: ""         # a gateway target; empty: the first with a local_model
//       embedding_batch: 64          # texts per embedding call
//       embedding_timeout_ms: 120000 # one Embed call, all its batches
//       ingestion_workers: 2         # threads extracting, chunking and embedding files
//       language: english            # BM25 analyser: english, chinese or auto
//       chinese_terms: both          # Chinese BM25 terms: words, bigrams or both
//       fusion: rrf                  # hybrid ranking: rrf or linear
//       vector_weight: 1             # the vector ranking's weight, the keyword one's is 1
//       seal_chunks: false           # encrypt chunk text at rest with the keyring
//       seal_key: vector-stores      # ... under this keyring key
//       worker_threads: 4            # threads serving the API's requests
//       max_queued_requests: 256     # requests waiting for them; more get 429
//
// Unknown keys, wrong types and values out of range are errors naming the key and its line.

#include <optional>
#include <string>

#include "core/status.h"
#include "knowledge/index/backend.h"

namespace rampart::app {

// knowledge.vector_stores: the Vector Stores API and the service behind it (docs/knowledge-hub.md).
struct VectorStoresConfig {
  bool enabled = true;
  std::string embedding_target;  // empty: the gateway's first target with a local model
  size_t embedding_batch = 64;
  int64_t embedding_timeout_ms = 120'000;
  size_t ingestion_workers = 2;
  std::string language = "english";    // english, chinese, auto
  std::string chinese_terms = "both";  // words, bigrams, both
  std::string fusion = "rrf";          // rrf, linear
  double vector_weight = 1;            // against the keyword ranking's 1
  bool seal_chunks = false;
  std::string seal_key = "vector-stores";
  // Each store's index kept in a snapshot under <data-dir>/vector-stores, loaded at start
  // (docs/knowledge-hub.md, "Index snapshots"); false: every start rebuilds from the chunks.
  bool index_snapshots = true;
  size_t worker_threads = 4;
  size_t max_queued_requests = 256;
};

struct KnowledgeConfig {
  bool enabled = true;
  std::string indexes_dir;  // empty: <data-dir>/indexes
  bool read_only = false;
  std::string public_url;
  knowledge::EngineOptions engine;  // dimension and metric unset: each index's own
  knowledge::DurabilityOptions durability;
  bool seal_snapshots = false;
  size_t worker_threads = 4;
  size_t max_queued_requests = 256;
  std::optional<VectorStoresConfig> vector_stores;  // the section present (and enabled) turns it on
};

// Reads `path`'s knowledge: section: nullopt when there is none (no vector indexes). Errors:
// NotFound for a file that cannot be read; InvalidArgument naming the key.
Result<std::optional<KnowledgeConfig>> LoadKnowledgeConfig(const std::string& path);

}  // namespace rampart::app
