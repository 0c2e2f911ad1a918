#include "knowledge/index/durable_index.h"

#include <chrono>
#include <cstdio>

#include "core/logging.h"
#include "core/thread_name.h"
#include "knowledge/index/durable_files.h"
#include "knowledge/index/write_codec.h"

namespace rampart::knowledge {
namespace {

// A group is committed once its payloads reach this size even if more writes wait.
constexpr size_t kMaxGroupBytes = size_t{64} << 20;

uint64_t RecordCount(const WriteOp& op) {
  if (const auto* upsert = std::get_if<UpsertOp>(&op.change)) return upsert->records.size();
  if (const auto* deletion = std::get_if<DeleteIdsOp>(&op.change)) return deletion->ids.size();
  return 1;
}

}  // namespace

DurableIndex::DurableIndex(DurableIndexOptions options) : options_(std::move(options)) {}

DurableIndex::~DurableIndex() {
  const Status closed = Close();
  if (!closed.ok()) LOG_ERROR("index '{}': {}", options_.spec.name, closed.ToString());
}

Result<std::shared_ptr<DurableIndex>> DurableIndex::Open(DurableIndexOptions options) {
  if (options.sealing.index_name.empty()) options.sealing.index_name = options.spec.name;
  std::shared_ptr<DurableIndex> index(new DurableIndex(std::move(options)));
  RETURN_IF_ERROR(index->Recover());
  return index;
}

Result<std::pair<std::unique_ptr<IndexEngine>, uint64_t>> DurableIndex::LoadNewestSnapshot(
    bool fall_back) {
  const std::vector<SnapshotInfo> snapshots = ListSnapshots(options_.directory);
  Status first_error;
  for (const SnapshotInfo& snapshot : snapshots) {
    ASSIGN_OR_RETURN(std::unique_ptr<IndexEngine> engine,
                     options_.engine_factory(options_.spec.engine));
    Result<SnapshotInfo> loaded =
        LoadSnapshot(snapshot.path, options_.spec.engine, options_.sealing, *engine);
    if (loaded.ok()) {
      if (!first_error.ok()) {
        LOG_ERROR("index '{}': {}; recovered from the older snapshot '{}' and the log after it",
                  options_.spec.name, first_error.message(), snapshot.path);
      }
      return std::make_pair(std::move(engine), loaded->sequence);
    }
    // Only damage falls back: a wrong key or another index's file would fail the same way.
    if (loaded.status().code() != StatusCode::kInternal || !fall_back || !first_error.ok()) {
      return first_error.ok() ? loaded.status() : first_error;
    }
    first_error = loaded.status();
  }
  if (!first_error.ok()) return first_error;
  ASSIGN_OR_RETURN(std::unique_ptr<IndexEngine> engine,
                   options_.engine_factory(options_.spec.engine));
  return std::make_pair(std::move(engine), uint64_t{0});
}

Status DurableIndex::Recover() {
  const std::string& name = options_.spec.name;
  ASSIGN_OR_RETURN(auto loaded, LoadNewestSnapshot(/*fall_back=*/!options_.read_only));
  auto [engine, sequence] = std::move(loaded);
  snapshot_sequence_ = sequence;
  if (options_.read_only) {
    engine_ = std::move(engine);
    applied_sequence_ = sequence;
    poller_ = std::thread([this] {
      NameThisThread("index-poll");
      PollLoop();
    });
    return Status::Ok();
  }
  for (const SnapshotInfo& snapshot : ListSnapshots(options_.directory)) {
    if (snapshot.sequence <= sequence) {
      kept_sequences_.insert(kept_sequences_.begin(), snapshot.sequence);
    } else {
      // Newer than the one loaded, so damaged: kept aside for a look, out of the way of pruning.
      const std::string aside = snapshot.path + ".corrupt";
      if (::rename(snapshot.path.c_str(), aside.c_str()) != 0) {
        return ErrnoStatus("cannot set aside the damaged snapshot", snapshot.path);
      }
    }
  }
  IndexEngine& target = *engine;
  uint64_t replayed = 0;
  ASSIGN_OR_RETURN(log_, WriteAheadLog::Open(options_.directory, sequence,
                                             {.segment_bytes = options_.durability.segment_bytes},
                                             [&](uint64_t, WriteOp op) {
                                               target.Apply(op);
                                               ++replayed;
                                               return Status::Ok();
                                             }));
  engine_ = std::move(engine);
  applied_sequence_ = log_->last_sequence();
  records_since_snapshot_ = replayed;
  LOG_INFO("index '{}': recovered through write {} (snapshot {}, {} logged writes replayed)", name,
           log_->last_sequence(), sequence, replayed);
  snapshot_worker_ = std::make_unique<SerialWorker>("index-snapshot");
  if (kept_sequences_.empty()) {
    // A new index: an empty snapshot at once, so a read-only replica finds one.
    RETURN_IF_ERROR(SnapshotNow());
  }
  writer_ = std::thread([this] {
    NameThisThread("index-writer");
    WriterLoop();
  });
  return Status::Ok();
}

std::shared_ptr<IndexEngine> DurableIndex::engine() const {
  std::lock_guard lock(engine_mutex_);
  return engine_;
}

void DurableIndex::Submit(PendingWrite write) {
  if (options_.read_only) {
    write.done(FailedPrecondition("this replica serves index '{}' read-only", options_.spec.name));
    return;
  }
  {
    std::unique_lock lock(queue_mutex_);
    const size_t bound = options_.durability.max_pending_writes;
    if (!stopping_ && (bound == 0 || queue_.size() < bound)) {
      queue_.push_back(std::move(write));
      lock.unlock();
      queue_changed_.notify_one();
      return;
    }
    if (!stopping_) {
      lock.unlock();
      write.done(ResourceExhausted("index '{}' has {} writes waiting for its log; retry later",
                                   options_.spec.name, options_.durability.max_pending_writes));
      return;
    }
  }
  write.done(Unavailable("index '{}' is closing", options_.spec.name));
}

void DurableIndex::Upsert(std::string name_space, std::vector<VectorRecord> records,
                          WriteDone done) {
  Submit({UpsertWrite{std::move(name_space), std::move(records)}, std::move(done)});
}
void DurableIndex::Update(UpdateRequest request, WriteDone done) {
  Submit({std::move(request), std::move(done)});
}
void DurableIndex::Delete(DeleteRequest request, WriteDone done) {
  Submit({std::move(request), std::move(done)});
}

void DurableIndex::WriterLoop() {
  std::deque<PendingWrite> batch;
  while (true) {
    {
      std::unique_lock lock(queue_mutex_);
      queue_changed_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, and everything queued is done
      batch.swap(queue_);
    }
    Process(batch);
    batch.clear();
  }
}

void DurableIndex::Process(std::deque<PendingWrite>& batch) {
  std::vector<Resolved> group;
  std::vector<std::string> payloads;
  size_t group_bytes = 0;
  for (PendingWrite& write : batch) {
    // Writes that read the index resolve against everything queued before them.
    const bool reads_index = std::holds_alternative<UpdateRequest>(write.request) ||
                             (std::holds_alternative<DeleteRequest>(write.request) &&
                              std::get<DeleteRequest>(write.request).filter.has_value());
    if (reads_index && !group.empty()) {
      Commit(group, payloads);
      group_bytes = 0;
    }
    IndexEngine& engine = *engine_;  // never swapped in a writable index
    Result<std::optional<WriteOp>> resolved = std::optional<WriteOp>();
    if (auto* upsert = std::get_if<UpsertWrite>(&write.request)) {
      Result<WriteOp> op =
          engine.ResolveUpsert(CanonicalNamespace(upsert->name_space), std::move(upsert->records));
      resolved = op.ok() ? Result<std::optional<WriteOp>>(std::optional(std::move(*op)))
                         : Result<std::optional<WriteOp>>(op.status());
    } else if (auto* update = std::get_if<UpdateRequest>(&write.request)) {
      update->name_space = std::string(CanonicalNamespace(update->name_space));
      resolved = engine.ResolveUpdate(*update);
    } else {
      auto& deletion = std::get<DeleteRequest>(write.request);
      deletion.name_space = std::string(CanonicalNamespace(deletion.name_space));
      Result<WriteOp> op = engine.ResolveDelete(deletion);
      resolved = op.ok() ? Result<std::optional<WriteOp>>(std::optional(std::move(*op)))
                         : Result<std::optional<WriteOp>>(op.status());
    }
    if (!resolved.ok()) {
      write.done(resolved.status());
      continue;
    }
    if (!resolved->has_value()) {  // an update of an absent id: nothing to log
      write.done(Status::Ok());
      continue;
    }
    Resolved entry{std::move(write.done), std::move(**resolved), 0};
    entry.records = RecordCount(entry.op);
    std::string& payload = payloads.emplace_back();
    EncodeWriteOp(entry.op, payload);
    group_bytes += payload.size();
    group.push_back(std::move(entry));
    if (group_bytes >= kMaxGroupBytes) {
      Commit(group, payloads);
      group_bytes = 0;
    }
  }
  if (!group.empty()) Commit(group, payloads);
}

void DurableIndex::Commit(std::vector<Resolved>& group, std::vector<std::string>& payloads) {
  Result<uint64_t> last = log_->Append(payloads);
  if (!last.ok()) {
    LOG_ERROR("index '{}': {}", options_.spec.name, last.status().ToString());
    for (Resolved& entry : group) entry.done(last.status());
  } else {
    {
      std::lock_guard lock(apply_mutex_);
      for (const Resolved& entry : group) engine_->Apply(entry.op);
      applied_sequence_ = *last;
    }
    commits_.fetch_add(1, std::memory_order_relaxed);
    for (const Resolved& entry : group) records_since_snapshot_ += entry.records;
    for (const std::string& payload : payloads) bytes_since_snapshot_ += payload.size();
    for (Resolved& entry : group) entry.done(Status::Ok());
    MaybeSnapshot();
  }
  group.clear();
  payloads.clear();
}

void DurableIndex::MaybeSnapshot() {
  const DurabilityOptions& durability = options_.durability;
  if (records_since_snapshot_ < durability.snapshot_every_records &&
      bytes_since_snapshot_ < durability.snapshot_every_bytes) {
    return;
  }
  if (snapshot_in_flight_.exchange(true)) return;  // the next commit tries again
  records_since_snapshot_ = 0;
  bytes_since_snapshot_ = 0;
  std::shared_ptr<EngineView> view = engine_->View();  // at applied_sequence_, on this thread
  const uint64_t sequence = applied_sequence_.load();
  const Status posted = snapshot_worker_->Post([this, view, sequence] {
    const Status written = WriteSnapshotOf(*view, sequence);
    if (!written.ok()) LOG_ERROR("index '{}': {}", options_.spec.name, written.ToString());
    snapshot_in_flight_ = false;
  });
  if (!posted.ok()) snapshot_in_flight_ = false;
}

Status DurableIndex::WriteSnapshotOf(const EngineView& view, uint64_t sequence) {
  std::lock_guard lock(snapshot_mutex_);
  if (!kept_sequences_.empty() && kept_sequences_.back() >= sequence) return Status::Ok();
  const auto started = std::chrono::steady_clock::now();
  ASSIGN_OR_RETURN(SnapshotInfo info, WriteSnapshot(options_.directory, view, sequence,
                                                    options_.spec.engine, options_.sealing));
  kept_sequences_.push_back(sequence);
  const size_t keep = 2;
  while (kept_sequences_.size() > keep) kept_sequences_.erase(kept_sequences_.begin());
  snapshot_sequence_ = sequence;
  RETURN_IF_ERROR(PruneSnapshots(options_.directory, keep));
  // The log stays complete after the older kept snapshot, so it remains a usable fallback.
  if (kept_sequences_.size() == keep) RETURN_IF_ERROR(log_->DropThrough(kept_sequences_.front()));
  LOG_INFO("index '{}': snapshot {} ({} records) in {} ms", options_.spec.name, info.path,
           info.record_count,
           std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                                 started)
               .count());
  return Status::Ok();
}

