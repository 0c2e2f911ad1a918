#pragma once

// Scheduler: one per loaded model version. Owns the model's instances (one thread each) and the
// BatchQueue that feeds them.
//
// A free instance thread asks the BatchQueue what to do (run a batch now, or wait until a time or
// an arrival), so a batch forms only when an instance is free. It assembles the batch's inputs
// (BatchAssembly: along dim 0, ragged ones flattened, batch inputs added), runs the backend,
// splits the outputs back per request, records statistics and
// completes each request's callback. When any queue policy has a timeout, a timer thread rejects
// requests whose deadline passes while every instance is busy. With preserve_ordering,
// completions are delivered in admission order.
//
// Direct execution: handing a request to an instance thread and the answer back costs two
// thread wake-ups (tens of microseconds on a VM), more than a small model takes to run. When
// `direct_limit` is set, the queue is empty, an instance is idle, the batcher would send a lone
// request at once (no dynamic batching, or a zero queue delay) and the model's recent executions
// took at most `direct_limit`, Enqueue runs the request on the calling thread instead, and then
// up to a few requests that queued for that instance meanwhile. The caller is blocked for at
// most kMaxDirectExecutions such executions; everything else (statistics, ordering, callbacks)
// is as on an instance thread.
//
// Tenant shares (serve/tenant_shares.h): once SetTenantShares gives any, a request with a tenant
// over its share of this version's instance time is refused at admission (ResourceExhausted,
// counted as REJECTED), and each execution's time is charged to its requests' tenants. Without
// shares, admission and execution pay one branch each.
//
// Thread safety: Enqueue, SetTenantShares and Stop may be called from any thread. The queue and the
// instances' busy flags are guarded by mutex_; backends run outside it.

#include <atomic>
#include <condition_variable>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <thread>
#include <vector>

#include "backend/backend.h"
#include "serve/batch_queue.h"
#include "serve/statistics.h"
#include "serve/tenant_shares.h"

namespace rampart::serve {

// Where and how a Scheduler's instance threads run.
struct InstanceThreadOptions {
  std::vector<int> cpus;  // CPUs they may run on; empty = any
  // Added to the nice value they start with (the process's): negative for a model whose
  // batches many requests wait on (config optimization.priority PRIORITY_MAX), so that other
  // threads and processes on its cores do not preempt a batch midway. Applied when each thread
  // starts, only to instances that compute on their own thread alone (ComputeThreads() == 1;
  // not revisited if a model loaded later widens a library's pool), and only where the process
  // may raise a priority; otherwise the threads keep the nice value they started with and the
  // log says why.
  int nice_offset = 0;
};

class Scheduler {
 public:
  // Executions one direct call may run on its caller's thread: its own request, then requests
  // that queued for the instance meanwhile.
  static constexpr int kMaxDirectExecutions = 16;

  // Starts one thread per instance (and the timer thread if needed). `model_name`/`version`
  // label responses and messages.
  Scheduler(std::string model_name, int64_t version, BatchPolicy policy,
            std::vector<std::unique_ptr<backend::ModelInstance>> instances, Statistics& statistics,
            const Clock& clock = Clock::Real(),
            std::chrono::nanoseconds direct_limit = std::chrono::nanoseconds::zero(),
            InstanceThreadOptions threads = {});
  // Stop()s.
  ~Scheduler();
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // Queues a validated request. `done` runs exactly once: at once for a request refused
  // admission (queue full, bad priority, stopping), otherwise on a scheduler thread or, for a
  // direct execution, on the calling thread before Enqueue returns.
  void Enqueue(std::unique_ptr<InferRequest> request, int64_t batch_items, InferCallback done);

  // Refuses new requests, runs everything already queued (ignoring the queue delay), and joins
  // the threads. Idempotent.
  void Stop();
  // Refuses new requests and answers every queued one with `status` (as rejected) instead of
  // running it; executions under way finish. For a shutdown past its deadline. Stop still joins.
  void AbandonQueued(const Status& status);

  // Replaces the tenants' shares of this version's instance time (tenant -> share in (0, 1]);
  // empty turns them off.
  void SetTenantShares(const std::map<std::string, double>& shares);

  // Requests waiting for an instance.
  size_t QueueSize() const;
  // Instances executing a batch now (on their own thread or a borrowed one).
  size_t BusyInstances() const;

  // Executions that ran on the caller's thread (direct execution).
  uint64_t DirectExecutions() const { return direct_executions_.load(std::memory_order_relaxed); }

  // Instance threads running at a raised priority (a negative nice_offset that was applied):
  // each holds a core whenever it has work. Final once the constructor has returned.
  int FavouredInstances() const { return favoured_instances_.load(std::memory_order_relaxed); }

 private:
  struct Instance {
    std::unique_ptr<backend::ModelInstance> backend;
    bool busy = false;  // guarded by mutex_: executing on its own or a borrowed thread
  };

