#include "serve/server.h"

#include <algorithm>
#include <thread>

#include "core/logging.h"
#include "model/repository.h"

namespace rampart::serve {
namespace {

int TotalInstances(const model::ModelConfig& config) {
  int total = 0;
  for (const auto& group : config.instance_group()) total += group.count();
  return std::max(1, total);
}

}  // namespace

InferenceServer::InferenceServer(ServerOptions options, const backend::BackendRegistry& backends)
    : options_(std::move(options)), backends_(backends) {}

InferenceServer::~InferenceServer() {
  // Stop and join every instance thread before the tables go away.
  std::map<std::string, ModelEntry, std::less<>> models;
  {
    std::lock_guard lock(models_mutex_);
    models.swap(models_);
  }
  for (auto& [name, entry] : models) {
    for (auto& [version, loaded] : entry.versions) loaded->Stop();
  }
}

Status InferenceServer::LoadStartupModels() {
  ASSIGN_OR_RETURN(std::vector<std::string> names, model::ListModels(options_.repository));
  std::vector<std::string> wanted;
  if (options_.control_mode == ModelControlMode::kNone ||
      std::find(options_.startup_models.begin(), options_.startup_models.end(), "*") !=
          options_.startup_models.end()) {
    wanted = names;
  } else {
    for (const std::string& name : options_.startup_models) {
      if (std::find(names.begin(), names.end(), name) == names.end()) {
        return NotFound("--load-model {}: no such model in repository '{}'", name,
                        options_.repository.string());
      }
      wanted.push_back(name);
    }
  }
  for (const std::string& name : wanted) LoadModel(name);
  return Status::Ok();
}

void InferenceServer::LoadModel(const std::string& name) {
  const auto started = Clock::Real().Now();
  ModelEntry entry;
  Result<model::ModelSource> source = model::ReadModel(options_.repository / name);
  if (!source.ok()) {
    entry.reason = source.status().message();
    LOG_ERROR("model '{}' failed to load: {}", name, entry.reason);
  } else {
    const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    const int threads = options_.threads_per_instance > 0
                            ? options_.threads_per_instance
                            : std::max(1, cores / TotalInstances(source->config));
    for (int64_t version : source->versions) {
      auto loaded = ModelVersion::Load(*source, version, backends_, threads, options_.observer);
      if (loaded.ok()) {
        entry.versions[version] = std::move(loaded).value();
      } else {
        entry.failures[version] = loaded.status().message();
        LOG_ERROR("model '{}' version {} failed to load: {}", name, version,
                  loaded.status().message());
      }
    }
    if (!entry.versions.empty()) {
      LOG_INFO("model '{}' ready: {} version(s) in {:.1f} ms", name, entry.versions.size(),
               NanosBetween(started, Clock::Real().Now()) / 1e6);
    }
  }
  std::lock_guard lock(models_mutex_);
  models_[name] = std::move(entry);
}

Result<std::shared_ptr<ModelVersion>> InferenceServer::GetModel(std::string_view name,
                                                                int64_t version) const {
  std::lock_guard lock(models_mutex_);
  auto it = models_.find(name);
  if (it == models_.end() || it->second.versions.empty()) {
    return NotFound("Request for unknown model: '{}' is not found", name);
  }
  const auto& versions = it->second.versions;
  if (version == kLatestVersion) return versions.rbegin()->second;
  auto found = versions.find(version);
  if (found == versions.end()) {
    return NotFound("Request for unknown model: '{}' version {} is not found", name, version);
  }
  return found->second;
}

Result<std::vector<std::shared_ptr<ModelVersion>>> InferenceServer::GetVersions(
    std::string_view name) const {
  std::lock_guard lock(models_mutex_);
  auto it = models_.find(name);
  if (it == models_.end() || it->second.versions.empty()) {
    return NotFound("Request for unknown model: '{}' is not found", name);
  }
  std::vector<std::shared_ptr<ModelVersion>> versions;
  for (const auto& [number, loaded] : it->second.versions) versions.push_back(loaded);
  return versions;
}

std::vector<std::shared_ptr<ModelVersion>> InferenceServer::AllModels() const {
  std::lock_guard lock(models_mutex_);
  std::vector<std::shared_ptr<ModelVersion>> all;
  for (const auto& [name, entry] : models_) {
    for (const auto& [version, loaded] : entry.versions) all.push_back(loaded);
  }
  return all;
}

std::vector<ModelIndexEntry> InferenceServer::RepositoryIndex() const {
  std::lock_guard lock(models_mutex_);
  std::vector<ModelIndexEntry> index;
  for (const auto& [name, entry] : models_) {
    if (!entry.reason.empty()) index.push_back({name, "", "UNAVAILABLE", entry.reason});
    for (const auto& [version, loaded] : entry.versions) {
      index.push_back({name, std::to_string(version), "READY", ""});
    }
    for (const auto& [version, reason] : entry.failures) {
      index.push_back({name, std::to_string(version), "UNAVAILABLE", reason});
    }
  }
  return index;
}

void InferenceServer::Infer(std::unique_ptr<InferRequest> request, InferCallback done) {
  if (shutting_down_.load()) {
    done(Unavailable("the server is shutting down"));
    return;
  }
  Result<std::shared_ptr<ModelVersion>> model =
      GetModel(request->model_name, request->model_version);
  if (!model.ok()) {
    done(model.status());
    return;
  }
  if (Status valid = (*model)->Validate(*request); !valid.ok()) {
    done(std::move(valid));
    return;
  }
  in_flight_.fetch_add(1);
  (*model)->Enqueue(std::move(request), [this, done = std::move(done)](
                                            Result<std::unique_ptr<InferResponse>> result) mutable {
    done(std::move(result));
    FinishRequest();
  });
}

void InferenceServer::FinishRequest() {
  // Only a shutdown waits for the count, so the common path takes no lock.
  if (in_flight_.fetch_sub(1) == 1 && shutting_down_.load()) {
    std::lock_guard lock(in_flight_mutex_);
    drained_.notify_all();
  }
}

int64_t InferenceServer::Shutdown(std::chrono::milliseconds timeout) {
  shutting_down_.store(true);
  std::unique_lock lock(in_flight_mutex_);
  drained_.wait_for(lock, timeout, [this] { return in_flight_.load() == 0; });
  return in_flight_.load();
}

}  // namespace rampart::serve
