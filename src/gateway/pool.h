#pragma once

// Upstream health and the pools that pick an endpoint for a call.
//
// UpstreamState is one upstream server's health as the gateway sees it: active checks (the
// HealthChecker reports each result; `unhealthy_threshold` failures in a row take it out,
// `healthy_threshold` passes bring it back), passive outlier ejection (consecutive failed calls
// eject it for a growing while, after which it is re-admitted), and a cool-down an upstream asks
// for with 429 + Retry-After. Shared by every pool that uses the upstream; thread-safe (one
// mutex, held for a few instructions).
//
// Pool is a logical model's endpoints in priority groups (highest first), with smooth weighted
// round-robin inside a group. Pick() takes the highest group with an available endpoint the
// request has not tried yet; when every available one was tried it retries among them; when no
// endpoint is available anywhere it falls back to all of them (better a call that may fail than a
// certain refusal, as Envoy's panic threshold does). Thread-safe.

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/clock.h"
#include "gateway/config.h"

namespace rampart::gateway {

class UpstreamState {
 public:
  UpstreamState(UpstreamConfig config, EjectionConfig ejection, HealthCheckConfig health);

  const UpstreamConfig& config() const { return config_; }

  // Whether calls may go to it now: not failing its health checks, not ejected, not cooling
  // down.
  bool Available(SteadyTime now) const;
  // Whether its active health checks pass (true until a check says otherwise).
  bool Healthy() const;

  // The outcome of a call. A failure is a 5xx, a connect error, a timeout or a garbled answer,
  // not the caller's own 4xx. Returns true when this failure ejected the upstream.
  bool RecordFailure(SteadyTime now);
  void RecordSuccess();
  // Leaves it out until `until` (429 with Retry-After).
  void CoolDown(SteadyTime until);
  // An active health check's result; returns true when it changed Healthy().
  bool ReportCheck(bool passed);

  uint64_t ejections() const;

 private:
  const UpstreamConfig config_;
  const EjectionConfig ejection_;
  const HealthCheckConfig health_;

  mutable std::mutex mutex_;
  bool healthy_ = true;           // guarded by mutex_
  int check_streak_ = 0;          // guarded by mutex_: results in a row against healthy_
  int consecutive_failures_ = 0;  // guarded by mutex_
  uint64_t ejections_ = 0;        // guarded by mutex_
  SteadyTime ejected_until_{};    // guarded by mutex_
  SteadyTime cooled_until_{};     // guarded by mutex_
};

class Pool {
 public:
  struct Member {
    std::shared_ptr<UpstreamState> upstream;
    std::string model;  // the upstream's name for the logical model
    int priority = 0;
    int weight = 1;
  };
  // At most this many members (a request's tried set is a bit mask).
  static constexpr size_t kMaxMembers = 64;

  // REQUIRES: 1 <= members.size() <= kMaxMembers.
  explicit Pool(std::vector<Member> members);

  struct Pick {
    size_t index = 0;       // into members()
    bool failover = false;  // below the highest priority group
    bool panic = false;     // no endpoint was available
  };
  // `tried`: bit i set when members()[i] was tried by this request.
  Pick Choose(uint64_t tried, SteadyTime now);

  const std::vector<Member>& members() const { return members_; }

 private:
  // Smooth weighted round-robin among `candidates` (indices). REQUIRES: mutex_ held, non-empty.
  size_t RoundRobin(const std::vector<size_t>& candidates);

  std::vector<Member> members_;       // sorted by priority, highest first
  std::vector<size_t> group_starts_;  // where each priority group begins in members_

  std::mutex mutex_;
  std::vector<int64_t> current_weight_;  // guarded by mutex_
};

}  // namespace rampart::gateway