  // With mutex_ held: an idle instance that may run a lone request on the caller's thread now,
  // or nullptr.
  Instance* ClaimForDirectExecution();
  // With mutex_ held: the policy sends lone requests at once and recent executions were fast.
  bool FastEnoughForDirectExecution() const;
  bool AnyIdle() const;  // with mutex_ held
  void ExecuteDirectly(Instance& instance, std::unique_ptr<PendingRequest> pending);
  // Moves the calling instance thread `nice_offset` from its nice value where it computes alone;
  // `report` logs the outcome (once per scheduler, from the first instance thread). True when
  // the thread's nice value changed.
  bool SetPriority(const backend::ModelInstance& instance, int nice_offset, bool report);
  void RunInstance(Instance& instance);
  void RecordExecutionTime(int64_t ns);
  // Charges an execution's wall time to the tenants of its requests, by their batch items.
  void ChargeShares(std::span<std::unique_ptr<PendingRequest>> batch, int64_t ns,
                    SteadyTime finished);
  void RunTimer();

  // One execution, in the order ExecuteBatch takes its steps: describe the batch, run it
  // (assemble the inputs, run the backend, split the outputs per request), record the
  // statistics and answer each request. Execute answers every request of the batch exactly
  // once, whatever fails or throws on the way.
  void Execute(backend::ModelInstance& instance, std::span<std::unique_ptr<PendingRequest>> batch);
  void ExecuteBatch(backend::ModelInstance& instance,
                    std::span<std::unique_ptr<PendingRequest>> batch);
  // How long a scheduler thread that failed to plan (out of memory) waits before it tries again.
  static constexpr std::chrono::milliseconds kRetryAfterFailure{10};
  struct BatchShape {
    bool whole = false;  // a lone request passed to the backend as it is (BatchAssembly rule 4)
    int64_t total_items = 0;
    std::vector<int64_t> items;                          // per request, unless whole
    std::vector<std::vector<tensor::Tensor>*> requests;  // their inputs, unless whole
  };
  using RequestOutputs = std::vector<std::vector<tensor::Tensor>>;  // [request][output]
  BatchShape DescribeBatch(std::span<std::unique_ptr<PendingRequest>> batch) const;
  // `executed` gets the backend's timing once it has answered, so a failure after it (splitting
  // the outputs) still counts as an execution.
  Result<RequestOutputs> RunBatch(backend::ModelInstance& instance,
                                  std::span<std::unique_ptr<PendingRequest>> batch,
                                  const BatchShape& shape,
                                  std::optional<backend::ExecutionTiming>& executed) const;
  void Answer(std::span<std::unique_ptr<PendingRequest>> batch, RequestOutputs& outputs,
              const backend::ExecutionTiming& timing, SteadyTime started, SteadyTime finished);
  // The response to `request` from its part of the outputs (moved from), keeping the outputs it
  // asked for.
  std::unique_ptr<InferResponse> MakeResponse(InferRequest& request, const RequestTiming& timing,
                                              std::vector<tensor::Tensor>& outputs) const;

  bool AllIdle() const;  // with mutex_ held
  void Fail(PendingRequest& pending, const Status& status, FailureReason reason);
  // Fails what the queue turned away: cancelled requests as CANCELED, timed out ones REJECTED.
  void FailRejected(std::vector<BatchQueue::Rejected>& rejected);
  // Delivers a request's answer: at once, or in admission order with preserve_ordering.
  void Complete(PendingRequest& pending, Result<std::unique_ptr<InferResponse>> result);
  // Calls a request's callback; an exception it throws is logged, not propagated.
  void Deliver(InferCallback& done, Result<std::unique_ptr<InferResponse>> result);

  const std::string model_name_;
  const int64_t version_;
  const std::string where_;  // "model 'm' version v", the context of log lines
  const Clock& clock_;
  Statistics& statistics_;
  const std::chrono::nanoseconds direct_limit_;
  std::vector<Instance> instances_;

  // Smoothed wall time of recent executions (ns); starts unknown (max), so a model runs on its
  // instance threads until it has been measured.
  std::atomic<int64_t> recent_execution_ns_{std::numeric_limits<int64_t>::max()};
  std::atomic<uint64_t> direct_executions_{0};
  std::atomic<int> favoured_instances_{0};

  // Whether any tenant has a share; shares_ is consulted only then.
  std::atomic<bool> shares_on_{false};
  TenantShares shares_;

  mutable std::mutex mutex_;
  std::condition_variable work_changed_;  // arrivals, instances freed, stop
  BatchQueue queue_;                      // guarded by mutex_
  uint64_t next_sequence_ = 0;            // guarded by mutex_
  bool stopping_ = false;                 // guarded by mutex_

  // preserve_ordering: completions wait here until every earlier request has completed. One
  // thread at a time delivers (`delivering_`), outside the lock: a callback may enqueue on this
  // model again (an ensemble's next step) and complete on the same thread.
  std::mutex delivery_mutex_;
  uint64_t next_delivery_ = 0;  // guarded by delivery_mutex_
  std::map<uint64_t, std::pair<InferCallback, Result<std::unique_ptr<InferResponse>>>>
      held_;                 // guarded by delivery_mutex_
  bool delivering_ = false;  // guarded by delivery_mutex_

  std::vector<std::thread> threads_;
  std::thread timer_;
};

}  // namespace rampart::serve
