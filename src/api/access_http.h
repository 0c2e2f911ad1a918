#pragma once

// Access control for the HTTP front ends (KServe /v2, the /v1 models, guard and admin APIs; the
// gateway's calls go through its own stages, gateway/access_stages.h): one request's check and
// the answer to a refusal, in either API's error shape (docs/access.md):
//
//   401  WWW-Authenticate: Bearer, and the authenticator's reason ("invalid API key", ...)
//   403  the policy's reason and the request id
//   429  Retry-After; and x-should-retry: false when a budget, not a rate, is spent
//
// Every answer made here carries x-request-id. Thread-safe; never blocks.

#include <string>
#include <string_view>

#include "net/http.h"
#include "policy/access.h"

namespace rampart::api {

enum class ErrorShape {
  kKServe,    // {"error": "<message>"}
  kOpenAi,    // {"error": {"message", "type", "param", "code"}}
  kPinecone,  // {"code": <gRPC code>, "message", "details": []}
};

// Whether `access` asks anything of requests (not null, and enforcing).
inline bool Enforcing(const policy::AccessControl* access) {
  return access != nullptr && access->enforcing();
}

// Checks `request` (its credentials and peer) for `action` on `resource`, counting `tokens`.
policy::AccessOutcome CheckRequest(const policy::AccessControl& access,
                                   const net::HttpRequest& request, std::string_view action,
                                   const policy::Resource& resource, int64_t tokens = 0);

// The answer to a refusal of `request`.
net::HttpResponse RefusalResponse(const policy::AccessRefusal& refusal,
                                  const net::HttpRequest& request, ErrorShape shape);

}  // namespace rampart::api
