#include "serve/scheduler.h"

#include <algorithm>
#include <latch>

#include <boost/container/small_vector.hpp>

#include "core/cpu_affinity.h"
#include "core/exceptions.h"
#include "core/logging.h"
#include "core/thread_name.h"

namespace rampart::serve {
namespace {

bool NeedsTimer(const BatchPolicy& policy) {
  return std::any_of(policy.queue_policies.begin(), policy.queue_policies.end(),
                     [](const QueuePolicy& queue) { return queue.default_timeout.count() > 0; });
}

}  // namespace

Scheduler::Scheduler(std::string model_name, int64_t version, BatchPolicy policy,
                     std::vector<std::unique_ptr<backend::ModelInstance>> instances,
                     Statistics& statistics, const Clock& clock,
                     std::chrono::nanoseconds direct_limit, InstanceThreadOptions threads)
    : model_name_(std::move(model_name)),
      version_(version),
      where_(fmt::format("model '{}' version {}", model_name_, version_)),
      clock_(clock),
      statistics_(statistics),
      direct_limit_(direct_limit),
      shares_(model_name_, static_cast<int>(instances.size())),
      queue_(std::move(policy)) {
  instances_.reserve(instances.size());
  for (auto& instance : instances) instances_.push_back({std::move(instance)});
  // The threads settle their placement and priority before the constructor returns, so that
  // FavouredInstances() is final once the model is loaded.
  std::latch settled(static_cast<std::ptrdiff_t>(instances_.size()));
  for (size_t i = 0; i < instances_.size(); ++i) {
    threads_.emplace_back([this, &instance = instances_[i], threads, first = i == 0, &settled] {
      NameThisThread("inst-" + model_name_);
      if (Status pinned = PinThisThread(threads.cpus); !pinned.ok()) {
        LOG_WARN("model '{}' version {}: {}", model_name_, version_, pinned.message());
      }
      if (threads.nice_offset != 0 && SetPriority(*instance.backend, threads.nice_offset, first) &&
          threads.nice_offset < 0) {
        favoured_instances_.fetch_add(1, std::memory_order_relaxed);
      }
      settled.count_down();  // the last use of `settled`, which the constructor waits for
      RunInstance(instance);
    });
  }
  settled.wait();
  if (NeedsTimer(queue_.policy())) {
    timer_ = std::thread([this] {
      NameThisThread("timer-" + model_name_);
      RunTimer();
    });
  }
}

bool Scheduler::SetPriority(const backend::ModelInstance& instance, int nice_offset, bool report) {
  const int started = ThisThreadNice();
  // A product split over several threads waits for its slowest part, and the others (OpenBLAS's
  // process-wide pool) are out of this thread's reach: favouring this one alone made batches on
  // two intra-op threads slower, not faster (docs/architecture.md). That is a rule of the
  // setting, not a fault (the shipped mlp_classifier meets it on any machine with more than one
  // core), so it is said at info level.
  if (const int compute = instance.ComputeThreads(); compute > 1) {
    if (report) {
      LOG_INFO(
          "model '{}' version {}: instance threads stay at nice {}: optimization.priority "
          "applies to instances computing on one thread, and this one computes on {} "
          "(set INTRA_OP_THREAD_COUNT or --threads-per-instance to 1 to use it)",
          model_name_, version_, started, compute);
    }
    return false;
  }
  const Status set = SetThisThreadNice(started + nice_offset);
  if (report && set.ok()) {
    LOG_INFO("model '{}' version {}: instance threads at nice {} (process: {})", model_name_,
             version_, ThisThreadNice(), started);
  } else if (report) {
    LOG_WARN("model '{}' version {}: instance threads stay at nice {}: {}", model_name_, version_,
             started, set.message());
  }
  return set.ok();
}

Scheduler::~Scheduler() { Stop(); }

void Scheduler::Stop() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  work_changed_.notify_all();
  for (std::thread& thread : threads_) {
    if (thread.joinable()) thread.join();
  }
  if (timer_.joinable()) timer_.join();
  // A direct execution started before the stop may still be running on its caller's thread.
  std::unique_lock lock(mutex_);
  work_changed_.wait(lock, [this] { return AllIdle(); });
}

void Scheduler::AbandonQueued(const Status& status) {
  std::vector<std::unique_ptr<PendingRequest>> abandoned;
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
    abandoned = queue_.TakeAll();
  }
  work_changed_.notify_all();
  for (auto& pending : abandoned) Fail(*pending, status, FailureReason::kRejected);
}

