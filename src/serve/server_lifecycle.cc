// InferenceServer's model lifecycle: start-up loading, load/unload, poll mode, hot reload and
// the delayed release of replaced versions. See server.h for the rules.

#include <algorithm>
#include <set>

#include "core/cpu_affinity.h"
#include "core/exceptions.h"
#include "core/logging.h"
#include "core/thread_name.h"
#include "model/repository.h"
#include "serve/ensemble.h"
#include "serve/server.h"

namespace rampart::serve {
namespace {

constexpr size_t kLoadTimesKept = 64;
constexpr std::chrono::milliseconds kReleaseMargin{50};
// How often a version past its buffer window is looked at again while a request path still
// holds it.
constexpr std::chrono::milliseconds kHeldRecheck{10};

int TotalInstances(const model::ModelConfig& config) {
  int total = 0;
  for (const auto& group : config.instance_group()) total += group.count();
  return std::max(1, total);
}

}  // namespace

InferenceServer::InferenceServer(ServerOptions options, const backend::BackendRegistry& backends)
    : options_(std::move(options)), backends_(backends) {
  lifecycle_thread_ = std::thread([this] {
    NameThisThread("lifecycle");
    RunLifecycleThread();
  });
}

InferenceServer::~InferenceServer() {
  {
    std::lock_guard lock(retire_mutex_);
    stopping_ = true;
  }
  retire_changed_.notify_all();
  lifecycle_thread_.join();
  // Stop and join every instance thread (draining queues) before the tables go away.
  std::map<std::string, ModelEntry, std::less<>> models;
  {
    std::lock_guard lock(models_mutex_);
    models.swap(models_);
  }
  for (auto& [name, entry] : models) {
    for (auto& [version, loaded] : entry.versions) loaded->Stop();
  }
  for (Retiring& retiring : retiring_) retiring.version->Stop();
}

int InferenceServer::DefaultThreads(const std::string& name, const model::ModelConfig& config,
                                    size_t versions) const {
  if (options_.threads_per_instance > 0) return options_.threads_per_instance;
  // The instances' CPUs when they have their own, else the ones the process may run on.
  const int cores = !options_.instance_cpus.empty()
                        ? static_cast<int>(options_.instance_cpus.size())
                        : UsableCpuCount();
  // Every instance of every model shares the cores: under load they all compute at once, and an
  // instance given more threads than its share only makes them wait for each other (a product
  // split over threads waits for its slowest part).
  int instances = TotalInstances(config) * static_cast<int>(std::max<size_t>(1, versions));
  {
    std::shared_lock lock(models_mutex_);
    for (const auto& [other, entry] : models_) {
      if (other == name) continue;
      for (const auto& [version, loaded] : entry.versions) {
        if (!loaded->IsEnsemble()) instances += TotalInstances(loaded->config());
      }
    }
  }
  instances = std::max(instances, planned_instances_);
  const int threads = std::max(1, cores / instances);
  LOG_INFO(
      "model '{}': {} intra-op thread(s) per instance: {} core(s) shared by {} model instance(s) "
      "(--threads-per-instance or the model's INTRA_OP_THREAD_COUNT parameter sets it)",
      name, threads, cores, instances);
  return threads;
}

int InferenceServer::PlannedInstances(const std::vector<std::string>& names) const {
  int instances = 0;
  for (const std::string& name : names) {
    Result<model::ModelSource> source = model::ReadModel(options_.repository / name);
    if (source.ok() && source->config.platform() != model::kEnsemblePlatform) {
      instances += TotalInstances(source->config) * static_cast<int>(source->versions.size());
    }
  }
  return instances;
}

bool InferenceServer::IsEnsembleInRepository(const std::string& name) const {
  Result<model::ModelSource> source = model::ReadModel(options_.repository / name);
  return source.ok() && source->config.platform() == model::kEnsemblePlatform;
}

void InferenceServer::EnsemblesLast(std::vector<std::string>& names) const {
  // Their steps' models must be serving first.
  std::stable_partition(names.begin(), names.end(),
                        [this](const std::string& name) { return !IsEnsembleInRepository(name); });
}

Status InferenceServer::LoadStartupModels() {
  ASSIGN_OR_RETURN(std::vector<std::string> names, model::ListModels(options_.repository));
  std::vector<std::string> wanted;
  const bool all = options_.control_mode != ModelControlMode::kExplicit ||
                   std::find(options_.startup_models.begin(), options_.startup_models.end(), "*") !=
                       options_.startup_models.end();
  if (all) {
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
  EnsemblesLast(wanted);
  // Models asked for by name bring their ensembles' step models along, as the repository API's
  // loads do; when every model is wanted, the step models load in their own turn.
  const LoadReason reason = all ? LoadReason::kRequested : LoadReason::kRequestedWithSteps;
  std::lock_guard lock(lifecycle_mutex_);
  // The first models' thread budgets count the instances of those that load after them.
  planned_instances_ = PlannedInstances(wanted);
  for (const std::string& name : wanted) {
    const bool polling = options_.control_mode == ModelControlMode::kPoll;
    if (polling) last_seen_[name] = model::Fingerprint(options_.repository / name);
    // Failures are recorded in the index and logged; the other models load regardless. A model
    // an earlier one brought in as a step is not loaded again.
    if (reason == LoadReason::kRequestedWithSteps && GetModel(name, kLatestVersion).ok()) {
      std::lock_guard models_lock(models_mutex_);
      models_[name].requested = true;
      continue;
    }
    // As Poll does, a failure remembers the files it failed on, so the first poll does not take
    // them for a change and retry them.
    if (!Load(name, std::nullopt, reason).ok() && polling) {
      std::lock_guard models_lock(models_mutex_);
      models_[name].fingerprint = last_seen_[name];
    }
  }
  planned_instances_ = 0;  // later loads count the instances then serving
  return Status::Ok();
}

Status InferenceServer::LoadModel(std::string_view name, std::optional<std::string> config_json) {
  // Unavailable (HTTP 503), as Triton answers.
  if (options_.control_mode != ModelControlMode::kExplicit) {
    return Unavailable(
        "explicit model load / unload is not allowed in model control mode '{}'; start with "
        "--model-control-mode=explicit",
        options_.control_mode == ModelControlMode::kPoll ? "poll" : "none");
  }
  std::lock_guard lock(lifecycle_mutex_);
  // Checked once this call's turn has come: loads queued behind a long one while a shutdown
  // began would otherwise hold the exit past its timeout.
  if (in_flight_.draining()) return Unavailable("the server is shutting down");
  return Load(std::string(name), std::move(config_json), LoadReason::kRequestedWithSteps);
}

Status InferenceServer::UnloadModel(std::string_view name, bool unload_dependents) {
  if (options_.control_mode != ModelControlMode::kExplicit) {
    return Unavailable("explicit model load / unload is not allowed in model control mode '{}'",
                       options_.control_mode == ModelControlMode::kPoll ? "poll" : "none");
  }
  std::lock_guard lock(lifecycle_mutex_);
  if (in_flight_.draining()) return Unavailable("the server is shutting down");
  return Unload(std::string(name), unload_dependents);
}

Status InferenceServer::LoadStepModels(const std::string& ensemble,
                                       const model::ModelConfig& config) {
  for (const auto& step : config.ensemble_scheduling().step()) {
    const std::string& model = step.model_name();
    if (loads_under_way_.contains(model) || GetModel(model, kLatestVersion).ok()) continue;
    LOG_INFO("ensemble '{}': loading its step model '{}'", ensemble, model);
    if (Status loaded = Load(model, std::nullopt, LoadReason::kStep); !loaded.ok()) {
      return InvalidArgument("ensemble '{}': step model '{}' failed to load: {}", ensemble, model,
                             loaded.message());
    }
  }
  return Status::Ok();
}

Status InferenceServer::Load(const std::string& name, std::optional<std::string> config_json,
                             LoadReason reason) {
  const SteadyTime started = Clock::Real().Now();
  const std::filesystem::path directory = options_.repository / name;
  std::error_code error;
  if (name.empty() || name.find('/') != std::string::npos || name[0] == '.' ||
      !std::filesystem::is_directory(directory, error)) {
    return NotFound("failed to load '{}': no such model in the repository", name);
  }
  const std::string fingerprint = model::Fingerprint(directory);
  loads_under_way_.insert(name);
  struct LoadEnds {
    std::set<std::string>& under_way;
    const std::string& name;
    ~LoadEnds() { under_way.erase(name); }
  } load_ends{loads_under_way_, name};

  // What is serving now; new versions are loaded beside it.
  std::map<int64_t, std::shared_ptr<ModelVersion>> serving;
  std::map<int64_t, std::string> serving_files;
  std::string serving_config;
  {
    std::lock_guard lock(models_mutex_);
    ModelEntry& entry = models_[name];
    serving = entry.versions;
    serving_files = entry.version_files;
    serving_config = entry.config;
    if (serving.empty()) entry.loading = true;
  }
  // `version`: the version that failed, when one did.
  const auto fail = [&](const Status& status, std::optional<int64_t> version = std::nullopt) {
    std::lock_guard lock(models_mutex_);
    ModelEntry& entry = models_[name];
    entry.loading = false;
    if (entry.versions.empty()) {
      entry.reason = status.message();
    } else if (version && !entry.versions.contains(*version)) {
      // A new version that failed shows in the index (and readiness) as Triton shows it.
      entry.failures[*version] = status.message();
    }
    // Otherwise the index stays as it was, as Triton's does: the serving versions READY.
    LOG_ERROR("model '{}' failed to load{}: {}", name,
              entry.versions.empty() ? "" : " (the serving versions stay)", status.message());
    return status;
  };

  Result<model::ModelSource> source = model::ReadModel(directory);
  if (config_json) {
    Result<model::ModelConfig> override =
        model::ParseConfigJson(*config_json, fmt::format("model '{}' config override", name));
    source = override.ok() ? model::ReadModelWithConfig(directory, std::move(override).value())
                           : Result<model::ModelSource>(override.status());
  }
  if (!source.ok()) return fail(source.status());
  if (source->config.platform() == model::kEnsemblePlatform) {
    if (reason != LoadReason::kRequested) {
      if (Status steps = LoadStepModels(name, source->config); !steps.ok()) return fail(steps);
    }
    std::vector<std::shared_ptr<ModelVersion>> step_models;
    std::vector<const model::ModelConfig*> step_configs;
    for (const auto& step : source->config.ensemble_scheduling().step()) {
      const int64_t version = step.model_version() > 0 ? step.model_version() : kLatestVersion;
      Result<std::shared_ptr<ModelVersion>> ready = GetModel(step.model_name(), version);
      if (!ready.ok()) {
        return fail(InvalidArgument("ensemble '{}': step model '{}' is not loaded: {}", name,
                                    step.model_name(), ready.status().message()));
      }
      step_configs.push_back(&(*ready)->config());
      step_models.push_back(std::move(ready).value());
    }
    if (Status tensors = CheckEnsembleTensors(source->config, step_configs); !tensors.ok()) {
      return fail(tensors);
    }
    if (Status acyclic = CheckEnsembleCycle(name, source->config); !acyclic.ok()) {
      return fail(acyclic);
    }
  }
  const std::string config = source->config.SerializeAsString();

  std::map<int64_t, std::shared_ptr<ModelVersion>> next;
  std::map<int64_t, std::string> next_files;
  std::optional<int> threads;  // decided once, for the first version that is built
  for (int64_t version : source->versions) {
    next_files[version] = model::VersionFingerprint(directory, version);
    // A version whose config and files are unchanged keeps serving as it is.
    auto same = serving.find(version);
    if (same != serving.end() && config == serving_config &&
        serving_files[version] == next_files[version]) {
      next[version] = same->second;
      continue;
    }
    const bool ensemble = source->config.platform() == model::kEnsemblePlatform;
    if (!threads)
      threads = ensemble ? 1 : DefaultThreads(name, source->config, source->versions.size());
    Result<std::shared_ptr<ModelVersion>> loaded =
        ModelVersion::Load(*source, version, backends_,
                           {.default_threads = *threads,
                            .direct_execution_limit = options_.direct_execution_limit,
                            .default_max_queue_size = options_.default_max_queue_size,
                            .cpus = options_.instance_cpus,
                            .observer = options_.observer});
    // All or nothing: a version that fails keeps every serving version in place.
    if (!loaded.ok()) return fail(loaded.status(), version);
    next[version] = std::move(loaded).value();
  }

  std::vector<std::shared_ptr<ModelVersion>> replaced;
  {
    std::lock_guard lock(models_mutex_);
    ModelEntry& entry = models_[name];
    for (auto& [version, loaded] : entry.versions) {
      auto kept = next.find(version);
      if (kept == next.end() || kept->second != loaded) replaced.push_back(loaded);
    }
    entry.versions = std::move(next);
    ApplySharesLocked(name, entry);  // before any request can reach the new versions
    entry.failures.clear();
    entry.reason.clear();
    entry.loading = false;
    // A step model loaded only for an ensemble (never serving before) is not requested.
    entry.requested = reason != LoadReason::kStep || (!serving.empty() && entry.requested);
    entry.config = config;
    entry.fingerprint = fingerprint;
    entry.version_files = std::move(next_files);
    EndCanaryWithoutItsVersionsLocked(name, entry);
  }
  const int64_t load_ms = NanosBetween(started, Clock::Real().Now()) / 1'000'000;
  load_times_ms_.push_back(load_ms);
  if (load_times_ms_.size() > kLoadTimesKept) load_times_ms_.pop_front();
  LOG_INFO("model '{}' ready: version(s) {} in {} ms{}", name, fmt::join(source->versions, ", "),
           load_ms,
           replaced.empty() ? ""
                            : fmt::format("; {} old version(s) released in {} ms", replaced.size(),
                                          ReleaseDelay().count()));
  Retire(std::move(replaced));
  return Status::Ok();
}

void InferenceServer::EndCanaryWithoutItsVersionsLocked(const std::string& name,
                                                        const ModelEntry& entry) {
  auto it = canaries_.find(name);
  if (it == canaries_.end()) return;
  // The versions it still routes to: both while it runs, one once it has decided (its final
  // status stays readable while that one is loaded).
  const CanaryStatus status = it->second->Status();
  std::vector<int64_t> routed = {status.policy.baseline, status.policy.candidate};
  if (status.state == CanaryState::kPromoted) routed = {status.policy.candidate};
  if (status.state == CanaryState::kRolledBack) routed = {status.policy.baseline};
  for (int64_t version : routed) {
    if (!entry.versions.contains(version)) {
      // Requests routed to it would fail NotFound before the canary could count them.
      LOG_WARN("canary '{}': stopped: version {} is no longer loaded; requests go to the latest",
               name, version);
      canaries_.erase(it);
      return;
    }
  }
}

Status InferenceServer::CheckEnsembleCycle(const std::string& name,
                                           const model::ModelConfig& config) const {
  // Depth first through the loaded ensembles the steps call: every cycle passes through the
  // model being loaded, as the ones loaded before were checked the same way.
  struct Visit {
    const model::ModelConfig* config;
    std::vector<std::string> path;  // from `name`
  };
  std::vector<std::shared_ptr<ModelVersion>> held;  // keeps the configs below alive
  std::vector<Visit> stack = {{&config, {name}}};
  std::set<std::string> seen;
  while (!stack.empty()) {
    Visit visit = std::move(stack.back());
    stack.pop_back();
    for (const auto& step : visit.config->ensemble_scheduling().step()) {
      std::vector<std::string> path = visit.path;
      path.push_back(step.model_name());
      if (step.model_name() == name) {
        return InvalidArgument("ensemble '{}': its steps call it again ({})", name,
                               fmt::join(path, " -> "));
      }
      const int64_t version = step.model_version() > 0 ? step.model_version() : kLatestVersion;
      Result<std::shared_ptr<ModelVersion>> model = GetModel(step.model_name(), version);
      if (!model.ok() || !(*model)->IsEnsemble()) continue;
      if (!seen.insert(step.model_name()).second) continue;
      stack.push_back({&(*model)->config(), std::move(path)});
      held.push_back(std::move(model).value());
    }
  }
  return Status::Ok();
}

Status InferenceServer::Unload(const std::string& name, bool unload_dependents) {
  std::vector<std::shared_ptr<ModelVersion>> removed;
  {
    std::lock_guard lock(models_mutex_);
    auto it = models_.find(name);
    if (it == models_.end() || it->second.versions.empty()) {
      return Status::Ok();  // as Triton: nothing to do (also for a name not in the repository)
    }
    for (auto& [version, loaded] : it->second.versions) removed.push_back(loaded);
    it->second = ModelEntry();
    it->second.reason = kUnloadedReason;
    EndCanaryWithoutItsVersionsLocked(name, it->second);
  }
  LOG_INFO("model '{}' unloaded; {} version(s) finish their queued requests", name, removed.size());
  // Its versions share one config: the steps, when it is an ensemble.
  std::vector<std::string> steps;
  if (removed.back()->IsEnsemble()) {
    for (const auto& step : removed.back()->config().ensemble_scheduling().step()) {
      if (std::find(steps.begin(), steps.end(), step.model_name()) == steps.end()) {
        steps.push_back(step.model_name());
      }
    }
  }
  Retire(std::move(removed));
  // The loaded ensembles that call it cannot run any more (Triton unloads them too); each takes
  // its own callers along. No cycle: loading refuses one (CheckEnsembleCycle).
  const auto calls = [](const ModelVersion& version, const std::string& model) {
    const auto& config_steps = version.config().ensemble_scheduling().step();
    return std::any_of(config_steps.begin(), config_steps.end(),
                       [&](const auto& step) { return step.model_name() == model; });
  };
  for (const std::shared_ptr<ModelVersion>& version : AllModels()) {
    if (!version->IsEnsemble() || !calls(*version, name)) continue;
    LOG_INFO("ensemble '{}' unloaded with '{}', which it calls", version->name(), name);
    (void)Unload(version->name(), /*unload_dependents=*/false);  // no-op if already taken along
  }
  if (!unload_dependents) return Status::Ok();
  // Triton's cascade: a step model the ensemble's load brought in goes too once no loaded
  // ensemble calls it; the models loaded on request stay.
  for (const std::string& step : steps) {
    {
      std::lock_guard lock(models_mutex_);
      auto it = models_.find(step);
      if (it == models_.end() || it->second.versions.empty() || it->second.requested) continue;
    }
    const std::vector<std::shared_ptr<ModelVersion>> loaded = AllModels();
    if (std::any_of(loaded.begin(), loaded.end(), [&](const auto& version) {
          return version->IsEnsemble() && calls(*version, step);
        })) {
      continue;
    }
    LOG_INFO("model '{}' unloaded with ensemble '{}', whose load brought it in", step, name);
    (void)Unload(step, /*unload_dependents=*/true);
  }
  return Status::Ok();
}

std::chrono::milliseconds InferenceServer::ReleaseDelay() const {
  if (load_times_ms_.empty()) return kReleaseMargin;
  std::vector<int64_t> sorted(load_times_ms_.begin(), load_times_ms_.end());
  std::sort(sorted.begin(), sorted.end());
  const size_t p90 = std::min(sorted.size() - 1, (sorted.size() * 9) / 10);
  return std::chrono::milliseconds(sorted[p90]) + kReleaseMargin;
}

void InferenceServer::Retire(std::vector<std::shared_ptr<ModelVersion>> versions) {
  if (versions.empty()) return;
  const SteadyTime release_at = Clock::Real().Now() + ReleaseDelay();
  {
    std::lock_guard lock(retire_mutex_);
    for (auto& version : versions) retiring_.push_back({release_at, std::move(version)});
  }
  retire_changed_.notify_all();
}

size_t InferenceServer::RetiringVersions() const {
  std::lock_guard lock(retire_mutex_);
  return retiring_.size();
}

void InferenceServer::Poll() {
  std::lock_guard lock(lifecycle_mutex_);
  Result<std::vector<std::string>> names = model::ListModels(options_.repository);
  if (!names.ok()) {
    LOG_WARN("poll: {}", names.status().message());
    return;
  }
  std::map<std::string, std::string> seen;
  std::vector<std::string> changed;
  for (const std::string& name : *names) {
    const std::string fingerprint = model::Fingerprint(options_.repository / name);
    seen[name] = fingerprint;
    // Act only on files that looked the same one interval ago: copies in progress wait.
    auto before = last_seen_.find(name);
    if (before == last_seen_.end() || before->second != fingerprint) continue;
    std::lock_guard models_lock(models_mutex_);
    auto it = models_.find(name);
    if (it == models_.end() || it->second.fingerprint != fingerprint) changed.push_back(name);
  }
  EnsemblesLast(changed);
  bool loaded_any = false;
  for (const std::string& name : changed) {
    if (in_flight_.draining()) return;  // shutting down: no more loads
    bool known = false;
    {
      std::lock_guard models_lock(models_mutex_);
      known = models_.contains(name);
    }
    LOG_INFO("poll: model '{}' {}", name, known ? "changed; reloading" : "appeared; loading");
    if (Load(name, std::nullopt, LoadReason::kRequested).ok()) {
      loaded_any = true;
    } else {
      // Remember the failed files so the same broken copy is not retried every interval.
      std::lock_guard models_lock(models_mutex_);
      models_[name].fingerprint = seen[name];
    }
  }
  // An ensemble that failed for want of a step model may load now that one did.
  std::vector<std::string> waiting;
  std::vector<std::string> gone;
  {
    std::lock_guard models_lock(models_mutex_);
    for (const auto& [name, entry] : models_) {
      if (!seen.contains(name)) {
        gone.push_back(name);
      } else if (loaded_any && entry.versions.empty() && !entry.reason.empty() &&
                 std::find(changed.begin(), changed.end(), name) == changed.end()) {
        waiting.push_back(name);
      }
    }
  }
  for (const std::string& name : waiting) {
    if (in_flight_.draining()) return;
    if (!IsEnsembleInRepository(name)) continue;
    LOG_INFO("poll: retrying ensemble '{}' after a model loaded", name);
    (void)Load(name, std::nullopt, LoadReason::kRequested);
  }
  for (const std::string& name : gone) {
    bool serving = false;
    {
      std::lock_guard models_lock(models_mutex_);
      auto it = models_.find(name);
      serving = !it->second.versions.empty();
      // A model that never loaded (or failed) leaves no entry behind: readiness and the index
      // follow the repository.
      if (!serving) models_.erase(it);
    }
    if (serving) {
      LOG_INFO("poll: model '{}' left the repository; unloading", name);
      (void)Unload(name, /*unload_dependents=*/false);
    }
  }
  last_seen_ = std::move(seen);
}

void InferenceServer::RunLifecycleThread() {
  const bool polling = options_.control_mode == ModelControlMode::kPoll;
  SteadyTime next_poll = Clock::Real().Now() + options_.poll_interval;
  std::unique_lock lock(retire_mutex_);
  while (!stopping_) {
    const SteadyTime now = Clock::Real().Now();
    // Release versions whose buffer window has passed and that no request path holds any more
    // (the version left the table, so nothing can look it up again once this is the only
    // reference). Stop() drains their queues, so it runs without the lock.
    std::vector<std::shared_ptr<ModelVersion>> due;
    SteadyTime next_release = SteadyTime::max();
    for (auto it = retiring_.begin(); it != retiring_.end();) {
      const bool window_passed = it->release_at <= now;
      if (window_passed && it->version.use_count() == 1) {
        due.push_back(std::move(it->version));
        it = retiring_.erase(it);
      } else {
        next_release = std::min(next_release, window_passed ? now + kHeldRecheck : it->release_at);
        ++it;
      }
    }
    if (!due.empty()) {
      lock.unlock();
      for (auto& version : due) {
        RunLoggingExceptions("stopping a replaced model version", [&] { version->Stop(); });
      }
      due.clear();
      lock.lock();
      continue;
    }
    if (polling && now >= next_poll) {
      lock.unlock();
      RunLoggingExceptions("polling the model repository", [this] { Poll(); });
      lock.lock();
      next_poll = Clock::Real().Now() + options_.poll_interval;
      continue;
    }
    retire_changed_.wait_until(lock, polling ? std::min(next_release, next_poll) : next_release);
  }
}

}  // namespace rampart::serve
