#pragma once

// Snapshots of one vector store's index (StoreIndex) on local disk, so that a start loads the
// index instead of rebuilding it from the Store's chunks (docs/knowledge-hub.md, "Index
// snapshots"). The file is the vector indexes' snapshot format (knowledge/index/snapshot.h,
// format 3): the HNSW engine's records and graph, then the service's own section: the files
// (their infos and chunk ids), BM25's terms, and each chunk's text, position and BM25 terms
// (ids and frequencies), so that loading analyses no text and builds no graph.
// The header's sequence is the Store's vector store change sequence the index reflects (every
// change up to it; later ones are replayed), and its tag names what the index was built with
// (format, dimension, embedder, analyser, ef_construction, sealing): a snapshot with another
// tag is refused. Sealed (every chunk an envelope under the chunks' keyring key, bound to the
// store's id) when the service seals chunks.
//
// One folder per store, `<directory>/<store id>/snapshot-<S>.snap`; the newest two are kept.
//
// Threads: the functions are independent; a folder must be written by one thread at a time.

#include <cstdint>
#include <memory>
#include <string>

#include "core/status.h"
#include "knowledge/hub/vector_store_index.h"
#include "knowledge/index/snapshot.h"

namespace rampart::knowledge::hub {

struct StoreSnapshotSettings {
  size_t dimension = 0;
  std::shared_ptr<const Analyzer> analyzer;
  size_t ef_construction = 100;
  std::string tag;                           // StoreSnapshotTag
  const crypto::Keyring* keyring = nullptr;  // set: sealed ...
  std::string key_name;                      // ... under this key
};

// The tag of an index built with these settings (all but the keyring are part of it, as is the
// format version of the service's section).
std::string StoreSnapshotTag(size_t dimension, const std::string& embedder,
                             AnalyzerLanguage language, ChineseTerms chinese_terms,
                             size_t ef_construction, bool sealed);

// Writes `state` as the store's snapshot at `sequence` (temporary file, fsync, rename, fsync of
// the folder; the folder is made when absent), then deletes all but the newest two.
Result<SnapshotInfo> WriteStoreSnapshot(const std::string& folder, const std::string& store_id,
                                        const StoreIndexState& state, uint64_t sequence,
                                        const StoreSnapshotSettings& settings);

struct LoadedStoreSnapshot {
  std::unique_ptr<StoreIndex> index;
  SnapshotInfo info;
};

// The newest snapshot in `folder` that loads (an older one when the newest fails). NotFound
// when there is none; otherwise the newest one's error (corrupt, another tag, a key that does
// not open it), which the caller logs before it rebuilds the index.
Result<LoadedStoreSnapshot> LoadStoreSnapshot(const std::string& folder,
                                              const std::string& store_id,
                                              const StoreSnapshotSettings& settings);

}  // namespace rampart::knowledge::hub
