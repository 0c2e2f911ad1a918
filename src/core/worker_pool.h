#pragma once

// WorkerPool: a fixed set of owned threads that run posted tasks, for blocking work (index
// searches) that must not run on an I/O thread. Post is thread-safe and never blocks: a full
// queue refuses the task. Stop (and the destructor) run what is already queued, then join. A
// task that throws is logged and its thread goes on with the next.

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "core/exceptions.h"
#include "core/status.h"
#include "core/thread_name.h"
#include "core/unique_function.h"

namespace rampart {

class WorkerPool {
 public:
  // `threads` (at least 1) named "<name>-<i>"; at most `max_queued` tasks wait for a thread.
  WorkerPool(std::string_view name, size_t threads, size_t max_queued)
      : name_(name), max_queued_(max_queued) {
    if (threads == 0) threads = 1;
    for (size_t i = 0; i < threads; ++i) {
      threads_.emplace_back([this, i] {
        NameThisThread(fmt::format("{}-{}", name_, i));
        Run();
      });
    }
  }
  ~WorkerPool() { Stop(); }
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  // Queues `task`. Errors (the task is dropped, unrun): Unavailable once stopping,
  // ResourceExhausted when max_queued tasks wait already.
  Status Post(UniqueFunction<void()> task) {
    {
      std::lock_guard lock(mutex_);
      if (stopping_) return Unavailable("the server is shutting down");
      if (tasks_.size() >= max_queued_) {
        return ResourceExhausted("{} requests are waiting already (at most {})", tasks_.size(),
                                 max_queued_);
      }
      tasks_.push_back(std::move(task));
    }
    changed_.notify_one();
    return Status::Ok();
  }

  void Stop() {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    changed_.notify_all();
    for (std::thread& thread : threads_) {
      if (thread.joinable()) thread.join();
    }
  }

 private:
  void Run() {
    std::unique_lock lock(mutex_);
    while (true) {
      changed_.wait(lock, [this] { return stopping_ || !tasks_.empty(); });
      if (tasks_.empty()) return;  // stopping and drained
      UniqueFunction<void()> task = std::move(tasks_.front());
      tasks_.pop_front();
      lock.unlock();
      RunLoggingExceptions(name_, [&] { task(); });
      task = UniqueFunction<void()>();
      lock.lock();
    }
  }

  const std::string name_;
  const size_t max_queued_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<UniqueFunction<void()>> tasks_;  // guarded by mutex_
  bool stopping_ = false;                     // guarded by mutex_
  std::vector<std::thread> threads_;          // last: started once the rest is built
};

}  // namespace rampart