bool Scheduler::AllIdle() const {
  return std::none_of(instances_.begin(), instances_.end(),
                      [](const Instance& instance) { return instance.busy; });
}

size_t Scheduler::QueueSize() const {
  std::lock_guard lock(mutex_);
  return queue_.size();
}

size_t Scheduler::BusyInstances() const {
  std::lock_guard lock(mutex_);
  return static_cast<size_t>(std::count_if(instances_.begin(), instances_.end(),
                                           [](const Instance& instance) { return instance.busy; }));
}

bool Scheduler::AnyIdle() const {
  return std::any_of(instances_.begin(), instances_.end(),
                     [](const Instance& instance) { return !instance.busy; });
}

bool Scheduler::FastEnoughForDirectExecution() const {
  if (direct_limit_.count() <= 0) return false;
  // Only where the batcher would send a lone request at once anyway.
  const BatchPolicy& policy = queue_.policy();
  if (policy.max_batch_size > 0 && policy.max_queue_delay.count() > 0) return false;
  return recent_execution_ns_.load(std::memory_order_relaxed) <= direct_limit_.count();
}

Scheduler::Instance* Scheduler::ClaimForDirectExecution() {
  if (!queue_.empty() || !FastEnoughForDirectExecution()) return nullptr;
  for (Instance& instance : instances_) {
    if (!instance.busy) {
      instance.busy = true;
      return &instance;
    }
  }
  return nullptr;
}

void Scheduler::Enqueue(std::unique_ptr<InferRequest> request, int64_t batch_items,
                        InferCallback done) {
  const SteadyTime now = clock_.Now();
  auto pending = std::make_unique<PendingRequest>();
  pending->batch_items = batch_items;
  pending->enqueued = now;
  Status refused;
  Instance* direct = nullptr;
  bool wake = false;
  if (shares_on_.load(std::memory_order_relaxed) && !request->tenant.empty()) {
    refused = shares_.Admit(request->tenant, now);
  }
  if (refused.ok()) {
    std::lock_guard lock(mutex_);
    if (stopping_) {
      refused = Unavailable("model '{}' version {} is unloading", model_name_, version_);
    } else {
      Result<BatchQueue::Admission> admission = queue_.Admit(*request, now);
      if (admission.ok()) {
        pending->level = admission->level;
        pending->deadline = admission->deadline;
        // Counted once the request is queued (or runs here): an arrival that fails to queue
        // must leave no gap in preserve_ordering's sequence.
        pending->sequence = next_sequence_;
        // A cancelled request goes through the queue, which drops it.
        if (!request->IsCancelled()) direct = ClaimForDirectExecution();
        pending->request = std::move(request);
        pending->done = std::move(done);
        if (direct == nullptr) {
          // Wake the instance threads (and the timer thread) only when this arrival can change
          // what they do: a deadline may be the earliest, or an idle instance can start a delay
          // (first request) or a batch. Otherwise a waiting instance would wake, find the same
          // answer (wait for the oldest request's delay) and sleep again: two futex calls and a
          // context switch per request while a batch fills. A busy instance, on its own thread
          // or a borrowed one, looks at the queue again when it finishes.
          const bool first = queue_.empty();
          const bool timed = pending->deadline.has_value();
          queue_.Push(std::move(pending));
          ++next_sequence_;
          wake = timed || (AnyIdle() && (first || queue_.WouldRunNow(now)));
        } else {
          ++next_sequence_;
        }
      } else {
        refused = admission.status();
      }
    }
  }
  if (!refused.ok()) {
    const int64_t total_ns = NanosBetween(request->arrival, clock_.Now());
    // A full queue, a stopping model and a tenant over its share are rejections.
    const bool rejected = refused.code() == StatusCode::kUnavailable ||
                          refused.code() == StatusCode::kResourceExhausted;
    statistics_.RecordFailure(rejected ? FailureReason::kRejected : FailureReason::kOther,
                              total_ns);
    done(std::move(refused));
    return;
  }
  if (direct != nullptr) {
    ExecuteDirectly(*direct, std::move(pending));
    return;
  }
  if (wake) work_changed_.notify_all();
}