Status DurableIndex::SnapshotNow() {
  if (options_.read_only) {
    return FailedPrecondition("this replica serves index '{}' read-only", options_.spec.name);
  }
  std::shared_ptr<EngineView> view;
  uint64_t sequence = 0;
  {
    std::lock_guard lock(apply_mutex_);
    view = engine_->View();
    sequence = applied_sequence_.load();
  }
  return WriteSnapshotOf(*view, sequence);
}

Status DurableIndex::Close() {
  std::lock_guard close_lock(close_mutex_);
  if (closed_) return Status::Ok();
  closed_ = true;
  {
    std::lock_guard lock(queue_mutex_);
    stopping_ = true;
  }
  queue_changed_.notify_all();
  {
    std::lock_guard lock(poll_mutex_);
    poll_stopping_ = true;
  }
  poll_stop_.notify_all();
  if (writer_.joinable()) writer_.join();
  if (poller_.joinable()) poller_.join();
  if (snapshot_worker_) snapshot_worker_->Stop();
  if (options_.read_only || log_ == nullptr) return Status::Ok();
  if (applied_sequence_.load() > snapshot_sequence_.load()) return SnapshotNow();
  return Status::Ok();
}

Result<QueryResult> DurableIndex::Query(const QueryRequest& request) const {
  return engine()->Query(request);
}
std::vector<VectorRecord> DurableIndex::Fetch(std::string_view name_space,
                                              std::span<const std::string> ids) const {
  return engine()->Fetch(CanonicalNamespace(name_space), ids);
}
Result<ListPage> DurableIndex::List(std::string_view name_space, std::string_view prefix,
                                    size_t limit, std::string_view token) const {
  return engine()->List(CanonicalNamespace(name_space), prefix, limit, token);
}
Result<IndexStats> DurableIndex::Stats(const FilterNode* filter) const {
  return engine()->Stats(filter);
}

