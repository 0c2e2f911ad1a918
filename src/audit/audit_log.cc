// The audit log's writer: one thread takes what Append queued, hashes it from the log's head,
// writes it in one store transaction (one fsync for the batch) and signs checkpoints.

#include "audit/audit_log.h"

#include <condition_variable>
#include <future>
#include <mutex>
#include <optional>
#include <span>
#include <thread>
#include <vector>

#include "audit/checkpoint.h"
#include "audit/log_reader.h"
#include "audit/merkle.h"
#include "audit/record_codec.h"
#include "audit/record_compact.h"
#include "core/clock.h"
#include "core/logging.h"
#include "core/thread_name.h"
#include "store/audit_batch.h"
#include "store/store.h"

namespace rampart::audit {
namespace {

using Steady = std::chrono::steady_clock;

// How many times a batch is rebuilt after other writers took its sequence numbers before the
// writer gives up on it (each retry first catches up with what they wrote).
constexpr int kMaxConflicts = 1000;
constexpr int64_t kCatchUpPage = 4096;
// The queue's buffer of encoded records is kept between batches up to this size (a served
// record's tail is a few hundred bytes).
constexpr size_t kKeptBytes = size_t{4} << 20;

std::string_view DigestBytes(const Digest& digest) {
  return {reinterpret_cast<const char*>(digest.data()), digest.size()};
}

size_t Beyond(size_t count, size_t limit) { return count > limit ? count - limit : 0; }

int64_t NowUnixNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

struct Pending {
  // The record's compact tail (record_compact.h), bytes [offset, offset + length) of the queue's
  // buffer: encoded by the appending thread, where the record's memory is warm, into one buffer
  // that is reused, so that neither a record nor anything allocated for it crosses to the
  // writer (records the I/O threads allocated and the writer freed drained their allocator
  // caches, and the writer paid a cache miss for every string it read). The writer puts the
  // sequence in front when it commits (once per attempt: the sequence is known then).
  size_t offset = 0;
  size_t length = 0;
  UniqueFunction<void(Status)> done;  // sync mode and flushes; empty otherwise
  Steady::time_point queued;
  bool flush = false;  // a Flush marker, not a record
  bool checkpoint = false;
};

}  // namespace

struct AuditLog::Impl {
  Impl(store::Store& store_in, AuditOptions options_in, crypto::SigningKey key_in,
       std::string key_id_in)
      : store(store_in),
        options(options_in),
        key(std::move(key_in)),
        key_id(std::move(key_id_in)),
        frontier(options.digest) {}

  store::Store& store;
  const AuditOptions options;
  const crypto::SigningKey key;
  const std::string key_id;

  std::mutex mutex;
  std::condition_variable wake;
  // Guarded by mutex. A vector and a buffer the writer swaps with its own (emptied, their
  // capacity kept) to take everything at once: no allocation per record on the appending threads
  // and no move per record on the writer.
  std::vector<Pending> queue;
  std::string queued_bytes;  // the queued records' tails
  size_t in_writer = 0;   // guarded by mutex: taken by the writer, not yet committed and answered
  bool stopping = false;  // guarded by mutex

  // The head, touched by the writer thread only (and by Open before it starts).
  int64_t size = 0;
  Digest chain{};
  Frontier frontier;
  int64_t checkpoint_size = 0;
  Steady::time_point checkpoint_time = Steady::now();
  // The time of the log's first record, once read: where its first epoch starts. Record 1 never
  // changes (it is pruned only with an epoch, and then the epochs say where the next starts), so
  // a checkpoint need not read it again.
  std::optional<int64_t> first_record_time;

  // The writer's buffers, reused from batch to batch.
  store::AuditBatchBuilder builder;
  std::string leaf_input;  // the bytes a record's leaf hash covers
  std::string compact;     // what the batch stores of it (audit/record_compact.h)
  std::string canonical;   // canonical_leaves: the record's canonical encoding
  AuditRecord decoded;     // canonical_leaves: the record, decoded from its compact leaf

  std::thread writer;

