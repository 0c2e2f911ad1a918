#pragma once

// ModelVersion: one loaded version of one model: its config, its Scheduler (instances, dynamic
// batcher) and its statistics.
//
// The version is held by shared_ptr, so the server can drop it from its tables while requests
// already queued finish.
//
// Thread safety: all public methods may be called from any thread.

#include <memory>
#include <vector>

#include "backend/backend.h"
#include "model/repository.h"
#include "serve/observer.h"
#include "serve/request.h"
#include "serve/scheduler.h"
#include "serve/statistics.h"

namespace rampart::serve {

class ModelVersion {
 public:
  struct LoadOptions {
    int default_threads = 1;                             // intra-op thread budget per instance
    std::chrono::nanoseconds direct_execution_limit{0};  // see Scheduler
    // The bound of a queue whose config sets no max_queue_size (0: unbounded); see BatchQueue.
    size_t default_max_queue_size = BatchPolicy::kDefaultMaxQueueSize;
    std::vector<int> cpus;               // instance threads' CPUs; empty = any
    ServerObserver* observer = nullptr;  // told about every request; may be null
  };
  // Creates every instance the config asks for and starts their threads. Errors name the model,
  // version and reason.
  static Result<std::shared_ptr<ModelVersion>> Load(const model::ModelSource& source,
                                                    int64_t version,
                                                    const backend::BackendRegistry& backends,
                                                    const LoadOptions& options);

  // Stops accepting work, lets queued requests finish, and joins the instance threads.
  ~ModelVersion();
  ModelVersion(const ModelVersion&) = delete;
  ModelVersion& operator=(const ModelVersion&) = delete;

  const model::ModelConfig& config() const { return config_; }
  const std::string& name() const { return config_.name(); }
  int64_t version() const { return version_; }
  const Statistics& statistics() const { return statistics_; }
  // For request paths outside the scheduler (ensembles) that record their own outcomes.
  Statistics& mutable_statistics() { return statistics_; }
  // Requests waiting for an instance (Triton's pending request count).
  size_t QueueSize() const { return scheduler_ ? scheduler_->QueueSize() : 0; }
  // Instances executing a batch now; 0 for an ensemble.
  size_t BusyInstances() const { return scheduler_ ? scheduler_->BusyInstances() : 0; }
  // Instance threads at a raised priority (config optimization.priority; see Scheduler).
  int FavouredInstances() const { return scheduler_ ? scheduler_->FavouredInstances() : 0; }
  // An ensemble has no instances of its own: InferenceServer runs its steps (serve/ensemble.h).
  bool IsEnsemble() const { return config_.platform() == model::kEnsemblePlatform; }
  // REQUIRES: !IsEnsemble() for Enqueue.

  // Checks a request against the config (inputs present and known, data types, shapes, batch
  // size, byte sizes, requested outputs) and puts its inputs into config order.
  // Errors: InvalidArgument with a message naming the tensor, in Triton's words where clients
  // match on them (missing inputs, batch size, byte sizes). A batch of 0 fails as in Triton.
  Status Validate(InferRequest& request) const;

  // Queues a validated request (see Scheduler::Enqueue).
  void Enqueue(std::unique_ptr<InferRequest> request, InferCallback done);

  // The tenants' shares of this version's instance time (Scheduler::SetTenantShares); nothing
  // for an ensemble, whose steps' models have their own.
  void SetTenantShares(const std::map<std::string, double>& shares) {
    if (scheduler_) scheduler_->SetTenantShares(shares);
  }

  // Refuses new requests and waits until queued ones have finished. Idempotent.
  void Stop();
  // Refuses new requests and answers the queued ones with `status` unrun (Scheduler).
  void AbandonQueued(const Status& status) {
    if (scheduler_) scheduler_->AbandonQueued(status);
  }

 private:
  // Validate's parts: every required input present; an input's data the size its shape needs
  // (REQUIRES: its shape matches the config's dims).
  Status CheckInputCount(const std::vector<tensor::Tensor>& inputs) const;
  Status CheckInputData(const tensor::Tensor& input, bool batched) const;

  ModelVersion(model::ModelConfig config, int64_t version,
               std::unique_ptr<VersionObserver> observer);

  const model::ModelConfig config_;
  const int64_t version_;
  Statistics statistics_;
  std::unique_ptr<Scheduler> scheduler_;  // uses statistics_, so declared after it
};

}  // namespace rampart::serve
