#pragma once

// Scanning a Triton-layout model repository:
//
//   <repository>/<model>/config.pbtxt
//   <repository>/<model>/<version>/<model file>     (version: a non-negative integer)
//
// Each model is read on its own, so one broken model never hides the others. Functions only read
// the filesystem; they are thread-safe.

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "core/status.h"
#include "model/config.h"

namespace rampart::model {

struct ModelSource {
  std::string name;
  std::filesystem::path directory;
  ModelConfig config;             // completed and validated
  std::vector<int64_t> versions;  // the versions the policy selects, ascending
};

// Reads and validates one model folder, and selects versions by the config's policy.
// Warnings (unknown fields) are logged.
Result<ModelSource> ReadModel(const std::filesystem::path& model_directory);

// Version folders present under a model folder, ascending.
std::vector<int64_t> ListVersions(const std::filesystem::path& model_directory);

// Applies a version policy to the versions present.
std::vector<int64_t> SelectVersions(const inference::ModelVersionPolicy& policy,
                                    const std::vector<int64_t>& available);

// Names of the model folders in a repository, sorted. Fails if the repository is unreadable.
Result<std::vector<std::string>> ListModels(const std::filesystem::path& repository);

}  // namespace rampart::model
