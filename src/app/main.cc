// rampart: one binary, subcommands. `rampart serve` runs the model server (app/serve_command.h);
// the others are tools on its config and stores (keys, tenants, policy, keyring, audit, gateway
// check).

#include <unistd.h>

#include <cstdio>
#include <cstdlib>

#include <CLI/CLI.hpp>

#include "app/access_cli.h"
#include "app/access_setup.h"
#include "app/audit_cli.h"
#include "app/gateway_config.h"
#include "app/keyring_cli.h"
#include "app/policy_cli.h"
#include "app/serve_command.h"
#include "app/settings.h"
#include "core/logging.h"
#include "gateway/gateway.h"

#ifndef RAMPART_VERSION
#define RAMPART_VERSION "0.0.0"
#endif

namespace rampart::app {
namespace {

// `rampart gateway check CONFIG`: what it was given.
struct GatewayCheckArgs {
  CLI::App* command = nullptr;  // parsed when chosen
  std::string config_file;
  std::vector<std::string> upstreams;
  std::string upstream_api_key;
};

// Validates a config's gateway: section (with --upstream flags, whose models are read) and
// prints the resolved routing table. 0 when valid, 2 with the reason when not.
int GatewayCheck(const GatewayCheckArgs& args) {
  Result<gateway::GatewayConfig> config = LoadGatewayConfig(args.config_file);
  Status valid = config.status();
  if (valid.ok()) valid = AddFlagUpstreams(args.upstreams, args.upstream_api_key, *config);
  if (valid.ok()) valid = gateway::Validate(*config);
  if (!valid.ok()) {
    std::fprintf(stderr, "rampart: %s\n", valid.message().c_str());
    return 2;
  }
  std::printf("%s: valid\n%s", args.config_file.c_str(), gateway::DescribeRoutes(*config).c_str());
  return 0;
}

// Defines `rampart` and its `serve` flags, bound directly to `settings`: CLI11 assigns only
// the flags present on the command line, so whatever `settings` held before (defaults, or the
// --config file's values) stays for the rest.
std::unique_ptr<CLI::App> MakeApp(ServeSettings& settings, std::string& config_file,
                                  GatewayCheckArgs& check) {
  auto app = std::make_unique<CLI::App>(
      "Rampart: run AI on your own hardware. Serves models over Triton's KServe v2 "
      "protocol.");
  app->set_version_flag("--version", RAMPART_VERSION);
  app->require_subcommand(1);
  CLI::App* gateway = app->add_subcommand("gateway", "OpenAI gateway tools");
  gateway->require_subcommand(1);
  check.command = gateway->add_subcommand(
      "check", "Validate a config file's gateway: section and print the routing table");
  check.command->add_option("CONFIG", check.config_file, "YAML config file")
      ->required()
      ->check(CLI::ExistingFile);
  check.command->add_option("--upstream", check.upstreams,
                            "OpenAI-compatible server to add, as `serve --upstream` does");
  check.command->add_option("--upstream-api-key", check.upstream_api_key,
                            "API key for the --upstream servers");
  CLI::App* serve = app->add_subcommand(
      "serve",
      "Serve the models of a Triton-layout model repository over KServe v2 HTTP and gRPC.");
  // `--help` shows every flag's default the same way, after its type: `INT=8000`,
  // `BOOLEAN=true` (flags whose default is empty, such as file paths, show none).
  // A flag with a value.
  const auto option = [serve](std::string name, auto& value, std::string help) {
    return serve->add_option(std::move(name), value, std::move(help))->capture_default_str();
  };
  // A boolean flag: alone it means true; it also takes a value (--allow-grpc=false or
  // --allow-grpc false).
  const auto switch_flag = [serve](std::string name, bool& value, std::string help) {
    return serve->add_flag(std::move(name), value, std::move(help))
        ->expected(0, 1)
        ->option_text(value ? "BOOLEAN=true" : "BOOLEAN=false");
  };
  serve->footer(
      "A BOOLEAN flag alone means true; --flag=false (or --flag false) turns it off. Flags "
      "override the --config file.");
  serve
      ->add_option("--config", config_file,
                   "YAML config file (sections server:, http: and gateway:); flags override it")
      ->check(CLI::ExistingFile);
  serve->add_option("--upstream", settings.upstreams,
                    "OpenAI-compatible server (base URL, e.g. http://10.0.0.5:8000/v1) whose "
                    "models the gateway routes to under their own names (repeatable; upstreams "
                    "serving the same model fail over to each other)");
  serve->add_option("--upstream-api-key", settings.upstream_api_key,
                    "API key sent to the --upstream servers (Authorization: Bearer)");
  serve->add_option("--model-repository", settings.model_repository,
                    "Model repository directory (Triton layout)");
  option("--server-name", settings.server_name,
         "Name the server metadata (HTTP GET /v2, gRPC ServerMetadata) answers; 'triton' for "
         "clients that expect Triton's");
  option("--model-control-mode", settings.model_control_mode,
         "none: load every model at start; explicit: load only "
         "--load-model models, then the repository API; poll: load "
         "everything and follow changes to the repository");
  option("--repository-poll-secs", settings.repository_poll_secs,
         "Seconds between repository scans in poll mode");
  serve->add_option("--load-model", settings.load_models,
                    "Model to load at start in explicit mode (repeatable; * = all)");
  option("--http-address", settings.http_address, "Address the HTTP server binds");
  option("--http-port", settings.http_port, "HTTP port (0 picks a free one and prints it)");
  option("--http-thread-count", settings.http_threads,
         "HTTP I/O threads (0 = one per core, or per --http-cpus CPU)");
  option("--http-max-input-size", settings.http_max_input_size,
         "Largest request body in bytes; larger bodies get 413");
  option("--http-max-connections", settings.http_max_connections,
         "Open HTTP connections at most; one more is answered 503 and closed (0 = no limit)");
  option("--http-idle-timeout-secs", settings.http_idle_timeout_secs,
         "Seconds a keep-alive connection may wait for its next request");
  option("--http-header-timeout-secs", settings.http_header_timeout_secs,
         "Seconds a request's head may take from its first byte; then 408");
  option("--http-body-timeout-secs", settings.http_body_timeout_secs,
         "Seconds a request's body may take, plus one per --http-body-min-rate bytes received; "
         "then 408");
  option("--http-body-min-rate", settings.http_body_min_rate,
         "Bytes per second a slow request body must keep (0 = the body timeout alone)");
  option("--files-max-bytes", settings.files_max_bytes,
         "The Files API's limit on a file's content (bytes); a larger upload gets 413");
  option("--files-seal-key", settings.files_seal_key,
         "Keyring key that seals uploaded files at rest (made when missing; needs the keyring); "
         "empty: files are kept plain");
  option("--http-max-body-bytes-in-flight", settings.http_max_body_bytes_in_flight,
         "Bytes of request bodies being read at once, over all connections; a body past it gets "
         "503 (0 = no limit)");
  serve->add_option("--http-ssl-cert", settings.http_ssl_cert,
                    "PEM certificate (chain): serve HTTPS instead of HTTP");
  serve->add_option("--http-ssl-key", settings.http_ssl_key, "PEM private key for HTTPS");
  serve->add_option("--http-ssl-root-cert", settings.http_ssl_root_cert,
                    "PEM CA certificate(s) that sign client certificates");
  switch_flag("--http-ssl-mutual", settings.http_ssl_mutual,
              "HTTPS with mutual TLS: clients must present a "
              "certificate signed by --http-ssl-root-cert");
  switch_flag("--allow-grpc", settings.allow_grpc, "Serve KServe v2 gRPC");
  option("--grpc-address", settings.grpc_address, "Address the gRPC server binds");
  option("--grpc-port", settings.grpc_port, "gRPC port (0 picks a free one and prints it)");
  option("--grpc-max-input-size", settings.grpc_max_input_size,
         "Largest gRPC request message in bytes; larger ones "
         "get RESOURCE_EXHAUSTED");
  option("--grpc-engine", settings.grpc_engine,
         "gRPC transport: native (Rampart's own HTTP/2 on its I/O threads) or core (gRPC's "
         "library)");
  option("--grpc-thread-count", settings.grpc_thread_count,
         "Threads serving gRPC (core: grpc-cq-<i>, default 1; native: grpc-io-<i>, default one "
         "per core)");
  switch_flag("--grpc-cork-writes", settings.grpc_cork_writes,
              "Gather the answers to several gRPC calls in a row into fewer TCP writes (TCP_CORK)");
  option("--grpc-max-inflight-bytes", settings.grpc_max_inflight_bytes,
         "Bytes of infer requests the gRPC front end holds at once (all calls and streams); "
         "past it requests get RESOURCE_EXHAUSTED");
  switch_flag("--grpc-use-ssl", settings.grpc_use_ssl,
              "Serve gRPC over TLS (needs --grpc-server-cert and "
              "--grpc-server-key)");
  switch_flag("--grpc-use-ssl-mutual", settings.grpc_use_ssl_mutual,
              "Serve gRPC over mutual TLS: clients must present a "
              "certificate signed by --grpc-root-cert");
  serve->add_option("--grpc-server-cert", settings.grpc_server_cert,
                    "PEM certificate (chain) of the gRPC server");
  serve->add_option("--grpc-server-key", settings.grpc_server_key, "PEM private key of the server");
  serve->add_option("--grpc-root-cert", settings.grpc_root_cert,
                    "PEM CA certificate(s) that sign client certificates");
  option("--metrics-port", settings.metrics_port, "Prometheus metrics port (/metrics)");
  switch_flag("--allow-metrics", settings.allow_metrics, "Serve Prometheus metrics");
  option("--metrics-address", settings.metrics_address, "Address the metrics server binds");
  serve
      ->add_option("--metrics-histogram-buckets", settings.metrics_histogram_buckets,
                   "Latency histogram bucket bounds in microseconds, exported in seconds (the "
                   "default: 10 us to 5 s); a model's metrics_histogram_buckets parameter "
                   "overrides it")
      ->default_str(settings.metrics_histogram_buckets.empty()
                        ? std::string(metrics::kDefaultDurationBucketsUsText)
                        : settings.metrics_histogram_buckets);
  switch_flag("--metrics-summaries", settings.metrics_summaries,
              "Also export p50/p90/p99 summaries (Triton's nv_inference_*_summary_us)");
  option("--default-max-queue-size", settings.default_max_queue_size,
         "Requests a model's queue (each priority level's) holds when its config sets no "
         "max_queue_size; more get 503 at once (0 = unbounded, as Triton)");
  option("--exit-timeout-secs", settings.exit_timeout_secs,
         "On SIGINT/SIGTERM, how long to wait for requests in "
         "flight before exiting");
  option("--instance-cpus", settings.instance_cpus,
         "CPUs (a list like 2-7,9) that model instance threads run on; the default "
         "intra-op budget then divides these instead of every core (default: any)");
  option("--http-cpus", settings.http_cpus,
         "CPUs (a list like 0-1) that HTTP I/O threads run on (default: any)");
  switch_flag("--http-sched-batch", settings.http_sched_batch,
              "Run HTTP I/O threads under SCHED_BATCH: their wake-ups then do not preempt a "
              "busy thread, such as a model instance mid-batch");
  switch_flag("--strict-readiness", settings.strict_readiness,
              "Whether /v2/health/ready (and gRPC ServerReady) answers ready only while every "
              "model in the repository is loaded; models unloaded on request do not count");
  option("--threads-per-instance", settings.threads_per_instance,
         "Intra-op threads per model instance (0 = cores divided by "
         "the model's instances); a model's INTRA_OP_THREAD_COUNT "
         "parameter overrides it");
  option("--direct-execution-max-us", settings.direct_execution_max_us,
         "Run a request on the I/O thread that read it, skipping the hand-off to an "
         "idle instance's thread, when the model's recent executions took at most "
         "this long and it does not wait to batch (0 = never)");
  option("--log-verbose", settings.log_verbose, "Verbose logging level (0 = info, >0 = debug)");
  option("--log-format", settings.log_format,
         "Log lines: 'default' (text) or 'json' (one object a line)");
  serve
      ->add_option("--data-dir", settings.data_dir,
                   "Directory of Rampart's persistent state (the SQLite store) when the config "
                   "has an access: section; unset, the config's access.data_dir, else ./data. "
                   "Given, it also turns the Files API on without one (files under <dir>/files)")
      ->default_str(std::string(kDefaultDataDir));
  option("--master-key-file", settings.master_key_file,
         "File holding the keyring's 32-byte master key (raw, hex or base64; mode "
         "0600); default: the RAMPART_MASTER_KEY environment variable; neither: no "
         "keyring (encrypted models do not load)");
  option("--model-region", settings.model_region,
         "Region bound into encrypted model files (model.pt.rpe)");
  option("--model-data-class", settings.model_data_class,
         "Data class bound into encrypted model files (model.pt.rpe)");
  switch_flag("--access-log", settings.access_log,
              "Log one JSON line per infer request with its trace id and per-stage timing");

  return app;
}

int Main(int argc, char** argv) {
  // First pass: defaults only, to find --config (and to answer --help and bad flags).
  ServeSettings settings;
  std::string config_file;
  {
    ServeSettings defaults;
    GatewayCheckArgs check;
    std::unique_ptr<CLI::App> app = MakeApp(defaults, config_file, check);
    PolicyCommands policy(*app);
    AccessCli access_cli;  // rampart keys|tenants|principals
    access_cli.AddTo(*app);
    KeyringCli keyring_cli;  // rampart keyring
    keyring_cli.AddTo(*app);
    AuditCli audit_cli;  // rampart audit verify|prove|check-proof|export|prune
    audit_cli.AddTo(*app);
    try {
      app->parse(argc, argv);
    } catch (const CLI::ParseError& error) {
      return app->exit(error);
    }
    if (check.command->parsed()) return GatewayCheck(check);
    if (policy.chosen()) return policy.Run();
    if (std::optional<int> status = access_cli.RunIfChosen()) return *status;
    if (std::optional<int> status = keyring_cli.RunIfChosen()) return *status;
    if (std::optional<int> status = audit_cli.RunIfChosen()) return *status;
  }
  if (!config_file.empty()) {
    if (Status applied = ApplyYamlFile(config_file, settings); !applied.ok()) {
      std::fprintf(stderr, "rampart: %s\n", applied.message().c_str());
      return 2;
    }
  }
  // Second pass over the config file's values: flags given on the command line win.
  {
    std::string ignored;
    GatewayCheckArgs unused;
    std::unique_ptr<CLI::App> app = MakeApp(settings, ignored, unused);
    try {
      app->parse(argc, argv);
    } catch (const CLI::ParseError& error) {
      return app->exit(error);
    }
  }
  settings.config_file = config_file;
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
    // By the binary's own path, so the process (and its threads) keep the name `rampart` in ps
    // and top; executing /proc/self/exe would name them `exe`.
    char path[4096];
    const ssize_t length = readlink("/proc/self/exe", path, sizeof(path) - 1);
    if (length > 0) {
      path[length] = '\0';
      execv(path, argv);
    }
    execv("/proc/self/exe", argv);  // returns only on failure: then run as we are
  }
  return rampart::app::Main(argc, argv);
}
