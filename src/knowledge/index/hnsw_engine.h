#pragma once

// The embedded engine behind NewHnswEngine (knowledge/index/engine.h; docs/vector-indexes.md,
// "The search engine"). Declared here for the tests and the benchmark, which also wait for its
// background compactions; everything else uses it as an IndexEngine.
//
// Concurrency: one reader/writer lock that prefers writers guards the published state (the
// namespaces, their id maps, slots and metadata indexes). Readers hold it shared for a whole
// read. The writer adds an upsert's nodes to the graph without it (hnswlib lets additions run
// beside searches; readers skip nodes not yet published), then takes it exclusively for the
// short step that publishes the whole Apply: so a reader sees an Apply whole or not at all. A
// node that would become the graph's new entry point, a graph resize and a graph swap after
// compaction also happen under the exclusive lock.

#include <pthread.h>

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "knowledge/index/engine.h"

namespace rampart::knowledge {

class HnswGraph;
struct Namespace;
struct Slot;

// A reader/writer lock whose waiting writer holds back new readers (glibc's default lets a
// steady stream of readers starve the writer). Meets SharedMutex for std::shared_lock.
class WriterPreferringMutex {
 public:
  WriterPreferringMutex();
  ~WriterPreferringMutex();
  WriterPreferringMutex(const WriterPreferringMutex&) = delete;
  WriterPreferringMutex& operator=(const WriterPreferringMutex&) = delete;
  void lock();
  void unlock();
  void lock_shared();
  void unlock_shared();

 private:
  pthread_rwlock_t lock_;
};

class HnswEngine final : public IndexEngine {
 public:
  // REQUIRES: options checked (NewHnswEngine does).
  explicit HnswEngine(const EngineOptions& options);
  ~HnswEngine() override;

  const EngineOptions& options() const override { return options_; }
  Result<WriteOp> ResolveUpsert(std::string_view name_space,
                                std::vector<VectorRecord> records) const override;
  Result<std::optional<WriteOp>> ResolveUpdate(const UpdateRequest& request) const override;
  Result<WriteOp> ResolveDelete(const DeleteRequest& request) const override;
  void Apply(const WriteOp& op) override;

  Result<QueryResult> Query(const QueryRequest& request) const override;
  std::vector<VectorRecord> Fetch(std::string_view name_space,
                                  std::span<const std::string> ids) const override;
  Result<ListPage> List(std::string_view name_space, std::string_view prefix, size_t limit,
                        std::string_view token) const override;
  Result<IndexStats> Stats(const FilterNode* filter) const override;
  // Takes the writer mutex (writes wait, reads go on) to copy each namespace's graph.
  std::unique_ptr<EngineView> View() const override;
  size_t MemoryBytes() const override;
  Status ImportNamespace(std::vector<VectorRecord>& records, const NamespaceGraph& graph) override;

  // Queues every namespace with any tombstone for compaction now (tests, benchmarks).
  void CompactAll();
  // Blocks until no compaction is queued or running.
  void WaitForCompactions() const;
  uint64_t compactions_done() const;

 private:
  friend class QueryPlanner;

  std::shared_ptr<Namespace> FindNamespace(std::string_view name) const;  // REQUIRES: a lock
  std::unique_ptr<HnswGraph> NewGraph(size_t capacity) const;
  size_t RecordBytes(const VectorRecord& record) const;
  size_t GraphBytesPerNode() const;  // an estimate, for the memory limit's check
  Status CheckMemory(size_t added_bytes) const;

  // The writer's steps (writer_mutex_ held).
  void ApplyUpsert(const std::string& name, const std::vector<VectorRecord>& records);
  void ApplyDeleteIds(const std::string& name, const std::vector<std::string>& ids);
  void ApplyDeleteAll(const std::string& name);
  void AddNode(Namespace& ns, const Slot& slot, uint32_t label);
  void Tombstone(Namespace& ns, uint32_t slot);  // REQUIRES: the exclusive lock too
  void Account(Namespace& ns);                   // REQUIRES: the exclusive lock too
  void MaybeQueueCompaction(const std::shared_ptr<Namespace>& ns);

  void CompactionLoop();
  void Compact(const std::shared_ptr<Namespace>& ns);

  const EngineOptions options_;

  mutable WriterPreferringMutex state_lock_;
  mutable std::mutex writer_mutex_;  // Apply, compaction's catch-up and swap, View's graph copy
  std::map<std::string, std::shared_ptr<Namespace>, std::less<>> namespaces_;
  size_t memory_bytes_ = 0;  // state_lock_

  mutable std::mutex compaction_mutex_;
  mutable std::condition_variable compaction_changed_;
  std::deque<std::weak_ptr<Namespace>> compaction_queue_;
  bool compacting_ = false;
  bool stopping_ = false;
  uint64_t compactions_ = 0;
  std::thread compactor_;
};

}  // namespace rampart::knowledge
