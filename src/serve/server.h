#pragma once

// InferenceServer: the narrow core API every protocol front end goes through.
//
// It owns the loaded models (by name, then version), routes requests to them, answers the
// metadata and statistics questions of the KServe v2 protocol, and runs the model lifecycle:
// control modes (none / explicit / poll), load and unload, and hot reload. It knows nothing of
// HTTP or gRPC.
//
// Hot reload: a (re)load builds and warms every new version beside the serving ones, then swaps
// the model's version table in one step under the table mutex. Versions that left the table keep
// running what they already have; they are stopped (draining their queues) only after a buffer
// window of P90(recent load times) + 50 ms, and not before every request path that looked one up
// has let it go (a request between its lookup and its queue, an ensemble in flight), so a
// request that found a version before the swap always finds it working, however long its thread
// was held up. A load that fails leaves the serving versions untouched.
//
// Thread safety: every public method may be called from any thread. Lifecycle operations run one
// at a time (lifecycle_mutex_); the model table is guarded by models_mutex_, held shared for
// lookups (so requests never wait for each other) and exclusively only for swaps, so inference
// never waits for a load.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "backend/backend.h"
#include "core/in_flight.h"
#include "serve/canary.h"
#include "serve/model_version.h"
#include "serve/request.h"
#include "serve/tenant_shares.h"

namespace rampart::serve {

enum class ModelControlMode { kNone, kExplicit, kPoll };

struct ServerOptions {
  std::filesystem::path repository;
  ModelControlMode control_mode = ModelControlMode::kNone;
  // Models to load at start in explicit mode ("*" = all).
  std::vector<std::string> startup_models;
  // Poll mode: how often the repository is rescanned. A change is loaded once the model's files
  // have looked the same for one whole interval (so a half-copied version is never loaded).
  std::chrono::milliseconds poll_interval{15000};
  // Intra-op threads per model instance unless a model says otherwise; 0 = the machine's cores
  // divided among the instances of that model.
  int threads_per_instance = 0;
  // A request for an idle instance whose recent executions took at most this long runs on the
  // calling (I/O) thread instead of being handed to the instance's thread; zero never does. See
  // Scheduler.
  std::chrono::nanoseconds direct_execution_limit{std::chrono::microseconds(50)};
  // The bound of a model queue (each priority level's) whose config sets no max_queue_size; 0 is
  // unbounded, as Triton's default. Requests past it are refused at once (503).
  size_t default_max_queue_size = BatchPolicy::kDefaultMaxQueueSize;
  // CPUs the model instance threads run on (all instances of all models); empty = any. When set,
  // the default intra-op budget divides these among a model's instances instead of every core.
  std::vector<int> instance_cpus;
  // Triton's --strict-readiness: the server is ready only while every model it knows of serves
  // all its versions (models unloaded on request do not count; loading or failed ones do).
  // Otherwise it is ready whenever it is not shutting down.
  bool strict_readiness = true;
  // Told about every loaded version and request (metrics); not owned, may be null, must outlive
  // the server.
  ServerObserver* observer = nullptr;
};

// A tensor as model metadata describes it: its wire datatype name ("FP32", "BYTES") and its
// shape, the batch dimension (-1) first when the model batches.
struct TensorMetadata {
  std::string name;
  std::string datatype;
  std::vector<int64_t> shape;
};

// A model's metadata, protocol-neutral: each front end writes this in its own form.
struct ModelMetadata {
  std::string name;
  std::vector<std::string> versions;  // every loaded version, ascending
  std::string platform;
  std::vector<TensorMetadata> inputs;
  std::vector<TensorMetadata> outputs;
};

// What the repository index reports for one model (version).
struct ModelIndexEntry {
  std::string name;
  std::string version;  // empty when the model never got as far as choosing versions
  // READY, LOADING, UNAVAILABLE; empty for a model of the repository that no load has tried
  // (Triton lists those by name only).
  std::string state;
  std::string reason;  // why it is not ready
};

class InferenceServer {
 public:
  InferenceServer(ServerOptions options, const backend::BackendRegistry& backends);
  ~InferenceServer();
  InferenceServer(const InferenceServer&) = delete;
  InferenceServer& operator=(const InferenceServer&) = delete;

