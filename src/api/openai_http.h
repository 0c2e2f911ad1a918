#pragma once

// The OpenAI-compatible front end, under /v1 on the HTTP(S) listener beside KServe's /v2:
//
//   POST /v1/chat/completions, /v1/completions, /v1/embeddings   the gateway (gateway/gateway.h)
//   GET  /v1/models, /v1/models/{id}                              the routable model names
//   POST /v1/admin/reload                                         reload the gateway's config
//   GET  /v1/admin/routes                                         the routing table in force
//   POST /v1/guard/pii/detect, /redact, /restore                  the PII guard (guard_http.h)
//
//   GET|POST|PUT|DELETE /v1/admin/tenants, principals, keys        the admin API (admin_http.h)
//
// Errors use OpenAI's body, {"error":{"message","type","param","code"}}; every answer carries
// x-request-id (the caller's, or a new one). Handle runs on an HTTP I/O thread and never blocks:
// a reload (which reads files and asks upstreams for their models) runs on a thread of its own.
//
// Access control (docs/access.md): the gateway's calls in its pipeline; here GET /v1/models
// (models:read, listing only the models the caller may call: chat:create, completions:create or
// embeddings:create on the model), the guard API (guard:detect, guard:redact, guard:restore),
// admin:reload and admin:routes:read; the admin API decides per action itself.

#include <functional>
#include <string_view>

#include "api/admin_http.h"
#include "api/audit_http.h"
#include "api/guard_http.h"
#include "audit/sink.h"
#include "core/serial_worker.h"
#include "gateway/gateway.h"
#include "net/http_server.h"
#include "policy/access.h"

namespace rampart::api {

class OpenAiHttp {
 public:
  // `reload` reads the gateway's config again and applies it (Gateway::Reload); it runs on this
  // front end's own thread.
  // `access` (null: open) and `admin` (null: no admin API; 404) must outlive the front end.
  // `audit` (null: nothing recorded) gets one record per guard API request (api "guard"); the
  // gateway's calls are recorded by its own audit stage, the admin API's by AdminHttp.
  OpenAiHttp(gateway::Gateway& gateway, std::function<Status()> reload,
             const policy::AccessControl* access = nullptr, AdminHttp* admin = nullptr,
             audit::AuditSink* audit = nullptr);

  // Whether `path` is this front end's (/v1 and below).
  static bool Owns(std::string_view path);
  // Every policy action this front end decides (docs/access.md): the gateway's operations,
  // models:read, admin:reload, admin:routes:read, the guard's and the admin API's.
  static std::vector<std::string_view> Actions();
  void Handle(net::HttpRequest&& request, net::Responder responder);
  // Finishes a reload under way and stops its thread.
  void Shutdown() { reloads_.Stop(); }

 private:
  // `responder`, recording the request (api "openai") as `action` on `resource` when there is
  // an audit log.
  RecordedResponder Recorded(const net::HttpRequest& request, net::Responder responder,
                             std::string_view action, const policy::Resource& resource);
  // The caller's grant for `action` on `resource`, or nullopt once the refusal was answered.
  // Open: a grant without a decision.
  std::optional<policy::AccessGrant> Check(const net::HttpRequest& request,
                                           RecordedResponder& responder, std::string_view action,
                                           const policy::Resource& resource);
  void Models(const net::HttpRequest& request, RecordedResponder responder, std::string_view id);

  gateway::Gateway& gateway_;
  const policy::AccessControl* access_;
  AdminHttp* admin_;
  audit::AuditSink* audit_;
  GuardHttp guard_{gateway_};
  std::function<Status()> reload_;
  SerialWorker reloads_{"gateway-reload", 4};
};

}  // namespace rampart::api
