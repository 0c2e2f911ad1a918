#pragma once

// DurableIndex: an IndexBackend over an in-memory IndexEngine made durable by a write-ahead log
// and snapshots in the index's folder (docs/vector-indexes.md, "Durability").
//
// Writes (group commit): callers queue them; one writer thread takes every queued write,
// resolves each against the engine (a refused one gets its error and is not logged), appends
// the resolved ones to the log with one fdatasync, applies them to the engine in log order, then
// runs their `done` callbacks. So a read sees every acknowledged write and never one that is not
// yet durable. A write that depends on the index's contents (an update, a delete by filter) is
// resolved only after the writes queued before it are applied. Upserts of one group are checked
// against the engine's memory limit as of the group's start, so a group may pass the limit by at
// most its own size.
//
// Snapshots: after an apply that takes the writes since the last snapshot past
// DurabilityOptions' thresholds, the writer takes the engine's View at that sequence S and a
// snapshot thread writes it; then the log segments wholly at or below the previous kept
// snapshot's sequence are deleted (so the older snapshot stays a usable fallback). Close writes
// a last snapshot. Open loads the newest snapshot that is intact (falling back to the older one
// when the newest is corrupt), then replays the log after it.
//
// Read-only mode (a replica sharing the folder with one writer): loads the newest snapshot,
// refuses writes, and polls the folder for a newer snapshot, which it loads on its poll thread
// and swaps in whole; reads in flight finish on the engine they started on.
//
// Threads: every method is thread-safe; `done` runs on the writer thread.

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <variant>

#include "core/serial_worker.h"
#include "knowledge/index/backend.h"
#include "knowledge/index/snapshot.h"
#include "knowledge/index/wal.h"

namespace rampart::knowledge {

using EngineFactory = std::function<Result<std::unique_ptr<IndexEngine>>(const EngineOptions&)>;

struct DurableIndexOptions {
  std::string directory;  // the index's folder (exists)
  IndexSpec spec;
  DurabilityOptions durability;
  SnapshotSealing sealing;  // keyring (optional) and the index's name
  bool read_only = false;
  EngineFactory engine_factory;  // makes the (empty) engine: NewHnswEngine in a server
};

class DurableIndex final : public IndexBackend {
 public:
  // Recovers the index (see above). Errors name the file: a corrupt log or snapshot, a sealed
  // snapshot that does not open, I/O errors.
  static Result<std::shared_ptr<DurableIndex>> Open(DurableIndexOptions options);
  ~DurableIndex() override;  // Close(), its error logged

  // Stops taking writes (later ones: Unavailable), finishes the queued ones, writes a last
  // snapshot when anything was logged since the previous one, joins the threads. Idempotent.
  Status Close();

  const IndexSpec& spec() const override { return options_.spec; }
  bool read_only() const override { return options_.read_only; }
  void Upsert(std::string name_space, std::vector<VectorRecord> records, WriteDone done) override;
  void Update(UpdateRequest request, WriteDone done) override;
  void Delete(DeleteRequest request, WriteDone done) override;
  Result<QueryResult> Query(const QueryRequest& request) const override;
  std::vector<VectorRecord> Fetch(std::string_view name_space,
                                  std::span<const std::string> ids) const override;
  Result<ListPage> List(std::string_view name_space, std::string_view prefix, size_t limit,
                        std::string_view token) const override;
  Result<IndexStats> Stats(const FilterNode* filter) const override;

  // The sequence of the last write applied, and of the newest snapshot written or loaded.
  uint64_t applied_sequence() const { return applied_sequence_.load(); }
  uint64_t snapshot_sequence() const { return snapshot_sequence_.load(); }
  // Group commits so far (one log append and fdatasync each): writes / commits is the mean group.
  uint64_t commits() const { return commits_.load(); }
  // Writes a snapshot now (on the calling thread, after the queued writes), for tests and tools.
  Status SnapshotNow();
  // Read-only mode: looks for a newer snapshot now and loads it (the poll thread's work).
  Status RefreshNow();

 private:
  struct UpsertWrite {
    std::string name_space;
    std::vector<VectorRecord> records;
  };
  struct PendingWrite {
    std::variant<UpsertWrite, UpdateRequest, DeleteRequest> request;
    WriteDone done;
  };
  struct Resolved {
    WriteDone done;
    WriteOp op;
    uint64_t records = 0;
  };

  explicit DurableIndex(DurableIndexOptions options);
  Status Recover();
  // A new engine holding the newest snapshot that loads (an older one when the newest is
  // corrupt and `fall_back`), and its sequence; an empty engine at 0 when there is none.
  Result<std::pair<std::unique_ptr<IndexEngine>, uint64_t>> LoadNewestSnapshot(bool fall_back);
  void Submit(PendingWrite write);
  void WriterLoop();
  void Process(std::deque<PendingWrite>& batch);
  void Commit(std::vector<Resolved>& group, std::vector<std::string>& payloads);
  void MaybeSnapshot();
  Status WriteSnapshotOf(const EngineView& view, uint64_t sequence);
  void PollLoop();
  std::shared_ptr<IndexEngine> engine() const;

  const DurableIndexOptions options_;
  mutable std::mutex engine_mutex_;  // guards engine_ (swapped by a read-only replica)
  std::shared_ptr<IndexEngine> engine_;
  std::unique_ptr<WriteAheadLog> log_;  // null when read-only

  std::mutex queue_mutex_;
  std::condition_variable queue_changed_;
  std::deque<PendingWrite> queue_;
  bool stopping_ = false;
  // Held by the writer while it applies a group, so that another thread can take a View and
  // know its sequence (SnapshotNow, Close).
  std::mutex apply_mutex_;

  std::atomic<uint64_t> applied_sequence_{0};
  std::atomic<uint64_t> commits_{0};
  std::atomic<uint64_t> snapshot_sequence_{0};
  std::mutex snapshot_mutex_;             // one snapshot written at a time; guards kept_sequences_
  std::vector<uint64_t> kept_sequences_;  // the snapshots on disk, oldest first
  std::atomic<bool> snapshot_in_flight_{false};
  uint64_t records_since_snapshot_ = 0;  // writer thread
  uint64_t bytes_since_snapshot_ = 0;    // writer thread

  std::mutex poll_mutex_;
  std::condition_variable poll_stop_;
  bool poll_stopping_ = false;  // guarded by poll_mutex_
  std::mutex refresh_mutex_;    // one RefreshNow at a time; guards failed_snapshot_sequence_
  uint64_t failed_snapshot_sequence_ = 0;  // the newest snapshot that did not load

  std::mutex close_mutex_;
  bool closed_ = false;
  std::thread writer_;
  std::thread poller_;
  std::unique_ptr<SerialWorker> snapshot_worker_;
};

}  // namespace rampart::knowledge