Status DurableIndex::RefreshNow() {
  std::lock_guard refresh_lock(refresh_mutex_);
  const std::vector<SnapshotInfo> snapshots = ListSnapshots(options_.directory);
  if (snapshots.empty()) return Status::Ok();
  const SnapshotInfo& newest = snapshots.front();
  if (newest.sequence <= snapshot_sequence_.load() ||
      newest.sequence == failed_snapshot_sequence_) {
    return Status::Ok();
  }
  ASSIGN_OR_RETURN(std::unique_ptr<IndexEngine> fresh,
                   options_.engine_factory(options_.spec.engine));
  Result<SnapshotInfo> loaded =
      LoadSnapshot(newest.path, options_.spec.engine, options_.sealing, *fresh);
  if (!loaded.ok()) {
    // The writer may have replaced it while we read (it keeps two); the next poll sees the
    // newer one. Remember this one so a damaged file is not read again on every poll.
    if (loaded.status().code() != StatusCode::kNotFound) {
      failed_snapshot_sequence_ = newest.sequence;
    }
    return loaded.status();
  }
  {
    std::lock_guard lock(engine_mutex_);
    engine_ = std::move(fresh);
  }
  snapshot_sequence_ = loaded->sequence;
  applied_sequence_ = loaded->sequence;
  LOG_INFO("index '{}' (read-only): now serving snapshot {} ({} records)", options_.spec.name,
           loaded->path, loaded->record_count);
  return Status::Ok();
}

void DurableIndex::PollLoop() {
  const auto interval = std::chrono::milliseconds(
      std::max<uint32_t>(options_.durability.replica_poll_milliseconds, 1));
  std::unique_lock lock(poll_mutex_);
  while (true) {
    // A timed wait, not a sleep: Close wakes it at once.
    if (poll_stop_.wait_for(lock, interval, [this] { return poll_stopping_; })) return;
    lock.unlock();
    const Status refreshed = RefreshNow();
    if (!refreshed.ok()) {
      LOG_WARN("index '{}' (read-only): {}", options_.spec.name, refreshed.ToString());
    }
    lock.lock();
  }
}

}  // namespace rampart::knowledge
