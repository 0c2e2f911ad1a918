#pragma once

// The OpenAI-compatible front end, under /v1 on the HTTP(S) listener beside KServe's /v2:
//
//   POST /v1/chat/completions, /v1/completions, /v1/embeddings   the gateway (gateway/gateway.h)
//   GET  /v1/models, /v1/models/{id}                              the routable model names
//   POST /v1/admin/reload                                         reload the gateway's config
//   GET  /v1/admin/routes                                         the routing table in force
//   POST /v1/guard/pii/detect, /redact, /restore                  the PII guard (guard_http.h)
//
// Errors use OpenAI's body, {"error":{"message","type","param","code"}}; every answer carries
// x-request-id (the caller's, or a new one). Handle runs on an HTTP I/O thread and never blocks:
// a reload (which reads files and asks upstreams for their models) runs on a thread of its own.

#include <functional>
#include <string_view>

#include "api/guard_http.h"
#include "core/serial_worker.h"
#include "gateway/gateway.h"
#include "net/http_server.h"

namespace rampart::api {

class OpenAiHttp {
 public:
  // `reload` reads the gateway's config again and applies it (Gateway::Reload); it runs on this
  // front end's own thread.
  OpenAiHttp(gateway::Gateway& gateway, std::function<Status()> reload);

  // Whether `path` is this front end's (/v1 and below).
  static bool Owns(std::string_view path);
  void Handle(net::HttpRequest&& request, net::Responder responder);
  // Finishes a reload under way and stops its thread.
  void Shutdown() { reloads_.Stop(); }

 private:
  void Models(const net::HttpRequest& request, net::Responder responder, std::string_view id);

  gateway::Gateway& gateway_;
  GuardHttp guard_{gateway_};
  std::function<Status()> reload_;
  SerialWorker reloads_{"gateway-reload", 4};
};

}  // namespace rampart::api
