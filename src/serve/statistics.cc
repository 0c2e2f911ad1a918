#include "serve/statistics.h"

#include "core/clock.h"

namespace rampart::serve {

void Statistics::RecordExecution(uint64_t batch_size, int64_t input_ns, int64_t infer_ns,
                                 int64_t output_ns) {
  std::lock_guard lock(mutex_);
  ++stats_.execution_count;
  BatchStats& batch = stats_.batch_stats[batch_size];
  batch.compute_input.Add(input_ns);
  batch.compute_infer.Add(infer_ns);
  batch.compute_output.Add(output_ns);
}

void Statistics::RecordSuccess(int64_t total_ns, int64_t queue_ns, int64_t input_ns,
                               int64_t infer_ns, int64_t output_ns, uint64_t batch_items) {
  const uint64_t now_ms = static_cast<uint64_t>(UnixNanosNow() / 1'000'000);
  std::lock_guard lock(mutex_);
  stats_.last_inference_ms = now_ms;
  stats_.inference_count += batch_items;
  stats_.success.Add(total_ns);
  stats_.queue.Add(queue_ns);
  stats_.compute_input.Add(input_ns);
  stats_.compute_infer.Add(infer_ns);
  stats_.compute_output.Add(output_ns);
}

void Statistics::RecordFailure(FailureReason reason, int64_t total_ns) {
  std::lock_guard lock(mutex_);
  stats_.fail.Add(total_ns);
  ++stats_.failures_by_reason[static_cast<int>(reason)];
}

const char* FailureReasonName(FailureReason reason) {
  switch (reason) {
    case FailureReason::kRejected: return "REJECTED";
    case FailureReason::kCanceled: return "CANCELED";
    case FailureReason::kBackend: return "BACKEND";
    case FailureReason::kOther: return "OTHER";
  }
  return "OTHER";
}

StatisticsSnapshot Statistics::Snapshot() const {
  std::lock_guard lock(mutex_);
  return stats_;
}

}  // namespace rampart::serve
