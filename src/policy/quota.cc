#include "policy/quota.h"

#include <algorithm>
#include <chrono>

#include <fmt/format.h>

#include "core/logging.h"
#include "policy/quota_core.h"

namespace rampart::policy {

using internal::kDaySeconds;
using internal::kMinuteSeconds;
using internal::kNanosPerSecond;
using internal::kRequestsPerMinute;
using internal::kTokensPerDay;
using internal::kTokensPerMinute;
using internal::kWindowedLimits;
using internal::QuotaCore;
using internal::Shard;
using internal::Subject;
using internal::Window;

namespace internal {

const char* WindowedLimitName(size_t limit) {
  switch (limit) {
    case kRequestsPerMinute: return "requests_per_minute";
    case kTokensPerMinute: return "tokens_per_minute";
    default: return "tokens_per_day";
  }
}

std::string BudgetKey(const Subject& subject, size_t limit) {
  return fmt::format("quota/{}/{}", subject.id, WindowedLimitName(limit));
}

int64_t QuotaCore::NowNanos() const {
  if (clock != nullptr) return ToNanos(clock->Now().time_since_epoch());
  return std::chrono::duration_cast<Nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

void QuotaCore::AskForLeases() {
  {
    std::lock_guard lock(lease_mutex);
    lease_asked = true;
  }
  lease_wake.notify_one();
}

}  // namespace internal

namespace {

constexpr size_t kMaxSubjects = 3;  // key, principal, tenant
constexpr std::array<const char*, kMaxSubjects> kScopeNames = {"key", "principal", "tenant"};

int64_t WindowStart(int64_t now_seconds, int64_t length) {
  return now_seconds - (now_seconds % length + length) % length;
}

int64_t LimitOf(const QuotaLimits& limits, size_t windowed) {
  switch (windowed) {
    case kRequestsPerMinute: return limits.requests_per_minute;
    case kTokensPerMinute: return limits.tokens_per_minute;
    default: return limits.tokens_per_day;
  }
}

bool Matches(const std::string& pattern, const std::string& value) {
  return pattern == "*" || pattern == value;
}

// The most specific rule of `scope` for a subject named `name` in `tenant`, or null.
const QuotaRule* SelectRule(const std::vector<QuotaRule>& rules, const std::string& tenant,
                            const std::string& name) {
  const QuotaRule* best = nullptr;
  int best_rank = -1;
  for (const QuotaRule& rule : rules) {
    if (!Matches(rule.tenant, tenant) || !Matches(rule.name, name)) continue;
    const int rank = (rule.name != "*" ? 2 : 0) + (rule.tenant != "*" ? 1 : 0);
    if (rank > best_rank) {
      best = &rule;
      best_rank = rank;
    }
  }
  return best;
}

bool Limits(const QuotaLimits& limits) {
  return limits.requests_per_minute > 0 || limits.tokens_per_minute > 0 ||
         limits.concurrent_requests > 0 || limits.tokens_per_day > 0;
}

// Moves `window` to the window starting at `start` if it counts an older one.
void Roll(Window& window, int64_t start) {
  if (window.start == start) return;
  const bool prefetched = window.next_start == start;
  window.start = start;
  window.used = 0;
  window.wanted = 0;
  window.asked = false;
  window.leased = prefetched ? window.next_leased : 0;
  window.exhausted = prefetched && window.next_exhausted;
  window.next_start = -1;
  window.next_leased = 0;
  window.next_exhausted = false;
}

bool Stale(const Subject& subject, int64_t minute, int64_t day) {
  if (subject.concurrent > 0) return false;
  for (size_t w = 0; w < kWindowedLimits; ++w) {
    const Window& window = subject.windows[w];
    const int64_t current = w == kTokensPerDay ? day : minute;
    // A window in use, or units leased for one to come, keep the subject.
    if (window.start >= current && (window.used > 0 || window.leased > 0)) return false;
    if (window.next_start >= current && window.next_leased > 0) return false;
  }
  return true;
}

// Drops the subjects that count nothing current and that no reservation holds, once a minute
// (the first Admit of a minute pays for it, outside its own locks).
void Sweep(QuotaCore& core, int64_t minute, int64_t day) {
  int64_t swept = core.swept_minute.load(std::memory_order_relaxed);
  if (swept >= minute || !core.swept_minute.compare_exchange_strong(swept, minute)) return;
  for (Shard& shard : core.shards) {
    std::lock_guard lock(shard.mutex);
    // use_count() only grows under this lock (Admit), so 1 means that no reservation holds it.
    std::erase_if(shard.subjects, [&](const auto& entry) {
      return entry.second.use_count() == 1 && Stale(*entry.second, minute, day);
    });
  }
}

// What refused an admission, noted under the shard's lock and put in words after it.
struct Refused {
  size_t subject = 0;      // index among the request's subjects
  size_t limit_index = 0;  // WindowedLimit, or kWindowedLimits for concurrency
  enum Why { kOver, kTooBig, kAcrossReplicas, kWaitingForLease, kConcurrency } why = kOver;
  int64_t limit = 0;
  int64_t need = 0;
  int64_t retry_after_seconds = 1;
};

QuotaRefusal Describe(const Refused& refused, const std::string& who) {
  QuotaRefusal refusal;
  refusal.retry_after_seconds = refused.retry_after_seconds;
  if (refused.why == Refused::kConcurrency) {
    refusal.limit = "concurrent_requests";
    refusal.status =
        ResourceExhausted("concurrency limit: {} concurrent requests for {}", refused.limit, who);
    return refusal;
  }
  const bool day = refused.limit_index == kTokensPerDay;
  const char* kind = day ? "budget" : "rate";
  const char* unit = refused.limit_index == kRequestsPerMinute ? "requests" : "tokens";
  const char* per = day ? "day" : "minute";
  refusal.limit = internal::WindowedLimitName(refused.limit_index);
  refusal.budget = day;
  switch (refused.why) {
    case Refused::kTooBig:
      refusal.budget = true;  // it can never pass
      refusal.status =
          ResourceExhausted("{} limit: the request needs {} {}, more than the {} per {} for {}",
                            kind, refused.need, unit, refused.limit, per, who);
      break;
    case Refused::kAcrossReplicas:
      refusal.status = ResourceExhausted("{} limit: {} {} per {} for {} (across replicas)", kind,
                                         refused.limit, unit, per, who);
      break;
    case Refused::kWaitingForLease:
      refusal.budget = false;
      refusal.retry_after_seconds = 1;
      refusal.status = ResourceExhausted(
          "rate limit: {} {} per {} for {}: this replica is waiting for its share", refused.limit,
          unit, per, who);
      break;
    default:
      refusal.status =
          ResourceExhausted("{} limit: {} {} per {} for {}", kind, refused.limit, unit, per, who);
  }
  return refusal;
}

}  // namespace

// What a reservation holds. Destroyed with its last Reservation: gives back the slots.
struct Reservation::State {
  struct Held {
    std::shared_ptr<Subject> subject;
    bool slot = false;           // holds a concurrency slot
    bool minute_tokens = false;  // its tokens count in the subject's tokens_per_minute
    bool day_tokens = false;     // ... and in its tokens_per_day
  };
  std::shared_ptr<QuotaCore> core;
  size_t shard = 0;  // every subject of a request is in its tenant's shard
  std::array<Held, kMaxSubjects> held;
  size_t count = 0;
  int64_t minute_start = 0;
  int64_t day_start = 0;
  int64_t tokens = 0;
  bool settled = false;

