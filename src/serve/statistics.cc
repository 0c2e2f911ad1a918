#include "serve/statistics.h"

#include "core/clock.h"
#include "serve/observer.h"

namespace rampart::serve {

Statistics::Statistics() = default;

Statistics::Statistics(std::unique_ptr<VersionObserver> observer)
    : observer_(std::move(observer)) {}

Statistics::~Statistics() = default;

void Statistics::RecordExecution(uint64_t batch_size, const backend::ExecutionTiming& timing,
                                 std::span<const Success> answered) {
  if (observer_) {
    observer_->OnExecution(batch_size);
    for (const Success& each : answered) {
      observer_->OnSuccess(each.timing, each.total_ns, each.batch_items);
    }
  }
  const uint64_t now_ms = static_cast<uint64_t>(UnixMillisNow());
  std::lock_guard lock(mutex_);
  ++stats_.execution_count;
  BatchStats& batch = stats_.batch_stats[batch_size];
  batch.compute_input.Add(timing.compute_input_ns);
  batch.compute_infer.Add(timing.compute_infer_ns);
  batch.compute_output.Add(timing.compute_output_ns);
  if (!answered.empty()) stats_.last_inference_ms = now_ms;
  for (const Success& each : answered) AddSuccess(each);
}

void Statistics::RecordSuccess(const Success& success) {
  if (observer_) observer_->OnSuccess(success.timing, success.total_ns, success.batch_items);
  const uint64_t now_ms = static_cast<uint64_t>(UnixMillisNow());
  std::lock_guard lock(mutex_);
  stats_.last_inference_ms = now_ms;
  AddSuccess(success);
}

void Statistics::AddSuccess(const Success& success) {
  stats_.inference_count += success.batch_items;
  stats_.success.Add(success.total_ns);
  stats_.queue.Add(success.timing.queue_ns);
  stats_.compute_input.Add(success.timing.compute_input_ns);
  stats_.compute_infer.Add(success.timing.compute_infer_ns);
  stats_.compute_output.Add(success.timing.compute_output_ns);
}

void Statistics::RecordFailure(FailureReason reason, int64_t total_ns) {
  if (observer_) observer_->OnFailure(reason, total_ns);
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
