#pragma once

// The Backend interface: what the serving core needs from a model runtime.
//
// A Backend creates ModelInstances; each instance holds one copy of a model's runtime state and
// is driven by exactly one thread (its instance thread in src/serve), so implementations need no
// locking of their own. Exceptions from the runtime library never leave a backend: they become
// Status inside the adapter's own file.

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "model/config.h"
#include "tensor/tensor.h"

namespace rampart::backend {

// Where the time of one execution went, in nanoseconds (Triton's compute_* stages).
struct ExecutionTiming {
  int64_t compute_input_ns = 0;   // request tensors -> runtime tensors
  int64_t compute_infer_ns = 0;   // the model itself
  int64_t compute_output_ns = 0;  // runtime tensors -> response tensors
};

struct ExecutionResult {
  // One tensor per config output, in config order, with the batch as dim 0 when the model
  // batches.
  std::vector<tensor::Tensor> outputs;
  ExecutionTiming timing;
};

class ModelInstance {
 public:
  virtual ~ModelInstance() = default;

  // Prepares the calling thread to run this instance (e.g. pins thread counts, which some
  // runtimes keep per thread). Called before every Execute, on whichever thread runs it: the
  // instance's own, or a borrowed one (direct execution, an ensemble's next step), and a thread
  // that ran another model meanwhile carries that model's settings. So it must be cheap when
  // nothing needs to change.
  virtual void PrepareThread() {}

  // Threads one execution computes on, the calling thread included (intra-op threads, or a
  // library's pool). Only the calling thread's scheduling can be set per instance.
  virtual int ComputeThreads() const { return 1; }

  // Runs the model. `inputs` holds one tensor per config input the request supplied, in config
  // order, already checked against the config (names, types, shapes, byte sizes); when the model
  // batches, dim 0 is the batch. The instance may consume (move from) the inputs.
  // Errors: InvalidArgument for input the model rejects at run time, Internal otherwise.
  virtual Result<ExecutionResult> Execute(std::vector<tensor::Tensor>& inputs) = 0;
};

struct InstanceSpec {
  const model::ModelConfig* config = nullptr;  // completed and validated; outlives the instance
  std::filesystem::path version_directory;     // <repository>/<model>/<version>
  int64_t version = 0;
  int group_index = 0;     // which instance_group
  int instance_index = 0;  // index within the group
  // Intra-op threads the server budgets for this instance; a model's `parameters` may override.
  int default_threads = 1;
};

class Backend {
 public:
  virtual ~Backend() = default;
  // The `backend` config value this backend serves, e.g. "pytorch".
  virtual std::string_view name() const = 0;
  // Loads one instance. Errors name the file and the reason (NotFound, InvalidArgument, Internal).
  virtual Result<std::unique_ptr<ModelInstance>> CreateInstance(const InstanceSpec& spec) = 0;
};

// Backends by name. Filled once at start-up by the app (no static registration), then read-only,
// so concurrent Find calls are safe.
class BackendRegistry {
 public:
  void Register(std::unique_ptr<Backend> backend);
  // nullptr when no backend has that name.
  Backend* Find(std::string_view name) const;
  std::vector<std::string> Names() const;

 private:
  std::map<std::string, std::unique_ptr<Backend>, std::less<>> backends_;
};

}  // namespace rampart::backend
