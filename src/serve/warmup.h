#pragma once

// Model warm-up (config `model_warmup`): runs each sample on an instance before the version is
// published, so the first real request does not pay for lazy initialisation (TorchScript's
// profiling runs, allocator growth). A version with warm-up samples is not ready until they ran.

#include <filesystem>

#include "backend/backend.h"
#include "model/config.h"
#include "serve/batch_assembly.h"

namespace rampart::serve {

// Runs every model_warmup sample `count` times (at least once) on `instance`. Inputs are zeros,
// random bytes, or the raw contents of `<version_directory>/warmup/<input_data_file>`. Each
// sample reaches the backend as `assembly` makes a batch of one (ragged and batch inputs).
// Errors: InvalidArgument for a sample that does not fit the config, or the backend's error.
Status WarmUp(backend::ModelInstance& instance, const model::ModelConfig& config,
              const BatchAssembly& assembly, const std::filesystem::path& version_directory);

}  // namespace rampart::serve
