#pragma once

// The PII guard's HTTP API, under /v1/guard on the HTTP listener (routed from OpenAiHttp):
//
//   POST /v1/guard/pii/detect   {"text", "types"?}      ->
//   {"entities":[{type,text,start,end,score}]} POST /v1/guard/pii/redact   {"text", "operators"?}
//   -> {"text","entities":[{type,start,end,
//                                                           score,operator,replacement}]}
//   POST /v1/guard/pii/restore  {"text"}                -> {"text"} with every token reversed
//
// Offsets are bytes of the UTF-8 text sent. `operators` maps a type to an operator ("mask",
// "mask:3:4", "hash", ...); types it leaves out get their defaults (guard::DefaultOperator). Keys
// are the gateway's for the caller's tenant ("default" when access is open), so a token made for
// one tenant restores for no other. With access control on, each operation is decided
// (guard:detect, guard:redact, guard:restore: docs/access.md) before it gets here. Errors in
// OpenAI's shape: 400 for a bad body, invalid UTF-8 or a blocked type, 413 for a text over
// gateway.guard.max_text_bytes, 503 when the gateway has no detector. Handle runs on an HTTP I/O
// thread; detection is linear in the text, bounded by max_text_bytes.

#include <string_view>
#include <vector>

#include "gateway/gateway.h"
#include "net/http_server.h"

namespace rampart::api {

class GuardHttp {
 public:
  explicit GuardHttp(gateway::Gateway& gateway) : gateway_(gateway) {}

  // Whether `path` is this API's (/v1/guard and below).
  static bool Owns(std::string_view path);
  // The policy action a request for `path` is decided as: guard:detect, guard:redact or
  // guard:restore (a path of none of them, answered 404 once allowed, as guard:detect).
  static std::string_view ActionOf(std::string_view path);
  // Every action ActionOf answers.
  static std::vector<std::string_view> Actions();
  // The answer to a request of this API (without x-request-id, which the caller adds), made with
  // the keys of `tenant`, the authenticated caller's (empty: the default tenant).
  net::HttpResponse Answer(const net::HttpRequest& request, std::string_view tenant);

 private:
  gateway::Gateway& gateway_;
};

}  // namespace rampart::api