  std::mutex& Mutex() const { return core->shards[shard].mutex; }

  ~State() {
    const bool slots = std::any_of(held.begin(), held.begin() + static_cast<std::ptrdiff_t>(count),
                                   [](const Held& each) { return each.slot; });
    if (!slots) return;
    std::lock_guard lock(Mutex());
    for (size_t i = 0; i < count; ++i) {
      if (held[i].slot) --held[i].subject->concurrent;
    }
  }
};

Reservation::Reservation(Reservation&&) noexcept = default;
Reservation& Reservation::operator=(Reservation&&) noexcept = default;
Reservation::~Reservation() = default;

void Reservation::Settle(int64_t tokens_used) {
  if (state_ == nullptr || state_->settled) return;
  state_->settled = true;
  const int64_t difference = std::max<int64_t>(tokens_used, 0) - state_->tokens;
  if (difference == 0) return;
  std::lock_guard lock(state_->Mutex());
  for (size_t i = 0; i < state_->count; ++i) {
    const State::Held& held = state_->held[i];
    // Only in the windows the tokens were taken in; a window since ended is left as it was.
    Window& minute = held.subject->windows[kTokensPerMinute];
    if (held.minute_tokens && minute.start == state_->minute_start) {
      minute.used = std::max<int64_t>(0, minute.used + difference);
    }
    Window& day = held.subject->windows[kTokensPerDay];
    if (held.day_tokens && day.start == state_->day_start) {
      day.used = std::max<int64_t>(0, day.used + difference);
    }
  }
}

Status ValidateQuotaRules(const std::vector<QuotaRule>& rules) {
  for (size_t i = 0; i < rules.size(); ++i) {
    const QuotaRule& rule = rules[i];
    if (std::find(kScopeNames.begin(), kScopeNames.end(), rule.scope) == kScopeNames.end()) {
      return InvalidArgument("quota rule {}: scope '{}' is not key, principal or tenant", i + 1,
                             rule.scope);
    }
    if (rule.tenant.empty() || rule.name.empty()) {
      return InvalidArgument("quota rule {}: an empty tenant or name (\"*\" is any)", i + 1);
    }
    const QuotaLimits& limits = rule.limits;
    if (limits.requests_per_minute < 0 || limits.tokens_per_minute < 0 ||
        limits.concurrent_requests < 0 || limits.tokens_per_day < 0) {
      return InvalidArgument("quota rule {}: a negative limit (0 is no limit)", i + 1);
    }
  }
  return Status::Ok();
}

namespace {

std::unique_ptr<const internal::RuleSet> MakeRuleSet(const std::vector<QuotaRule>& rules) {
  auto set = std::make_unique<internal::RuleSet>();
  for (size_t i = 0; i < rules.size(); ++i) {
    if (Status valid = ValidateQuotaRules({rules[i]}); !valid.ok()) {
      LOG_WARN("quotas: rule {} left out: {}", i + 1, valid.message());
      continue;
    }
    const auto scope = static_cast<size_t>(
        std::find(kScopeNames.begin(), kScopeNames.end(), rules[i].scope) - kScopeNames.begin());
    set->by_scope[scope].push_back(rules[i]);
  }
  return set;
}

}  // namespace

QuotaLedger::QuotaLedger(QuotaOptions options, store::Store* shared)
    : core_(std::make_shared<QuotaCore>()),
      default_reserved_tokens_(options.default_reserved_tokens) {
  core_->clock = options.clock;
  core_->shared = shared;
  core_->InstallRules(MakeRuleSet(options.rules));
  if (shared != nullptr) {
    lease_thread_ = std::thread([core = core_] { internal::RunLeaseThread(*core); });
  }
}

QuotaLedger::~QuotaLedger() {
  {
    std::lock_guard lock(core_->lease_mutex);
    core_->stopping = true;
  }
  core_->lease_wake.notify_all();
  if (lease_thread_.joinable()) lease_thread_.join();
}

void QuotaLedger::SetRules(std::vector<QuotaRule> rules) {
  core_->InstallRules(MakeRuleSet(rules));
}

size_t QuotaLedger::SubjectsHeld() const {
  size_t held = 0;
  for (Shard& shard : core_->shards) {
    std::lock_guard lock(shard.mutex);
    held += shard.subjects.size();
  }
  return held;
}

QuotaLedger::Admission QuotaLedger::Admit(const identity::Identity& identity, int64_t tokens) {
  Admission admission;
  QuotaCore& core = *core_;
  tokens = std::max<int64_t>(tokens, 0);
  const internal::RuleSet* rules = core.rules.load(std::memory_order_acquire);

  // The subjects the rules select, in scope order.
  struct Selected {
    const QuotaLimits* limits = nullptr;
    size_t scope = 0;
  };
  std::array<Selected, kMaxSubjects> selected;
  size_t count = 0;
  const std::array<const std::string*, kMaxSubjects> names = {&identity.key_id, &identity.principal,
                                                              &identity.tenant};
  for (size_t scope = 0; scope < kMaxSubjects; ++scope) {
    if (names[scope]->empty() || rules->by_scope[scope].empty()) continue;
    const QuotaRule* rule = SelectRule(rules->by_scope[scope], identity.tenant, *names[scope]);
    if (rule != nullptr && Limits(rule->limits)) selected[count++] = {&rule->limits, scope};
  }
  if (count == 0) return admission;
  // Their ids, written without allocating ("key:<id>", "principal:<tenant>/<name>",
  // "tenant:<name>"); a subject's own copy is made only when it is new.
  std::array<fmt::basic_memory_buffer<char, 96>, kMaxSubjects> ids;  // longer ones spill over
  for (size_t i = 0; i < count; ++i) {
    auto append = [&id = ids[i]](std::string_view text) {
      id.append(text.data(), text.data() + text.size());
    };
    const size_t scope = selected[i].scope;
    append(kScopeNames[scope]);
    append(":");
    if (scope == 1) {
      append(identity.tenant);
      append("/");
    }
    append(*names[scope]);
  }
  auto id_of = [&ids](size_t i) { return std::string_view(ids[i].data(), ids[i].size()); };

  const int64_t now_nanos = core.NowNanos();
  const int64_t now = now_nanos / kNanosPerSecond;
  const int64_t minute = WindowStart(now, kMinuteSeconds);
  const int64_t day = WindowStart(now, kDaySeconds);
  const bool shared = core.shared != nullptr;
  bool ask_for_leases = false;

  std::array<Subject*, kMaxSubjects> subjects{};
  std::optional<Refused> refused;
  auto state = std::make_shared<Reservation::State>();
  // A key and a principal belong to one tenant: the request's subjects share its shard, so one
  // lock covers the check and the take.
  state->shard = std::hash<std::string_view>{}(identity.tenant) % QuotaCore::kShards;
  Shard& shard = core.shards[state->shard];
  {
    std::lock_guard lock(shard.mutex);
    for (size_t i = 0; i < count; ++i) {
      auto found = shard.subjects.find(id_of(i));
      if (found == shard.subjects.end()) {
        auto subject = std::make_shared<Subject>();
        subject->id = std::string(id_of(i));
        subject->display = subject->id;
        subject->display[subject->display.find(':')] = ' ';
        found = shard.subjects.emplace(subject->id, std::move(subject)).first;
      }
      Subject& subject = *found->second;
      for (size_t w = 0; w < kWindowedLimits; ++w) {
        Window& window = subject.windows[w];
        Roll(window, w == kTokensPerDay ? day : minute);
        const int64_t limit = LimitOf(*selected[i].limits, w);
        if (limit != window.limit) window.exhausted = window.next_exhausted = false;  // new rules
        window.limit = limit;
      }
      subjects[i] = &subject;
      state->held[i].subject = found->second;
    }

    // Checks, budgets first, then rates, then concurrency (quota.h). What refuses is noted here
    // and put in words after the lock is released: a flood of refused requests must not hold
    // up the tenant's others.
    auto refuse = [&](size_t i, size_t w, int64_t need) -> std::optional<Refused> {
      Window& window = subjects[i]->windows[w];
      if (window.limit <= 0 || need == 0) return std::nullopt;
      Refused noted{i, w, Refused::kOver, window.limit, need};
      noted.retry_after_seconds =
          std::max<int64_t>(1, ((window.start + internal::WindowSeconds(w)) * kNanosPerSecond -
                                now_nanos + kNanosPerSecond - 1) /
                                   kNanosPerSecond);
      if (need > window.limit) {
        noted.why = Refused::kTooBig;
        return noted;
      }
      if (window.used + need > window.limit) return noted;
      if (shared && window.used + need > window.leased) {
        window.wanted = std::max(window.wanted, need);
        if (!window.asked && !window.exhausted) ask_for_leases = window.asked = true;
        // Every unit of the window is with the replicas: as good as passing the limit.
        noted.why = window.exhausted ? Refused::kAcrossReplicas : Refused::kWaitingForLease;
        return noted;
      }
      return std::nullopt;
    };
    for (size_t i = 0; i < count && !refused; ++i) refused = refuse(i, kTokensPerDay, tokens);
    for (size_t i = 0; i < count && !refused; ++i) refused = refuse(i, kRequestsPerMinute, 1);
    for (size_t i = 0; i < count && !refused; ++i) refused = refuse(i, kTokensPerMinute, tokens);
    for (size_t i = 0; i < count && !refused; ++i) {
      const int64_t limit = selected[i].limits->concurrent_requests;
      if (limit > 0 && subjects[i]->concurrent >= limit) {
        refused = Refused{i, kWindowedLimits, Refused::kConcurrency, limit, 1};
      }
    }

    if (!refused) {
      // Take everything at once: nothing was taken before every check passed.
      for (size_t i = 0; i < count; ++i) {
        Reservation::State::Held& held = state->held[i];
        Subject& subject = *subjects[i];
        for (size_t w = 0; w < kWindowedLimits; ++w) {
          Window& window = subject.windows[w];
          const int64_t need = w == kRequestsPerMinute ? 1 : tokens;
          if (window.limit <= 0 || need == 0) continue;
          window.used += need;
          if (w == kTokensPerMinute) held.minute_tokens = true;
          if (w == kTokensPerDay) held.day_tokens = true;
          if (shared && !window.asked && !window.exhausted &&
              2 * (window.leased - window.used) < internal::LeaseTarget(window)) {
            ask_for_leases = window.asked = true;
          }
        }
        if (selected[i].limits->concurrent_requests > 0) {
          ++subject.concurrent;
          held.slot = true;
        }
      }
    }
  }  // the shard's lock
  if (ask_for_leases) core.AskForLeases();
  Sweep(core, minute, day);
  if (refused) {  // `state` holds no slot: dropping it gives nothing back
    // A subject's display name never changes, and `state` keeps the subject alive.
    admission.refusal = Describe(*refused, subjects[refused->subject]->display);
    return admission;
  }
  state->core = core_;
  state->count = count;
  state->minute_start = minute;
  state->day_start = day;
  state->tokens = tokens;
  admission.reservation.state_ = std::move(state);
  return admission;
}

}  // namespace rampart::policy
