#include "serve/batch_queue.h"

#include <algorithm>

namespace rampart::serve {
namespace {

// `value` microseconds, or InvalidArgument naming `field` when it is past kMaxQueueMicros (the
// config's uint64 would otherwise turn negative, or overflow a deadline).
Result<std::chrono::microseconds> QueueMicros(const model::ModelConfig& config,
                                              std::string_view field, uint64_t value) {
  if (value > kMaxQueueMicros) {
    return InvalidArgument("model '{}': dynamic_batching.{}: {} is too large (at most {})",
                           config.name(), field, value, kMaxQueueMicros);
  }
  return std::chrono::microseconds(static_cast<int64_t>(value));
}

Result<QueuePolicy> ToQueuePolicy(const model::ModelConfig& config, std::string_view field,
                                  const inference::ModelQueuePolicy& policy) {
  QueuePolicy out;
  out.delay_on_timeout = policy.timeout_action() == inference::ModelQueuePolicy::DELAY;
  ASSIGN_OR_RETURN(out.default_timeout,
                   QueueMicros(config, fmt::format("{}.default_timeout_microseconds", field),
                               policy.default_timeout_microseconds()));
  out.allow_timeout_override = policy.allow_timeout_override();
  out.max_queue_size = policy.max_queue_size();
  return out;
}

// Moves the requests `leave` picks out of `queue`, oldest first, into `take`, keeping the
// others in their order. In place: std::stable_partition would allocate a buffer on every call,
// and this runs before every batch.
template <typename Leave, typename Take>
void TakeOut(std::deque<std::unique_ptr<PendingRequest>>& queue, Leave leave, Take take) {
  auto kept_end = queue.begin();
  for (auto it = queue.begin(); it != queue.end(); ++it) {
    if (leave(**it)) {
      take(std::move(*it));
    } else {
      if (kept_end != it) *kept_end = std::move(*it);
      ++kept_end;
    }
  }
  queue.erase(kept_end, queue.end());
}

BatchQueue::Rejected Cancel(std::unique_ptr<PendingRequest> pending) {
  return {std::move(pending), Cancelled("the client went away before the request ran")};
}

}  // namespace

Result<BatchPolicy> BatchPolicy::FromConfig(const model::ModelConfig& config,
                                            size_t default_max_queue_size) {
  BatchPolicy policy;
  policy.assembly = BatchAssembly::FromConfig(config);
  ASSIGN_OR_RETURN(policy, FromDynamicBatching(config, std::move(policy)));
  for (QueuePolicy& level : policy.queue_policies) {
    if (level.max_queue_size == 0) level.max_queue_size = default_max_queue_size;
  }
  return policy;
}

Result<BatchPolicy> BatchPolicy::FromDynamicBatching(const model::ModelConfig& config,
                                                     BatchPolicy policy) {
  if (!config.has_dynamic_batching() || config.max_batch_size() == 0) {
    policy.queue_policies.emplace_back();
    return policy;
  }
  const auto& batching = config.dynamic_batching();
  policy.max_batch_size = config.max_batch_size();
  policy.preferred_sizes.assign(batching.preferred_batch_size().begin(),
                                batching.preferred_batch_size().end());
  std::sort(policy.preferred_sizes.begin(), policy.preferred_sizes.end());
  ASSIGN_OR_RETURN(policy.max_queue_delay, QueueMicros(config, "max_queue_delay_microseconds",
                                                       batching.max_queue_delay_microseconds()));
  policy.preserve_ordering = batching.preserve_ordering();
  if (batching.priority_levels() > kMaxPriorityLevels) {
    return InvalidArgument(
        "model '{}': dynamic_batching.priority_levels must be at most {} (each level is a queue "
        "the batcher scans), got {}",
        config.name(), kMaxPriorityLevels, batching.priority_levels());
  }
  policy.priority_levels = std::max<uint64_t>(1, batching.priority_levels());
  if (batching.priority_levels() == 0) {
    policy.default_priority_level = 1;
  } else {
    policy.default_priority_level = batching.default_priority_level();
    if (policy.default_priority_level < 1 ||
        policy.default_priority_level > policy.priority_levels) {
      return InvalidArgument(
          "model '{}': dynamic_batching.default_priority_level must be in [1, {}], got {}",
          config.name(), policy.priority_levels, policy.default_priority_level);
    }
  }
  ASSIGN_OR_RETURN(const QueuePolicy base,
                   ToQueuePolicy(config, "default_queue_policy", batching.default_queue_policy()));
  policy.queue_policies.assign(policy.priority_levels, base);
  for (const auto& [level, level_policy] : batching.priority_queue_policy()) {
    if (level < 1 || level > policy.priority_levels) {
      return InvalidArgument(
          "model '{}': dynamic_batching.priority_queue_policy has level {} outside [1, {}]",
          config.name(), level, policy.priority_levels);
    }
    ASSIGN_OR_RETURN(
        policy.queue_policies[level - 1],
        ToQueuePolicy(config, fmt::format("priority_queue_policy[{}]", level), level_policy));
  }
  return policy;
}

BatchQueue::BatchQueue(BatchPolicy policy)
    : policy_(std::move(policy)), levels_(policy_.queue_policies.size()) {}

Result<BatchQueue::Admission> BatchQueue::Admit(const InferRequest& request, SteadyTime now) const {
  Admission admission;
  // Triton's InferenceRequest::SetPriority: 0 and levels the model does not have mean its default.
  admission.level = request.priority == 0 || request.priority > policy_.priority_levels
                        ? policy_.default_priority_level
                        : request.priority;
  const QueuePolicy& queue_policy = policy_.queue_policies[admission.level - 1];
  const Level& level = levels_[admission.level - 1];
  if (queue_policy.max_queue_size > 0 &&
      level.queue.size() + level.delayed.size() >= queue_policy.max_queue_size) {
    return Unavailable("Exceeds maximum queue size");
  }
  // In uint64, as the request sends it: a timeout past int64's range must not turn negative. As
  // in Triton's PolicyQueue::Enqueue, a request's timeout only shortens a default: where the level
  // has none, it is ignored.
  auto timeout_us = static_cast<uint64_t>(queue_policy.default_timeout.count());
  if (request.timeout_us > 0 && queue_policy.allow_timeout_override &&
      request.timeout_us < timeout_us) {
    timeout_us = request.timeout_us;
  }
  if (timeout_us > 0 && timeout_us <= kMaxQueueMicros) {
    admission.deadline = now + std::chrono::microseconds(static_cast<int64_t>(timeout_us));
  }
  return admission;
}

void BatchQueue::Push(std::unique_ptr<PendingRequest>&& pending) {
  const bool timed = pending->deadline.has_value();
  levels_[pending->level - 1].queue.push_back(std::move(pending));
  if (timed) ++timed_;
  ++size_;
}

void BatchQueue::DropCancelledAhead(std::vector<Rejected>& rejected) {
  // Live batch items passed so far: once they fill a batch, nothing further back can join it.
  // A request counts as at least one, so the walk passes at most max_batch_size live ones.
  const auto max_items = static_cast<int64_t>(policy_.max_batch_size);
  int64_t live_items = 0;
  for (Level& level : levels_) {
    for (auto* queue : {&level.queue, &level.delayed}) {
      // Compacts the walked prefix: live requests move forward over the dropped ones' slots.
      size_t kept = 0;
      size_t walked = 0;
      for (; walked < queue->size() && live_items < max_items; ++walked) {
        std::unique_ptr<PendingRequest>& pending = (*queue)[walked];
        if (pending->request->IsCancelled()) {
          Forget(*pending);
          rejected.push_back(Cancel(std::move(pending)));
          continue;
        }
        live_items += std::max<int64_t>(1, pending->batch_items);
        if (kept != walked) (*queue)[kept] = std::move(pending);
        ++kept;
      }
      const auto begin = queue->begin();
      queue->erase(begin + static_cast<std::ptrdiff_t>(kept),
                   begin + static_cast<std::ptrdiff_t>(walked));
      if (live_items >= max_items) return;
    }
  }
}

bool BatchQueue::CancelledAhead() const {
  const auto max_items = static_cast<int64_t>(policy_.max_batch_size);
  int64_t live_items = 0;
  for (const Level& level : levels_) {
    for (const auto* queue : {&level.queue, &level.delayed}) {
      for (const auto& pending : *queue) {
        if (live_items >= max_items) return false;
        if (pending->request->IsCancelled()) return true;
        live_items += std::max<int64_t>(1, pending->batch_items);
      }
    }
  }
  return false;
}

void BatchQueue::Forget(const PendingRequest& removed) {
  if (removed.deadline) --timed_;
  --size_;
}

std::unique_ptr<PendingRequest> BatchQueue::PopFront() {
  for (Level& level : levels_) {
    for (auto* queue : {&level.queue, &level.delayed}) {
      if (!queue->empty()) {
        std::unique_ptr<PendingRequest> front = std::move(queue->front());
        queue->pop_front();
        Forget(*front);
        return front;
      }
    }
  }
  return nullptr;
}

bool BatchQueue::Compatible(const InferRequest& first, const InferRequest& other) const {
  if (first.inputs.size() != other.inputs.size()) return false;
  for (size_t i = 0; i < first.inputs.size(); ++i) {
    const tensor::Shape& a = first.inputs[i].shape;
    const tensor::Shape& b = other.inputs[i].shape;
    if (first.inputs[i].name != other.inputs[i].name) return false;
    if (policy_.assembly.IsRagged(first.inputs[i].name)) continue;  // flattened: any shape
    if (a.size() != b.size() || !std::equal(a.begin() + 1, a.end(), b.begin() + 1)) return false;
  }
  return true;
}

BatchQueue::Plan BatchQueue::PlanBatch(SteadyTime now, bool flush) const {
  // Plan the batch over the queues in order (rule 2) without taking anything.
  const InferRequest* first = nullptr;
  int64_t items = 0;
  size_t count = 0;
  size_t preferred_count = 0;
  bool blocked = false;  // a waiting request cannot join this batch
  SteadyTime oldest = SteadyTime::max();
  const auto max_items = static_cast<int64_t>(policy_.max_batch_size);
  for (const Level& level : levels_) {
    for (const auto* queue : {&level.queue, &level.delayed}) {
      for (const auto& pending : *queue) {
        if (blocked || items == max_items) break;
        if (first != nullptr &&
            (items + pending->batch_items > max_items || !Compatible(*first, *pending->request))) {
          blocked = true;
          break;
        }
        if (first == nullptr) first = pending->request.get();
        items += pending->batch_items;
        ++count;
        oldest = std::min(oldest, pending->enqueued);
        if (std::binary_search(policy_.preferred_sizes.begin(), policy_.preferred_sizes.end(),
                               static_cast<int>(items))) {
          preferred_count = count;
        }
      }
    }
  }

  Plan plan;
  if (count == 0) return plan;  // no request fits a batch (validation keeps them within it)
  if (items == max_items) {
    plan.take = count;  // rule 3
  } else if (preferred_count > 0) {
    plan.take = preferred_count;  // rule 4
  } else if (flush || blocked || policy_.max_queue_delay.count() == 0 ||
             now >= oldest + policy_.max_queue_delay) {
    plan.take = count;  // rule 5
  } else {
    plan.wake_at = oldest + policy_.max_queue_delay;
  }
  return plan;
}

bool BatchQueue::WouldRunNow(SteadyTime now) const {
  if (size_ == 0) return false;
  if (policy_.max_batch_size == 0) return true;
  return CancelledAhead() || PlanBatch(now, /*flush=*/false).take > 0;
}

BatchQueue::Decision BatchQueue::Next(SteadyTime now, bool flush) {
  Decision decision;
  if (size_ == 0) return decision;  // nothing to drop, expire or run; no deadline to wake for
  const bool one_at_a_time = policy_.max_batch_size == 0;  // rule 6
  if (!one_at_a_time) DropCancelledAhead(decision.rejected);
  std::optional<SteadyTime> next_deadline;
  for (Rejected& rejected : Expire(now, next_deadline)) {
    decision.rejected.push_back(std::move(rejected));
  }
  if (one_at_a_time) {
    // Rule 1 at the front only: each execution takes the first request still wanted.
    while (size_ > 0) {
      std::unique_ptr<PendingRequest> front = PopFront();
      if (!front->request->IsCancelled()) {
        decision.batch.push_back(std::move(front));
        return decision;
      }
      decision.rejected.push_back(Cancel(std::move(front)));
    }
  }
  if (size_ == 0) {
    decision.wake_at = next_deadline;
    return decision;
  }
  const Plan plan = PlanBatch(now, flush);
  if (plan.take == 0) {
    decision.wake_at = plan.wake_at;
    if (next_deadline && *next_deadline < *decision.wake_at) decision.wake_at = next_deadline;
    return decision;
  }
  for (size_t i = 0; i < plan.take; ++i) decision.batch.push_back(PopFront());
  return decision;
}

std::vector<std::unique_ptr<PendingRequest>> BatchQueue::TakeAll() {
  std::vector<std::unique_ptr<PendingRequest>> all;
  all.reserve(size_);
  while (size_ > 0) all.push_back(PopFront());
  return all;
}

std::vector<BatchQueue::Rejected> BatchQueue::Expire(SteadyTime now,
                                                     std::optional<SteadyTime>& next_deadline) {
  std::vector<Rejected> rejected;
  next_deadline.reset();
  if (timed_ == 0) return rejected;
  for (size_t index = 0; index < levels_.size(); ++index) {
    Level& level = levels_[index];
    const bool delay = policy_.queue_policies[index].delay_on_timeout;
    const auto expired = [&](const PendingRequest& pending) {
      if (!pending.deadline) return false;
      if (*pending.deadline > now) {
        if (!next_deadline || *pending.deadline < *next_deadline) next_deadline = pending.deadline;
        return false;
      }
      return true;
    };
    TakeOut(level.queue, expired, [&](std::unique_ptr<PendingRequest> pending) {
      if (delay) {  // stays queued, behind the others, without its deadline
        --timed_;
        pending->deadline.reset();
        pending->delayed = true;
        level.delayed.push_back(std::move(pending));
      } else {
        Forget(*pending);
        rejected.push_back({std::move(pending), Unavailable("Request timeout expired")});
      }
    });
  }
  return rejected;
}

}  // namespace rampart::serve
