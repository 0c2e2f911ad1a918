#pragma once

// Gateway: the OpenAI-compatible front door. It runs each call through the stage pipeline
// (stage.h), calls the chosen targets (upstream pools with retries, failover by priority and
// fallbacks along the route; or a local Rampart model), and answers whole or streamed.
//
// Routing state (the config, the Router, the pools) is one immutable Runtime, replaced whole by
// Reload; a call keeps the Runtime it started with. Upstream health (UpstreamState) carries over
// a reload for every upstream whose settings all stay the same (and the health_check and
// ejection sections too).
//
// Threads: Handle runs on an HTTP I/O thread and never blocks. Upstream answers arrive on the
// HTTP client's threads; retries, keep-alives and health checks run on the gateway's timer
// thread; local models answer on their instance threads; knowledge searches run on the
// gateway's knowledge workers. Every method is thread-safe.

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "audit/sink.h"
#include "core/clock.h"
#include "core/status.h"
#include "core/trace.h"
#include "core/worker_pool.h"
#include "gateway/config.h"
#include "gateway/guard_stages.h"
#include "gateway/metrics.h"
#include "gateway/pool.h"
#include "gateway/router.h"
#include "gateway/stage.h"
#include "gateway/timer.h"
#include "knowledge/hub/vector_stores.h"
#include "net/http_client.h"
#include "net/http_server.h"
#include "serve/server.h"

namespace rampart::gateway {

struct GatewayOptions {
  bool access_log = false;
  int client_threads = 1;  // the HTTP client's I/O threads
  // Serves targets with `local_model`; null when the gateway runs without a model repository.
  serve::InferenceServer* local = nullptr;
  // Makes the PII guard's Detector (guard::Detector::Create); unset, the gateway has no guard:
  // a config that turns it on is invalid, and the guard API answers 503.
  DetectorFactory detector_factory;
  // Authentication, policy and quotas for every call (the authenticate, authorise and quota
  // stages); null = open. Must outlive the gateway.
  const policy::AccessControl* access = nullptr;
  // The audit log (the audit stage, gateway/audit_stage.h); null = nothing recorded. Must
  // outlive the gateway.
  audit::AuditSink* audit = nullptr;
  // The guard's key when the config names no guard.key_file (the app keeps it sealed in the
  // keyring); null = a key generated at start, which does not survive a restart.
  std::shared_ptr<const guard::GuardKeys> guard_keys;
  // The knowledge hub's vector stores, which answer `kb:` models and routes with `knowledge`
  // (gateway/knowledge.h); null = those calls answer 404 "knowledge base is not configured".
  // Must outlive the gateway.
  knowledge::hub::VectorStores* vector_stores = nullptr;
  // Threads that run the searches (VectorStores blocks), and searches that may wait for one.
  int knowledge_threads = 2;
  size_t knowledge_max_queued = 1024;
};

// One upstream as calls use it.
struct UpstreamRuntime {
  std::shared_ptr<UpstreamState> state;
  net::Endpoint endpoint;
  net::HttpClient* client = nullptr;
  net::HttpHeaders headers;  // Authorization and the configured extra headers
};

struct TargetRuntime {
  const TargetConfig* config = nullptr;
  std::unique_ptr<Pool> pool;                   // upstream targets
  std::vector<const UpstreamRuntime*> members;  // pool->members()[i]'s upstream
};

// Everything a call reads of the configuration, built once per config.
struct Runtime {
  GatewayConfig config;
  std::unique_ptr<Router> router;
  std::map<std::string, UpstreamRuntime> upstreams;
  std::map<std::string, TargetRuntime> targets;
  GuardRuntime guard;  // its config points at `config`

