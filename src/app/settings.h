#pragma once

// Settings for `rampart serve`: built-in defaults, then the YAML file given by --config, then
// command-line flags (Triton's names), each layer overriding the one before.

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"

namespace rampart::app {

struct ServeSettings {
  std::string model_repository;
  std::string model_control_mode = "none";  // none | explicit | poll
  int repository_poll_secs = 15;
  std::vector<std::string> load_models;
  std::string http_address = "0.0.0.0";
  int http_port = 8000;
  int http_threads = 0;  // 0 = one per core
  uint64_t http_max_input_size = 64ull << 20;
  int grpc_port = 8001;
  bool allow_metrics = true;
  std::string metrics_address = "0.0.0.0";
  int metrics_port = 8002;
  std::string metrics_histogram_buckets;  // microseconds, e.g. "1000,5000"; empty = defaults
  bool metrics_summaries = false;
  int exit_timeout_secs = 30;
  int threads_per_instance = 0;  // 0 = cores / instances
  int log_verbose = 0;
  std::string log_format = "default";  // default | json
  bool access_log = false;
};

// Reads a YAML config file into `settings` (only the keys present change). Unknown keys are an
// error naming the file and key, so typos never pass silently.
Status ApplyYamlFile(const std::string& path, ServeSettings& settings);

// Checks values that flags and YAML cannot constrain by type alone.
Status Validate(const ServeSettings& settings);

}  // namespace rampart::app
