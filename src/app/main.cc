// rampart: one binary, subcommands. `rampart serve` runs the model server.
//
// Wiring only: parse settings, build the backend registry, the InferenceServer and the HTTP and
// gRPC front ends, wait for SIGINT/SIGTERM, then drain and exit.

#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include <CLI/CLI.hpp>

#include "api/kserve_grpc.h"
#include "api/kserve_http.h"
#include "app/settings.h"
#include "backend/torch/torch_backend.h"
#include "core/logging.h"
#include "metrics/process_collector.h"
#include "metrics/serve_metrics.h"
#include "net/http_server.h"
#include "serve/server.h"

#ifndef RAMPART_VERSION
#define RAMPART_VERSION "0.0.0"
#endif

namespace rampart::app {
namespace {

// Blocks SIGINT and SIGTERM in every thread started after this, so sigwait sees them.
sigset_t BlockShutdownSignals() {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  return signals;
}

// Serves /metrics in Prometheus text format on its own port.
Result<std::unique_ptr<net::HttpServer>> StartMetricsServer(const ServeSettings& settings,
                                                            const metrics::Registry& registry) {
  net::HttpServerOptions options;
  options.address = settings.metrics_address;
  options.port = static_cast<uint16_t>(settings.metrics_port);
  options.threads = 1;
  options.max_body_bytes = 64 * 1024;
  return net::HttpServer::Start(
      options, [&registry](net::HttpRequest&& request, net::Responder responder) {
        net::HttpResponse response;
        if (request.path() != "/metrics") {
          response.status = 404;
          response.body = R"({"error":"not found; metrics are at /metrics"})";
        } else if (request.method != "GET") {
          response.status = 405;
          response.body = R"({"error":"use GET /metrics"})";
        } else {
          response.content_type = "text/plain; version=0.0.4; charset=utf-8";
          response.body = registry.Exposition();
        }
        responder.Send(std::move(response));
      });
}

api::KServeGrpcOptions GrpcOptions(const ServeSettings& settings) {
  api::KServeGrpcOptions options;
  options.address = settings.grpc_address;
  options.port = settings.grpc_port;
  options.server_name = "rampart";
  options.server_version = RAMPART_VERSION;
  options.max_receive_bytes = static_cast<int>(settings.grpc_max_input_size);  // checked
  if (settings.grpc_use_ssl || settings.grpc_use_ssl_mutual) {
    options.tls = api::GrpcTlsOptions{.server_cert = settings.grpc_server_cert,
                                      .server_key = settings.grpc_server_key,
                                      .root_cert = settings.grpc_root_cert,
                                      .mutual = settings.grpc_use_ssl_mutual};
  }
  return options;
}

int Serve(const ServeSettings& settings) {
  const sigset_t signals = BlockShutdownSignals();

  backend::BackendRegistry backends;
  backends.Register(backend::MakeTorchBackend());

  // Metrics outlive the server they observe.
  metrics::Registry registry;
  std::unique_ptr<metrics::ServeMetrics> serve_metrics;
  if (settings.allow_metrics) {
    metrics::ServeMetricsOptions metrics_options;
    if (!settings.metrics_histogram_buckets.empty()) {
      // Checked by Validate.
      metrics_options.histogram_buckets_us =
          *metrics::ParseHistogramBuckets(settings.metrics_histogram_buckets);
    }
    metrics_options.summaries = settings.metrics_summaries;
    serve_metrics = std::make_unique<metrics::ServeMetrics>(registry, metrics_options);
    registry.AddCollector(std::make_unique<metrics::ProcessCollector>(registry));
  }

  serve::ServerOptions options;
  options.repository = settings.model_repository;
  options.control_mode = settings.model_control_mode == "explicit"
                             ? serve::ModelControlMode::kExplicit
                         : settings.model_control_mode == "poll" ? serve::ModelControlMode::kPoll
                                                                 : serve::ModelControlMode::kNone;
  options.poll_interval = std::chrono::seconds(settings.repository_poll_secs);
  options.startup_models = settings.load_models;
  options.threads_per_instance = settings.threads_per_instance;
  options.observer = serve_metrics.get();
  auto server = std::make_unique<serve::InferenceServer>(options, backends);
  if (Status loaded = server->LoadStartupModels(); !loaded.ok()) {
    LOG_ERROR("{}", loaded.message());
    return 1;
  }
  if (serve_metrics) serve_metrics->WatchQueues(*server);

  api::KServeHttp kserve(*server, {.server_name = "rampart",
                                   .server_version = RAMPART_VERSION,
                                   .access_log = settings.access_log});
  // gRPC serves the same InferenceServer; it is shut down before the server goes away.
  std::unique_ptr<api::KServeGrpc> grpc;
  if (settings.allow_grpc) {
    auto started = api::KServeGrpc::Start(*server, GrpcOptions(settings));
    if (!started.ok()) {
      LOG_ERROR("gRPC: {}", started.status().message());
      return 1;
    }
    grpc = std::move(started).value();
  }
  net::HttpServerOptions http_options;
  http_options.address = settings.http_address;
  http_options.port = static_cast<uint16_t>(settings.http_port);
  http_options.threads = settings.http_threads;
  http_options.max_body_bytes = settings.http_max_input_size;
  if (!settings.http_ssl_cert.empty()) {
    http_options.tls = net::HttpTlsOptions{.cert = settings.http_ssl_cert,
                                           .key = settings.http_ssl_key,
                                           .root_cert = settings.http_ssl_root_cert,
                                           .mutual = settings.http_ssl_mutual};
  }
  auto http = net::HttpServer::Start(
      http_options, [&kserve](net::HttpRequest&& request, net::Responder responder) {
        kserve.Handle(std::move(request), std::move(responder));
      });
  if (!http.ok()) {
    LOG_ERROR("{}", http.status().message());
    return 1;
  }
  std::unique_ptr<net::HttpServer> metrics_http;
  if (settings.allow_metrics) {
    auto started = StartMetricsServer(settings, registry);
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
    LOG_INFO("KServe v2 gRPC listening on {}:{}{}", settings.grpc_address, grpc->port(),
             settings.grpc_use_ssl_mutual ? " (mutual TLS)"
             : settings.grpc_use_ssl      ? " (TLS)"
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

  int signal_number = 0;
  sigwait(&signals, &signal_number);
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
  if (metrics_http) metrics_http->Shutdown(std::chrono::milliseconds(0));
  kserve.Shutdown();
  // Models go first: their threads may still hold responders that point into the HTTP server.
  server.reset();
  const net::HttpServer::Stats stats = (*http)->stats();
  std::printf("rampart: http served=%llu handle_ns_total=%llu\n",
              static_cast<unsigned long long>(stats.requests),
              static_cast<unsigned long long>(stats.handle_ns_total));
  std::fflush(stdout);
  LOG_INFO("stopped");
  return 0;
}

int Main(int argc, char** argv) {
  CLI::App app{
      "Rampart: run AI on your own hardware. Serves models over Triton's KServe v2 "
      "protocol."};
  app.set_version_flag("--version", RAMPART_VERSION);
  app.require_subcommand(1);

  ServeSettings cli;
  std::string config_file;
  CLI::App* serve = app.add_subcommand(
      "serve",
      "Serve the models of a Triton-layout model repository over KServe v2 HTTP and gRPC.");
  serve
      ->add_option("--config", config_file,
                   "YAML config file (sections server: and http:); flags override it")
      ->check(CLI::ExistingFile);
  auto* repository = serve->add_option("--model-repository", cli.model_repository,
                                       "Model repository directory (Triton layout)");
  auto* mode = serve
                   ->add_option("--model-control-mode", cli.model_control_mode,
                                "none: load every model at start; explicit: load only "
                                "--load-model models, then the repository API; poll: load "
                                "everything and follow changes to the repository")
                   ->capture_default_str();
  auto* poll = serve
                   ->add_option("--repository-poll-secs", cli.repository_poll_secs,
                                "Seconds between repository scans in poll mode")
                   ->capture_default_str();
  auto* load = serve->add_option("--load-model", cli.load_models,
                                 "Model to load at start in explicit mode (repeatable; * = all)");
  auto* http_address =
      serve->add_option("--http-address", cli.http_address, "Address the HTTP server binds")
          ->capture_default_str();
  auto* http_port =
      serve
          ->add_option("--http-port", cli.http_port, "HTTP port (0 picks a free one and prints it)")
          ->capture_default_str();
  auto* http_threads = serve
                           ->add_option("--http-thread-count", cli.http_threads,
                                        "HTTP I/O threads (0 = one per core)")
                           ->capture_default_str();
  auto* max_input = serve
                        ->add_option("--http-max-input-size", cli.http_max_input_size,
                                     "Largest request body in bytes; larger bodies get 413")
                        ->capture_default_str();
  auto* http_ssl_cert = serve->add_option("--http-ssl-cert", cli.http_ssl_cert,
                                          "PEM certificate (chain): serve HTTPS instead of HTTP");
  auto* http_ssl_key =
      serve->add_option("--http-ssl-key", cli.http_ssl_key, "PEM private key for HTTPS");
  auto* http_ssl_root = serve->add_option("--http-ssl-root-cert", cli.http_ssl_root_cert,
                                          "PEM CA certificate(s) that sign client certificates");
  auto* http_ssl_mutual = serve
                              ->add_flag("--http-ssl-mutual", cli.http_ssl_mutual,
                                         "HTTPS with mutual TLS: clients must present a "
                                         "certificate signed by --http-ssl-root-cert")
                              ->expected(0, 1);
  auto* allow_grpc = serve
                         ->add_flag("--allow-grpc", cli.allow_grpc,
                                    "Serve KServe v2 gRPC (true/false; default true)")
                         ->expected(0, 1);
  auto* grpc_address =
      serve->add_option("--grpc-address", cli.grpc_address, "Address the gRPC server binds")
          ->capture_default_str();
  auto* grpc_port =
      serve
          ->add_option("--grpc-port", cli.grpc_port, "gRPC port (0 picks a free one and prints it)")
          ->capture_default_str();
  auto* grpc_max_input = serve
                             ->add_option("--grpc-max-input-size", cli.grpc_max_input_size,
                                          "Largest gRPC request message in bytes; larger ones "
                                          "get RESOURCE_EXHAUSTED")
                             ->capture_default_str();
  auto* grpc_ssl = serve
                       ->add_flag("--grpc-use-ssl", cli.grpc_use_ssl,
                                  "Serve gRPC over TLS (needs --grpc-server-cert and "
                                  "--grpc-server-key)")
                       ->expected(0, 1);
  auto* grpc_ssl_mutual = serve
                              ->add_flag("--grpc-use-ssl-mutual", cli.grpc_use_ssl_mutual,
                                         "Serve gRPC over mutual TLS: clients must present a "
                                         "certificate signed by --grpc-root-cert")
                              ->expected(0, 1);
  auto* grpc_cert = serve->add_option("--grpc-server-cert", cli.grpc_server_cert,
                                      "PEM certificate (chain) of the gRPC server");
  auto* grpc_key =
      serve->add_option("--grpc-server-key", cli.grpc_server_key, "PEM private key of the server");
  auto* grpc_root = serve->add_option("--grpc-root-cert", cli.grpc_root_cert,
                                      "PEM CA certificate(s) that sign client certificates");
  auto* metrics_port =
      serve->add_option("--metrics-port", cli.metrics_port, "Prometheus metrics port (/metrics)")
          ->capture_default_str();
  auto* allow_metrics = serve
                            ->add_option("--allow-metrics", cli.allow_metrics,
                                         "Serve Prometheus metrics (true/false)")
                            ->capture_default_str();
  auto* metrics_address =
      serve
          ->add_option("--metrics-address", cli.metrics_address, "Address the metrics server binds")
          ->capture_default_str();
  auto* metrics_buckets = serve->add_option(
      "--metrics-histogram-buckets", cli.metrics_histogram_buckets,
      "Latency histogram bucket bounds in microseconds, e.g. 1000,5000,10000 (default "
      "1000,5000,10000,50000,100000,500000,1000000); a model's metrics_histogram_buckets "
      "parameter overrides it");
  auto* metrics_summaries = serve->add_flag("--metrics-summaries", cli.metrics_summaries,
                                            "Also export p50/p90/p99 summaries (Triton's "
                                            "nv_inference_*_summary_us)");
  auto* exit_timeout = serve
                           ->add_option("--exit-timeout-secs", cli.exit_timeout_secs,
                                        "On SIGINT/SIGTERM, how long to wait for requests in "
                                        "flight before exiting")
                           ->capture_default_str();
  auto* threads = serve
                      ->add_option("--threads-per-instance", cli.threads_per_instance,
                                   "Intra-op threads per model instance (0 = cores divided by "
                                   "the model's instances); a model's INTRA_OP_THREAD_COUNT "
                                   "parameter overrides it")
                      ->capture_default_str();
  auto* verbose = serve
                      ->add_option("--log-verbose", cli.log_verbose,
                                   "Verbose logging level (0 = info, >0 = debug)")
                      ->capture_default_str();
  auto* log_format = serve
                         ->add_option("--log-format", cli.log_format,
                                      "Log lines: 'default' (text) or 'json' (one object a line)")
                         ->capture_default_str();
  auto* access_log = serve->add_flag("--access-log", cli.access_log,
                                     "Log one JSON line per infer request with its trace id and "
                                     "per-stage timing");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    return app.exit(error);
  }

  ServeSettings settings;
  if (!config_file.empty()) {
    if (Status applied = ApplyYamlFile(config_file, settings); !applied.ok()) {
      std::fprintf(stderr, "rampart: %s\n", applied.message().c_str());
      return 2;
    }
  }
  // Flags given on the command line win over the config file.
  const auto apply = [](CLI::Option* option, auto& target, const auto& value) {
    if (option->count() > 0) target = value;
  };
  apply(repository, settings.model_repository, cli.model_repository);
  apply(mode, settings.model_control_mode, cli.model_control_mode);
  apply(poll, settings.repository_poll_secs, cli.repository_poll_secs);
  apply(load, settings.load_models, cli.load_models);
  apply(http_address, settings.http_address, cli.http_address);
  apply(http_port, settings.http_port, cli.http_port);
  apply(http_threads, settings.http_threads, cli.http_threads);
  apply(max_input, settings.http_max_input_size, cli.http_max_input_size);
  apply(http_ssl_cert, settings.http_ssl_cert, cli.http_ssl_cert);
  apply(http_ssl_key, settings.http_ssl_key, cli.http_ssl_key);
  apply(http_ssl_root, settings.http_ssl_root_cert, cli.http_ssl_root_cert);
  apply(http_ssl_mutual, settings.http_ssl_mutual, cli.http_ssl_mutual);
  apply(allow_grpc, settings.allow_grpc, cli.allow_grpc);
  apply(grpc_address, settings.grpc_address, cli.grpc_address);
  apply(grpc_port, settings.grpc_port, cli.grpc_port);
  apply(grpc_max_input, settings.grpc_max_input_size, cli.grpc_max_input_size);
  apply(grpc_ssl, settings.grpc_use_ssl, cli.grpc_use_ssl);
  apply(grpc_ssl_mutual, settings.grpc_use_ssl_mutual, cli.grpc_use_ssl_mutual);
  apply(grpc_cert, settings.grpc_server_cert, cli.grpc_server_cert);
  apply(grpc_key, settings.grpc_server_key, cli.grpc_server_key);
  apply(grpc_root, settings.grpc_root_cert, cli.grpc_root_cert);
  apply(metrics_port, settings.metrics_port, cli.metrics_port);
  apply(allow_metrics, settings.allow_metrics, cli.allow_metrics);
  apply(metrics_address, settings.metrics_address, cli.metrics_address);
  apply(metrics_buckets, settings.metrics_histogram_buckets, cli.metrics_histogram_buckets);
  apply(metrics_summaries, settings.metrics_summaries, cli.metrics_summaries);
  apply(exit_timeout, settings.exit_timeout_secs, cli.exit_timeout_secs);
  apply(threads, settings.threads_per_instance, cli.threads_per_instance);
  apply(verbose, settings.log_verbose, cli.log_verbose);
  apply(log_format, settings.log_format, cli.log_format);
  apply(access_log, settings.access_log, cli.access_log);
  if (Status valid = Validate(settings); !valid.ok()) {
    std::fprintf(stderr, "rampart: %s\n", valid.message().c_str());
    return 2;
  }
  LogSettings log_settings;
  log_settings.verbose_level = settings.log_verbose;
  log_settings.format = *ParseLogFormat(settings.log_format);  // checked by Validate
  ConfigureLogging(log_settings);
  return Serve(settings);
}

}  // namespace
}  // namespace rampart::app

int main(int argc, char** argv) {
  // Debian's LibTorch does its matrix products in OpenBLAS (pthreads build), whose workers
  // busy-wait for a long time after each product, burning a core per worker while the server is
  // idle between requests. OpenBLAS reads OPENBLAS_THREAD_TIMEOUT only when it is loaded,
  // before main, so set it and start again once; an operator's own value is left alone.
  if (std::getenv("OPENBLAS_THREAD_TIMEOUT") == nullptr &&
      std::getenv("RAMPART_KEEP_OPENBLAS_SPIN") == nullptr) {
    setenv("OPENBLAS_THREAD_TIMEOUT", "4", 1);
    execv("/proc/self/exe", argv);  // returns only on failure: then run as we are
  }
  return rampart::app::Main(argc, argv);
}
