#include "serve/server.h"

#include <algorithm>
#include <shared_mutex>
#include <thread>

#include "core/exceptions.h"
#include "core/logging.h"
#include "model/repository.h"
#include "serve/ensemble.h"

namespace rampart::serve {

Result<std::shared_ptr<ModelVersion>> InferenceServer::GetModel(std::string_view name,
                                                                int64_t version) const {
  std::shared_lock lock(models_mutex_);
  return GetModelLocked(name, version);
}

Result<std::shared_ptr<ModelVersion>> InferenceServer::GetModelLocked(std::string_view name,
                                                                      int64_t version) const {
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
  std::shared_lock lock(models_mutex_);
  auto it = models_.find(name);
  if (it == models_.end() || it->second.versions.empty()) {
    return NotFound("Request for unknown model: '{}' is not found", name);
  }
  std::vector<std::shared_ptr<ModelVersion>> versions;
  for (const auto& [number, loaded] : it->second.versions) versions.push_back(loaded);
  return versions;
}

std::vector<std::shared_ptr<ModelVersion>> InferenceServer::AllModels() const {
  std::shared_lock lock(models_mutex_);
  std::vector<std::shared_ptr<ModelVersion>> all;
  for (const auto& [name, entry] : models_) {
    for (const auto& [version, loaded] : entry.versions) all.push_back(loaded);
  }
  return all;
}

Result<ModelMetadata> InferenceServer::Metadata(std::string_view name, int64_t version) const {
  ASSIGN_OR_RETURN(std::shared_ptr<ModelVersion> loaded, GetModel(name, version));
  const model::ModelConfig& config = loaded->config();
  ModelMetadata metadata;
  metadata.name = config.name();
  if (Result<std::vector<std::shared_ptr<ModelVersion>>> versions = GetVersions(name);
      versions.ok()) {
    for (const auto& each : *versions) metadata.versions.push_back(std::to_string(each->version()));
  }
  metadata.platform = config.platform();
  const bool batched = config.max_batch_size() > 0;
  const auto describe = [batched](const auto& tensors, std::vector<TensorMetadata>& out) {
    for (const auto& tensor : tensors) {
      TensorMetadata& described = out.emplace_back();
      described.name = tensor.name();
      described.datatype = tensor::DataTypeName(model::ToTensorType(tensor.data_type()));
      if (batched) described.shape.push_back(-1);
      described.shape.insert(described.shape.end(), tensor.dims().begin(), tensor.dims().end());
    }
  };
  describe(config.input(), metadata.inputs);
  describe(config.output(), metadata.outputs);
  return metadata;
}

Result<std::vector<std::shared_ptr<ModelVersion>>> InferenceServer::StatisticsTargets(
    std::string_view name, int64_t version) const {
  if (name.empty()) return AllModels();
  if (version == kLatestVersion) return GetVersions(name);
  ASSIGN_OR_RETURN(std::shared_ptr<ModelVersion> loaded, GetModel(name, version));
  return std::vector<std::shared_ptr<ModelVersion>>{std::move(loaded)};
}

bool InferenceServer::IsReady() const {
  if (in_flight_.draining()) return false;
  if (!options_.strict_readiness) return true;
  std::shared_lock lock(models_mutex_);
  // As Triton: every version of every model READY, except models unloaded on request. A failed
  // reload leaves the serving versions (and readiness) as they were.
  return std::all_of(models_.begin(), models_.end(), [](const auto& item) {
    const ModelEntry& entry = item.second;
    if (!entry.failures.empty()) return false;
    if (!entry.versions.empty()) return true;
    return !entry.loading && entry.reason == kUnloadedReason;
  });
}

std::vector<ModelIndexEntry> InferenceServer::RepositoryIndex() const {
  // Clients look for the models they may load here, so those no load has tried are listed too.
  Result<std::vector<std::string>> in_repository = model::ListModels(options_.repository);
  std::shared_lock lock(models_mutex_);
  std::vector<ModelIndexEntry> index;
  if (in_repository.ok()) {
    for (std::string& name : *in_repository) {
      if (!models_.contains(name)) index.push_back({std::move(name), "", "", ""});
    }
  }
  for (const auto& [name, entry] : models_) {
    if (entry.loading && entry.versions.empty()) index.push_back({name, "", "LOADING", ""});
    if (!entry.reason.empty()) {
      // A failed reload leaves the serving versions READY; the reason still shows.
      index.push_back({name, "", entry.versions.empty() ? "UNAVAILABLE" : "READY", entry.reason});
    }
    for (const auto& [version, loaded] : entry.versions) {
      index.push_back({name, std::to_string(version), "READY", ""});
    }
    for (const auto& [version, reason] : entry.failures) {
      index.push_back({name, std::to_string(version), "UNAVAILABLE", reason});
    }
  }
  std::stable_sort(index.begin(), index.end(),
                   [](const auto& a, const auto& b) { return a.name < b.name; });
  return index;
}

void InferenceServer::Infer(std::unique_ptr<InferRequest> request, InferCallback done) {
  // Counted before the check: a Drain that found nothing in flight has set `draining` first, and
  // this request sees it (both are sequentially consistent).
  in_flight_.Enter();
  if (in_flight_.draining()) {
    in_flight_.Leave();
    Answer(done, Unavailable("the server is shutting down"));
    return;
  }
  Result<Target> target = CatchAsStatus(
      "looking the model up", [&] { return Resolve(request->model_name, request->model_version); });
  if (!target.ok()) {
    Answer(done, target.status());
    in_flight_.Leave();
    return;
  }
  Dispatch(*target, std::move(request), std::move(done), /*counted=*/true);
}

void InferenceServer::Answer(InferCallback& done, Result<std::unique_ptr<InferResponse>> result) {
  // The caller's callback runs once; what it throws is logged, and the request still leaves
  // the in-flight count after it.
  RunLoggingExceptions("answering a request", [&] { done(std::move(result)); });
}

void InferenceServer::InferStep(Target target, std::unique_ptr<InferRequest> request,
                                InferCallback done) {
  Dispatch(target, std::move(request), std::move(done), /*counted=*/false);
}

Result<InferenceServer::Target> InferenceServer::Resolve(std::string_view name, int64_t version) {
  Target target;
  // Shared: the I/O threads look models up side by side; only a swap or a canary change waits.
  std::shared_lock lock(models_mutex_);
  if (version == kLatestVersion) {
    auto it = canaries_.find(name);
    if (it != canaries_.end()) {
      target.canary = it->second;
      version = target.canary->Route();
    }
  }
  ASSIGN_OR_RETURN(target.model, GetModelLocked(name, version));
  return target;
}

void InferenceServer::Dispatch(const Target& target, std::unique_ptr<InferRequest> request,
                               InferCallback done, bool counted) {
  request->model_version = target.model->version();
  const Status refused =
      CatchAsStatus("checking the request", [&] { return target.model->Validate(*request); });
  if (!refused.ok()) {
    Answer(done, refused);
    if (counted) in_flight_.Leave();
    return;
  }
  // From here every path answers through `finish`, at the latest when an exception drops it.
  InferCallback finish = AnsweredOnce(
      [this, done = std::move(done), canary = target.canary, version = request->model_version,
       arrival = request->arrival, counted](Result<std::unique_ptr<InferResponse>> result) mutable {
        // A request its client gave up on says nothing about the version it went to.
        if (canary && (result.ok() || result.status().code() != StatusCode::kCancelled)) {
          canary->Record(version, result.ok(), NanosBetween(arrival, Clock::Real().Now()));
        }
        Answer(done, std::move(result));
        if (counted) in_flight_.Leave();
      });
  RunLoggingExceptions("queuing a request", [&] {
    if (target.model->IsEnsemble()) {
      RunEnsemble(*this, target.model, std::move(request), std::move(finish));
    } else {
      target.model->Enqueue(std::move(request), std::move(finish));
    }
  });
}

Status InferenceServer::SetInstanceShares(std::vector<InstanceShare> shares) {
  std::map<std::string, std::map<std::string, double>, std::less<>> by_model;
  for (const InstanceShare& each : shares) {
    if (each.model.empty() || each.tenant.empty()) {
      return InvalidArgument("an instance share needs a model and a tenant");
    }
    // Written to refuse NaN too.
    if (!(each.share > 0 && each.share <= 1)) {
      return InvalidArgument("the share of tenant '{}' of model '{}' is {}: it must be in (0, 1]",
                             each.tenant, each.model, each.share);
    }
    if (!by_model[each.model].emplace(each.tenant, each.share).second) {
      return InvalidArgument("tenant '{}' has two shares of model '{}'", each.tenant, each.model);
    }
  }
  std::lock_guard lock(models_mutex_);
  instance_shares_ = std::move(by_model);
  for (const auto& [name, entry] : models_) ApplySharesLocked(name, entry);
  return Status::Ok();
}

void InferenceServer::ApplySharesLocked(const std::string& name, const ModelEntry& entry) const {
  static const std::map<std::string, double> kNone;
  auto it = instance_shares_.find(name);
  const std::map<std::string, double>& shares = it == instance_shares_.end() ? kNone : it->second;
  for (const auto& [version, loaded] : entry.versions) loaded->SetTenantShares(shares);
}

Status InferenceServer::StartCanary(std::string_view name, CanaryPolicy policy) {
  RETURN_IF_ERROR(policy.Validate());
  for (int64_t version : {policy.baseline, policy.candidate}) {
    RETURN_IF_ERROR(GetModel(name, version).status());
  }
  auto controller = std::make_shared<CanaryController>(std::string(name), std::move(policy));
  std::lock_guard lock(models_mutex_);
  canaries_[std::string(name)] = std::move(controller);
  return Status::Ok();
}

Status InferenceServer::StopCanary(std::string_view name) {
  std::lock_guard lock(models_mutex_);
  auto it = canaries_.find(name);
  if (it == canaries_.end()) return NotFound("no canary runs for model '{}'", name);
  canaries_.erase(it);
  LOG_INFO("canary '{}': stopped", name);
  return Status::Ok();
}

Result<CanaryStatus> InferenceServer::GetCanary(std::string_view name) const {
  std::shared_ptr<CanaryController> canary;
  {
    std::shared_lock lock(models_mutex_);
    auto it = canaries_.find(name);
    if (it == canaries_.end()) return NotFound("no canary runs for model '{}'", name);
    canary = it->second;
  }
  return canary->Status();
}

std::vector<std::pair<std::string, CanaryStatus>> InferenceServer::Canaries() const {
  std::vector<std::pair<std::string, std::shared_ptr<CanaryController>>> all;
  {
    std::shared_lock lock(models_mutex_);
    all.assign(canaries_.begin(), canaries_.end());
  }
  std::vector<std::pair<std::string, CanaryStatus>> statuses;
  for (const auto& [name, canary] : all) statuses.emplace_back(name, canary->Status());
  return statuses;
}

int64_t InferenceServer::Shutdown(std::chrono::milliseconds timeout) {
  const int64_t left = in_flight_.Drain(timeout);
  if (left > 0) {
    // Past the deadline: what still waits for an instance is answered, not run, so the process
    // can exit (executions under way finish; nothing can interrupt a backend).
    const Status status = Unavailable("the server is shutting down");
    std::vector<std::shared_ptr<ModelVersion>> versions = AllModels();
    {
      // Replaced or unloaded versions still finishing what they hold.
      std::lock_guard lock(retire_mutex_);
      for (const Retiring& retiring : retiring_) versions.push_back(retiring.version);
    }
    for (const std::shared_ptr<ModelVersion>& version : versions) version->AbandonQueued(status);
  }
  return left;
}

}  // namespace rampart::serve
