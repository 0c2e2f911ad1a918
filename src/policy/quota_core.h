#pragma once

// The inside of QuotaLedger (quota.h), shared by quota.cc (admission, reservations) and
// quota_leases.cc (the lease thread). Not for other modules.
//
// Locking: subjects live in kShards shards, each with its own mutex. A request's subjects (its
// key, its principal and its tenant) all live in its tenant's shard, so Admit's check-and-take
// over all of them is one short critical section under one lock, and so are Settle and a
// reservation's release. lease_mutex is taken alone, never while a shard's is held.

#include <algorithm>
#include <array>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "policy/quota.h"

namespace rampart::policy::internal {

// The counters kept per window, indexing Subject::windows.
enum WindowedLimit : size_t { kRequestsPerMinute = 0, kTokensPerMinute = 1, kTokensPerDay = 2 };
inline constexpr size_t kWindowedLimits = 3;
inline constexpr int64_t kMinuteSeconds = 60;
inline constexpr int64_t kDaySeconds = 86400;
inline constexpr int64_t kNanosPerSecond = 1'000'000'000;

inline int64_t WindowSeconds(size_t limit) {
  return limit == kTokensPerDay ? kDaySeconds : kMinuteSeconds;
}
// "requests_per_minute", ...: the names of QuotaLimits' fields.
const char* WindowedLimitName(size_t limit);

// One windowed counter of one subject. Guarded by its shard's mutex.
struct Window {
  int64_t start = -1;  // Unix seconds of the window counted; -1 = none yet
  int64_t used = 0;    // units taken in it (admissions, settled tokens)
  int64_t limit = 0;   // the limit the last Admit applied (the lease thread's view of the rules)
  // With a shared store only.
  int64_t leased = 0;       // units of `start` the store granted this replica
  int64_t wanted = 0;       // the largest single need seen in `start`: a lease covers it
  bool exhausted = false;   // the store has granted the whole limit of `start` to replicas
  bool asked = false;       // a top-up was asked of the lease thread and not yet served
  int64_t next_start = -1;  // a lease prefetched for the window after `start`
  int64_t next_leased = 0;
  bool next_exhausted = false;
};

// A key, principal or tenant with its counters.
struct Subject {
  std::string id;       // "key:rk_live_...", "principal:acme/alice", "tenant:acme" (map key)
  std::string display;  // "key rk_live_...", "principal acme/alice", "tenant acme" (messages)
  std::array<Window, kWindowedLimits> windows;
  int64_t concurrent = 0;  // slots held (only while a concurrency limit applies)
};

// Looks subjects up by a string_view of their id (no string is made to find one).
struct IdHash {
  using is_transparent = void;
  size_t operator()(std::string_view id) const { return std::hash<std::string_view>{}(id); }
};

struct alignas(64) Shard {
  std::mutex mutex;
  // By Subject::id.
  std::unordered_map<std::string, std::shared_ptr<Subject>, IdHash, std::equal_to<>> subjects;
};

// Validated rules, grouped by scope (key, principal, tenant), in file order.
struct RuleSet {
  std::array<std::vector<QuotaRule>, 3> by_scope;
};

struct QuotaCore {
  static constexpr size_t kShards = 16;

  const Clock* clock = nullptr;    // null = the system clock
  store::Store* shared = nullptr;  // null = counters local to this process
  // The rules in force. Admit reads them with one acquire load; every set ever installed stays
  // alive (all_rules) until the ledger goes, so a reader never holds a freed set. A set is a few
  // hundred bytes per rule and replaced only on a config reload.
  std::atomic<const RuleSet*> rules{nullptr};
  std::mutex rules_mutex;                                 // serialises SetRules
  std::vector<std::unique_ptr<const RuleSet>> all_rules;  // guarded by rules_mutex
  void InstallRules(std::unique_ptr<const RuleSet> set) {
    std::lock_guard lock(rules_mutex);
    rules.store(set.get(), std::memory_order_release);
    all_rules.push_back(std::move(set));
  }
  std::array<Shard, kShards> shards;
  // The minute whose stale subjects were dropped: the first Admit of each minute sweeps.
  std::atomic<int64_t> swept_minute{-1};

  // The lease thread's wake-ups (top-ups asked by Admit) and stop.
  std::mutex lease_mutex;
  std::condition_variable lease_wake;
  bool lease_asked = false;  // guarded by lease_mutex
  bool stopping = false;     // guarded by lease_mutex

  // Unix time in nanoseconds (see quota.h: a given clock's time since its epoch).
  int64_t NowNanos() const;
  // Asks the lease thread for a round now. Takes lease_mutex: never with a shard's held.
  void AskForLeases();
};

// The units a lease asks for: max(1, limit / 16), or the largest single need if larger.
inline int64_t LeaseTarget(const Window& window) {
  return std::max<int64_t>(std::max<int64_t>(1, window.limit / 16), window.wanted);
}

// The store's budget key of one subject's windowed limit.
std::string BudgetKey(const Subject& subject, size_t limit);

// Runs lease rounds until core.stopping: on a wake-up from Admit and at least every 200 ms
// (to prefetch the next windows).
void RunLeaseThread(QuotaCore& core);

}  // namespace rampart::policy::internal
