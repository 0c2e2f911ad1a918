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
// Threads: Admit and Reservation are thread-safe and never block (they never touch the store).

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
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
  std::string scope;   // key | principal | tenant
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
  Status status;           // ResourceExhausted "rate limit: 60 requests per minute for key ..."
  int64_t retry_after_seconds = 1;
  bool budget = false;     // a budget, not a rate: retrying soon will not help
  std::string limit;       // "requests_per_minute", "tokens_per_minute", ...
};

class QuotaLedger;

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
  ~QuotaLedger();

  // Admits one request of `identity` that may use up to `tokens` tokens (0 for calls that use
  // none, such as KServe inference). Refuses with the first limit it would pass.
  struct Admission {
    Reservation reservation;  // empty when refused, or when no rule limits the identity
    std::optional<QuotaRefusal> refusal;
    bool admitted() const { return !refusal.has_value(); }
  };
  Admission Admit(const identity::Identity& identity, int64_t tokens);

  // Replaces the rules (a config reload); counters of subjects still limited carry over.
  void SetRules(std::vector<QuotaRule> rules);

 private:
  // (the quota's implementer's to choose)
};

}  // namespace rampart::policy
