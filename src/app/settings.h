#pragma once

// Settings for `rampart serve`: built-in defaults, then the YAML file given by --config, then
// command-line flags (Triton's names), each layer overriding the one before.

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "core/status.h"

namespace rampart::app {

struct ServeSettings {
  std::string config_file;  // --config, read again when the gateway reloads
  // The gateway's quick start: OpenAI-compatible servers whose models become routable.
  std::vector<std::string> upstreams;
  std::string upstream_api_key;
  std::string model_repository;
  // The name ServerMetadata answers (HTTP GET /v2 and gRPC); Triton answers "triton", which some
  // clients expect.
  std::string server_name = "rampart";
  std::string model_control_mode = "none";  // none | explicit | poll
  int repository_poll_secs = 15;
  std::vector<std::string> load_models;
  std::string http_address = "0.0.0.0";
  int http_port = 8000;
  int http_threads = 0;  // 0 = one per core
  uint64_t http_max_input_size = 64ull << 20;
  // Overload and slow-client limits (net::HttpServerOptions has their rules).
  int http_max_connections = 4096;    // 0 = no limit
  int http_idle_timeout_secs = 300;   // between requests on a keep-alive connection
  int http_header_timeout_secs = 20;  // a request's head, from its first byte
  int http_body_timeout_secs = 20;    // its body, plus a second per min-rate bytes
  uint64_t http_body_min_rate = 500;  // bytes per second; 0 = body timeout alone
  uint64_t http_max_body_bytes_in_flight = 1ull << 30;  // 0 = no limit
  // HTTPS when http_ssl_cert is set (PEM files); mutual TLS requires client certificates signed
  // by http_ssl_root_cert.
  std::string http_ssl_cert;
  std::string http_ssl_key;
  std::string http_ssl_root_cert;
  bool http_ssl_mutual = false;
  bool allow_grpc = true;
  std::string grpc_address = "0.0.0.0";
  int grpc_port = 8001;
  // Triton's limit, which its clients send up to (HTTP's is 64 MiB in both).
  uint64_t grpc_max_input_size = std::numeric_limits<int32_t>::max();
  // Bytes of infer requests the gRPC front end holds at once (all calls and streams); past it
  // requests are refused RESOURCE_EXHAUSTED. At least grpc_max_input_size, or a request of the
  // largest size could never be served.
  uint64_t grpc_max_inflight_bytes = uint64_t{4} << 30;
  // The gRPC transport: "native" (Rampart's own HTTP/2) or "core" (gRPC's library;
  // KServeGrpcOptions::engine).
  std::string grpc_engine = "native";
  // Threads serving gRPC: the core engine's completion-queue threads
  // (KServeGrpcOptions::completion_queue_threads), the native engine's I/O threads
  // (native_io_threads). 0 = the engine's default: one for core, one per core for native.
  int grpc_thread_count = 0;
  // Cork the gRPC connections while a queue thread answers several calls in a row
  // (KServeGrpcOptions::cork_writes).
  bool grpc_cork_writes = true;
  // TLS for gRPC (Triton's flags); --grpc-use-ssl-mutual implies --grpc-use-ssl.
  bool grpc_use_ssl = false;
  bool grpc_use_ssl_mutual = false;
  std::string grpc_server_cert;  // PEM file
  std::string grpc_server_key;   // PEM file
  std::string grpc_root_cert;    // PEM file: the CA that signs client certificates (mutual TLS)
  bool allow_metrics = true;
  std::string metrics_address = "0.0.0.0";
  int metrics_port = 8002;
  // Latency histogram bounds in microseconds, e.g. "100,1000,10000"; empty = the default
  // (metrics::kDefaultDurationBucketsUs, 10 µs to 5 s).
  std::string metrics_histogram_buckets;
  bool metrics_summaries = false;
  int exit_timeout_secs = 30;
  // The bound of a model queue whose config sets no max_queue_size (0 = unbounded, as Triton).
  uint64_t default_max_queue_size = 1024;
  bool strict_readiness = true;      // ready only while every model is available (Triton)
  int threads_per_instance = 0;      // 0 = cores / instances
  std::string instance_cpus;         // CPU list ("2-7") for model instance threads; "" = any
  std::string http_cpus;             // CPU list for HTTP I/O threads; "" = any
  bool http_sched_batch = true;      // HTTP I/O threads under SCHED_BATCH
  int direct_execution_max_us = 50;  // 0 = always hand requests to instance threads
  int log_verbose = 0;
  std::string log_format = "default";  // default | json
  bool access_log = false;
  // Where persistent state lives (the SQLite store) when the config has an access: section;
  // empty = the config's access.data_dir, else ./data.
  std::string data_dir;
  // The keyring's master key file (docs/crypto.md); empty = the RAMPART_MASTER_KEY environment
  // variable, or no keyring when that is unset too (the file's path may be in the config; the
  // key itself never is).
  std::string master_key_file;
  // The OpenAI Files API (docs/knowledge-hub.md, "Files API"): a file's content at most (bytes),
  // and the keyring key its bytes are sealed under at rest (empty: kept plain; set, it needs the
  // keyring and is made when missing).
  uint64_t files_max_bytes = 512ull << 20;
  std::string files_seal_key;
  // The region and data class encrypted model files (model.pt.rpe) are sealed for.
  std::string model_region = "local";
  std::string model_data_class = "CONFIDENTIAL";
};

// Reads a YAML config file into `settings` (only the keys present change). Unknown keys are an
// error naming the file and key, so typos never pass silently.
Status ApplyYamlFile(const std::string& path, ServeSettings& settings);

// Checks values that flags and YAML cannot constrain by type alone.
Status Validate(const ServeSettings& settings);

}  // namespace rampart::app
