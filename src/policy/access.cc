#include "policy/access.h"

#include <algorithm>

#include "core/check.h"
#include "core/clock.h"

namespace rampart::policy {
namespace {

int64_t RealUnixNow() { return UnixMillisNow() / 1000; }

identity::Identity OpenIdentity() {
  identity::Identity identity;
  identity.method = identity::Method::kAnonymous;
  identity.tenant = "default";
  identity.principal = "anonymous";
  return identity;
}

}  // namespace

AccessRefusal AccessRefusal::Unauthenticated(const Status& why) {
  return AccessRefusal{.kind = RefusalKind::kUnauthenticated,
                       .message = why.message().empty() ? "no credentials" : why.message()};
}

AccessRefusal AccessRefusal::Forbidden(const Decision& decision) {
  return AccessRefusal{.kind = RefusalKind::kForbidden,
                       .message = decision.reason.empty() ? "denied by policy" : decision.reason};
}

AccessRefusal AccessRefusal::Quota(const QuotaRefusal& refusal) {
  return AccessRefusal{
      .kind = refusal.budget ? RefusalKind::kBudgetExhausted : RefusalKind::kRateLimited,
      .message = refusal.status.message(),
      .retry_after_seconds = std::max<int64_t>(1, refusal.retry_after_seconds)};
}

int AccessRefusal::http_status() const {
  switch (kind) {
    case RefusalKind::kUnauthenticated: return 401;
    case RefusalKind::kForbidden: return 403;
    case RefusalKind::kRateLimited:
    case RefusalKind::kBudgetExhausted: return 429;
  }
  return 403;
}

std::string AccessRefusal::AnswerMessage(std::string_view request_id) const {
  if (kind != RefusalKind::kForbidden) return message;
  std::string answer = message;
  answer.append(" (request id ").append(request_id).append(")");
  return answer;
}

Status AccessRefusal::ToStatus() const {
  switch (kind) {
    case RefusalKind::kUnauthenticated: return Status(StatusCode::kUnauthenticated, message);
    case RefusalKind::kForbidden: return Status(StatusCode::kPermissionDenied, message);
    case RefusalKind::kRateLimited:
    case RefusalKind::kBudgetExhausted: return Status(StatusCode::kResourceExhausted, message);
  }
  return Status(StatusCode::kPermissionDenied, message);
}

std::vector<std::pair<std::string, std::string>> AccessRefusal::HttpHeaders() const {
  std::vector<std::pair<std::string, std::string>> headers;
  switch (kind) {
    case RefusalKind::kUnauthenticated: headers.emplace_back("WWW-Authenticate", "Bearer"); break;
    case RefusalKind::kForbidden: break;
    case RefusalKind::kBudgetExhausted:
      headers.emplace_back("x-should-retry", "false");
      [[fallthrough]];
    case RefusalKind::kRateLimited:
      headers.emplace_back("Retry-After",
                           std::to_string(std::max<int64_t>(1, retry_after_seconds)));
      break;
  }
  return headers;
}

bool AccessGrant::HasObligation(std::string_view obligation) const {
  const std::vector<std::string>& all = decision.obligations;
  return std::find(all.begin(), all.end(), obligation) != all.end();
}

std::unique_ptr<AccessControl> AccessControl::Open() {
  return std::unique_ptr<AccessControl>(new AccessControl());
}

std::unique_ptr<AccessControl> AccessControl::Enforcing(Parts parts) {
  CHECK(parts.authenticator != nullptr);
  CHECK(parts.policies != nullptr);
  std::unique_ptr<AccessControl> access(new AccessControl());
  access->authenticator_ = std::move(parts.authenticator);
  access->policies_ = std::move(parts.policies);
  access->quotas_ = std::move(parts.quotas);
  access->default_reserved_tokens_ = parts.default_reserved_tokens;
  access->unix_now_ = parts.unix_now != nullptr ? parts.unix_now : &RealUnixNow;
  return access;
}

AccessControl::~AccessControl() = default;

Result<identity::Identity> AccessControl::Authenticate(
    const identity::Credentials& credentials) const {
  if (!enforcing()) return OpenIdentity();
  return authenticator_->Authenticate(credentials, unix_now_());
}

Decision AccessControl::Authorise(const identity::Identity& identity, std::string_view action,
                                  const Resource& resource, std::string_view source_address) const {
  if (!enforcing()) return Decision{.allowed = true};
  const AccessRequest request{.principal = &identity,
                              .action = action,
                              .resource = resource,
                              .source_address = source_address};
  return policies_->Current()->Decide(request);
}

QuotaLedger::Admission AccessControl::Admit(const identity::Identity& identity,
                                            int64_t tokens) const {
  if (!enforcing() || quotas_ == nullptr) return QuotaLedger::Admission{};
  return quotas_->Admit(identity, tokens);
}

AccessOutcome AccessControl::Check(const identity::Credentials& credentials,
                                   std::string_view action, const Resource& resource,
                                   int64_t tokens) const {
  Result<identity::Identity> identity = Authenticate(credentials);
  if (!identity.ok()) return AccessRefusal::Unauthenticated(identity.status());
  const std::string_view source =
      credentials.peer != nullptr ? std::string_view(credentials.peer->address) : "";
  Decision decision = Authorise(*identity, action, resource, source);
  if (!decision.allowed) return AccessRefusal::Forbidden(decision);
  QuotaLedger::Admission admission = Admit(*identity, tokens);
  if (!admission.admitted()) return AccessRefusal::Quota(*admission.refusal);
  return AccessGrant{.identity = std::move(identity).value(),
                     .decision = std::move(decision),
                     .reservation = std::move(admission.reservation)};
}

std::shared_ptr<const PolicySet> AccessControl::policy_set() const {
  return enforcing() ? policies_->Current() : nullptr;
}

Status AccessControl::Reload(std::optional<std::vector<QuotaRule>> quota_rules) {
  if (!enforcing()) return Status::Ok();
  RETURN_IF_ERROR(policies_->Reload().WithContext("policy files"));
  if (quota_rules && quotas_ != nullptr) quotas_->SetRules(std::move(*quota_rules));
  return Status::Ok();
}

}  // namespace rampart::policy
