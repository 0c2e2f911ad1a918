#pragma once

// KServe v2 / Triton HTTP front end: health, metadata, config, infer, statistics, the repository
// index and model control, Triton's logging extension and Rampart's canary releases, on top of
// the InferenceServer. Every route is in one table (Routes, kserve_http_routes.cc).
//
// Handle() runs on an HTTP I/O thread and never blocks: infer requests are decoded there, handed
// to the server, and answered from the completion callback (the response is serialized back on
// the I/O thread); the repository index and load/unload, which read files and build models, run
// on threads of their own, each behind a bounded queue (429 when it is full). Every infer answer
// carries a W3C `traceparent` (continuing the caller's trace or starting one) and a
// `Server-Timing` header with the request's queue, compute_input, compute_infer, compute_output
// and total durations. Thread-safe; holds no mutable state of its own.

#include <functional>
#include <string>
#include <vector>

#include "api/audit_http.h"
#include "audit/sink.h"
#include "core/serial_worker.h"
#include "core/trace.h"
#include "net/http_server.h"
#include "policy/access.h"
#include "serve/server.h"

namespace rampart::api {

struct KServeHttpOptions {
  std::string server_name = "rampart";
  std::string server_version;
  // One JSON line per infer request (trace id, status, per-stage timing) at info level.
  bool access_log = false;
  // The most a compressed infer body may inflate to (the HTTP server's body limit, as a rule).
  uint64_t max_body_bytes = 64ull << 20;
  // Told when a repository request is refused because too many wait already (429); on an I/O
  // thread, so it must be cheap and thread-safe (a counter).
  std::function<void()> on_worker_queue_full;
  // Authentication, policy and quotas (docs/access.md): every route but health names an action
  // and a resource and is checked before it runs. Null = open. Must outlive the front end.
  const policy::AccessControl* access = nullptr;
  // The audit log (docs/audit.md): every request but health probes yields one record, its
  // answer held until the record is durable when the sink is sync. Null = nothing recorded.
  // Must outlive the front end.
  audit::AuditSink* audit = nullptr;
};

// Repository requests (index, load, unload) that may wait for their thread; more get 429.
inline constexpr size_t kMaxQueuedRepositoryRequests = 64;

class KServeHttp {
 public:
  KServeHttp(serve::InferenceServer& server, KServeHttpOptions options);

  void Handle(net::HttpRequest&& request, net::Responder responder);
  // The policy actions its routes are decided as (docs/access.md), each once; the health probes
  // are open and have none.
  static std::vector<std::string_view> Actions();
  // Finishes queued repository requests and stops their threads. Call before the
  // InferenceServer goes away.
  void Shutdown();

 private:
  // What a route's path captures, and what access control granted.
  struct RouteArgs {
    std::string model;                        // "{model}", percent-decoded
    int64_t version = serve::kLatestVersion;  // "{version}"
    std::string tenant;                       // the caller's (empty when open)
    policy::Reservation reservation;          // held until the request is answered
    TraceContext trace;                       // this server's span of the caller's trace
  };
  using RouteHandler = void (*)(KServeHttp&, RouteArgs&, net::HttpRequest&&, RecordedResponder&&);
  struct Route {
    std::string_view method;
    // Literal path segments; "{model}" and "{version}" match any segment and capture it.
    std::vector<std::string> pattern;
    RouteHandler handler;
    // The policy action (model:infer, model:read, ...; docs/access.md) and the type of the
    // resource it acts on ("model": the {model} captured, "*" for every model's; "server",
    // "repository"). Empty: open to all (health probes).
    std::string_view action;
    std::string_view resource_type;
  };
  // Every route, built once. A path no route has is 404; one with another method, 405.
  static const std::vector<Route>& Routes();

  // Runs `work` on `worker` and answers with what it returns; a full queue answers 429, a
  // stopping one 503. `reservation` (the request's quota, if any) is held until the answer.
  void OffIoThread(SerialWorker& worker, RecordedResponder responder,
                   UniqueFunction<net::HttpResponse()> work, policy::Reservation reservation);
  void QueueRepositoryControl(bool load, std::string model, std::string body,
                              RecordedResponder responder, policy::Reservation reservation);
  void Infer(net::HttpRequest&& request, RouteArgs& args, RecordedResponder responder);
  net::HttpResponse ServerMetadata() const;
  net::HttpResponse ModelMetadata(std::string_view model, int64_t version) const;
  net::HttpResponse ModelConfig(std::string_view model, int64_t version) const;
  net::HttpResponse ModelReady(std::string_view model, int64_t version) const;
  net::HttpResponse Statistics(std::string_view model, int64_t version) const;
  // POST /v2/repository/index with `body` (may be empty); reads the repository.
  net::HttpResponse RepositoryIndex(const std::string& body) const;
  net::HttpResponse Logging(const net::HttpRequest& request) const;
  // GET/POST/DELETE /v2/models/{m}/canary: state, start (JSON policy), stop.
  net::HttpResponse Canary(std::string_view model) const;
  net::HttpResponse StartCanary(std::string_view model, const std::string& body) const;
  // POST /v2/repository/models/{m}/load|unload; runs on its own thread (it builds models).
  net::HttpResponse RepositoryControl(bool load, const std::string& model,
                                      const std::string& body) const;

  serve::InferenceServer& server_;
  const KServeHttpOptions options_;
  // Repository load/unload, one at a time; and the repository index, apart, so that it answers
  // (a model LOADING) while a load runs.
  SerialWorker control_{"http-control", kMaxQueuedRepositoryRequests};
  SerialWorker repository_reads_{"http-index", kMaxQueuedRepositoryRequests};
};

}  // namespace rampart::api