  const TargetRuntime* FindTarget(const std::string& name) const {
    auto found = targets.find(name);
    return found == targets.end() ? nullptr : &found->second;
  }
};

// Things every call shares with the gateway (owned by it).
struct CallEnvironment {
  const Pipeline* pipeline = nullptr;
  GatewayMetrics* metrics = nullptr;
  Timers* timers = nullptr;
  serve::InferenceServer* local = nullptr;
  const Clock* clock = nullptr;
  const std::atomic<bool>* stopping = nullptr;  // set once the gateway is being destroyed
  // Answers from knowledge bases: null when the gateway has no vector stores.
  knowledge::hub::VectorStores* vector_stores = nullptr;
  WorkerPool* knowledge_workers = nullptr;
  const policy::AccessControl* access = nullptr;  // null = open
};

struct ModelEntry {
  std::string id;
  std::string owned_by;
  int64_t created = 0;  // unix seconds
};

// x-request-id for an answer to `request`: the caller's when it is a sane token (printable
// ASCII, at most 128 bytes), else "req_" and the trace id.
std::string RequestId(const net::HttpRequest& request, const TraceContext& trace);

class Gateway {
 public:
  // Errors: InvalidArgument when the config is invalid (Validate) or a TLS file cannot be used.
  static Result<std::unique_ptr<Gateway>> Create(GatewayConfig config, GatewayOptions options,
                                                 metrics::Registry& registry);
  ~Gateway();  // stops health checks and the client; calls in flight end Unavailable

  // Gives the gateway its vector stores after it was created: the app builds them over the
  // gateway's own embedding target, so they cannot exist when the gateway is created. REQUIRES:
  // called at most once, before the gateway takes its first call, and only when
  // GatewayOptions::vector_stores was null; `vector_stores` must outlive the gateway.
  void AttachVectorStores(knowledge::hub::VectorStores* vector_stores);

  // POST /v1/chat/completions, /v1/completions, /v1/embeddings.
  void Handle(Operation operation, net::HttpRequest&& request, net::Responder responder);

  // The models callers may name (GET /v1/models).
  std::vector<ModelEntry> Models() const;

  // Replaces the routing table; the old one stays when `config` is invalid (the error says why).
  Status Reload(GatewayConfig config);
  // The routing table in force, as text (DescribeRoutes), with each canary's state and the
  // upstreams that take no calls now.
  std::string Describe() const;
  // Canary states of routes with a canary.
  std::vector<std::pair<std::string, serve::CanaryStatus>> Canaries() const;
  // Upstream name -> available now.
  std::vector<std::pair<std::string, bool>> UpstreamHealth() const;

  // The guard in force (kept alive by the pointer), for the guard's HTTP API.
  std::shared_ptr<const GuardRuntime> guard() const;
  GatewayMetrics& metrics() { return metrics_; }
  // The routing state in force (kept alive by the pointer), and the server local targets run
  // on (null without one): for calls to a target outside any route (gateway/embedder.h).
  std::shared_ptr<const Runtime> CurrentRuntime() const { return runtime(); }
  serve::InferenceServer* local_server() const { return options_.local; }

 private:
  void StartKnowledgeWorkers();
  Gateway(GatewayOptions options, metrics::Registry& registry);

  Result<std::shared_ptr<const Runtime>> Build(GatewayConfig config);
  Result<net::HttpClient*> ClientFor(const UpstreamConfig& upstream);
  // The guard of a new runtime: the detector and keys of `previous` where their settings stay.
  Status BuildGuard(Runtime& runtime, const Runtime* previous);
  std::shared_ptr<const Runtime> runtime() const;
  void ScheduleHealthChecks();
  void CheckHealth();

  const GatewayOptions options_;
  const int64_t created_;
  GatewayMetrics metrics_;
  Pipeline pipeline_;
  Timers timers_;
  std::unique_ptr<WorkerPool> knowledge_workers_;  // when options_.vector_stores is set
  CallEnvironment environment_;

  mutable std::mutex mutex_;
  std::shared_ptr<const Runtime> runtime_;  // guarded by mutex_
  // HTTP clients by TLS settings (CA, certificate, key) and connection limit; kept for the
  // gateway's life.
  std::map<std::string, std::unique_ptr<net::HttpClient>> clients_;  // guarded by mutex_
  // The master key made at start when no key file is configured; kept across reloads.
  std::shared_ptr<const guard::GuardKeys> generated_keys_;  // guarded by mutex_
  std::atomic<bool> stopping_{false};
};

}  // namespace rampart::gateway
