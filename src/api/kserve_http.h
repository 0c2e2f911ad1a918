#pragma once

// KServe v2 / Triton HTTP front end (PROTOCOLS.md §2): health, metadata, config, infer,
// statistics and the repository index, on top of the InferenceServer.
//
// Handle() runs on an HTTP I/O thread and never blocks: infer requests are decoded there, handed
// to the server, and answered from the completion callback (the response is serialized back on
// the I/O thread). Every infer answer carries a W3C `traceparent` (continuing the caller's trace
// or starting one) and a `Server-Timing` header with the request's queue, compute_input,
// compute_infer, compute_output and total durations. Thread-safe; holds no mutable state.

#include <string>

#include "core/serial_worker.h"
#include "net/http_server.h"
#include "serve/server.h"

namespace rampart::api {

struct KServeHttpOptions {
  std::string server_name = "rampart";
  std::string server_version;
  // One JSON line per infer request (trace id, status, per-stage timing) at info level.
  bool access_log = false;
  // The most a compressed infer body may inflate to (the HTTP server's body limit, as a rule).
  uint64_t max_body_bytes = 64ull << 20;
};

class KServeHttp {
 public:
  KServeHttp(serve::InferenceServer& server, KServeHttpOptions options);

  void Handle(net::HttpRequest&& request, net::Responder responder);
  // Finishes queued repository load/unload requests and stops their thread. Call before the
  // InferenceServer goes away.
  void Shutdown();

 private:
  void Infer(net::HttpRequest&& request, std::string_view model, int64_t version,
             net::Responder responder);
  net::HttpResponse ServerMetadata() const;
  net::HttpResponse ModelMetadata(std::string_view model, int64_t version) const;
  net::HttpResponse ModelConfig(std::string_view model, int64_t version) const;
  net::HttpResponse ModelReady(std::string_view model, int64_t version) const;
  net::HttpResponse Statistics(std::string_view model, int64_t version) const;
  net::HttpResponse RepositoryIndex(const net::HttpRequest& request) const;
  net::HttpResponse Logging(const net::HttpRequest& request) const;
  // GET/POST/DELETE /v2/models/{m}/canary: state, start (JSON policy), stop.
  net::HttpResponse Canary(std::string_view model) const;
  net::HttpResponse StartCanary(std::string_view model, const std::string& body) const;
  // POST /v2/repository/models/{m}/load|unload; runs on its own thread (it builds models).
  net::HttpResponse RepositoryControl(bool load, const std::string& model,
                                      const std::string& body) const;

  serve::InferenceServer& server_;
  const KServeHttpOptions options_;
  SerialWorker control_{"http-control"};  // repository load/unload, one at a time, off I/O
};

}  // namespace rampart::api
