#pragma once

// Access control in the gateway's pipeline (docs/access.md): the authenticate, authorise and
// quota stages over one policy::AccessControl, and what the route and guard stages do with the
// decision's obligations.
//
//   authenticate  the request's credentials (Authorization: Bearer, x-api-key / api-key, the
//                 connection's client certificate and address) -> CallContext::identity; 401
//   authorise     chat:create / completions:create / embeddings:create on {model: <requested
//                 model>} -> CallContext::decision; 403 with the request id
//   quota         reserves max_tokens (or max_completion_tokens, else the configured default)
//                 plus an estimate of the prompt's tokens -> CallContext::reservation; 429 with
//                 Retry-After (and x-should-retry: false for a budget). Settled with the call's
//                 real usage (or its estimate) once the call has ended.
//
// Obligations of the decision: `local_only` drops every target that is not a local model from
// the route's chain (403 when none is left); `redact:pii` turns the input guard on (redact)
// where the route's is off or only detects; `block:secret` blocks SECRET in both directions;
// `audit:full` is kept on the context and shown in the access log line. Stages are shared by all
// calls, thread-safe and never block.

#include <memory>
#include <string_view>

#include "gateway/stage.h"
#include "identity/identity.h"
#include "net/http.h"
#include "policy/access.h"

namespace rampart::gateway {

// The credentials `request` offers: views into it, valid while it lives.
identity::Credentials CredentialsOf(const net::HttpRequest& request);

// The policy action of an OpenAI operation: "chat:create", "completions:create",
// "embeddings:create".
std::string_view ActionOf(Operation operation);

// Tokens the quota reserves for `request`: its max_tokens (or `default_tokens` when it names
// none; embeddings produce no tokens) plus an estimate of its prompt's.
int64_t TokensToReserve(const OpenAiRequest& request, int64_t default_tokens);

// `access` must outlive the stages. With an AccessControl that is not enforcing, each passes
// (the anonymous identity, an allowed decision, no reservation).
std::unique_ptr<Stage> MakeAuthenticateStage(const policy::AccessControl& access);
std::unique_ptr<Stage> MakeAuthoriseStage(const policy::AccessControl& access);
std::unique_ptr<Stage> MakeQuotaStage(const policy::AccessControl& access);

// What the route stage does with the decision's obligations once the plan is made: local_only
// keeps the targets of `call.plan.chain` that call.router says are local models; redact:pii and
// block:secret set `call.guard_policy`. PermissionDenied when local_only leaves no target;
// Unavailable when an obligation needs the PII guard and the gateway has none.
Status ApplyObligations(CallContext& call);

}  // namespace rampart::gateway
