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

// Reads and validates one model folder, and selects versions by the config's policy. A config
// that names neither platform nor backend is completed from the files, as Triton does: a
// model.pt in the first version folder (by name) makes it a PyTorch model.
// protobuf's warnings about config.pbtxt, if any, are logged.
Result<ModelSource> ReadModel(const std::filesystem::path& model_directory);

// As ReadModel, with `config` in place of the folder's config.pbtxt, which is not read at all (a
// load request's override, as Triton uses it: fields it leaves out take their defaults, not
// config.pbtxt's values). It is completed and validated the same way: the name from the folder,
// platform and backend from the model's files when it names neither (a model.pt in the first
// version folder makes it a PyTorch model), version policy and instance group defaults.
Result<ModelSource> ReadModelWithConfig(const std::filesystem::path& model_directory,
                                        ModelConfig config);

// A digest of everything a load reads from a model folder: config.pbtxt's bytes and the path,
// size and modification time of every file under the version folders. Equal fingerprints mean
// nothing changed. Empty when the folder cannot be read.
std::string Fingerprint(const std::filesystem::path& model_directory);
// The same digest for one version folder's files only.
std::string VersionFingerprint(const std::filesystem::path& model_directory, int64_t version);

// Version folders present under a model folder, ascending: folders named by a number without
// leading zeros ("0" included). Numbered folders skipped for a leading zero ("01", as Triton
// skips them) are added to `leading_zeros` when given.
std::vector<int64_t> ListVersions(const std::filesystem::path& model_directory,
                                  std::vector<std::string>* leading_zeros = nullptr);

// Applies a version policy to the versions present.
std::vector<int64_t> SelectVersions(const inference::ModelVersionPolicy& policy,
                                    const std::vector<int64_t>& available);

// Names of the model folders in a repository, sorted. Fails if the repository is unreadable.
Result<std::vector<std::string>> ListModels(const std::filesystem::path& repository);

}  // namespace rampart::model
