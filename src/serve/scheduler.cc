#include "serve/scheduler.h"

#include <algorithm>
#include <latch>

#include <boost/container/small_vector.hpp>

#include "core/cpu_affinity.h"
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
      clock_(clock),
      statistics_(statistics),
      direct_limit_(direct_limit),
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
  {
    std::lock_guard lock(mutex_);
    if (stopping_) {
      refused = Unavailable("model '{}' version {} is unloading", model_name_, version_);
    } else {
      Result<BatchQueue::Admission> admission = queue_.Admit(*request, now);
      if (admission.ok()) {
        pending->level = admission->level;
        pending->deadline = admission->deadline;
        pending->sequence = next_sequence_++;
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
          wake = timed || (AnyIdle() && (first || queue_.WouldRunNow(now)));
        }
      } else {
        refused = admission.status();
      }
    }
  }
  if (!refused.ok()) {
    const int64_t total_ns = NanosBetween(request->arrival, clock_.Now());
    statistics_.RecordFailure(refused.code() == StatusCode::kUnavailable ? FailureReason::kRejected
                                                                         : FailureReason::kOther,
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
  instance.backend->OnThreadStart();  // the borrowed thread gets the instance's settings
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
  // The last use of this scheduler on the borrowed thread: once the instance is idle, Stop may
  // return and the scheduler go. Arrivals meanwhile wait for this instance's thread; a stop
  // waits for the instance.
  std::lock_guard lock(mutex_);
  instance.busy = false;
  if (!queue_.empty() || stopping_) work_changed_.notify_all();
}

void Scheduler::RunInstance(Instance& instance) {
  instance.backend->OnThreadStart();
  std::unique_lock lock(mutex_);
  while (true) {
    if (stopping_ && queue_.empty()) break;
    if (instance.busy) {  // running a direct execution on another thread
      work_changed_.wait(lock);
      continue;
    }
    BatchQueue::Decision decision = queue_.Next(clock_.Now(), /*flush=*/stopping_);
    if (!decision.rejected.empty() || !decision.batch.empty()) {
      instance.busy = true;
      lock.unlock();
      FailRejected(decision.rejected);
      if (!decision.batch.empty()) Execute(*instance.backend, decision.batch);
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
    std::vector<BatchQueue::Rejected> expired = queue_.Expire(clock_.Now(), next_deadline);
    if (!expired.empty()) {
      lock.unlock();
      for (BatchQueue::Rejected& rejected : expired) {
        Fail(*rejected.pending, rejected.status, FailureReason::kRejected);
      }
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

void Scheduler::Complete(PendingRequest& pending, Result<std::unique_ptr<InferResponse>> result) {
  if (!queue_.policy().preserve_ordering) {
    pending.done(std::move(result));
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
    for (auto& [done, answer] : due) done(std::move(answer));
    due.clear();
  }
}

void Scheduler::Execute(backend::ModelInstance& instance,
                        std::span<std::unique_ptr<PendingRequest>> batch) {
  const SteadyTime started = clock_.Now();
  // A lone request of a model without ragged or batch inputs and outputs goes through as it is
  // (rule 4 of batch_assembly.h): the common case of direct execution, kept free of copies and
  // of the bookkeeping below.
  const BatchAssembly& assembly = queue_.policy().assembly;
  const bool whole = batch.size() == 1 && assembly.PassThrough();
  int64_t total_items = 0;
  std::vector<int64_t> items;
  std::vector<std::vector<tensor::Tensor>*> requests;
  if (whole) {
    total_items = batch.front()->batch_items;
  } else {
    items.reserve(batch.size());
    requests.reserve(batch.size());
    for (const auto& pending : batch) {
      total_items += pending->batch_items;
      items.push_back(pending->batch_items);
      requests.push_back(&pending->request->inputs);
    }
  }
  std::vector<tensor::Tensor> inputs =
      whole ? std::move(batch.front()->request->inputs) : assembly.Assemble(requests, items);
  Result<backend::ExecutionResult> result = instance.Execute(inputs);
  if (!result.ok()) {
    RecordExecutionTime(NanosBetween(started, clock_.Now()));
    LOG_DEBUG("model '{}' version {}: {}", model_name_, version_, result.status().ToString());
    for (auto& pending : batch) Fail(*pending, result.status(), FailureReason::kBackend);
    return;
  }
  const backend::ExecutionTiming& timing = result->timing;

  // outputs_per_request[r][o]: request r's part of output o.
  Result<std::vector<std::vector<tensor::Tensor>>> outputs_per_request =
      std::vector<std::vector<tensor::Tensor>>();
  if (whole) {
    // emplace_back, not an initializer list: that would copy every output.
    outputs_per_request->emplace_back(std::move(result->outputs));
  } else {
    outputs_per_request = assembly.Scatter(result->outputs, requests, items);
  }
  for (size_t r = 0; outputs_per_request.ok() && r < outputs_per_request->size(); ++r) {
    Status finished =
        assembly.Finish((*outputs_per_request)[r], whole ? total_items : items[r], whole);
    if (!finished.ok()) outputs_per_request = std::move(finished);
  }
  // One clock read for the execution's time (what decides direct execution) and the requests'
  // end; the split is part of the execution's work.
  const SteadyTime finished = clock_.Now();
  RecordExecutionTime(NanosBetween(started, finished));
  if (!outputs_per_request.ok()) {
    statistics_.RecordExecution(static_cast<uint64_t>(total_items), timing, {});
    const Status status = outputs_per_request.status().WithContext(
        fmt::format("model '{}' version {}", model_name_, version_));
    for (auto& pending : batch) Fail(*pending, status, FailureReason::kBackend);
    return;
  }

  // The statistics first, the execution and its requests under one lock, then the answers: a
  // client that reads the statistics after its answer finds its request counted.
  boost::container::small_vector<Statistics::Success, 1> answered;
  answered.reserve(batch.size());
  for (const auto& pending : batch) {
    answered.push_back({NanosBetween(pending->request->arrival, finished),
                        {NanosBetween(pending->enqueued, started), timing.compute_input_ns,
                         timing.compute_infer_ns, timing.compute_output_ns},
                        static_cast<uint64_t>(pending->batch_items)});
  }
  statistics_.RecordExecution(static_cast<uint64_t>(total_items), timing,
                              std::span(answered.data(), answered.size()));
  for (size_t r = 0; r < batch.size(); ++r) {
    PendingRequest& pending = *batch[r];
    auto response = std::make_unique<InferResponse>();
    response->model_name = model_name_;
    response->model_version = version_;
    response->id = std::move(pending.request->id);
    response->timing = answered[r].timing;
    const auto& wanted = pending.request->requested_outputs;
    std::vector<tensor::Tensor>& outputs = (*outputs_per_request)[r];
    response->outputs.reserve(wanted.empty() ? outputs.size() : wanted.size());
    for (tensor::Tensor& output : outputs) {
      if (wanted.empty() || std::find(wanted.begin(), wanted.end(), output.name) != wanted.end()) {
        response->outputs.push_back(std::move(output));
      }
    }
    Complete(pending, std::move(response));
  }
}

}  // namespace rampart::serve
