#include "serve/canary.h"

#include <algorithm>

#include "core/logging.h"

namespace rampart::serve {
namespace {

double P99Ms(std::vector<int64_t> latencies) {
  if (latencies.empty()) return 0;
  const size_t rank = (latencies.size() * 99 + 99) / 100 - 1;  // nearest rank
  std::nth_element(latencies.begin(), latencies.begin() + static_cast<std::ptrdiff_t>(rank),
                   latencies.end());
  return static_cast<double>(latencies[rank]) / 1e6;
}

}  // namespace

Status CanaryPolicy::Validate() const {
  if (candidate == baseline) {
    return InvalidArgument("canary: candidate and baseline must be different versions");
  }
  if (stages_percent.empty()) return InvalidArgument("canary: list at least one stage");
  int previous = 0;
  for (int stage : stages_percent) {
    if (stage <= previous || stage > 100) {
      return InvalidArgument("canary: stages must increase within (0, 100], got {}", stage);
    }
    previous = stage;
  }
  if (min_requests == 0) return InvalidArgument("canary: min_requests must be positive");
  if (max_error_rate < 0 || max_error_rate >= 1) {
    return InvalidArgument("canary: max_error_rate must be in [0, 1)");
  }
  if (max_p99_ratio < 1) return InvalidArgument("canary: max_p99_ratio must be >= 1");
  return Status::Ok();
}

const char* CanaryStateName(CanaryState state) {
  switch (state) {
    case CanaryState::kRunning: return "RUNNING";
    case CanaryState::kPromoted: return "PROMOTED";
    case CanaryState::kRolledBack: return "ROLLED_BACK";
  }
  return "RUNNING";
}

CanaryController::CanaryController(std::string model, CanaryPolicy policy)
    : model_(std::move(model)), policy_(std::move(policy)) {
  last_decision_ = fmt::format("started: {}% to {}", policy_.stages_percent[0], Label(true));
  LOG_INFO("canary '{}': {}", model_, last_decision_);
}

std::string CanaryController::Label(bool candidate) const {
  const std::string& label = candidate ? policy_.candidate_label : policy_.baseline_label;
  if (!label.empty()) return label;
  return fmt::format("version {}", candidate ? policy_.candidate : policy_.baseline);
}

int CanaryController::Weight() const {
  switch (state_) {
    case CanaryState::kPromoted: return 100;
    case CanaryState::kRolledBack: return 0;
    case CanaryState::kRunning: return policy_.stages_percent[stage_];
  }
  return 0;
}

int64_t CanaryController::Route() {
  std::lock_guard lock(mutex_);
  credit_ += Weight();
  if (credit_ >= 100) {
    credit_ -= 100;
    return policy_.candidate;
  }
  return policy_.baseline;
}

void CanaryController::Record(int64_t version, bool success, int64_t latency_ns) {
  std::lock_guard lock(mutex_);
  if (state_ != CanaryState::kRunning) return;
  Arm& arm = version == policy_.candidate ? candidate_ : baseline_;
  ++arm.requests;
  if (!success) {
    ++arm.failures;
  } else if (arm.latencies_ns.size() < 100000) {
    arm.latencies_ns.push_back(latency_ns);
  }
  Decide();
}

void CanaryController::Decide() {
  const auto allowed_failures = static_cast<uint64_t>(
      policy_.max_error_rate *
      static_cast<double>(std::max(candidate_.requests, policy_.min_requests)));
  if (candidate_.failures > allowed_failures) {
    RollBack(fmt::format(
        "candidate error rate {:.2f}% over {} requests exceeds {:.2f}%",
        100.0 * static_cast<double>(candidate_.failures) / static_cast<double>(candidate_.requests),
        candidate_.requests, 100.0 * policy_.max_error_rate));
    return;
  }
  if (candidate_.requests < policy_.min_requests) return;
  if (baseline_.latencies_ns.size() >= policy_.min_baseline_samples) {
    const double candidate_p99 = P99Ms(candidate_.latencies_ns);
    const double baseline_p99 = P99Ms(baseline_.latencies_ns);
    if (candidate_p99 > policy_.max_p99_ratio * baseline_p99) {
      RollBack(fmt::format("candidate p99 {:.3f} ms exceeds {:.1f} x baseline p99 {:.3f} ms",
                           candidate_p99, policy_.max_p99_ratio, baseline_p99));
      return;
    }
  }
  if (stage_ + 1 == policy_.stages_percent.size()) {
    state_ = CanaryState::kPromoted;
    last_decision_ = fmt::format("promoted {} after stage {}% passed", Label(true),
                                 policy_.stages_percent[stage_]);
  } else {
    ++stage_;
    last_decision_ =
        fmt::format("stage passed; now {}% to {}", policy_.stages_percent[stage_], Label(true));
  }
  LOG_INFO("canary '{}': {}", model_, last_decision_);
  candidate_ = Arm();
  baseline_ = Arm();
}

void CanaryController::RollBack(std::string reason) {
  state_ = CanaryState::kRolledBack;
  last_decision_ = "rolled back: " + std::move(reason);
  LOG_WARN("canary '{}': {}; all traffic to {}", model_, last_decision_, Label(false));
}

CanaryStatus CanaryController::Status() const {
  std::lock_guard lock(mutex_);
  CanaryStatus status;
  status.policy = policy_;
  status.state = state_;
  status.stage = stage_;
  status.weight_percent = Weight();
  status.candidate_requests = candidate_.requests;
  status.candidate_failures = candidate_.failures;
  status.baseline_requests = baseline_.requests;
  status.candidate_p99_ms = P99Ms(candidate_.latencies_ns);
  status.baseline_p99_ms = P99Ms(baseline_.latencies_ns);
  status.last_decision = last_decision_;
  return status;
}

}  // namespace rampart::serve
