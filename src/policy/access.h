#pragma once

// AccessControl: the one door every API goes through (docs/access.md). A front end turns its
// request into Credentials, names the action (model:infer, chat:create, admin:keys:write, ...)
// and the resource it acts on, and gets either an AccessGrant (who the caller is, the policy's
// decision with its obligations, and the quota reservation to settle when the call ends) or an
// AccessRefusal carrying what the front end needs to answer: 401 (unauthenticated), 403
// (forbidden), 429 with Retry-After (a rate), or 429 with `x-should-retry: false` (a budget).
//
// The three steps also run apart (the gateway's authenticate, authorise and quota stages):
// Authenticate, Authorise and Admit; Check is the three in order.
//
// Two modes:
//   - open (Open(): the config has no `access:` section): every request is granted as the
//     anonymous principal of tenant "default", no decision is made and nothing is counted;
//   - enforcing (Enforcing()): the Authenticator, the PolicyEngine and the QuotaLedger decide.
//
// Cost: nothing beyond the three parts' own work (Authenticate reads the key table's snapshot,
// Decide walks the rules indexed for the request, Admit takes a few atomic counters); no lock
// is held across them and nothing blocks. Thread-safe: every method may be called from any
// thread at once; Reload swaps the policy set and the quota rules atomically.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "core/status.h"
#include "identity/authenticator.h"
#include "identity/identity.h"
#include "policy/policy.h"
#include "policy/quota.h"

namespace rampart::policy {

// The obligations front ends honour (policy permits attach them; docs/access.md).
inline constexpr std::string_view kObligationLocalOnly = "local_only";
inline constexpr std::string_view kObligationRedactPii = "redact:pii";
inline constexpr std::string_view kObligationBlockSecret = "block:secret";
inline constexpr std::string_view kObligationAuditFull = "audit:full";

enum class RefusalKind {
  kUnauthenticated,  // 401, gRPC UNAUTHENTICATED
  kForbidden,        // 403, gRPC PERMISSION_DENIED
  kRateLimited,      // 429 + Retry-After, gRPC RESOURCE_EXHAUSTED
  kBudgetExhausted,  // 429 + Retry-After + x-should-retry: false, gRPC RESOURCE_EXHAUSTED
};

// Why a request was refused, as every front end answers it.
struct AccessRefusal {
  RefusalKind kind = RefusalKind::kForbidden;
  // Safe to show the caller: the authenticator's reason ("invalid API key", "token expired"),
  // the policy's ("no rule permits chat:create on model 'gpt-4o'"), the quota's.
  std::string message;
  int64_t retry_after_seconds = 0;  // for the 429s; 0 otherwise

  static AccessRefusal Unauthenticated(const Status& why);
  static AccessRefusal Forbidden(const Decision& decision);
  static AccessRefusal Quota(const QuotaRefusal& refusal);

  int http_status() const;  // 401, 403 or 429
  // What the answer says: `message`, and for a 403 (PERMISSION_DENIED) the request id too,
  // "<message> (request id <id>)", so that the caller can quote it to an operator.
  std::string AnswerMessage(std::string_view request_id) const;
  // Unauthenticated, PermissionDenied or ResourceExhausted with `message`.
  Status ToStatus() const;
  // The headers an HTTP answer carries besides its body: WWW-Authenticate: Bearer (401),
  // Retry-After (429), x-should-retry: false (a budget).
  std::vector<std::pair<std::string, std::string>> HttpHeaders() const;
};

// What a granted request holds until it ends.
struct AccessGrant {
  identity::Identity identity;
  Decision decision;
  // Settle it with the tokens really used when the call ends (dropping it unsettled gives back
  // its concurrency slot and keeps the reserved tokens spent). Empty when nothing is counted.
  Reservation reservation;

  bool HasObligation(std::string_view obligation) const;
};

// Either a grant or a refusal (Check's answer).
using AccessOutcome = std::variant<AccessGrant, AccessRefusal>;

class AccessControl {
 public:
  // Everything allowed (no `access:` section).
  static std::unique_ptr<AccessControl> Open();

  struct Parts {
    std::unique_ptr<identity::Authenticator> authenticator;  // required
    std::unique_ptr<PolicyEngine> policies;                  // required
    std::unique_ptr<QuotaLedger> quotas;                     // null = nothing counted
    int64_t default_reserved_tokens = 1024;
    // Unix seconds now (authentication's expiry checks); null = the real clock.
    int64_t (*unix_now)() = nullptr;
  };
  // REQUIRES: parts.authenticator and parts.policies (CHECKed).
  static std::unique_ptr<AccessControl> Enforcing(Parts parts);

  ~AccessControl();
  AccessControl(const AccessControl&) = delete;
  AccessControl& operator=(const AccessControl&) = delete;

  bool enforcing() const { return authenticator_ != nullptr; }

  // Who the caller is. Unauthenticated with a reason safe to show. Open: the anonymous
  // principal of tenant "default".
  Result<identity::Identity> Authenticate(const identity::Credentials& credentials) const;
  // Whether `identity` may do `action` on `resource`, coming from `source_address` (the peer's
  // IP, for conditions on context.source_ip). Open: allowed, without rules or obligations.
  Decision Authorise(const identity::Identity& identity, std::string_view action,
                     const Resource& resource, std::string_view source_address) const;
  // Counts one request of `identity` that may use up to `tokens` tokens. Open, or without
  // quotas: admitted with an empty reservation.
  QuotaLedger::Admission Admit(const identity::Identity& identity, int64_t tokens) const;

  // The three in order: the first refusal, or the grant.
  AccessOutcome Check(const identity::Credentials& credentials, std::string_view action,
                      const Resource& resource, int64_t tokens) const;

  // The policies in force (for explanations and the admin API); null when open.
  std::shared_ptr<const PolicySet> policy_set() const;
  // Tokens to reserve for a call that names no maximum.
  int64_t default_reserved_tokens() const { return default_reserved_tokens_; }

  // Reads the policy files again and, when given, replaces the quota rules. The old policies
  // stay when the files are invalid (the error says why); quota rules are only replaced once
  // the policies loaded. Open: OK, nothing to do.
  Status Reload(std::optional<std::vector<QuotaRule>> quota_rules);

 private:
  AccessControl() = default;

  std::unique_ptr<identity::Authenticator> authenticator_;  // null when open
  std::unique_ptr<PolicyEngine> policies_;
  std::unique_ptr<QuotaLedger> quotas_;
  int64_t default_reserved_tokens_ = 1024;
  int64_t (*unix_now_)() = nullptr;
};

}  // namespace rampart::policy