void Scheduler::ExecuteDirectly(Instance& instance, std::unique_ptr<PendingRequest> pending) {
  // Whatever happens on the borrowed thread, the instance is given back below.
  RunLoggingExceptions(where_, [&] {
    Execute(*instance.backend, std::span(&pending, 1));
    direct_executions_.fetch_add(1, std::memory_order_relaxed);
    for (int executions = 1;; ++executions) {
      BatchQueue::Decision next;
      {
        std::lock_guard lock(mutex_);
        // What arrived meanwhile (another I/O thread's requests) would otherwise wait for the
        // instance thread to be woken; while the model stays fast, this thread runs a few of
        // those itself, bounded so that its own connections are not kept waiting long.
        if (executions < kMaxDirectExecutions && !stopping_ && !queue_.empty() &&
            FastEnoughForDirectExecution()) {
          next = queue_.Next(clock_.Now());
        }
      }
      FailRejected(next.rejected);  // still busy: Stop waits for these answers too
      if (next.batch.empty()) break;
      Execute(*instance.backend, next.batch);
      direct_executions_.fetch_add(1, std::memory_order_relaxed);
    }
  });
  // The last use of this scheduler on the borrowed thread: once the instance is idle, Stop may
  // return and the scheduler go. Arrivals meanwhile wait for this instance's thread; a stop
  // waits for the instance.
  std::lock_guard lock(mutex_);
  instance.busy = false;
  if (!queue_.empty() || stopping_) work_changed_.notify_all();
}

void Scheduler::RunInstance(Instance& instance) {
  std::unique_lock lock(mutex_);
  while (true) {
    if (stopping_ && queue_.empty()) break;
    if (instance.busy) {  // running a direct execution on another thread
      work_changed_.wait(lock);
      continue;
    }
    BatchQueue::Decision decision;
    if (!RunLoggingExceptions(where_, [&] { decision = queue_.Next(clock_.Now(), stopping_); })) {
      // Out of memory planning a batch: look again shortly rather than spin.
      work_changed_.wait_for(lock, kRetryAfterFailure);
      continue;
    }
    if (!decision.rejected.empty() || !decision.batch.empty()) {
      instance.busy = true;
      lock.unlock();
      // Execute answers its own failures; this only keeps the thread (and the instance's busy
      // flag) going should answering a rejected request throw.
      RunLoggingExceptions(where_, [&] {
        FailRejected(decision.rejected);
        if (!decision.batch.empty()) Execute(*instance.backend, decision.batch);
      });
      // Whatever is left of the batch goes outside the lock: a request dropped unanswered
      // answers itself then (AnsweredOnce), and its callback may enqueue on this model.
      decision = BatchQueue::Decision();
      lock.lock();
      instance.busy = false;
      continue;
    }
    if (decision.wake_at) {
      work_changed_.wait_until(lock, *decision.wake_at);
    } else {
      work_changed_.wait(lock);
    }
  }
}

void Scheduler::RunTimer() {
  std::unique_lock lock(mutex_);
  while (!stopping_) {
    std::optional<SteadyTime> next_deadline;
    std::vector<BatchQueue::Rejected> expired;
    if (!RunLoggingExceptions(where_,
                              [&] { expired = queue_.Expire(clock_.Now(), next_deadline); })) {
      work_changed_.wait_for(lock, kRetryAfterFailure);
      continue;
    }
    if (!expired.empty()) {
      lock.unlock();
      RunLoggingExceptions(where_, [&] {
        for (BatchQueue::Rejected& rejected : expired) {
          Fail(*rejected.pending, rejected.status, FailureReason::kRejected);
        }
      });
      expired.clear();  // outside the lock, as in RunInstance
      lock.lock();
      continue;
    }
    if (next_deadline) {
      work_changed_.wait_until(lock, *next_deadline);
    } else {
      work_changed_.wait(lock);
    }
  }
}

void Scheduler::SetTenantShares(const std::map<std::string, double>& shares) {
  shares_.Set(shares);
  shares_on_.store(!shares.empty(), std::memory_order_relaxed);
}

void Scheduler::ChargeShares(std::span<std::unique_ptr<PendingRequest>> batch, int64_t ns,
                             SteadyTime finished) {
  int64_t items = 0;
  for (const auto& pending : batch) items += std::max<int64_t>(pending->batch_items, 1);
  for (const auto& pending : batch) {
    if (pending->request->tenant.empty()) continue;
    shares_.Charge(pending->request->tenant,
                   ns * std::max<int64_t>(pending->batch_items, 1) / std::max<int64_t>(items, 1),
                   finished);
  }
}

