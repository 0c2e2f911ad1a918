#pragma once

// BatchQueue: the dynamic batcher's state machine (Triton semantics, PROTOCOLS.md §5).
//
// The rules, in the order Next() applies them:
//  1. Requests whose client has gone away are dropped (Cancelled) before anything else (for a
//     model that runs one request per execution, rule 6, when they reach the front: the queue
//     is then not scanned for every execution).
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

  // Reads dynamic_batching (or its absence) from a validated config. A model without
  // dynamic_batching gets one level whose queue holds at most kUnbatchedQueueLimit requests, so
  // overload answers 503 instead of growing memory. Errors: InvalidArgument for impossible
  // priority settings.
  static Result<BatchPolicy> FromConfig(const model::ModelConfig& config);
};

inline constexpr size_t kUnbatchedQueueLimit = 1024;

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

  // Queues an admitted request (its level, deadline and sequence already set).
  void Push(std::unique_ptr<PendingRequest> pending);

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

  // Whether Next(now) would hand out a batch. Looks past requests whose client has gone away, as
  // Next drops them first (without them a preferred size may be reachable); a deadline needs no
  // look, as a waiting instance wakes at the earliest one anyway (Decision::wake_at). An arrival
  // for which this is false leaves a waiting instance's decision as it was (wait until the
  // oldest request's delay ends, or a deadline), so the scheduler need not wake it.
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
  // Rules 2-5 over the queues as they are; `skip_cancelled` leaves out the requests whose client
  // has gone away (for WouldRunNow: Next plans after dropping them, and takes `take` requests
  // from the front, so its plan must count every request).
  Plan PlanBatch(SteadyTime now, bool flush, bool skip_cancelled = false) const;
  void DropCancelled(std::vector<Rejected>& rejected);
  void Forget(const PendingRequest& removed);  // counts out a request taken from a queue
  std::unique_ptr<PendingRequest> PopFront();
  bool Compatible(const InferRequest& first, const InferRequest& other) const;

  const BatchPolicy policy_;
  std::vector<Level> levels_;
  size_t size_ = 0;
  size_t timed_ = 0;  // requests with a deadline (none in `delayed`): Expire scans only if any
};

}  // namespace rampart::serve
