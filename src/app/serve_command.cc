// `rampart serve`: wiring only. Builds the backend registry, the InferenceServer, access
// control, the keyring and audit log, the gateway, the knowledge APIs and the HTTP, gRPC and
// metrics front ends from the settings; waits for SIGINT/SIGTERM (SIGHUP reloads); then drains
// and stops them in order.

#include "app/serve_command.h"

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <optional>
#include <thread>

#include "api/admin_http.h"
#include "api/files_http.h"
#include "api/kserve_grpc.h"
#include "api/kserve_http.h"
#include "api/openai_http.h"
#include "app/access_config.h"
#include "app/access_setup.h"
#include "app/audit_config.h"
#include "app/audit_setup.h"
#include "app/gateway_config.h"
#include "app/keyring_setup.h"
#include "app/knowledge_config.h"
#include "app/knowledge_setup.h"
#include "app/signals.h"
#include "backend/model_decryptor.h"
#include "backend/torch/torch_backend.h"
#include "core/cpu_affinity.h"
#include "core/logging.h"
#include "core/serial_worker.h"
#include "gateway/gateway.h"
#include "guard/detector.h"
#include "metrics/process_collector.h"
#include "metrics/reason_counter.h"
#include "metrics/serve_metrics.h"
#include "net/http_server.h"
#include "serve/server.h"

#ifndef RAMPART_VERSION
#define RAMPART_VERSION "0.0.0"
#endif

