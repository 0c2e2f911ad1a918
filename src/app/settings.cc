#include "app/settings.h"

#include <functional>
#include <limits>
#include <map>

#include <yaml-cpp/yaml.h>

#include "core/cpu_affinity.h"
#include "core/logging.h"
#include "metrics/serve_metrics.h"

namespace rampart::app {
namespace {

template <typename T>
std::function<Status(const YAML::Node&)> Field(T& target, std::string key) {
  return [&target, key](const YAML::Node& node) -> Status {
    try {
      target = node.as<T>();
    } catch (const YAML::Exception& error) {
      return InvalidArgument("'{}' has the wrong type (line {}): {}", key, node.Mark().line + 1,
                             error.msg);
    }
    return Status::Ok();
  };
}

using FieldMap = std::map<std::string, std::function<Status(const YAML::Node&)>>;

Status ApplySections(const std::string& path, const YAML::Node& root,
                     const std::map<std::string, const FieldMap*>& sections) {
  for (const auto& section : root) {
    const std::string name = section.first.as<std::string>();
    auto found = sections.find(name);
    if (found == sections.end()) {
      return InvalidArgument(
          "config file '{}': unknown section '{}' (known: server, http, gateway, access, audit, "
          "keyring, knowledge)",
          path, name);
    }
    // Read elsewhere: gateway: (app/gateway_config.h), access: (app/access_config.h).
    if (found->second == nullptr) continue;
    if (!section.second.IsMap()) {
      return InvalidArgument("config file '{}': '{}' must be a map", path, name);
    }
    for (const auto& entry : section.second) {
      const std::string key = entry.first.as<std::string>();
      auto field = found->second->find(key);
      if (field == found->second->end()) {
        return InvalidArgument("config file '{}': unknown key '{}.{}'", path, name, key);
      }
      RETURN_IF_ERROR(
          field->second(entry.second).WithContext(fmt::format("config file '{}'", path)));
    }
  }
  return Status::Ok();
}

}  // namespace

Status ApplyYamlFile(const std::string& path, ServeSettings& settings) {
  YAML::Node root;
  try {
    root = YAML::LoadFile(path);
  } catch (const YAML::BadFile&) {
    return NotFound("config file '{}' cannot be read", path);
  } catch (const YAML::Exception& error) {
    return InvalidArgument("config file '{}': {}", path, error.what());
  }
  if (root.IsNull()) return Status::Ok();
  if (!root.IsMap()) return InvalidArgument("config file '{}': the top level must be a map", path);

  // The YAML layout mirrors the flags: `server:` holds serve settings, `http:` the HTTP front end.
  const FieldMap server_fields = {
      {"model_repository", Field(settings.model_repository, "server.model_repository")},
      {"server_name", Field(settings.server_name, "server.server_name")},
      {"model_control_mode", Field(settings.model_control_mode, "server.model_control_mode")},
      {"repository_poll_secs", Field(settings.repository_poll_secs, "server.repository_poll_secs")},
      {"load_models", Field(settings.load_models, "server.load_models")},
      {"exit_timeout_secs", Field(settings.exit_timeout_secs, "server.exit_timeout_secs")},
      {"default_max_queue_size",
       Field(settings.default_max_queue_size, "server.default_max_queue_size")},
      {"strict_readiness", Field(settings.strict_readiness, "server.strict_readiness")},
      {"threads_per_instance", Field(settings.threads_per_instance, "server.threads_per_instance")},
      {"instance_cpus", Field(settings.instance_cpus, "server.instance_cpus")},
      {"direct_execution_max_us",
       Field(settings.direct_execution_max_us, "server.direct_execution_max_us")},
      {"log_verbose", Field(settings.log_verbose, "server.log_verbose")},
      {"log_format", Field(settings.log_format, "server.log_format")},
      {"master_key_file", Field(settings.master_key_file, "server.master_key_file")},
      {"model_region", Field(settings.model_region, "server.model_region")},
      {"model_data_class", Field(settings.model_data_class, "server.model_data_class")},
      {"access_log", Field(settings.access_log, "server.access_log")},
      {"allow_grpc", Field(settings.allow_grpc, "server.allow_grpc")},
      {"grpc_address", Field(settings.grpc_address, "server.grpc_address")},
      {"grpc_port", Field(settings.grpc_port, "server.grpc_port")},
      {"grpc_max_input_size", Field(settings.grpc_max_input_size, "server.grpc_max_input_size")},
      {"grpc_max_inflight_bytes",
       Field(settings.grpc_max_inflight_bytes, "server.grpc_max_inflight_bytes")},
      {"grpc_engine", Field(settings.grpc_engine, "server.grpc_engine")},
      {"grpc_thread_count", Field(settings.grpc_thread_count, "server.grpc_thread_count")},
      {"grpc_cork_writes", Field(settings.grpc_cork_writes, "server.grpc_cork_writes")},
      {"grpc_use_ssl", Field(settings.grpc_use_ssl, "server.grpc_use_ssl")},
      {"grpc_use_ssl_mutual", Field(settings.grpc_use_ssl_mutual, "server.grpc_use_ssl_mutual")},
      {"grpc_server_cert", Field(settings.grpc_server_cert, "server.grpc_server_cert")},
      {"grpc_server_key", Field(settings.grpc_server_key, "server.grpc_server_key")},
      {"grpc_root_cert", Field(settings.grpc_root_cert, "server.grpc_root_cert")},
      {"metrics_port", Field(settings.metrics_port, "server.metrics_port")},
      {"allow_metrics", Field(settings.allow_metrics, "server.allow_metrics")},
      {"metrics_address", Field(settings.metrics_address, "server.metrics_address")},
      {"metrics_histogram_buckets",
       Field(settings.metrics_histogram_buckets, "server.metrics_histogram_buckets")},
      {"metrics_summaries", Field(settings.metrics_summaries, "server.metrics_summaries")},
  };
  const FieldMap http_fields = {
      {"address", Field(settings.http_address, "http.address")},
      {"port", Field(settings.http_port, "http.port")},
      {"threads", Field(settings.http_threads, "http.threads")},
      {"cpus", Field(settings.http_cpus, "http.cpus")},
      {"sched_batch", Field(settings.http_sched_batch, "http.sched_batch")},
      {"max_input_size", Field(settings.http_max_input_size, "http.max_input_size")},
      {"max_connections", Field(settings.http_max_connections, "http.max_connections")},
      {"idle_timeout_secs", Field(settings.http_idle_timeout_secs, "http.idle_timeout_secs")},
      {"header_timeout_secs", Field(settings.http_header_timeout_secs, "http.header_timeout_secs")},
      {"body_timeout_secs", Field(settings.http_body_timeout_secs, "http.body_timeout_secs")},
      {"body_min_rate", Field(settings.http_body_min_rate, "http.body_min_rate")},
      {"max_body_bytes_in_flight",
       Field(settings.http_max_body_bytes_in_flight, "http.max_body_bytes_in_flight")},
      {"ssl_cert", Field(settings.http_ssl_cert, "http.ssl_cert")},
      {"ssl_key", Field(settings.http_ssl_key, "http.ssl_key")},
      {"ssl_root_cert", Field(settings.http_ssl_root_cert, "http.ssl_root_cert")},
      {"ssl_mutual", Field(settings.http_ssl_mutual, "http.ssl_mutual")},
  };
  const FieldMap files_fields = {
      {"max_bytes", Field(settings.files_max_bytes, "files.max_bytes")},
      {"seal_key", Field(settings.files_seal_key, "files.seal_key")},
  };
  const std::map<std::string, const FieldMap*> sections = {
      {"server", &server_fields}, {"http", &http_fields}, {"files", &files_fields},
      {"gateway", nullptr},       {"access", nullptr},    {"audit", nullptr},
      {"keyring", nullptr},       {"knowledge", nullptr}};

  // Keys that are not scalars (`[a]: 1`) fail their conversion to a name.
  try {
    return ApplySections(path, root, sections);
  } catch (const YAML::Exception& error) {
    return InvalidArgument("config file '{}' (line {}): {}", path, error.mark.line + 1, error.msg);
  }
}

Status Validate(const ServeSettings& settings) {
  if (settings.model_repository.empty()) {
    return InvalidArgument(
        "--model-repository is required (or server.model_repository in --config)");
  }
  if (settings.server_name.empty()) return InvalidArgument("--server-name must not be empty");
  if (settings.files_max_bytes == 0) return InvalidArgument("--files-max-bytes must be positive");
  if (settings.model_control_mode != "none" && settings.model_control_mode != "explicit" &&
      settings.model_control_mode != "poll") {
    return InvalidArgument("--model-control-mode must be none, poll or explicit, got '{}'",
                           settings.model_control_mode);
  }
  for (auto [name, port] :
       {std::pair{"--http-port", settings.http_port}, std::pair{"--grpc-port", settings.grpc_port},
        std::pair{"--metrics-port", settings.metrics_port}}) {
    if (port < 0 || port > 65535)
      return InvalidArgument("{} must be in [0, 65535], got {}", name, port);
  }
  for (auto [name, list] : {std::pair{"--instance-cpus", &settings.instance_cpus},
                            std::pair{"--http-cpus", &settings.http_cpus}}) {
    Result<std::vector<int>> cpus = ParseCpuList(*list);
    Status usable = cpus.ok() ? CheckAllowedCpus(*cpus) : cpus.status();
    if (!usable.ok()) return InvalidArgument("{} '{}': {}", name, *list, usable.message());
  }
  if (settings.grpc_max_input_size == 0 ||
      settings.grpc_max_input_size > static_cast<uint64_t>(std::numeric_limits<int32_t>::max())) {
    return InvalidArgument("--grpc-max-input-size must be in [1, 2147483647], got {}",
                           settings.grpc_max_input_size);
  }
  if (settings.grpc_thread_count < 0 || settings.grpc_thread_count > 64) {
    return InvalidArgument(
        "--grpc-thread-count must be in [0, 64] (0: the engine's default), got {}",
        settings.grpc_thread_count);
  }
  if (settings.grpc_engine != "core" && settings.grpc_engine != "native") {
    return InvalidArgument("--grpc-engine must be 'core' or 'native', got '{}'",
                           settings.grpc_engine);
  }
  if (settings.grpc_max_inflight_bytes < settings.grpc_max_input_size) {
    return InvalidArgument(
        "--grpc-max-inflight-bytes ({}) must be at least --grpc-max-input-size ({}): a request "
        "of the largest size could never be served",
        settings.grpc_max_inflight_bytes, settings.grpc_max_input_size);
  }
  if (settings.http_ssl_cert.empty() != settings.http_ssl_key.empty()) {
    return InvalidArgument("HTTPS needs both --http-ssl-cert and --http-ssl-key");
  }
  if (settings.http_ssl_mutual &&
      (settings.http_ssl_cert.empty() || settings.http_ssl_root_cert.empty())) {
    return InvalidArgument(
        "--http-ssl-mutual needs --http-ssl-cert, --http-ssl-key and --http-ssl-root-cert (the CA "
        "that signs client certificates)");
  }
  if (settings.allow_grpc && (settings.grpc_use_ssl || settings.grpc_use_ssl_mutual)) {
    if (settings.grpc_server_cert.empty() || settings.grpc_server_key.empty()) {
      return InvalidArgument("--grpc-use-ssl needs --grpc-server-cert and --grpc-server-key");
    }
    if (settings.grpc_use_ssl_mutual && settings.grpc_root_cert.empty()) {
      return InvalidArgument(
          "--grpc-use-ssl-mutual needs --grpc-root-cert (the CA that signs client certificates)");
    }
  }
  if (settings.http_threads < 0) {
    return InvalidArgument("--http-thread-count must be >= 0 (0: the default), got {}",
                           settings.http_threads);
  }
  if (settings.threads_per_instance < 0) {
    return InvalidArgument("--threads-per-instance must be >= 0 (0: the default), got {}",
                           settings.threads_per_instance);
  }
  if (settings.direct_execution_max_us < 0) {
    return InvalidArgument("--direct-execution-max-us must be >= 0, got {}",
                           settings.direct_execution_max_us);
  }
  if (settings.http_max_input_size == 0) {
    return InvalidArgument("--http-max-input-size must be positive");
  }
  if (settings.http_max_connections < 0) {
    return InvalidArgument("--http-max-connections must be >= 0 (0: no limit), got {}",
                           settings.http_max_connections);
  }
  for (auto [name, value] :
       {std::pair{"--http-idle-timeout-secs", settings.http_idle_timeout_secs},
        std::pair{"--http-header-timeout-secs", settings.http_header_timeout_secs},
        std::pair{"--http-body-timeout-secs", settings.http_body_timeout_secs}}) {
    if (value < 1) return InvalidArgument("{} must be at least 1, got {}", name, value);
  }
  if (settings.exit_timeout_secs < 0) return InvalidArgument("--exit-timeout-secs must be >= 0");
  if (settings.repository_poll_secs < 1) {
    return InvalidArgument("--repository-poll-secs must be >= 1, got {}",
                           settings.repository_poll_secs);
  }
  RETURN_IF_ERROR(ParseLogFormat(settings.log_format).status().WithContext("--log-format"));
  if (!settings.metrics_histogram_buckets.empty()) {
    RETURN_IF_ERROR(metrics::ParseMicrosecondBuckets(settings.metrics_histogram_buckets)
                        .status()
                        .WithContext("--metrics-histogram-buckets"));
  }
  return Status::Ok();
}

}  // namespace rampart::app