  // Loads the models the control mode asks for, and starts polling in poll mode. A model that
  // fails is logged and recorded with its reason; the others load regardless. Fails only when the
  // repository cannot be read or an explicitly requested model does not exist.
  Status LoadStartupModels();

  // Loads or reloads one model (the repository API). `config_json`, when given, replaces the
  // model's config.pbtxt (protobuf JSON mapping, Triton's field names). An ensemble's step models
  // that are not serving are loaded first, recursively, as Triton loads an ensemble's composing
  // models (those stay loaded if the ensemble then fails). Errors: Unavailable (as Triton)
  // outside explicit mode, NotFound for a model not in the repository, InvalidArgument for a bad
  // config or a step model that failed, or why a version failed to load (the serving versions
  // stay); Unavailable once a shutdown has begun.
  Status LoadModel(std::string_view name, std::optional<std::string> config_json = std::nullopt);
  // Unloads every version of a model, and the loaded ensembles that call it (directly or through
  // other ensembles), which could not run any more, as Triton does; requests already queued still
  // finish. With `unload_dependents` (Triton's flag), unloading an ensemble also unloads the step
  // models its load brought in (not those loaded on request), once no loaded ensemble calls them,
  // recursively. A model that is not loaded, or not in the repository at all, is no error (as in
  // Triton): nothing happens. Errors: Unavailable outside explicit mode or once a shutdown has
  // begun.
  Status UnloadModel(std::string_view name, bool unload_dependents = false);
  // One poll-mode scan: loads new and changed models whose files have settled, unloads removed
  // ones. Runs by itself every poll interval in poll mode; public for tests.
  void Poll();

  bool IsLive() const { return true; }
  // Not while shutting down; with strict readiness, only while every model is available.
  bool IsReady() const;
  // OK when a model version (kLatestVersion: the highest) is loaded and takes requests; strict
  // readiness does not change it. As Triton answers: NotFound (GetModel's wording) for a model or
  // version not loaded, Unavailable once a shutdown has begun.
  Status ModelReady(std::string_view name, int64_t version) const {
    RETURN_IF_ERROR(GetModel(name, version).status());
    return in_flight_.draining() ? Unavailable("Server not ready") : Status::Ok();
  }

  // Validates and queues a request; `done` is called exactly once, possibly before Infer returns
  // (for requests that fail validation) or later on an instance thread. Refused once a shutdown
  // has begun; a request taken is counted until it is answered, and Shutdown waits for it.
  void Infer(std::unique_ptr<InferRequest> request, InferCallback done);
  // Where a request goes: the loaded version, and the canary that chose it, if one did.
  struct Target {
    std::shared_ptr<ModelVersion> model;
    std::shared_ptr<CanaryController> canary;
  };
  // The version a request for `name` and `version` (kLatestVersion: the highest, or the canary's
  // choice while one runs) goes to now. An ensemble resolves its steps' models when its request
  // starts and holds them until it ends, as Triton's ensemble holds its models' handles, so an
  // unload or reload meanwhile does not fail the steps still to run (a canary's choice is made
  // then too, for every step, also one a failure leaves unrun). Errors: NotFound as GetModel.
  Result<Target> Resolve(std::string_view name, int64_t version);
  // Infer for an ensemble's step, to the version Resolve gave: part of a request already counted
  // in flight, so it is not refused while a shutdown drains (the ensemble's answer waits for it).
  // `target` is held until the request is queued (or refused).
  void InferStep(Target target, std::unique_ptr<InferRequest> request, InferCallback done);