  Status LoadHead();
  Status CatchUp();
  void Run();
  Status Commit(std::span<Pending> batch, std::string_view bytes, bool force_checkpoint);
  void CommitAndAnswer(std::span<Pending> batch, std::string_view bytes, bool stop);
  bool CheckpointDue(int64_t tree_size, bool force) const;
  Status MakeCheckpoint(int64_t tree_size, const Frontier& tree, const Digest& tree_chain,
                        int64_t unstored_first_time, store::AuditCheckpointRow& row,
                        std::optional<store::AuditEpochRow>& closes);
  void Checkpointed(const std::optional<store::AuditEpochRow>& closed);
  Status MaybeCheckpoint(bool force);
};

Status AuditLog::Impl::LoadHead() {
  ASSIGN_OR_RETURN(const std::optional<store::AuditCheckpointRow> last,
                   store.LastAuditCheckpoint());
  if (last.has_value()) {
    ASSIGN_OR_RETURN(frontier, Frontier::Decode(options.digest, last->tree_size, last->frontier));
    if (last->tree_size > 0) {
      ASSIGN_OR_RETURN(chain, ParseHashHex(last->chain_hash));
    }
    size = last->tree_size;
    checkpoint_size = size;
  }
  RETURN_IF_ERROR(CatchUp());
  // Records a signed checkpoint covers are gone (the log was truncated): appending after them
  // would leave a hole in the sequence. The operator must look first.
  ASSIGN_OR_RETURN(const int64_t last_sequence, store.LastAuditSequence());
  if (last_sequence != size) {
    return FailedPrecondition(
        "the audit log's records end at {}, but its checkpoint at tree size {} covers more: "
        "records were deleted (run `rampart audit verify`)",
        last_sequence, size);
  }
  return Status::Ok();
}

Status AuditLog::Impl::CatchUp() {
  while (true) {
    ASSIGN_OR_RETURN(const std::vector<store::AuditRow> rows,
                     store.ReadAuditRows(size, kCatchUpPage));
    if (rows.empty()) return Status::Ok();
    for (const store::AuditRow& row : rows) {
      if (row.sequence != size + 1) {
        return Internal("the audit log skips from record {} to {}: run `rampart audit verify`",
                        size, row.sequence);
      }
      ASSIGN_OR_RETURN(const Digest leaf, ParseHashHex(row.leaf_hash));
      ASSIGN_OR_RETURN(chain, ParseHashHex(row.chain_hash));
      frontier.Append(leaf);
      ++size;
    }
  }
}

Status AuditLog::Impl::Commit(std::span<Pending> batch, std::string_view bytes,
                              bool force_checkpoint) {
  for (int conflicts = 0;; ++conflicts) {
    // The batch is packed straight into the blob the store keeps (store/audit_batch.h, version
    // 3): per record its query fields and the rest of it in compact form, both from its tail.
    // The leaf hash covers the compact leaf input: the tail with its sequence in front (readers
    // rebuild it from the two). With canonical_leaves, version 2: the leaf hash covers the
    // canonical encoding of the record decoded back, made only to be hashed.
    builder.Start(size + 1, options.canonical_leaves ? store::kAuditBatchVersion2
                                                     : store::kAuditBatchVersion3);
    Frontier next_frontier = frontier;
    Digest next_chain = chain;
    int64_t sequence = size;
    int64_t first_time = 0;  // the batch's first record's
    for (const Pending& pending : batch) {
      if (pending.flush) continue;
      const std::string_view tail = bytes.substr(pending.offset, pending.length);
      CompactTail parts;
      // Append wrote it: a failure here is a bug, and the batch is not written.
      RETURN_IF_ERROR(ParseCompactTail(tail, parts).WithContext("a queued audit record"));
      if (sequence == size) first_time = parts.time_unix_ns;
      ++sequence;
      leaf_input.clear();
      compact.clear();
      CompactLeafFromTail(tail, parts, sequence, sequence, leaf_input, compact);
      Digest leaf;
      if (options.canonical_leaves) {
        RETURN_IF_ERROR(
            DecodeCompactLeaf(leaf_input, decoded).WithContext("a queued audit record"));
        leaf = LeafHash(options.digest, EncodeRecordInto(decoded, canonical));
        compact.clear();
        AppendCompactRecord(decoded, sequence, compact);
      } else {
        leaf = LeafHash(options.digest, leaf_input);
      }
      next_chain = ChainHash(options.digest, next_chain, leaf);
      next_frontier.Append(leaf);
      builder.Add(parts.time_unix_ns, parts.tenant, parts.principal, parts.trace_id,
                  parts.request_id, parts.action, compact, DigestBytes(leaf),
                  DigestBytes(next_chain));
    }
    if (builder.count() == 0) return Status::Ok();
    // A checkpoint due once this batch is in commits with it (one transaction and one sync for
    // both, not two): it is signed over the tree the batch completes.
    bool checkpointed = false;
    if (CheckpointDue(sequence, force_checkpoint)) {
      store::AuditCheckpointRow row;
      std::optional<store::AuditEpochRow> closes;
      const Status made = MakeCheckpoint(sequence, next_frontier, next_chain,
                                         size == 0 ? first_time : 0, row, closes);
      if (made.ok()) {
        builder.SetCheckpoint(std::move(row), std::move(closes));
        checkpointed = true;
      } else {
        // The records go in without it; MaybeCheckpoint tries again a period later.
        LOG_WARN("audit log: making a checkpoint failed: {}", made.ToString());
        checkpoint_time = Steady::now();
      }
    }
    const Status appended = store.AppendAuditBatch(builder.batch());
    if (appended.ok()) {
      size = sequence;
      chain = next_chain;
      frontier = std::move(next_frontier);
      if (checkpointed) Checkpointed(builder.batch().closes);
      return Status::Ok();
    }
    if (appended.code() != StatusCode::kAlreadyExists || conflicts >= kMaxConflicts) {
      return appended;
    }
    RETURN_IF_ERROR(CatchUp());  // another replica appended first: build on what it wrote
  }
}

bool AuditLog::Impl::CheckpointDue(int64_t tree_size, bool force) const {
  if (tree_size == checkpoint_size) return false;
  return force || tree_size - checkpoint_size >= options.checkpoint_every_records ||
         Steady::now() - checkpoint_time >= options.checkpoint_every;
}

// `unstored_first_time`: the log's first record's time when it is not stored yet (it commits with
// this checkpoint); 0 otherwise.
Status AuditLog::Impl::MakeCheckpoint(int64_t tree_size, const Frontier& tree,
                                      const Digest& tree_chain, int64_t unstored_first_time,
                                      store::AuditCheckpointRow& row,
                                      std::optional<store::AuditEpochRow>& closes) {
  const int64_t now = NowUnixNs();
  const Checkpoint checkpoint{
      .tree_size = tree_size, .root = tree.Root(), .time_unix_ns = now, .digest = options.digest};
  ASSIGN_OR_RETURN(const SignedCheckpoint signed_checkpoint,
                   SignCheckpoint(checkpoint, key, key_id));
  row =
      store::AuditCheckpointRow{.tree_size = tree_size,
                                .root_hash = HashHex(checkpoint.root),
                                .time_unix_ns = now,
                                .key_id = key_id,
                                .algorithm = std::string(crypto::SignatureName(key.algorithm())),
                                .signature = Base64Encode(signed_checkpoint.signature),
                                .frontier = tree.Encode(),
                                .chain_hash = tree_size > 0 ? HashHex(tree_chain) : std::string()};
  // Does this checkpoint end the current epoch? The epochs are read afresh: another replica may
  // have ended one since.
  closes.reset();
  ASSIGN_OR_RETURN(const std::vector<store::AuditEpochRow> epochs, store.ListAuditEpochs());
  store::AuditEpochRow next{.epoch = 1, .first_sequence = 1};
  if (!epochs.empty()) {
    next.epoch = epochs.back().epoch + 1;
    next.first_sequence = epochs.back().last_sequence + 1;
    next.start_unix_ns = epochs.back().end_unix_ns;
  } else {
    if (!first_record_time.has_value()) {
      ASSIGN_OR_RETURN(const std::vector<store::AuditRow> first, store.ReadAuditRows(0, 1));
      if (!first.empty()) first_record_time = first.front().time_unix_ns;
    }
    next.start_unix_ns = first_record_time.has_value() ? *first_record_time
                         : unstored_first_time != 0    ? unstored_first_time
                                                       : now;
  }
  const int64_t length_ns =
      std::chrono::duration_cast<std::chrono::nanoseconds>(options.epoch_length).count();
  if (tree_size >= next.first_sequence && now - next.start_unix_ns >= length_ns) {
    next.last_sequence = tree_size;
    next.end_unix_ns = now;
    closes = next;
  }
  return Status::Ok();
}

// After a checkpoint at the head's size was written (and `closed` the epoch it ended).
void AuditLog::Impl::Checkpointed(const std::optional<store::AuditEpochRow>& closed) {
  checkpoint_size = size;
  checkpoint_time = Steady::now();
  if (!closed.has_value()) return;
  const Result<int> pruned = PruneExpiredEpochs(store, closed->end_unix_ns, options.retention);
  if (!pruned.ok()) {
    LOG_WARN("audit log: pruning expired epochs failed: {}", pruned.status().ToString());
  } else if (*pruned > 0) {
    LOG_INFO("audit log: pruned {} epochs older than the retention", *pruned);
  }
}

Status AuditLog::Impl::MaybeCheckpoint(bool force) {
  if (!CheckpointDue(size, force)) return Status::Ok();
  store::AuditCheckpointRow row;
  std::optional<store::AuditEpochRow> closes;
  Status written = MakeCheckpoint(size, frontier, chain, 0, row, closes);
  if (written.ok()) written = store.PutAuditCheckpoint(row, closes);
  if (!written.ok()) {
    checkpoint_time = Steady::now();  // retried a period later
    return written;
  }
  Checkpointed(closes);
  return Status::Ok();
}

void AuditLog::Impl::CommitAndAnswer(std::span<Pending> batch, std::string_view bytes, bool stop) {
  bool checkpoint_asked = stop;
  for (const Pending& pending : batch) checkpoint_asked = checkpoint_asked || pending.checkpoint;
  Status committed = Status::Ok();
  if (!batch.empty()) {
    committed = Commit(batch, bytes, checkpoint_asked);
    while (!committed.ok() && !options.sync) {
      // Batched mode answered these records already: keep them and retry, while new ones wait
      // in the queue (which, once full, makes Append refuse).
      LOG_ERROR("audit log: writing {} records failed, retrying: {}", batch.size(),
                committed.ToString());
      std::unique_lock lock(mutex);
      if (wake.wait_for(lock, std::chrono::seconds(1), [&] { return stopping; })) break;
      lock.unlock();
      committed = Commit(batch, bytes, checkpoint_asked);
    }
    if (!committed.ok() && !options.sync) {
      LOG_ERROR("audit log: {} records were not written at shutdown: {}", batch.size(),
                committed.ToString());
    }
  }
  for (Pending& pending : batch) {
    if (!pending.flush && pending.done) pending.done(committed);
  }
  // Due by time, asked for, or not written with the batch (signing or the store failed).
  Status checkpointed = MaybeCheckpoint(checkpoint_asked);
  if (!checkpointed.ok()) {
    LOG_WARN("audit log: writing a checkpoint failed: {}", checkpointed.ToString());
  }
  for (Pending& pending : batch) {
    if (!pending.flush) continue;
    pending.done(!committed.ok() ? committed : pending.checkpoint ? checkpointed : Status::Ok());
  }
}

void AuditLog::Impl::Run() {
  NameThisThread("audit-writer");
  std::vector<Pending> taken;
  std::string taken_bytes;
  while (true) {
    bool stop = false;
    {
      std::unique_lock lock(mutex);
      const auto ready = [&] { return !queue.empty() || stopping; };
      if (size > checkpoint_size) {
        wake.wait_until(lock, checkpoint_time + options.checkpoint_every, ready);
      } else {
        wake.wait(lock, ready);  // nothing to sign until records come
      }
      if (!options.sync && !stopping && !queue.empty() && queue.size() < options.max_batch &&
          !queue.front().flush) {
        // Batched mode: let a batch fill for up to max_delay from its oldest record.
        wake.wait_until(lock, queue.front().queued + options.max_delay, [&] {
          return stopping || queue.size() >= options.max_batch || queue.back().flush;
        });
      }
      taken.swap(queue);  // everything queued; the queue gets the emptied buffers
      taken_bytes.swap(queued_bytes);
      in_writer = taken.size();
      stop = stopping;
    }
    // Committed in batches of up to max_batch records; a Flush marker ends its batch (it is
    // answered once the records before it are written).
    std::span<Pending> rest(taken);
    do {
      size_t end = 0;
      size_t records = 0;
      while (end < rest.size() && records < options.max_batch) {
        if (rest[end++].flush) break;
        ++records;
      }
      CommitAndAnswer(rest.first(end), taken_bytes, stop && end == rest.size());
      rest = rest.subspan(end);
      std::lock_guard lock(mutex);
      in_writer = rest.size();
    } while (!rest.empty());
    taken.clear();
    taken_bytes.clear();
    // A burst's buffers are not kept for ever.
    if (taken.capacity() > 4 * options.max_batch) taken.shrink_to_fit();
    if (taken_bytes.capacity() > kKeptBytes) taken_bytes.shrink_to_fit();
    if (stop) return;
  }
}

Result<std::unique_ptr<AuditLog>> AuditLog::Open(store::Store& store, AuditOptions options,
                                                 crypto::SigningKey signing_key,
                                                 std::string signing_key_id) {
  if (options.max_batch == 0 || options.max_queue == 0) {
    return InvalidArgument("the audit log's max_batch and max_queue must be positive");
  }
  auto impl =
      std::make_unique<Impl>(store, options, std::move(signing_key), std::move(signing_key_id));
  RETURN_IF_ERROR(impl->LoadHead());
  Impl* raw = impl.get();
  raw->writer = std::thread([raw] { raw->Run(); });
  return std::unique_ptr<AuditLog>(new AuditLog(std::move(impl)));
}

AuditLog::AuditLog(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

AuditLog::~AuditLog() {
  {
    std::lock_guard lock(impl_->mutex);
    impl_->stopping = true;
  }
  impl_->wake.notify_all();
  impl_->writer.join();
}

void AuditLog::Append(const AuditRecord& record, UniqueFunction<void(Status)> done,
                      const ContentDigests* digests) {
  // Encoded here, outside the lock, into this thread's buffer; copied into the queue's under it.
  thread_local std::string tail;
  tail.clear();
  AppendCompactTail(record, record.time_unix_ns != 0 ? record.time_unix_ns : NowUnixNs(), digests,
                    tail);
  const bool sync = impl_->options.sync;
  const Steady::time_point queued = Steady::now();
  Status refused = Status::Ok();
  bool wake_writer = false;
  {
    std::lock_guard lock(impl_->mutex);
    if (impl_->stopping) {
      refused = Unavailable("the audit log is shutting down");
    } else if (impl_->queue.size() + Beyond(impl_->in_writer, impl_->options.max_batch) >=
               impl_->options.max_queue) {
      // What the writer took beyond the batch it writes counts too: as when it took one batch at
      // a time, at most max_queue + max_batch records are held.
      refused = Unavailable("the audit log's queue is full ({} records)", impl_->options.max_queue);
    } else if (impl_->queued_bytes.size() + tail.size() > impl_->options.max_queue_bytes &&
               !impl_->queue.empty()) {
      refused =
          Unavailable("the audit log's queue is full ({} bytes)", impl_->options.max_queue_bytes);
    } else {
      Pending& pending = impl_->queue.emplace_back();
      pending.offset = impl_->queued_bytes.size();
      pending.length = tail.size();
      impl_->queued_bytes.append(tail);
      if (sync) pending.done = std::move(done);
      pending.queued = queued;
      // The writer waits only for an empty queue to get a record, or (batched) for a batch to
      // fill: waking it for any other append would cost both threads a futex call and the
      // writer a context switch per record, for nothing (see Run's two waits).
      wake_writer = impl_->queue.size() == 1 || impl_->queue.size() == impl_->options.max_batch;
    }
  }
  if (tail.capacity() > kKeptBytes) tail = std::string();  // a sealed request's, not kept
  if (!refused.ok()) {
    if (done) done(refused);
    return;
  }
  if (wake_writer) impl_->wake.notify_one();
  if (!sync && done) done(Status::Ok());
}

Status AuditLog::Flush(bool checkpoint) {
  std::promise<Status> flushed;
  std::future<Status> result = flushed.get_future();
  {
    std::lock_guard lock(impl_->mutex);
    if (impl_->stopping) return Unavailable("the audit log is shutting down");
    impl_->queue.push_back(
        Pending{.done = [&flushed](Status status) { flushed.set_value(std::move(status)); },
                .queued = Steady::now(),
                .flush = true,
                .checkpoint = checkpoint});
  }
  impl_->wake.notify_one();
  return result.get();
}

}  // namespace rampart::audit