void Scheduler::RecordExecutionTime(int64_t ns) {
  // An exponential moving average over about the last eight executions; concurrent updates may
  // drop one sample, which does not matter for a smoothed estimate.
  const int64_t previous = recent_execution_ns_.load(std::memory_order_relaxed);
  const int64_t next =
      previous == std::numeric_limits<int64_t>::max() ? ns : previous + (ns - previous) / 8;
  recent_execution_ns_.store(next, std::memory_order_relaxed);
}

void Scheduler::FailRejected(std::vector<BatchQueue::Rejected>& rejected) {
  for (BatchQueue::Rejected& each : rejected) {
    Fail(*each.pending, each.status,
         each.status.code() == StatusCode::kCancelled ? FailureReason::kCanceled
                                                      : FailureReason::kRejected);
  }
}

void Scheduler::Fail(PendingRequest& pending, const Status& status, FailureReason reason) {
  statistics_.RecordFailure(reason, NanosBetween(pending.request->arrival, clock_.Now()));
  Complete(pending, status);
}

void Scheduler::Deliver(InferCallback& done, Result<std::unique_ptr<InferResponse>> result) {
  // The callback runs exactly once: if it throws, it has run, and only a log line is left to do.
  RunLoggingExceptions(where_, [&] { done(std::move(result)); });
}

void Scheduler::Complete(PendingRequest& pending, Result<std::unique_ptr<InferResponse>> result) {
  pending.answered = true;
  if (!queue_.policy().preserve_ordering) {
    Deliver(pending.done, std::move(result));
    return;
  }
  {
    std::lock_guard lock(delivery_mutex_);
    held_.emplace(pending.sequence, std::make_pair(std::move(pending.done), std::move(result)));
    if (delivering_) return;  // the delivering thread takes this one too, in its turn
    delivering_ = true;
  }
  std::vector<std::pair<InferCallback, Result<std::unique_ptr<InferResponse>>>> due;
  while (true) {
    {
      std::lock_guard lock(delivery_mutex_);
      for (auto it = held_.begin(); it != held_.end() && it->first == next_delivery_;
           it = held_.erase(it), ++next_delivery_) {
        due.push_back(std::move(it->second));
      }
      if (due.empty()) {
        delivering_ = false;
        return;
      }
    }
    for (auto& [done, answer] : due) Deliver(done, std::move(answer));
    due.clear();
  }
}

Scheduler::BatchShape Scheduler::DescribeBatch(
    std::span<std::unique_ptr<PendingRequest>> batch) const {
  BatchShape shape;
  // A lone request of a model without ragged or batch inputs and outputs goes through as it is
  // (rule 4 of batch_assembly.h): the common case of direct execution, kept free of copies and
  // of the bookkeeping below.
  shape.whole = batch.size() == 1 && queue_.policy().assembly.PassThrough();
  if (shape.whole) {
    shape.total_items = batch.front()->batch_items;
    return shape;
  }
  shape.items.reserve(batch.size());
  shape.requests.reserve(batch.size());
  for (const auto& pending : batch) {
    shape.total_items += pending->batch_items;
    shape.items.push_back(pending->batch_items);
    shape.requests.push_back(&pending->request->inputs);
  }
  return shape;
}

Result<Scheduler::RequestOutputs> Scheduler::RunBatch(
    backend::ModelInstance& instance, std::span<std::unique_ptr<PendingRequest>> batch,
    const BatchShape& shape, std::optional<backend::ExecutionTiming>& executed) const {
  const BatchAssembly& assembly = queue_.policy().assembly;
  std::vector<tensor::Tensor> inputs = shape.whole ? std::move(batch.front()->request->inputs)
                                                   : assembly.Assemble(shape.requests, shape.items);
  ASSIGN_OR_RETURN(backend::ExecutionResult result, instance.Execute(inputs));
  executed = result.timing;
  RequestOutputs outputs;
  if (shape.whole) {
    // emplace_back, not an initializer list: that would copy every output.
    outputs.emplace_back(std::move(result.outputs));
  } else {
    ASSIGN_OR_RETURN(outputs, assembly.Scatter(result.outputs, shape.requests, shape.items));
  }
  for (size_t r = 0; r < outputs.size(); ++r) {
    RETURN_IF_ERROR(
        assembly.Finish(outputs[r], shape.whole ? shape.total_items : shape.items[r], shape.whole));
  }
  return outputs;
}

