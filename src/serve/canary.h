#pragma once

// Canary releases with automatic rollback.
//
// A CanaryController sends a growing share of a model's unversioned ("latest") traffic to a
// candidate version, stage by stage (e.g. 5 % -> 20 % -> 100 %). A stage passes once the
// candidate has answered `min_requests` requests in it; the controller then rolls back
// (everything to the baseline) when the candidate's error rate in the stage exceeds
// `max_error_rate`, or its p99 latency exceeds `max_p99_ratio` x the baseline's p99 over the
// same stage; otherwise it advances. Passing the last stage promotes the candidate (it takes all
// traffic). A rollback happens as soon as the candidate's failures make the stage impossible to
// pass. Routing is a deterministic weighted round-robin, so shares are exact.
//
// Decisions depend only on counts and recorded latencies, never on wall time, so tests drive it
// request by request. Thread-safe (one mutex).

#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "core/status.h"

namespace rampart::serve {

struct CanaryPolicy {
  int64_t baseline = 0;
  int64_t candidate = 0;
  std::vector<int> stages_percent = {5, 20, 100};
  uint64_t min_requests = 200;  // candidate requests per stage before deciding
  double max_error_rate = 0.005;
  double max_p99_ratio = 2.0;
  uint64_t min_baseline_samples = 20;  // below this, latency is not compared
  // How decisions name the two arms in logs and status ("model 'x'"); empty = "version <n>".
  std::string baseline_label;
  std::string candidate_label;

  Status Validate() const;
};

enum class CanaryState { kRunning, kPromoted, kRolledBack };
const char* CanaryStateName(CanaryState state);

struct CanaryStatus {
  CanaryPolicy policy;
  CanaryState state = CanaryState::kRunning;
  size_t stage = 0;
  int weight_percent = 0;           // share of latest-version traffic going to the candidate now
  uint64_t candidate_requests = 0;  // in the current stage
  uint64_t candidate_failures = 0;
  uint64_t baseline_requests = 0;
  double candidate_p99_ms = 0;
  double baseline_p99_ms = 0;
  std::string last_decision;
};

class CanaryController {
 public:
  explicit CanaryController(std::string model, CanaryPolicy policy);

  // The version the next latest-version request should go to.
  int64_t Route();
  // The outcome of a request that Route() sent to `version`.
  void Record(int64_t version, bool success, int64_t latency_ns);

  CanaryStatus Status() const;

 private:
  struct Arm {
    uint64_t requests = 0;
    uint64_t failures = 0;
    std::vector<int64_t> latencies_ns;  // successful requests of the stage
  };

  void Decide();  // REQUIRES: mutex_ held
  void RollBack(std::string reason);
  int Weight() const;
  std::string Label(bool candidate) const;

  const std::string model_;
  const CanaryPolicy policy_;

  mutable std::mutex mutex_;
  CanaryState state_ = CanaryState::kRunning;  // guarded by mutex_
  size_t stage_ = 0;                           // guarded by mutex_
  int credit_ = 0;                             // guarded by mutex_
  Arm candidate_;                              // guarded by mutex_
  Arm baseline_;                               // guarded by mutex_
  std::string last_decision_;                  // guarded by mutex_
};

}  // namespace rampart::serve
