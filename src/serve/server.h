#pragma once

// InferenceServer: the narrow core API every protocol front end goes through.
//
// It owns the loaded models (by name, then version), routes requests to them, and answers the
// metadata and statistics questions of the KServe v2 protocol. It knows nothing of HTTP or gRPC.
//
// Thread safety: every public method may be called from any thread. The model table is guarded
// by one mutex held only for lookups and swaps; inference never runs under it.

#include <atomic>
#include <condition_variable>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "serve/model_version.h"
#include "serve/request.h"

namespace rampart::serve {

enum class ModelControlMode { kNone, kExplicit };

struct ServerOptions {
  std::filesystem::path repository;
  ModelControlMode control_mode = ModelControlMode::kNone;
  // Models to load at start in explicit mode ("*" = all).
  std::vector<std::string> startup_models;
  // Intra-op threads per model instance unless a model says otherwise; 0 = the machine's cores
  // divided among the instances of that model.
  int threads_per_instance = 0;
  // Told about every loaded version and request (metrics); not owned, may be null, must outlive
  // the server.
  ServerObserver* observer = nullptr;
};

// What the repository index reports for one model version.
struct ModelIndexEntry {
  std::string name;
  std::string version;  // empty when the model never got as far as choosing versions
  std::string state;    // READY, UNAVAILABLE
  std::string reason;   // why it is not ready
};

class InferenceServer {
 public:
  InferenceServer(ServerOptions options, const backend::BackendRegistry& backends);
  ~InferenceServer();
  InferenceServer(const InferenceServer&) = delete;
  InferenceServer& operator=(const InferenceServer&) = delete;

  // Loads the models the control mode asks for. A model that fails is logged and recorded with
  // its reason; the others load regardless. Fails only when the repository cannot be read or an
  // explicitly requested model does not exist.
  Status LoadStartupModels();

  bool IsLive() const { return true; }
  // Ready while not shutting down.
  bool IsReady() const { return !shutting_down_.load(); }

  // Validates and queues a request; `done` is called exactly once, possibly before Infer returns
  // (for requests that fail validation) or later on an instance thread.
  void Infer(std::unique_ptr<InferRequest> request, InferCallback done);

  // A loaded version: the exact one, or the highest when version is kLatestVersion.
  // Errors: NotFound with Triton's wording.
  Result<std::shared_ptr<ModelVersion>> GetModel(std::string_view name, int64_t version) const;
  // All loaded versions of a model, ascending. Errors: NotFound.
  Result<std::vector<std::shared_ptr<ModelVersion>>> GetVersions(std::string_view name) const;
  // Every loaded version of every model, by name then version.
  std::vector<std::shared_ptr<ModelVersion>> AllModels() const;
  std::vector<ModelIndexEntry> RepositoryIndex() const;

  // Stops accepting requests and waits up to `timeout` for those in flight. Returns the number
  // still in flight at the deadline (0 when drained).
  int64_t Shutdown(std::chrono::milliseconds timeout);

 private:
  struct ModelEntry {
    std::map<int64_t, std::shared_ptr<ModelVersion>> versions;  // loaded
    std::map<int64_t, std::string> failures;                    // version -> reason
    std::string reason;  // why the model as a whole failed (bad config, ...)
  };

  void LoadModel(const std::string& name);
  void FinishRequest();

  const ServerOptions options_;
  const backend::BackendRegistry& backends_;

  mutable std::mutex models_mutex_;
  std::map<std::string, ModelEntry, std::less<>> models_;  // guarded by models_mutex_

  std::atomic<bool> shutting_down_{false};
  std::atomic<int64_t> in_flight_{0};
  std::mutex in_flight_mutex_;  // only for drained_
  std::condition_variable drained_;
};

}  // namespace rampart::serve