void Scheduler::Execute(backend::ModelInstance& instance,
                        std::span<std::unique_ptr<PendingRequest>> batch) {
  if (RunLoggingExceptions(where_, [&] { ExecuteBatch(instance, batch); })) return;
  // Something outside the guarded steps threw: every request not yet answered is answered now.
  for (auto& pending : batch) {
    if (!pending || pending->answered) continue;
    RunLoggingExceptions(where_, [&] {
      Fail(*pending,
           Internal("model '{}' version {}: the batch failed (see the server's log)", model_name_,
                    version_),
           FailureReason::kOther);
    });
  }
}

void Scheduler::ExecuteBatch(backend::ModelInstance& instance,
                             std::span<std::unique_ptr<PendingRequest>> batch) {
  // Whichever thread this is (the instance's own, or one borrowed for direct execution, whose
  // settings the last model it ran may have changed), it runs with this instance's settings.
  instance.PrepareThread();
  const SteadyTime started = clock_.Now();
  const BatchShape shape = DescribeBatch(batch);
  std::optional<backend::ExecutionTiming> executed;  // set once the backend has answered
  Result<RequestOutputs> outputs =
      CatchAsStatus("running a batch", [&] { return RunBatch(instance, batch, shape, executed); });
  // One clock read for the execution's time (what decides direct execution) and the requests'
  // end; the split is part of the execution's work.
  const SteadyTime finished = clock_.Now();
  RecordExecutionTime(NanosBetween(started, finished));
  if (shares_on_.load(std::memory_order_relaxed)) {
    ChargeShares(batch, NanosBetween(started, finished), finished);
  }
  if (!outputs.ok()) {
    Status status = outputs.status();
    if (executed) {  // the model ran; its outputs could not be split or answered
      statistics_.RecordExecution(static_cast<uint64_t>(shape.total_items), *executed, {});
      status = status.WithContext(fmt::format("model '{}' version {}", model_name_, version_));
    } else {
      LOG_DEBUG("model '{}' version {}: {}", model_name_, version_, status.ToString());
    }
    for (auto& pending : batch) Fail(*pending, status, FailureReason::kBackend);
    return;
  }
  Answer(batch, *outputs, *executed, started, finished);
}

void Scheduler::Answer(std::span<std::unique_ptr<PendingRequest>> batch, RequestOutputs& outputs,
                       const backend::ExecutionTiming& timing, SteadyTime started,
                       SteadyTime finished) {
  // The statistics first, the execution and its requests under one lock, then the answers: a
  // client that reads the statistics after its answer finds its request counted.
  boost::container::small_vector<Statistics::Success, 1> answered;
  answered.reserve(batch.size());
  uint64_t total_items = 0;
  for (const auto& pending : batch) {
    total_items += static_cast<uint64_t>(pending->batch_items);
    answered.push_back({NanosBetween(pending->request->arrival, finished),
                        {NanosBetween(pending->enqueued, started), timing.compute_input_ns,
                         timing.compute_infer_ns, timing.compute_output_ns},
                        static_cast<uint64_t>(pending->batch_items)});
  }
  statistics_.RecordExecution(total_items, timing, std::span(answered.data(), answered.size()));
  for (size_t r = 0; r < batch.size(); ++r) {
    PendingRequest& pending = *batch[r];
    Result<std::unique_ptr<InferResponse>> response =
        CatchAsStatus("answering a request", [&]() -> Result<std::unique_ptr<InferResponse>> {
          return MakeResponse(*pending.request, answered[r].timing, outputs[r]);
        });
    if (!response.ok()) {
      Fail(pending, response.status(), FailureReason::kOther);
      continue;
    }
    Complete(pending, std::move(response));
  }
}

std::unique_ptr<InferResponse> Scheduler::MakeResponse(InferRequest& request,
                                                       const RequestTiming& timing,
                                                       std::vector<tensor::Tensor>& outputs) const {
  auto response = std::make_unique<InferResponse>();
  response->model_name = model_name_;
  response->model_version = version_;
  response->id = std::move(request.id);
  response->timing = timing;
  const auto& wanted = request.requested_outputs;
  response->outputs.reserve(wanted.empty() ? outputs.size() : wanted.size());
  for (tensor::Tensor& output : outputs) {
    if (wanted.empty() || std::find(wanted.begin(), wanted.end(), output.name) != wanted.end()) {
      response->outputs.push_back(std::move(output));
    }
  }
  return response;
}

}  // namespace rampart::serve
