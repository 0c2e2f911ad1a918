#pragma once

// BatchQueue: the dynamic batcher's state machine (Triton semantics, docs/triton-compatibility.md).
//
// The rules, in the order Next() applies them:
//  1. Requests whose client has gone away are dropped (Cancelled) when the batcher comes to
//     them: before planning, Next walks the queues from the front, as far as a batch could
//     reach, and takes out the cancelled requests it passes (for a model that runs one request
//     per execution, rule 6, only the front). Each request is passed over at most once per batch
//     it could join, so dropping costs O(1) per request and the queue is never scanned whole; a
//     cancelled request further back keeps its place (and its slot under max_queue_size) until
//     the batcher reaches it.
//  2. Requests wait in one FIFO per priority level (1 = highest). A batch takes requests in
//     order: level 1's queue, then its delayed requests, then level 2, ... A request is never
//     split, and the batch stops at the first request that would exceed max_batch_size or whose
//     variable dimensions differ from the batch's first request (inputs with
//     allow_ragged_batch excepted: BatchAssembly flattens them).
//  3. A batch that reaches max_batch_size goes at once.
//  4. Otherwise, if a preferred batch size can be reached, the largest reachable one goes at once.
//  5. Otherwise the batch goes at once when max_queue_delay is 0, or when more requests wait
//     than can join it (waiting cannot grow it); else it waits until its oldest request has
//     waited max_queue_delay, and goes then with whatever has arrived.
//  6. A model without dynamic batching (or max_batch_size 0) runs one request per execution.
// Timeouts (Expire): a request whose queue deadline passes is rejected with Unavailable
// "Request timeout expired" (action REJECT) or moved behind its level's unexpired requests
// (action DELAY). A full level queue rejects new requests with "Exceeds maximum queue size".
// Every level's queue is bounded: by its max_queue_size, or where that is 0 (Triton's
// "unbounded") by the server's default (kDefaultMaxQueueSize unless configured), so overload
// answers 503 at once instead of growing memory.
//
// Time is passed in, never read, so every rule is testable to the microsecond. Not thread-safe:
// the Scheduler guards it with its mutex.

#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <vector>

#include "model/config.h"
#include "serve/batch_assembly.h"
#include "serve/request.h"

namespace rampart::serve {

struct QueuePolicy {
  bool delay_on_timeout = false;                 // timeout_action DELAY (else REJECT)
  std::chrono::microseconds default_timeout{0};  // 0 = none
  bool allow_timeout_override = false;
  size_t max_queue_size = 0;  // 0 = unbounded
};

struct BatchPolicy {
  int max_batch_size = 0;            // 0 = one request per execution
  std::vector<int> preferred_sizes;  // ascending
  std::chrono::microseconds max_queue_delay{0};
  bool preserve_ordering = false;
  uint64_t priority_levels = 1;
  uint64_t default_priority_level = 1;
  std::vector<QueuePolicy> queue_policies;  // one per level, index = level - 1
  // What the backend receives for a batch; its ragged inputs need not share shapes.
  BatchAssembly assembly;

  // Reads dynamic_batching (or its absence: one level) from a validated config. A level whose
  // max_queue_size is 0 holds at most `default_max_queue_size` requests (0: unbounded, as in
  // Triton). Errors: InvalidArgument for impossible priority settings.
  static Result<BatchPolicy> FromConfig(const model::ModelConfig& config,
                                        size_t default_max_queue_size = kDefaultMaxQueueSize);

  // The bound of a level whose config sets none: requests waiting beyond it are refused with 503
  // at once. Large enough that a burst from thousands of clients queues rather than fails.
  static constexpr size_t kDefaultMaxQueueSize = 1024;

