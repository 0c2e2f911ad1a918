#pragma once

// Per-model-version inference statistics in Triton's terms (docs/triton-compatibility.md): request
// outcomes, per-stage durations, and per-batch-size execution figures. Recorded by instance
// threads, read by front ends; every method is thread-safe (one mutex, held for a few additions).

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <span>

#include "backend/backend.h"
#include "serve/request.h"

namespace rampart::serve {

struct Duration {
  uint64_t count = 0;
  uint64_t ns = 0;
  void Add(int64_t nanos) {
    ++count;
    ns += static_cast<uint64_t>(nanos < 0 ? 0 : nanos);
  }
};

// Why a request failed, as Triton's nv_inference_request_failure{reason=...} labels it.
enum class FailureReason { kRejected = 0, kCanceled, kBackend, kOther };
inline constexpr int kFailureReasons = 4;
const char* FailureReasonName(FailureReason reason);  // "REJECTED", ...

struct BatchStats {
  Duration compute_input;
  Duration compute_infer;
  Duration compute_output;
};

struct StatisticsSnapshot {
  uint64_t last_inference_ms = 0;  // Unix milliseconds of the last completed request
  uint64_t inference_count = 0;    // batch items inferred
  uint64_t execution_count = 0;    // backend executions
  Duration success;
  Duration fail;
  uint64_t failures_by_reason[kFailureReasons] = {};
  Duration queue;
  Duration compute_input;
  Duration compute_infer;
  Duration compute_output;
  std::map<uint64_t, BatchStats> batch_stats;  // by batch size
};

class VersionObserver;

class Statistics {
 public:
  // `observer` (may be null) sees every record as well; see serve/observer.h.
  Statistics();
  explicit Statistics(std::unique_ptr<VersionObserver> observer);
  ~Statistics();

  // A request that succeeded, with its share of the stages.
  struct Success {
    int64_t total_ns = 0;
    RequestTiming timing;
    uint64_t batch_items = 1;
  };
  // One backend execution of `batch_size` items and the requests it answered, under one lock.
  void RecordExecution(uint64_t batch_size, const backend::ExecutionTiming& timing,
                       std::span<const Success> answered);
  void RecordSuccess(const Success& success);  // a request answered without an execution
  void RecordFailure(FailureReason reason, int64_t total_ns);

  StatisticsSnapshot Snapshot() const;
  VersionObserver* observer() const { return observer_.get(); }

 private:
  void AddSuccess(const Success& success);  // with mutex_ held

  const std::unique_ptr<VersionObserver> observer_;
  mutable std::mutex mutex_;
  StatisticsSnapshot stats_;  // guarded by mutex_
};

}  // namespace rampart::serve