  // A loaded version: the exact one, or the highest when version is kLatestVersion.
  // Errors: NotFound with Triton's wording.
  Result<std::shared_ptr<ModelVersion>> GetModel(std::string_view name, int64_t version) const;
  // All loaded versions of a model, ascending. Errors: NotFound.
  Result<std::vector<std::shared_ptr<ModelVersion>>> GetVersions(std::string_view name) const;
  // Every loaded version of every model, by name then version.
  std::vector<std::shared_ptr<ModelVersion>> AllModels() const;
  // The metadata of a loaded version (kLatestVersion: the highest). Errors: NotFound as GetModel.
  Result<ModelMetadata> Metadata(std::string_view name, int64_t version) const;
  // The versions a statistics request covers: every model's when `name` is empty, every
  // version of `name` for kLatestVersion, else the one. Errors: NotFound as GetModel.
  Result<std::vector<std::shared_ptr<ModelVersion>>> StatisticsTargets(std::string_view name,
                                                                       int64_t version) const;
  std::vector<ModelIndexEntry> RepositoryIndex() const;

  // Canary releases (serve/canary.h): requests that name no version are split between the
  // policy's baseline and candidate versions. Errors: NotFound when either version is not
  // loaded, InvalidArgument for a bad policy. Starting again replaces a running canary.
  Status StartCanary(std::string_view name, CanaryPolicy policy);
  Status StopCanary(std::string_view name);  // NotFound when none runs
  Result<CanaryStatus> GetCanary(std::string_view name) const;
  std::vector<std::pair<std::string, CanaryStatus>> Canaries() const;

  // The tenants' shares of local models' instance time (serve/tenant_shares.h), replacing the
  // previous ones: every loaded version of each model named applies its tenants' shares to its
  // own instances, and so do versions loaded later; models not named have none. Requests carry
  // their tenant in InferRequest::tenant. Errors: InvalidArgument for a share outside (0, 1], an
  // empty model or tenant, or a model and tenant named twice; nothing changes then.
  Status SetInstanceShares(std::vector<InstanceShare> shares);

  // Stops accepting requests and waits up to `timeout` for those in flight. Returns the number
  // still in flight at the deadline (0 when drained); those still queued then are answered
  // Unavailable instead of run, so that stopping the models does not outlast the timeout.
  int64_t Shutdown(std::chrono::milliseconds timeout);

  // Versions that left the model table (replaced or unloaded) and are not stopped yet: within
  // their buffer window, or still held by a request on its way to them.
  size_t RetiringVersions() const;

 private:
  // Validates the request against `target` and queues it there (or runs the ensemble). `counted`:
  // the request was entered in in_flight_, which its answer leaves.
  void Dispatch(const Target& target, std::unique_ptr<InferRequest> request, InferCallback done,
                bool counted);
  // Calls a request's callback; an exception it throws is logged, not propagated.
  static void Answer(InferCallback& done, Result<std::unique_ptr<InferResponse>> result);
  // ModelEntry::reason of a model unloaded on request (the repository index shows it; Triton's
  // wording).
  static constexpr std::string_view kUnloadedReason = "unloaded";

  // GetModel with models_mutex_ held.
  Result<std::shared_ptr<ModelVersion>> GetModelLocked(std::string_view name,
                                                       int64_t version) const;

  struct ModelEntry {
    std::map<int64_t, std::shared_ptr<ModelVersion>> versions;  // serving
    std::map<int64_t, std::string> failures;                    // version -> reason
    std::string reason;    // why the model as a whole is not serving (bad config, ...)
    bool loading = false;  // a first load is under way
    // Loaded on request (every model in none and poll modes), not only as an ensemble's step.
    bool requested = false;
    std::string config;       // serialized config the versions were loaded with
    std::string fingerprint;  // the files the versions were loaded from (poll mode)
    std::map<int64_t, std::string> version_files;  // per-version file digests
  };
  // With models_mutex_ held: gives `entry`'s versions the shares of model `name`.
  void ApplySharesLocked(const std::string& name, const ModelEntry& entry) const;

