#pragma once

// IndexEngine: one index's records in memory, searchable (docs/vector-indexes.md). It knows
// nothing of files: the durable layer (knowledge/index/durable_index.h) logs each write before it
// hands it to Apply, and takes snapshots from View.
//
// Threads: one writer (Resolve* and Apply are called by one thread at a time, in log order);
// any number of readers (Query, Fetch, List, Stats, View) at once, concurrently with the writer.
// A reader sees each Apply whole or not at all, and sees every Apply that returned before the
// read began.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "knowledge/index/vector_types.h"

namespace rampart::knowledge {

struct EngineOptions {
  size_t dimension = 0;  // 1..kMaxDimension
  Metric metric = Metric::kCosine;
  // Refuse writes (ResourceExhausted) that would take the engine's memory over this; 0: no limit.
  size_t max_memory_bytes = 0;
  // HNSW graph parameters (hnswlib's names): links per node, and the build-time search breadth.
  size_t hnsw_m = 16;
  size_t ef_construction = 200;
  // Search breadth for a query that names none (always at least its topK).
  size_t default_ef = 100;
  // A namespace's graph is rebuilt in the background once this share of its nodes are deleted
  // or replaced.
  double compaction_ratio = 0.25;
};

// A namespace's search graph as of a view, for a snapshot to carry so that loading need not
// rebuild it. Opaque outside the engine that exported it.
struct NamespaceGraph {
  std::string name_space;
  // The graph's label of each of the namespace's records, in the order the view visits them.
  std::vector<uint64_t> labels;
  std::string graph;  // the engine's own encoding
};

// A consistent cut of the engine's live records, taken at one moment and read later (on another
// thread, while the engine goes on taking writes).
class EngineView {
 public:
  virtual ~EngineView() = default;
  // Calls `visit` for every live record of every namespace, namespace by namespace; stops at
  // and returns the first error `visit` returns.
  virtual Status ForEach(const std::function<Status(std::string_view name_space,
                                                    const VectorRecord& record)>& visit) const = 0;
  virtual uint64_t record_count() const = 0;
  // The graphs of the namespaces, consistent with the records (none for engines without).
  virtual const std::vector<NamespaceGraph>& graphs() const {
    static const std::vector<NamespaceGraph> kNone;
    return kNone;
  }
};

class IndexEngine {
 public:
  virtual ~IndexEngine() = default;
  virtual const EngineOptions& options() const = 0;

  // ---- the writer's side: turn a request into the write to log, then apply it ---------------
  // Each checks the request against the index as it is now (dimension, finite values, limits,
  // sparse indices, metadata types and size, the memory limit): InvalidArgument naming the
  // field, or ResourceExhausted when the index would outgrow max_memory_bytes.
  virtual Result<WriteOp> ResolveUpsert(std::string_view name_space,
                                        std::vector<VectorRecord> records) const = 0;
  // The record merged with the update, as an upsert of that one record; nullopt when the id is
  // absent (Pinecone answers such an update with success and changes nothing).
  virtual Result<std::optional<WriteOp>> ResolveUpdate(const UpdateRequest& request) const = 0;
  // Ids, all, or the ids a filter matches now, as a DeleteIdsOp or DeleteAllOp.
  virtual Result<WriteOp> ResolveDelete(const DeleteRequest& request) const = 0;
  // Applies a logged write (also when replaying the log at start, where it must accept what an
  // earlier Resolve produced even if the limits have since changed). Never fails.
  virtual void Apply(const WriteOp& op) = 0;

  // ---- readers ------------------------------------------------------------------------------
  // InvalidArgument (wrong dimension, topK out of range, a query id that is absent: NotFound).
  virtual Result<QueryResult> Query(const QueryRequest& request) const = 0;
  // The records among `ids` that exist, in the order asked.
  virtual std::vector<VectorRecord> Fetch(std::string_view name_space,
                                          std::span<const std::string> ids) const = 0;
  // Ids in byte order starting with `prefix`, at most `limit`, after `token` (the previous
  // page's next_token; InvalidArgument when it is not one).
  virtual Result<ListPage> List(std::string_view name_space, std::string_view prefix, size_t limit,
                                std::string_view token) const = 0;
  // Counts per namespace, of the records `filter` matches when given.
  virtual Result<IndexStats> Stats(const FilterNode* filter) const = 0;

  // The live records now, and the namespaces' graphs for engines that have them (the embedded
  // engine copies them while writes wait: docs/vector-indexes.md, "Snapshots").
  virtual std::unique_ptr<EngineView> View() const = 0;
  virtual size_t MemoryBytes() const = 0;

  // ---- loading a snapshot -------------------------------------------------------------------
  // Adds a namespace the engine does not have, with `records` and the graph a view exported with
  // them, as if they had been upserted, without rebuilding the graph. Any disagreement between
  // graph and records (layout, damage, labels, values) is an error and leaves the engine and
  // `records` unchanged: the caller then applies the records as upserts. On success `records` is
  // moved from. Engines without graphs answer Unimplemented.
  virtual Status ImportNamespace(std::vector<VectorRecord>& records, const NamespaceGraph& graph) {
    (void)records;
    (void)graph;
    return Status(StatusCode::kUnimplemented, "this engine has no graphs to import");
  }
};

// The embedded engine: hnswlib graphs per namespace, Rampart's own id map and tombstones,
// inverted metadata indexes and an exact-scan planner (knowledge/index/hnsw_engine.cc).
// InvalidArgument for options out of range.
Result<std::unique_ptr<IndexEngine>> NewHnswEngine(const EngineOptions& options);

}  // namespace rampart::knowledge