namespace rampart::app {
namespace {

// Opens the listening socket of one front end, named by its flags in the one line logged when it
// cannot: "--http-port 8000: address already in use".
std::optional<net::Listener> OpenListener(std::string_view port_flag, int port,
                                          std::string_view address_flag,
                                          const std::string& address) {
  Result<net::Listener> listener = net::Listener::Open(address, static_cast<uint16_t>(port));
  if (listener.ok()) return std::move(listener).value();
  if (listener.status().code() != StatusCode::kUnavailable) {
    LOG_ERROR("{} {}: {}", address_flag, address, listener.status().message());
  } else {
    LOG_ERROR("{} {}: {}{}", port_flag, port, listener.status().message(),
              address == "0.0.0.0" ? "" : fmt::format(" (on {} {})", address_flag, address));
  }
  return std::nullopt;
}

// rampart_http_refused_total's reasons: the HTTP server's limits, and a full repository queue.
constexpr std::string_view kRepositoryQueueRefusal = "repository_queue";
std::vector<std::string> RefusalReasons() {
  std::vector<std::string> reasons;
  for (int i = 0; i < net::kHttpRefusalKinds; ++i) {
    reasons.emplace_back(net::HttpRefusalName(static_cast<net::HttpRefusal>(i)));
  }
  reasons.emplace_back(kRepositoryQueueRefusal);
  return reasons;
}

// A scrape has no body; anything larger than this is refused 413.
constexpr uint64_t kMetricsMaxBodyBytes = 64 * 1024;

// Serves /metrics in Prometheus text format on its own port, on `listener` (opened before the
// models load). A scrape (which reads /proc and takes the registry's locks) runs on `scrapes`,
// off the I/O thread; `scrapes` must be stopped before the server goes.
Result<std::unique_ptr<net::HttpServer>> StartMetricsServer(const ServeSettings& settings,
                                                            const metrics::Registry& registry,
                                                            SerialWorker& scrapes,
                                                            net::Listener listener) {
  net::HttpServerOptions options;
  options.address = settings.metrics_address;
  options.port = static_cast<uint16_t>(settings.metrics_port);
  options.threads = 1;
  options.max_body_bytes = kMetricsMaxBodyBytes;
  options.name = "metrics";
  return net::HttpServer::Start(
      options,
      [&registry, &scrapes](net::HttpRequest&& request, net::Responder responder) {
        net::HttpResponse response;
        if (request.path() != "/metrics") {
          response.status = 404;
          response.body = R"({"error":"not found; metrics are at /metrics"})";
        } else if (request.method != "GET") {
          response.status = 405;
          response.body = R"({"error":"use GET /metrics"})";
        } else {
          auto held = std::make_shared<net::Responder>(std::move(responder));
          const Status queued = scrapes.Post([held, &registry] {
            net::HttpResponse exposition;
            exposition.content_type = "text/plain; version=0.0.4; charset=utf-8";
            exposition.body = registry.Exposition();
            held->Send(std::move(exposition));
          });
          if (queued.ok()) return;
          response.status = 503;
          response.body = R"({"error":"too many scrapes at once; retry later"})";
          held->Send(std::move(response));
          return;
        }
        responder.Send(std::move(response));
      },
      std::move(listener));
}

api::KServeGrpcOptions GrpcOptions(const ServeSettings& settings,
                                   const policy::AccessControl* access, audit::AuditSink* audit) {
  api::KServeGrpcOptions options;
  options.access = access;
  options.audit = audit;
  options.address = settings.grpc_address;
  options.port = settings.grpc_port;
  options.server_name = settings.server_name;
  options.server_version = RAMPART_VERSION;
  options.max_receive_bytes = static_cast<int>(settings.grpc_max_input_size);  // checked
  options.max_inflight_bytes = static_cast<size_t>(settings.grpc_max_inflight_bytes);
  options.engine = api::ParseGrpcEngine(settings.grpc_engine).value();  // checked
  options.completion_queue_threads = settings.grpc_thread_count;
  options.native_io_threads = settings.grpc_thread_count;
  options.cork_writes = settings.grpc_cork_writes;
  if (settings.grpc_use_ssl || settings.grpc_use_ssl_mutual) {
    options.tls = api::GrpcTlsOptions{.server_cert = settings.grpc_server_cert,
                                      .server_key = settings.grpc_server_key,
                                      .root_cert = settings.grpc_root_cert,
                                      .mutual = settings.grpc_use_ssl_mutual};
  }
  return options;
}

// HTTP I/O threads when --http-thread-count is 0, with the reason logged: one per CPU they may
// run on (--http-cpus', else the machine's cores). Model instance threads at a raised priority
// (optimization.priority PRIORITY_MAX) take their core from the I/O threads whenever they have a
// batch, so a core is not set aside for them: a model that answers on the I/O threads (direct
// execution) keeps every core when the batching model idles (docs/benchmarks.md).
int DefaultHttpThreads(const ServeSettings& settings, const serve::InferenceServer& server) {
  if (!settings.http_cpus.empty()) {
    const auto threads = static_cast<int>(ParseCpuList(settings.http_cpus)->size());  // checked
    LOG_INFO("HTTP: {} I/O thread(s), one per --http-cpus CPU (--http-thread-count overrides)",
             threads);
    return threads;
  }
  const int cores = UsableCpuCount();
  int favoured = 0;
  for (const auto& version : server.AllModels()) favoured += version->FavouredInstances();
  LOG_INFO(
      "HTTP: {} I/O thread(s), one per CPU this process may run on{} (--http-thread-count "
      "overrides)",
      cores,
      favoured > 0 ? fmt::format("; {} model instance thread(s) at a raised priority take "
                                 "their core when they have a batch",
                                 favoured)
                   : std::string());
  return cores;
}

// The InferenceServer's options from the serve flags (checked by Validate); no observer.
serve::ServerOptions ServerOptionsFor(const ServeSettings& settings) {
  serve::ServerOptions options;
  options.repository = settings.model_repository;
  options.control_mode = settings.model_control_mode == "explicit"
                             ? serve::ModelControlMode::kExplicit
                         : settings.model_control_mode == "poll" ? serve::ModelControlMode::kPoll
                                                                 : serve::ModelControlMode::kNone;
  options.poll_interval = std::chrono::seconds(settings.repository_poll_secs);
  options.startup_models = settings.load_models;
  options.threads_per_instance = settings.threads_per_instance;
  options.instance_cpus = ParseCpuList(settings.instance_cpus).value();  // checked by Validate
  options.strict_readiness = settings.strict_readiness;
  options.direct_execution_limit = std::chrono::microseconds(settings.direct_execution_max_us);
  options.default_max_queue_size = settings.default_max_queue_size;
  return options;
}

// The HTTP front end's options from the serve flags; refusals are counted in `refusals` (null
// without metrics).
net::HttpServerOptions HttpOptionsFor(const ServeSettings& settings,
                                      const serve::InferenceServer& server,
                                      const std::shared_ptr<metrics::ReasonCounter>& refusals) {
  net::HttpServerOptions options;
  options.address = settings.http_address;
  options.port = static_cast<uint16_t>(settings.http_port);
  options.threads =
      settings.http_threads > 0 ? settings.http_threads : DefaultHttpThreads(settings, server);
  options.cpus = ParseCpuList(settings.http_cpus).value();  // checked by Validate
  options.sched_batch = settings.http_sched_batch;
  options.max_body_bytes = settings.http_max_input_size;
  options.max_connections = static_cast<size_t>(settings.http_max_connections);
  options.idle_timeout = std::chrono::seconds(settings.http_idle_timeout_secs);
  options.header_timeout = std::chrono::seconds(settings.http_header_timeout_secs);
  options.body_timeout = std::chrono::seconds(settings.http_body_timeout_secs);
  options.body_min_rate = settings.http_body_min_rate;
  options.max_body_bytes_in_flight = settings.http_max_body_bytes_in_flight;
  if (refusals) {
    options.on_refused = [refusals](net::HttpRefusal refusal) {
      refusals->Count(net::HttpRefusalName(refusal));
    };
  }
  if (!settings.http_ssl_cert.empty()) {
    options.tls = net::HttpTlsOptions{.cert = settings.http_ssl_cert,
                                      .key = settings.http_ssl_key,
                                      .root_cert = settings.http_ssl_root_cert,
                                      .mutual = settings.http_ssl_mutual};
  }
  return options;
}

}  // namespace

int Serve(const ServeSettings& settings) {
  ServeSignals signals;

  backend::BackendRegistry backends;  // filled once the keyring is open (below)

  // Metrics outlive the server they observe.
  metrics::Registry registry;
  std::unique_ptr<metrics::ServeMetrics> serve_metrics;
  std::shared_ptr<metrics::ReasonCounter> refusals;  // null without metrics
  if (settings.allow_metrics) {
    metrics::ServeMetricsOptions metrics_options;
    if (!settings.metrics_histogram_buckets.empty()) {
      // Checked by Validate.
      metrics_options.histogram_buckets_us =
          *metrics::ParseMicrosecondBuckets(settings.metrics_histogram_buckets);
    }
    metrics_options.summaries = settings.metrics_summaries;
    serve_metrics = std::make_unique<metrics::ServeMetrics>(registry, metrics_options);
    registry.AddCollector(std::make_unique<metrics::ProcessCollector>(registry));
    refusals = std::make_shared<metrics::ReasonCounter>(
        registry, "rampart_http_refused_total",
        "HTTP requests and connections the server's limits refused, by reason", RefusalReasons());
  }

  serve::ServerOptions options = ServerOptionsFor(settings);
  options.observer = serve_metrics.get();

  // Every port is checked before the models load, which can take minutes. HTTP's and the
  // metrics' sockets are opened here and kept, so nothing can take them meanwhile (connections
  // wait in the backlog until serving starts); gRPC binds its own socket, so its port is only
  // tried here (a name rather than an IP address is left for gRPC to resolve).
  std::optional<net::Listener> http_listener =
      OpenListener("--http-port", settings.http_port, "--http-address", settings.http_address);
  std::optional<net::Listener> metrics_listener;
  if (settings.allow_metrics) {
    metrics_listener = OpenListener("--metrics-port", settings.metrics_port, "--metrics-address",
                                    settings.metrics_address);
  }
  bool grpc_port_free = true;
  if (settings.allow_grpc && settings.grpc_port != 0) {
    Result<net::Listener> tried =
        net::Listener::Open(settings.grpc_address, static_cast<uint16_t>(settings.grpc_port));
    if (!tried.ok() && tried.status().code() == StatusCode::kUnavailable) {
      grpc_port_free =
          OpenListener("--grpc-port", settings.grpc_port, "--grpc-address", settings.grpc_address)
              .has_value();
    }
  }
  if (!http_listener || (settings.allow_metrics && !metrics_listener) || !grpc_port_free) {
    return 1;
  }

  // Access control (the config's access: section), before the models load: a bad policy file
  // or an unreachable store is a start-up error, found at once.
  Result<std::optional<AccessConfig>> access_config = LoadAccessConfig(settings.config_file);
  if (!access_config.ok()) {
    LOG_ERROR("access: {}", access_config.status().message());
    return 1;
  }
  std::optional<AccessRuntime> access;
  if (access_config->has_value()) {
    const std::string data_dir = ResolveDataDir(settings.data_dir, &**access_config);
    Result<AccessRuntime> started = StartAccess(**access_config, data_dir);
    if (!started.ok()) {
      LOG_ERROR("access: {}", started.status().message());
      return 1;
    }
    access = std::move(started).value();
  } else {
    const auto loopback = [](const std::string& address) {
      return address == "127.0.0.1" || address == "::1" || address == "localhost";
    };
    if (!loopback(settings.http_address) ||
        (settings.allow_grpc && !loopback(settings.grpc_address))) {
      LOG_WARN(
          "access: the config has no access: section, so every API is open to anyone who can "
          "reach {}{}: add one (docs/access.md) or bind to 127.0.0.1",
          settings.http_address, settings.allow_grpc ? " and the gRPC port" : "");
    }
  }
  const policy::AccessControl* access_control = access ? access->control.get() : nullptr;

  // The audit log (the config's audit: section) needs the keyring: its checkpoint signing key
  // and its envelope key live there.
  Result<std::optional<AuditConfig>> audit_config = LoadAuditConfig(settings.config_file);
  if (!audit_config.ok()) {
    LOG_ERROR("audit: {}", audit_config.status().message());
    return 1;
  }
  const bool audit_on = audit_config->has_value() && (*audit_config)->enabled;
  Result<std::optional<KeyringConfig>> keyring_config = LoadKeyringConfig(settings.config_file);
  if (!keyring_config.ok()) {
    LOG_ERROR("keyring: {}", keyring_config.status().message());
    return 1;
  }
  const std::string data_dir =
      ResolveDataDir(settings.data_dir, access_config->has_value() ? &**access_config : nullptr);

  // The keyring, when a master key is given (app/keyring_setup.h); the audit log needs one.
  Result<std::optional<ServerKeyring>> opened_keyring =
      OpenServerKeyring(settings.master_key_file, *keyring_config,
                        access ? access->store.get() : nullptr, data_dir, audit_on);
  if (!opened_keyring.ok()) {
    LOG_ERROR("keyring: {}", opened_keyring.status().message());
    return 1;
  }
  std::optional<ServerKeyring> keyring = std::move(opened_keyring).value();
  std::shared_ptr<const backend::ModelDecryptor> decryptor;
  if (keyring) {
    decryptor = std::make_shared<const backend::ModelDecryptor>(
        *keyring->runtime.keyring, settings.model_region, settings.model_data_class);
    LOG_INFO(
        "keyring: master key from {}, {} key(s) in {}; encrypted models open for region "
        "'{}', data class '{}'",
        keyring->runtime.keyring->MasterKeyDescription(), keyring->runtime.keyring->List().size(),
        keyring->store->Describe(), settings.model_region, settings.model_data_class);
  }
  backends.Register(backend::MakeTorchBackend(decryptor));

  // The audit log, on the keyring's store; closed (with a final checkpoint) after every front
  // end stopped, so it is declared before them.
  std::unique_ptr<AuditRuntime> audit_runtime;
  if (audit_on) {
    Result<std::unique_ptr<AuditRuntime>> started =
        StartAudit(**audit_config, *keyring->runtime.keyring, *keyring->store, data_dir,
                   settings.allow_metrics ? &registry : nullptr);
    if (!started.ok()) {
      LOG_ERROR("audit: {}", started.status().message());
      return 1;
    }
    audit_runtime = std::move(started).value();
  }
  audit::AuditSink* const audit_sink = audit_runtime ? audit_runtime->recorder.get() : nullptr;

  auto server = std::make_unique<serve::InferenceServer>(options, backends);
  if (Status loaded = server->LoadStartupModels(); !loaded.ok()) {
    LOG_ERROR("{}", loaded.message());
    return 1;
  }
  if (serve_metrics) serve_metrics->WatchQueues(*server);
  if (access) {
    if (Status shared = ApplyModelShares(**access_config, *server); !shared.ok()) {
      LOG_ERROR("access: {}", shared.message());
      return 1;
    }
  }

  api::KServeHttpOptions kserve_options{.server_name = settings.server_name,
                                        .server_version = RAMPART_VERSION,
                                        .access_log = settings.access_log,
                                        .max_body_bytes = settings.http_max_input_size,
                                        .access = access_control,
                                        .audit = audit_sink};
  if (refusals) {
    kserve_options.on_worker_queue_full = [refusals] { refusals->Count(kRepositoryQueueRefusal); };
  }
  api::KServeHttp kserve(*server, std::move(kserve_options));
  // gRPC serves the same InferenceServer; it is shut down before the server goes away.
  std::unique_ptr<api::KServeGrpc> grpc;
  if (settings.allow_grpc) {
    auto started =
        api::KServeGrpc::Start(*server, GrpcOptions(settings, access_control, audit_sink));
    if (!started.ok()) {
      LOG_ERROR("gRPC: {}", started.status().message());
      return 1;
    }
    grpc = std::move(started).value();
  }
  net::HttpServerOptions http_options = HttpOptionsFor(settings, *server, refusals);
  // The OpenAI gateway under /v1: the config file's gateway: section and the --upstream flags,
  // read again on SIGHUP and POST /v1/admin/reload.
  const auto gateway_config = [&settings]() -> Result<gateway::GatewayConfig> {
    ASSIGN_OR_RETURN(gateway::GatewayConfig config, LoadGatewayConfig(settings.config_file));
    RETURN_IF_ERROR(AddFlagUpstreams(settings.upstreams, settings.upstream_api_key, config));
    return config;
  };
  Result<gateway::GatewayConfig> initial_gateway = gateway_config();
  if (!initial_gateway.ok()) {
    LOG_ERROR("gateway: {}", initial_gateway.status().message());
    return 1;
  }
  auto gateway = gateway::Gateway::Create(
      std::move(initial_gateway).value(),
      gateway::GatewayOptions{.access_log = settings.access_log,
                              .local = server.get(),
                              .detector_factory = guard::Detector::Create,
                              .access = access_control,
                              .audit = audit_sink,
                              .guard_keys = keyring ? keyring->guard_keys : nullptr,
                              // Answers with citations (`kb:` models, routes with knowledge)
                              // get the vector stores below (AttachVectorStores): they embed
                              // through this gateway, so they come after it.
                              .vector_stores = nullptr},
      registry);
  if (!gateway.ok()) {
    LOG_ERROR("gateway: {}", gateway.status().message());
    return 1;
  }
  // SIGHUP and POST /v1/admin/reload: the gateway's routes, and the policy files and quota
  // rules; each keeps its old state when its new one is invalid, and the answer says which.
  const auto reload = [&gateway_config, &gateway, &access, &settings, &server]() -> Status {
    Result<gateway::GatewayConfig> config = gateway_config();
    const Status routes =
        config.ok() ? (*gateway)->Reload(std::move(config).value()) : config.status();
    const Status policies =
        access ? ReloadAccess(*access, settings.config_file, server.get()) : Status::Ok();
    if (routes.ok() && policies.ok()) return Status::Ok();
    std::vector<std::string> failed;
    if (!routes.ok()) failed.push_back(fmt::format("gateway: {}", routes.message()));
    if (!policies.ok()) failed.push_back(fmt::format("access: {}", policies.message()));
    return InvalidArgument("{}", fmt::join(failed, "; "));
  };
  std::unique_ptr<api::AdminHttp> admin;
  if (access)
    admin = std::make_unique<api::AdminHttp>(*access->store, access->keys.get(), *access->control,
                                             keyring ? keyring->runtime.keyring.get() : nullptr,
                                             audit_sink);
  api::OpenAiHttp openai(**gateway, reload, access_control, admin.get(), audit_sink);
  LOG_INFO("OpenAI gateway at /v1; routing table:\n{}", (*gateway)->Describe());

  // Vector indexes under /pinecone (the config's knowledge: section), recovered before serving.
  Result<std::optional<KnowledgeConfig>> knowledge_config =
      LoadKnowledgeConfig(settings.config_file);
  if (!knowledge_config.ok()) {
    LOG_ERROR("knowledge: {}", knowledge_config.status().message());
    return 1;
  }
  std::unique_ptr<KnowledgeRuntime> knowledge;
  if (knowledge_config->has_value() && (*knowledge_config)->enabled) {
    Result<std::unique_ptr<KnowledgeRuntime>> started = StartKnowledge(
        **knowledge_config, data_dir, keyring ? keyring->runtime.keyring.get() : nullptr,
        !settings.http_ssl_cert.empty(), access_control, audit_sink);
    if (!started.ok()) {
      LOG_ERROR("knowledge: {}", started.status().message());
      return 1;
    }
    knowledge = std::move(started).value();
  }
  api::PineconeHttp* const pinecone = knowledge ? knowledge->pinecone.get() : nullptr;

  // The OpenAI Files API (/v1/files): metadata in the access store, else the keyring's, else a
  // SQLite store of its own when --data-dir is given; bytes under <data-dir>/files. Without a
  // store it is off (501). The vector stores (/v1/vector_stores) build on its files.
  const VectorStoresConfig* vector_stores_config = knowledge && (*knowledge_config)->vector_stores
                                                       ? &*(*knowledge_config)->vector_stores
                                                       : nullptr;
  Result<std::unique_ptr<DocumentsRuntime>> started_documents =
      StartDocuments({.store = access ? access->store.get() : (keyring ? keyring->store : nullptr),
                      .own_store_allowed = !settings.data_dir.empty(),
                      .data_dir = data_dir,
                      .files_max_bytes = settings.files_max_bytes,
                      .files_seal_key = settings.files_seal_key,
                      .keyring = keyring ? keyring->runtime.keyring.get() : nullptr,
                      .vector_stores = vector_stores_config,
                      .gateway = gateway->get(),
                      .access = access_control,
                      .audit = audit_sink});
  if (!started_documents.ok()) {
    LOG_ERROR("{}", started_documents.status().message());
    return 1;
  }
  std::unique_ptr<DocumentsRuntime> documents = std::move(started_documents).value();
  api::FilesHttp* const files = documents->files.get();
  api::VectorStoresHttp* const vector_stores = documents->vector_stores_http.get();
  (*gateway)->AttachVectorStores(documents->vector_stores.get());
  if (files != nullptr) {
    http_options.streamed_body = [files](const net::HttpRequest& head) {
      return files->StreamedBodyLimit(head);
    };
  }

  auto http = net::HttpServer::Start(
      http_options,
      [&kserve, &openai, files, pinecone, vector_stores](net::HttpRequest&& request,
                                                         net::Responder responder) {
        if (vector_stores != nullptr && api::VectorStoresHttp::Owns(request.path())) {
          vector_stores->Handle(std::move(request), std::move(responder));
        } else if (api::FilesHttp::Owns(request.path())) {
          if (files) {
            files->Handle(std::move(request), std::move(responder));
          } else {
            responder.Send({.status = 501,
                            .body = R"({"error":{"message":"the Files API needs a store: give )"
                                    R"(--data-dir, an access: section or a keyring","type":)"
                                    R"("server_error","param":null,"code":null}})"});
          }
        } else if (api::OpenAiHttp::Owns(request.path())) {
          openai.Handle(std::move(request), std::move(responder));
        } else if (pinecone != nullptr && api::PineconeHttp::Owns(request.path())) {
          pinecone->Handle(std::move(request), std::move(responder));
        } else {
          kserve.Handle(std::move(request), std::move(responder));
        }
      },
      std::move(*http_listener));
  if (!http.ok()) {
    LOG_ERROR("{}", http.status().message());
    return 1;
  }
  SerialWorker scrapes("metrics-scrape", /*max_queued=*/4);
  std::unique_ptr<net::HttpServer> metrics_http;
  if (settings.allow_metrics) {
    auto started = StartMetricsServer(settings, registry, scrapes, std::move(*metrics_listener));
    if (!started.ok()) {
      LOG_ERROR("metrics: {}", started.status().message());
      return 1;
    }
    metrics_http = std::move(started).value();
  }
  LOG_INFO("KServe v2 HTTP{} listening on {}:{} (repository '{}')",
           settings.http_ssl_mutual          ? "S (mutual TLS)"
           : !settings.http_ssl_cert.empty() ? "S"
                                             : "",
           settings.http_address, (*http)->port(), settings.model_repository);
  // The HTTP line comes last: tools wait for it, and by then every other line is out.
  if (grpc) {
    LOG_INFO("KServe v2 gRPC listening on {}:{} ({} engine{})", settings.grpc_address, grpc->port(),
             settings.grpc_engine,
             settings.grpc_use_ssl_mutual ? ", mutual TLS"
             : settings.grpc_use_ssl      ? ", TLS"
                                          : "");
    std::printf("rampart: gRPC listening on %s:%d\n", settings.grpc_address.c_str(), grpc->port());
  }
  if (metrics_http) {
    LOG_INFO("Prometheus metrics at http://{}:{}/metrics", settings.metrics_address,
             metrics_http->port());
    std::printf("rampart: metrics listening on %s:%u\n", settings.metrics_address.c_str(),
                static_cast<unsigned>(metrics_http->port()));
  }
  std::printf("rampart: HTTP listening on %s:%u\n", settings.http_address.c_str(),
              static_cast<unsigned>((*http)->port()));
  std::fflush(stdout);

  int signal_number = signals.Wait();
  for (; signal_number == SIGHUP; signal_number = signals.Wait()) {
    const Status reloaded = reload();
    if (!reloaded.ok()) {
      LOG_ERROR("reload on SIGHUP failed, what failed keeps its old state: {}", reloaded.message());
    }
  }
  LOG_INFO("received {}, draining requests in flight (up to {} s)", strsignal(signal_number),
           settings.exit_timeout_secs);

  const auto timeout = std::chrono::seconds(settings.exit_timeout_secs);
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  (*http)->StopAccepting();
  // Health turns NOT_SERVING and open streams end once their requests are answered; unary calls
  // still arriving are answered UNAVAILABLE by the server below.
  if (grpc) grpc->StopServing();
  const int64_t unfinished = server->Shutdown(timeout);
  if (unfinished > 0) LOG_WARN("{} request(s) still running at the exit timeout", unfinished);
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(std::max(
      deadline - std::chrono::steady_clock::now(), std::chrono::steady_clock::duration(0)));
  (*http)->Shutdown(left);
  if (grpc) {
    grpc->Shutdown(std::chrono::duration_cast<std::chrono::milliseconds>(std::max(
        deadline - std::chrono::steady_clock::now(), std::chrono::steady_clock::duration(0))));
  }
  scrapes.Stop();  // its tasks answer through the metrics server's connections
  if (metrics_http) metrics_http->Shutdown(std::chrono::milliseconds(0));
  kserve.Shutdown();
  openai.Shutdown();
  StopDocuments(*documents);
  if (admin) admin->Shutdown();
  // The indexes close after the HTTP server: a write it still answers holds its index.
  if (knowledge) StopKnowledge(*knowledge);
  gateway->reset();  // after the HTTP server: its streams call back into the gateway
  // Models go first: their threads may still hold responders that point into the HTTP server.
  server.reset();
  // Every front end has stopped: what they recorded is written and a final checkpoint signed.
  if (audit_runtime) {
    if (Status stopped = StopAudit(*audit_runtime); !stopped.ok()) {
      LOG_ERROR("audit: the last records may not be written: {}", stopped.message());
    }
  }
  const net::HttpServer::Stats stats = (*http)->stats();
  std::printf("rampart: http served=%llu handle_ns_total=%llu\n",
              static_cast<unsigned long long>(stats.requests),
              static_cast<unsigned long long>(stats.handle_ns_total));
  std::fflush(stdout);
  LOG_INFO("stopped");
  return 0;
}

}  // namespace rampart::app
