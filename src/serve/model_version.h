#pragma once

// ModelVersion: one loaded version of one model, with its instances and the queue that feeds
// them.
//
// Each instance (instance_group count) owns one thread and one backend ModelInstance. Requests
// wait in one FIFO queue; a free instance takes the oldest and runs it. The version is held by
// shared_ptr, so the server can drop it from its tables while requests already queued finish.
//
// Thread safety: all public methods may be called from any thread.

#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "backend/backend.h"
#include "model/repository.h"
#include "serve/request.h"
#include "serve/statistics.h"

namespace rampart::serve {

class ModelVersion {
 public:
  // Creates every instance the config asks for and starts their threads. `default_threads` is the
  // intra-op thread budget per instance. Errors name the model, version and reason.
  static Result<std::shared_ptr<ModelVersion>> Load(const model::ModelSource& source,
                                                    int64_t version,
                                                    const backend::BackendRegistry& backends,
                                                    int default_threads);

  // Stops accepting work, lets queued requests finish, and joins the instance threads.
  ~ModelVersion();
  ModelVersion(const ModelVersion&) = delete;
  ModelVersion& operator=(const ModelVersion&) = delete;

  const model::ModelConfig& config() const { return config_; }
  const std::string& name() const { return config_.name(); }
  int64_t version() const { return version_; }
  const Statistics& statistics() const { return statistics_; }

  // Checks a request against the config (inputs present and known, data types, shapes, batch
  // size, byte sizes, requested outputs) and puts its inputs into config order.
  // Errors: InvalidArgument with a message naming the tensor.
  Status Validate(InferRequest& request) const;

  // Queues a validated request; `done` runs on an instance thread. Unavailable once stopping.
  void Enqueue(std::unique_ptr<InferRequest> request, InferCallback done);

  // Refuses new requests and waits until queued ones have finished. Idempotent.
  void Stop();

 private:
  struct Pending {
    std::unique_ptr<InferRequest> request;
    InferCallback done;
    SteadyTime enqueued;
    int64_t batch_items = 1;
  };

  ModelVersion(model::ModelConfig config, int64_t version);
  void RunInstance(backend::ModelInstance* instance);
  void Execute(backend::ModelInstance& instance, Pending& pending);
  std::unique_ptr<Pending> Next();

  const model::ModelConfig config_;
  const int64_t version_;
  Statistics statistics_;
  std::vector<std::unique_ptr<backend::ModelInstance>> instances_;
  std::vector<std::thread> threads_;

  std::mutex mutex_;
  std::condition_variable work_available_;
  std::deque<std::unique_ptr<Pending>> queue_;  // guarded by mutex_
  bool stopping_ = false;                       // guarded by mutex_
};

}  // namespace rampart::serve
