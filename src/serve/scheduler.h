#pragma once

// Scheduler: one per loaded model version. Owns the model's instances (one thread each) and the
// BatchQueue that feeds them.
//
// A free instance thread asks the BatchQueue what to do (run a batch now, or wait until a time or
// an arrival), so a batch forms only when an instance is free. It concatenates the batch's inputs
// along dim 0, runs the backend, splits the outputs back per request, records statistics and
// completes each request's callback. When any queue policy has a timeout, a timer thread rejects
// requests whose deadline passes while every instance is busy. With preserve_ordering,
// completions are delivered in admission order.
//
// Thread safety: Enqueue and Stop may be called from any thread. The queue is guarded by mutex_;
// backends run outside it.

#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "backend/backend.h"
#include "serve/batch_queue.h"
#include "serve/statistics.h"

namespace rampart::serve {

class Scheduler {
 public:
  // Starts one thread per instance (and the timer thread if needed). `model_name`/`version`
  // label responses and messages.
  Scheduler(std::string model_name, int64_t version, BatchPolicy policy,
            std::vector<std::unique_ptr<backend::ModelInstance>> instances, Statistics& statistics,
            const Clock& clock = Clock::Real());
  // Stop()s.
  ~Scheduler();
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // Queues a validated request. `done` runs exactly once: at once for a request refused
  // admission (queue full, bad priority, stopping), otherwise on a scheduler thread.
  void Enqueue(std::unique_ptr<InferRequest> request, int64_t batch_items, InferCallback done);

  // Refuses new requests, runs everything already queued (ignoring the queue delay), and joins
  // the threads. Idempotent.
  void Stop();

  // Requests waiting for an instance.
  size_t QueueSize() const;

 private:
  void RunInstance(backend::ModelInstance* instance);
  void RunTimer();
  void Execute(backend::ModelInstance& instance,
               std::vector<std::unique_ptr<PendingRequest>>& batch);
  void Fail(PendingRequest& pending, const Status& status, FailureReason reason);
  void Complete(PendingRequest& pending, Result<std::unique_ptr<InferResponse>> result);

  const std::string model_name_;
  const int64_t version_;
  const Clock& clock_;
  Statistics& statistics_;
  std::vector<std::unique_ptr<backend::ModelInstance>> instances_;

  mutable std::mutex mutex_;
  std::condition_variable work_changed_;  // arrivals, stop
  BatchQueue queue_;                      // guarded by mutex_
  uint64_t next_sequence_ = 0;            // guarded by mutex_
  bool stopping_ = false;                 // guarded by mutex_

  // preserve_ordering: completions wait here until every earlier request has completed.
  std::mutex delivery_mutex_;
  uint64_t next_delivery_ = 0;  // guarded by delivery_mutex_
  std::map<uint64_t, std::pair<InferCallback, Result<std::unique_ptr<InferResponse>>>>
      held_;  // guarded by delivery_mutex_

  std::vector<std::thread> threads_;
  std::thread timer_;
};

}  // namespace rampart::serve
