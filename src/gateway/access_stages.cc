#include "gateway/access_stages.h"

#include <algorithm>

#include "gateway/guard_stages.h"
#include "gateway/openai_response.h"
#include "guard/detector.h"

namespace rampart::gateway {
namespace {

// A refusal as the pipeline returns it: the status (OpenAI's error body), the headers the
// answer carries, the outcome the access log shows. 403s name the request id.
Status Refuse(CallContext& call, const policy::AccessRefusal& refusal) {
  call.refusal_headers = refusal.HttpHeaders();
  switch (refusal.kind) {
    case policy::RefusalKind::kUnauthenticated: call.outcome = "unauthenticated"; break;
    case policy::RefusalKind::kForbidden: call.outcome = "forbidden"; break;
    case policy::RefusalKind::kRateLimited: call.outcome = "rate_limited"; break;
    case policy::RefusalKind::kBudgetExhausted: call.outcome = "budget_exhausted"; break;
  }
  return Status(refusal.ToStatus().code(), refusal.AnswerMessage(call.request_id));
}

class AuthenticateStage final : public Stage {
 public:
  explicit AuthenticateStage(const policy::AccessControl& access) : access_(access) {}
  std::string_view name() const override { return "authenticate"; }
  Status OnRequest(CallContext& call) override {
    Result<identity::Identity> identity = access_.Authenticate(CredentialsOf(call.http));
    if (!identity.ok()) {
      return Refuse(call, policy::AccessRefusal::Unauthenticated(identity.status()));
    }
    call.identity = std::move(identity).value();
    return Status::Ok();
  }

 private:
  const policy::AccessControl& access_;
};

class AuthoriseStage final : public Stage {
 public:
  explicit AuthoriseStage(const policy::AccessControl& access) : access_(access) {}
  std::string_view name() const override { return "authorise"; }
  Status OnRequest(CallContext& call) override {
    const policy::Resource resource{.type = "model", .name = call.request.model};
    const std::string_view source =
        call.http.peer != nullptr ? std::string_view(call.http.peer->address) : "";
    call.decision = access_.Authorise(call.identity, ActionOf(call.operation), resource, source);
    if (!call.decision.allowed)
      return Refuse(call, policy::AccessRefusal::Forbidden(call.decision));
    return Status::Ok();
  }

 private:
  const policy::AccessControl& access_;
};

class QuotaStage final : public Stage {
 public:
  explicit QuotaStage(const policy::AccessControl& access) : access_(access) {}
  std::string_view name() const override { return "quota"; }
  Status OnRequest(CallContext& call) override {
    call.reserved_tokens = TokensToReserve(call.request, access_.default_reserved_tokens());
    policy::QuotaLedger::Admission admission = access_.Admit(call.identity, call.reserved_tokens);
    if (!admission.admitted())
      return Refuse(call, policy::AccessRefusal::Quota(*admission.refusal));
    call.reservation = std::move(admission.reservation);
    return Status::Ok();
  }
  void OnComplete(const CallContext& call) override {
    if (call.reservation.empty()) return;
    const Usage& usage = call.usage;
    call.reservation.Settle(
        std::max(usage.total_tokens, usage.prompt_tokens + usage.completion_tokens));
  }

 private:
  const policy::AccessControl& access_;
};

bool Has(const policy::Decision& decision, std::string_view obligation) {
  return std::find(decision.obligations.begin(), decision.obligations.end(), obligation) !=
         decision.obligations.end();
}

}  // namespace

identity::Credentials CredentialsOf(const net::HttpRequest& request) {
  identity::Credentials credentials;
  credentials.authorization = request.Header("authorization").value_or("");
  credentials.api_key = request.Header("x-api-key").value_or("");
  if (credentials.api_key.empty()) credentials.api_key = request.Header("api-key").value_or("");
  credentials.peer = request.peer.get();
  return credentials;
}

std::string_view ActionOf(Operation operation) {
  switch (operation) {
    case Operation::kChatCompletions: return "chat:create";
    case Operation::kCompletions: return "completions:create";
    case Operation::kEmbeddings: return "embeddings:create";
  }
  return "chat:create";
}

int64_t TokensToReserve(const OpenAiRequest& request, int64_t default_tokens) {
  const int64_t prompt = EstimateTokens(request.prompt_chars);
  if (request.operation == Operation::kEmbeddings) return prompt;
  const int64_t completion = request.max_tokens > 0 ? request.max_tokens : default_tokens;
  return prompt + completion * std::max<int64_t>(1, request.n);
}

std::unique_ptr<Stage> MakeAuthenticateStage(const policy::AccessControl& access) {
  return std::make_unique<AuthenticateStage>(access);
}
std::unique_ptr<Stage> MakeAuthoriseStage(const policy::AccessControl& access) {
  return std::make_unique<AuthoriseStage>(access);
}
std::unique_ptr<Stage> MakeQuotaStage(const policy::AccessControl& access) {
  return std::make_unique<QuotaStage>(access);
}

Status ApplyObligations(CallContext& call) {
  const policy::Decision& decision = call.decision;
  if (decision.obligations.empty()) return Status::Ok();
  if (Has(decision, policy::kObligationLocalOnly)) {
    std::vector<std::string>& chain = call.plan.chain;
    const std::string first = chain.empty() ? std::string() : chain.front();
    std::erase_if(chain, [&call](const std::string& target) {
      return call.router == nullptr || !call.router->IsLocal(target);
    });
    if (chain.empty()) {
      call.outcome = "forbidden";
      return PermissionDenied(
          "the policy keeps this caller's data on local models (local_only), and no local model "
          "serves '{}' (request id {})",
          call.request.model, call.request_id);
    }
    // A canary's pick that was dropped no longer decides which arm answered.
    if (chain.front() != first) call.plan.canary = nullptr;
  }
  const bool redact = Has(decision, policy::kObligationRedactPii);
  const bool block = Has(decision, policy::kObligationBlockSecret);
  if (!redact && !block) return Status::Ok();
  if (call.guard == nullptr || call.guard->detector == nullptr) {
    return Unavailable(
        "the policy requires the PII guard for this call ({}), and this gateway has none",
        redact ? policy::kObligationRedactPii : policy::kObligationBlockSecret);
  }
  GuardPolicy policy = call.guard->PolicyFor(call.plan.route);
  if (redact && (policy.input == GuardMode::kOff || policy.input == GuardMode::kDetect)) {
    policy.input = GuardMode::kRedact;
  }
  if (block) {
    const std::string secret(guard::kSecret);
    if (std::find(policy.block.begin(), policy.block.end(), secret) == policy.block.end()) {
      policy.block.push_back(secret);
    }
    if (!policy.types.empty() &&
        std::find(policy.types.begin(), policy.types.end(), secret) == policy.types.end()) {
      policy.types.push_back(secret);
    }
    // The block list applies in any mode but off: detect at least.
    if (policy.input == GuardMode::kOff) policy.input = GuardMode::kDetect;
    if (policy.output == GuardMode::kOff) policy.output = GuardMode::kDetect;
  }
  call.guard_policy = std::make_shared<const GuardPolicy>(std::move(policy));
  return Status::Ok();
}

}  // namespace rampart::gateway
