// The lease thread of a QuotaLedger with a shared store (quota.h, quota_core.h): it finds the
// counters that run low (or will need the next window's units soon), asks the store for leases
// without holding any lock, and credits what it is granted.

#include <chrono>

#include "core/logging.h"
#include "core/thread_name.h"
#include "policy/quota_core.h"

namespace rampart::policy::internal {
namespace {

// How often a round runs without being asked: the prefetch of the next windows needs it.
constexpr std::chrono::milliseconds kRoundInterval{200};
// How long before a window ends the next window's first lease is taken.
constexpr int64_t kPrefetchSeconds[kWindowedLimits] = {5, 5, 60};

struct Job {
  std::shared_ptr<Subject> subject;
  size_t shard = 0;
  size_t limit = 0;  // WindowedLimit
  int64_t window_start = 0;
  bool next = false;  // a prefetch for the window after the current one
  int64_t units = 0;  // the limit's value
  int64_t want = 0;
  std::string key;
};

std::vector<Job> FindJobs(QuotaCore& core, int64_t now) {
  std::vector<Job> jobs;
  for (size_t s = 0; s < QuotaCore::kShards; ++s) {
    Shard& shard = core.shards[s];
    std::lock_guard lock(shard.mutex);
    for (const auto& [id, subject] : shard.subjects) {
      for (size_t w = 0; w < kWindowedLimits; ++w) {
        Window& window = subject->windows[w];
        if (window.limit <= 0) continue;
        const int64_t length = WindowSeconds(w);
        const int64_t current = now - now % length;
        if (window.start != current) continue;  // idle this window: Admit asks when it comes
        const int64_t target = LeaseTarget(window);
        const int64_t left = window.leased - window.used;
        if (!window.exhausted && (window.asked || 2 * left < target)) {
          jobs.push_back({subject, s, w, current, false, window.limit, target - left, {}});
        }
        const bool active = window.used > 0;
        if (active && now >= current + length - kPrefetchSeconds[w] &&
            window.next_start != current + length) {
          jobs.push_back({subject, s, w, current + length, true, window.limit, target, {}});
        }
      }
    }
  }
  for (Job& job : jobs) job.key = BudgetKey(*job.subject, job.limit);
  return jobs;
}

// Credits one lease to its window, if that window is still the one it was taken for.
void Credit(QuotaCore& core, const Job& job, const store::BudgetLease& lease) {
  std::lock_guard lock(core.shards[job.shard].mutex);
  Window& window = job.subject->windows[job.limit];
  const bool exhausted = lease.used >= job.units;
  if (window.start == job.window_start) {  // current, or a prefetch whose window has begun
    window.leased += lease.granted;
    window.exhausted = window.exhausted || exhausted;
    if (!job.next) window.asked = false;
  } else if (job.next && window.next_start == job.window_start) {
    window.next_leased += lease.granted;
    window.next_exhausted = window.next_exhausted || exhausted;
  } else if (job.next && window.start < job.window_start) {
    window.next_start = job.window_start;
    window.next_leased = lease.granted;
    window.next_exhausted = exhausted;
  }
  // Otherwise the window has ended: its units are never used outside it.
}

// One round: every lease due. Returns the last failure (OK when every lease was granted).
Status RunRound(QuotaCore& core) {
  const int64_t now = core.NowNanos() / kNanosPerSecond;
  Status failure;
  for (const Job& job : FindJobs(core, now)) {
    Result<store::BudgetLease> lease = core.shared->LeaseBudget(
        job.key, job.window_start, job.units, std::max<int64_t>(job.want, 1));
    if (!lease.ok()) {
      // Left asked: the next round tries again; meanwhile the replica spends what it holds.
      failure = lease.status();
      continue;
    }
    Credit(core, job, *lease);
  }
  return failure;
}

}  // namespace

void RunLeaseThread(QuotaCore& core) {
  NameThisThread("quota-leases");
  bool failing = false;  // logged once when leases start failing, and once when they recover
  std::unique_lock lock(core.lease_mutex);
  while (!core.stopping) {
    core.lease_wake.wait_for(lock, kRoundInterval,
                             [&] { return core.lease_asked || core.stopping; });
    if (core.stopping) break;
    core.lease_asked = false;
    lock.unlock();
    const Status round = RunRound(core);
    if (!round.ok() && !failing) {
      LOG_WARN(
          "quotas: the shared store refuses leases ({}); each counter is limited to the units "
          "it holds until the store answers again",
          round.ToString());
    } else if (round.ok() && failing) {
      LOG_INFO("quotas: the shared store grants leases again");
    }
    failing = !round.ok();
    lock.lock();
  }
}

}  // namespace rampart::policy::internal
