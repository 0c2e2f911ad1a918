#pragma once

// InferenceServer tests' repositories on disk: the fake `add` backend's model, a broken one, and
// ensembles of `add` calls (server_test.cc, server_ensemble_test.cc).

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>

#include "add_backend.h"
#include "serve/server.h"

namespace rampart::serve {

// A repository on disk: `add` (the fake backend, version 1) and `broken` (a config that does not
// parse).
class RepositoryDir {
 public:
  RepositoryDir() {
    char pattern[] = "/tmp/rampart_server_test.XXXXXX";
    EXPECT_NE(mkdtemp(pattern), nullptr);
    path_ = pattern;
    std::filesystem::create_directories(path_ / "add" / "1");
    std::ofstream(path_ / "add" / "config.pbtxt") << kAddConfig;
    std::filesystem::create_directories(path_ / "broken" / "1");
    std::ofstream(path_ / "broken" / "config.pbtxt") << "name: \"broken\" max_batch_size: eight";
  }
  ~RepositoryDir() { std::filesystem::remove_all(path_); }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

inline ServerOptions ExplicitMode(const std::filesystem::path& repository, bool strict) {
  ServerOptions options;
  options.repository = repository;
  options.control_mode = ModelControlMode::kExplicit;
  options.strict_readiness = strict;
  return options;
}

// An ensemble `name` of `steps` chained `add` calls: A + B, then (A + B) + B, ...; its output SUM.
// `step_model` is called by the fake backend's names (INPUT0, INPUT1, OUTPUT0), or, when
// `step_is_chain`, by those of another such ensemble (A, B, SUM).
inline std::string ChainConfig(std::string_view name, int steps,
                               std::string_view step_model = "add", bool step_is_chain = false) {
  const char* first_input = step_is_chain ? "A" : "INPUT0";
  const char* second_input = step_is_chain ? "B" : "INPUT1";
  const char* output = step_is_chain ? "SUM" : "OUTPUT0";
  std::string text = fmt::format(
      "name: \"{}\" platform: \"ensemble\" max_batch_size: 4 "
      "input [ {{ name: \"A\" data_type: TYPE_INT32 dims: [ -1 ] }}, "
      "{{ name: \"B\" data_type: TYPE_INT32 dims: [ -1 ] }} ] "
      "output [ {{ name: \"SUM\" data_type: TYPE_INT32 dims: [ -1 ] }} ] "
      "ensemble_scheduling {{ step [ ",
      name);
  for (int i = 0; i < steps; ++i) {
    const std::string in = i == 0 ? "A" : fmt::format("T{}", i);
    const std::string out = i == steps - 1 ? "SUM" : fmt::format("T{}", i + 1);
    text += fmt::format(
        "{}{{ model_name: \"{}\" input_map {{ key: \"{}\" value: \"{}\" }} "
        "input_map {{ key: \"{}\" value: \"B\" }} "
        "output_map {{ key: \"{}\" value: \"{}\" }} }}",
        i == 0 ? "" : ", ", step_model, first_input, in, second_input, output, out);
  }
  return text + " ] }";
}

inline void WriteModel(const std::filesystem::path& repository, std::string_view name,
                       const std::string& config) {
  std::filesystem::create_directories(repository / name / "1");
  std::ofstream(repository / name / "config.pbtxt") << config;
}

inline std::unique_ptr<InferRequest> EnsembleRequest(std::string_view name, int32_t first) {
  auto request = Request({Int32Tensor("A", {1, 2}, {first, 1}), Int32Tensor("B", {1, 2}, {1, 1})});
  request->model_name = std::string(name);
  return request;
}

}  // namespace rampart::serve
