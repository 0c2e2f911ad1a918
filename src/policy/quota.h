#pragma once

// Quotas: exact counters for requests per minute, tokens per minute, concurrent requests and a
// token budget per day, kept per API key, per principal and per tenant (docs/access.md).
//
// Admit takes everything a request needs from every subject it counts against at once, or
// nothing: there is no check-then-increment race, so under any concurrency the admitted requests
// never pass a limit, not even by one. Tokens are reserved (the request's max_tokens, or a
// configured default) before the call and settled with the real usage after it; a reservation
// dropped unsettled gives back its concurrency slot and keeps its tokens spent.
//
// Windows are calendar minutes and days (UTC). With a shared store (PostgreSQL), the rate and
// budget counters of every replica draw on one budget per window through leases
// (store::Store::LeaseBudget), taken in the background: the replicas together never pass a
// limit; the cost is that a replica may refuse while another still holds unused units of its
// lease (bounded by the lease size). Concurrency is counted per replica.
//
// Threads: Admit and Reservation are thread-safe and never block (they never touch the store;
// each takes one short lock, its tenant's counters').
//
// Details of the contract (docs/quotas.md says the same for operators):
// - Subjects and rules: an identity counts against at most three subjects, its key (when it came
//   with one), its principal (within its tenant) and its tenant. For each scope the most specific
//   matching rule applies (a rule naming the subject beats one naming only its tenant, which
//   beats "*"; among equals, the first), so `{scope: key}` can set a default that a rule for one
//   key overrides. A subject's limits are read from the rules at each Admit; its counters live
//   while it is active (while a window of its is current, or it holds a slot or a reservation)
//   and are dropped after, so memory is bounded by the active subjects.
// - Order of refusal: budgets first (tokens_per_day, whose Retry-After would only invite a
//   retry that fails again), then rates (requests_per_minute, tokens_per_minute), then
//   concurrency; within each, key, principal, tenant. A request needing more tokens than a
//   limit allows in a whole window is refused as a budget (it can never pass). Token limits do
//   not apply to a request of 0 tokens.
// - Windows and Retry-After: a window is the calendar minute or UTC day the admission falls in;
//   Retry-After is the seconds until the refusing window ends, at least 1 (1 for concurrency).
//   Time is the clock's (QuotaOptions::clock) time since its epoch read as Unix time (a test's
//   FakeClock), or the system clock's when none is given. A reservation's tokens settle in the
//   windows it was taken in: settling after its minute has ended changes nothing there.
// - Shared store: the lease thread takes leases of max(1, limit / 16) units (or the largest
//   single need seen, if larger) and tops a counter up when less than half of that is left; for
//   a subject active in the current window it leases the next window's first units in the last
//   seconds of this one. A replica that has no units of a window yet (a subject new to it, or
//   idle for a whole window) refuses with Retry-After 1 until the lease arrives (one store round
//   trip). A settled overrun is counted (a debt the next lease covers) but can pass the limit by
//   that overrun, on one node as across replicas. If the store fails, leases stop and the
//   replica refuses once its units are spent (fail closed); the lease thread logs and retries.

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "core/clock.h"
#include "core/status.h"
#include "identity/identity.h"
#include "store/store.h"

namespace rampart::policy {

// 0 = no limit.
struct QuotaLimits {
  int64_t requests_per_minute = 0;
  int64_t tokens_per_minute = 0;
  int64_t concurrent_requests = 0;
  int64_t tokens_per_day = 0;  // a budget: exhausted, it answers x-should-retry: false
};

// Limits for the identities a rule matches: `scope` is "key", "principal" or "tenant" (each
// matching subject gets its own counters); `tenant` and `name` select ("*" = any).
struct QuotaRule {
  std::string scope;  // key | principal | tenant
  std::string tenant = "*";
  std::string name = "*";  // the key id, the principal's name, or the tenant's name
  QuotaLimits limits;
};

struct QuotaOptions {
  std::vector<QuotaRule> rules;
  // Tokens reserved for a request that names no max_tokens (chat, completions).
  int64_t default_reserved_tokens = 1024;
  const Clock* clock = nullptr;  // null = the real clock (wall time for windows)
};

// Why Admit refused.
struct QuotaRefusal {
  Status status;  // ResourceExhausted "rate limit: 60 requests per minute for key ..."
  int64_t retry_after_seconds = 1;
  bool budget = false;  // a budget, not a rate: retrying soon will not help
  std::string limit;    // "requests_per_minute", "tokens_per_minute", ...
};

class QuotaLedger;
namespace internal {
struct QuotaCore;  // the rules and counters (quota.cc), shared by a ledger and its reservations
}  // namespace internal

// OK, or InvalidArgument naming the first bad rule: a scope other than key, principal and
// tenant, an empty tenant or name, a negative limit.
Status ValidateQuotaRules(const std::vector<QuotaRule>& rules);

// What one admitted request holds. Move-only; releases on destruction.
class Reservation {
 public:
  Reservation() = default;
  Reservation(Reservation&&) noexcept;
  Reservation& operator=(Reservation&&) noexcept;
  ~Reservation();
  // The real number of tokens used: the difference from the reservation is given back (or, if
  // the call used more, taken; a settled overrun is never refused). Once.
  void Settle(int64_t tokens_used);
  bool empty() const { return state_ == nullptr; }

 private:
  friend class QuotaLedger;
  struct State;
  std::shared_ptr<State> state_;
};

class QuotaLedger {
 public:
  // `shared` (may be null) is the store the replicas share; the ledger keeps a pointer and must
  // not outlive it. Starts the lease thread when `shared` is given.
  QuotaLedger(QuotaOptions options, store::Store* shared);
  // Stops the lease thread, waiting for a store call under way.
  ~QuotaLedger();

  // Admits one request of `identity` that may use up to `tokens` tokens (0 for calls that use
  // none, such as KServe inference). Refuses with the first limit it would pass.
  struct Admission {
    Reservation reservation;  // empty when refused, or when no rule limits the identity
    std::optional<QuotaRefusal> refusal;
    bool admitted() const { return !refusal.has_value(); }
  };
  Admission Admit(const identity::Identity& identity, int64_t tokens);

  // Replaces the rules (a config reload); counters of subjects still limited carry over. Rules
  // that ValidateQuotaRules refuses are left out (and logged).
  void SetRules(std::vector<QuotaRule> rules);

  // Subjects whose counters are kept now (for tests and metrics): those active this minute or
  // day, or held by a reservation, plus those gone idle since the minute's sweep.
  size_t SubjectsHeld() const;

  // What a caller reserves for a request that names no max_tokens (QuotaOptions).
  int64_t DefaultReservedTokens() const { return default_reserved_tokens_; }

  QuotaLedger(const QuotaLedger&) = delete;
  QuotaLedger& operator=(const QuotaLedger&) = delete;

 private:
  // Reservations hold the core too, so one may outlive its ledger harmlessly.
  std::shared_ptr<internal::QuotaCore> core_;
  const int64_t default_reserved_tokens_;
  std::thread lease_thread_;  // only with a shared store
};

}  // namespace rampart::policy
