#pragma once

// One namespace of the embedded engine (knowledge/index/hnsw_engine.h): its records by slot, the
// id map, the inverted metadata indexes and the HNSW graph. Internal to the engine's .cc files.
//
// Slots: every record written gets a new slot number (never reused), which is also its label in
// the graph. Replacing or deleting a record empties its slot, removes it from the id map and the
// metadata indexes, and marks its graph node deleted (a tombstone), so a search can never return
// it. Compaction rebuilds the graph from the live slots; slot numbers stay as they are.
//
// Threads: the engine's writer mutates a Namespace under the engine's exclusive lock (and adds
// graph nodes, which hnswlib allows concurrently with searches, under no lock); readers read it
// under the shared lock. A slot number at or past slots.size() is a node the writer has added to
// the graph but not yet published: readers skip it.

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "knowledge/index/hnsw_graph.h"
#include "knowledge/index/metadata_index.h"
#include "knowledge/index/vector_types.h"

namespace rampart::knowledge {

// A record as stored; immutable once published, shared with views (snapshots) that outlive it.
struct Slot {
  VectorRecord record;
  std::vector<float> normalized;  // cosine: the unit-length values searched; otherwise empty
  const float* vector() const {
    return normalized.empty() ? record.values.data() : normalized.data();
  }
};

struct Namespace {
  std::string name;
  std::vector<std::shared_ptr<const Slot>> slots;  // by slot number; null once deleted
  std::map<std::string, uint32_t, std::less<>> ids;
  MetadataIndex metadata;
  std::unique_ptr<HnswGraph> graph;
  size_t record_bytes = 0;          // the live records' own bytes (values, ids, metadata)
  size_t accounted_bytes = 0;       // what the engine's total holds for this namespace
  bool compaction_pending = false;  // writer mutex
};

}  // namespace rampart::knowledge