 private:
  // The batching settings and per-level queue policies as the config writes them.
  static Result<BatchPolicy> FromDynamicBatching(const model::ModelConfig& config,
                                                 BatchPolicy policy);
};

// The most priority levels a model may have.
inline constexpr uint64_t kMaxPriorityLevels = 1024;

// The longest queue delay or timeout, in microseconds (about 31.7 years): a config asking for
// more is refused, a request's longer timeout counts as none. Keeps every deadline far inside
// SteadyTime's range.
inline constexpr uint64_t kMaxQueueMicros = 1'000'000'000'000'000;

struct PendingRequest {
  std::unique_ptr<InferRequest> request;
  InferCallback done;
  SteadyTime enqueued{};
  std::optional<SteadyTime> deadline;  // queue timeout
  int64_t batch_items = 1;             // dim 0 of the inputs when the model batches
  uint64_t level = 1;
  uint64_t sequence = 0;  // admission order, for preserve_ordering
  bool delayed = false;   // timed out under action DELAY
  bool answered = false;  // its callback has been called (Scheduler::Complete)
};

class BatchQueue {
 public:
  explicit BatchQueue(BatchPolicy policy);

  const BatchPolicy& policy() const { return policy_; }

  // Resolves the request's priority level and queue deadline, and checks there is room. As in
  // Triton, priority 0 or one past the model's levels means the default level, and a request's
  // timeout (any uint64) can only shorten the level's default timeout, so it is ignored where the
  // level has none. Errors: Unavailable "Exceeds maximum queue size".
  struct Admission {
    uint64_t level;
    std::optional<SteadyTime> deadline;
  };
  Result<Admission> Admit(const InferRequest& request, SteadyTime now) const;

  // Queues an admitted request (its level, deadline and sequence already set). Moved from only
  // once queued: if queuing throws (out of memory), `pending` is left as it was.
  void Push(std::unique_ptr<PendingRequest>&& pending);

  struct Rejected {
    std::unique_ptr<PendingRequest> pending;
    Status status;
  };
  struct Decision {
    std::vector<std::unique_ptr<PendingRequest>> batch;  // run now when not empty
    std::vector<Rejected> rejected;                      // fail these (timed out, cancelled)
    std::optional<SteadyTime> wake_at;  // nothing to run: look again then (or on arrival)
  };

  // What a free instance should do now. `flush` ignores the queue delay (shutdown drain).
  Decision Next(SteadyTime now, bool flush = false);

  // Whether Next(now) has work for a free instance now: a batch to hand out, or a cancelled
  // request within a batch's reach to drop (after which a preferred size may be reachable). A
  // deadline needs no look, as a waiting instance wakes at the earliest one anyway
  // (Decision::wake_at). An arrival for which this is false leaves a waiting instance's decision
  // as it was (wait until the oldest request's delay ends, or a deadline), so the scheduler need
  // not wake it.
  bool WouldRunNow(SteadyTime now) const;

  // Empties the queue: every waiting request, in the order Next would have taken them.
  std::vector<std::unique_ptr<PendingRequest>> TakeAll();

  // Applies queue timeouts; returns the requests to reject. `next_deadline` gets the earliest
  // deadline still pending.
  std::vector<Rejected> Expire(SteadyTime now, std::optional<SteadyTime>& next_deadline);

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }

 private:
  struct Level {
    std::deque<std::unique_ptr<PendingRequest>> queue;
    std::deque<std::unique_ptr<PendingRequest>> delayed;
  };

  struct Plan {
    size_t take = 0;     // requests to run now, from the front; 0 = wait
    SteadyTime wake_at;  // when waiting: the oldest request's delay ends
  };
  // Rules 2-5 over the queues as they are.
  Plan PlanBatch(SteadyTime now, bool flush) const;
  // Rule 1: takes the cancelled requests out of the part of the queues a batch could reach.
  void DropCancelledAhead(std::vector<Rejected>& rejected);
  // Whether a cancelled request waits within a batch's reach.
  bool CancelledAhead() const;
  void Forget(const PendingRequest& removed);  // counts out a request taken from a queue
  std::unique_ptr<PendingRequest> PopFront();
  bool Compatible(const InferRequest& first, const InferRequest& other) const;

  const BatchPolicy policy_;
  std::vector<Level> levels_;
  size_t size_ = 0;
  size_t timed_ = 0;  // requests with a deadline (none in `delayed`): Expire scans only if any
};

}  // namespace rampart::serve