  struct Retiring {
    SteadyTime release_at;
    std::shared_ptr<ModelVersion> version;
  };

  // Why Load runs: on request (in explicit mode, loading the ensemble's step models that are not
  // serving first), or as such a step model (Triton's implicitly loaded composing models).
  enum class LoadReason { kRequested, kRequestedWithSteps, kStep };

  // The buffer window a replaced version keeps running for (P90 of recent loads + 50 ms).
  // REQUIRES: lifecycle_mutex_ held (as for the methods below).
  std::chrono::milliseconds ReleaseDelay() const;
  Status Load(const std::string& name, std::optional<std::string> config_json, LoadReason reason);
  // Loads the models `config`'s steps name that are not serving (LoadReason::kStep), skipping
  // those whose load is already under way (an ensemble that calls itself fails its own checks).
  Status LoadStepModels(const std::string& ensemble, const model::ModelConfig& config);
  // Also unloads the loaded ensembles that call the model, directly or through other ensembles.
  // OK when the model is not loaded.
  Status Unload(const std::string& name, bool unload_dependents);
  void Retire(std::vector<std::shared_ptr<ModelVersion>> versions);
  void RunLifecycleThread();
  // Intra-op threads for each instance of model `name`, which loads `versions` versions: the
  // cores (--instance-cpus' when given) divided among every instance of every version of every
  // model loaded or planned, this one's included; logs its choice. REQUIRES: lifecycle_mutex_
  // held (as the one below).
  int DefaultThreads(const std::string& name, const model::ModelConfig& config,
                     size_t versions) const;
  // The instances of every version of the models `names` (read from the repository; ensembles
  // have none).
  int PlannedInstances(const std::vector<std::string>& names) const;
  // With models_mutex_ held, after `entry`'s versions changed: ends the model's canary when its
  // baseline or candidate version is no longer loaded.
  void EndCanaryWithoutItsVersionsLocked(const std::string& name, const ModelEntry& entry);
  // Whether the repository's `name` is an ensemble (false when its config does not read).
  bool IsEnsembleInRepository(const std::string& name) const;
  // Reorders model names so that ensembles come after the models their steps may need.
  void EnsemblesLast(std::vector<std::string>& names) const;
  // InvalidArgument when the ensemble `name` with `config` would call itself through the loaded
  // ensembles its steps name (directly calling itself is ValidateEnsemble's error).
  Status CheckEnsembleCycle(const std::string& name, const model::ModelConfig& config) const;

  const ServerOptions options_;
  const backend::BackendRegistry& backends_;

  std::mutex lifecycle_mutex_;  // one load/unload/poll at a time; taken before models_mutex_
  std::map<std::string, std::string> last_seen_;  // poll: fingerprints one scan ago
  std::deque<int64_t> load_times_ms_;             // recent load durations
  int planned_instances_ = 0;  // the start-up's models' instances, counted before they load
  std::set<std::string> loads_under_way_;  // models whose Load call is in progress

  // Taken shared for lookups (every request takes it once), exclusively to change the tables.
  mutable std::shared_mutex models_mutex_;
  std::map<std::string, ModelEntry, std::less<>> models_;  // guarded by models_mutex_
  std::map<std::string, std::shared_ptr<CanaryController>, std::less<>>
      canaries_;  // guarded by models_mutex_
  // Model -> tenant -> share of its instance time (SetInstanceShares); guarded by models_mutex_.
  std::map<std::string, std::map<std::string, double>, std::less<>> instance_shares_;

  // Replaced versions waiting for their buffer window and their last request path, and the
  // thread that releases them (and polls, in poll mode).
  mutable std::mutex retire_mutex_;
  std::condition_variable retire_changed_;
  std::vector<Retiring> retiring_;  // guarded by retire_mutex_
  bool stopping_ = false;           // guarded by retire_mutex_
  std::thread lifecycle_thread_;

  InFlight in_flight_;  // Infer calls not yet answered; draining once Shutdown is called
};

}  // namespace rampart::serve
