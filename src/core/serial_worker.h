#pragma once

// SerialWorker: one owned thread that runs posted tasks in order, for slow work (loading models,
// reading the repository) that must not run on an I/O thread. Post is thread-safe; Stop (and
// the destructor) run what is already queued, then join. A task that throws is logged and the
// worker goes on with the next.

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>

#include "core/exceptions.h"
#include "core/status.h"
#include "core/thread_name.h"
#include "core/unique_function.h"

namespace rampart {

class SerialWorker {
 public:
  // `name` names the thread (see core/thread_name.h); at most `max_queued` tasks wait behind
  // the one running (0: no bound).
  explicit SerialWorker(std::string_view name = "worker", size_t max_queued = 0)
      : name_(name), max_queued_(max_queued), thread_([this] {
          NameThisThread(name_);
          Run();
        }) {}
  ~SerialWorker() { Stop(); }
  SerialWorker(const SerialWorker&) = delete;
  SerialWorker& operator=(const SerialWorker&) = delete;

  // Queues `task`. Errors (the task is dropped, unrun): Unavailable once stopping,
  // ResourceExhausted when max_queued tasks wait already.
  Status Post(UniqueFunction<void()> task) {
    {
      std::lock_guard lock(mutex_);
      if (stopping_) return Unavailable("the server is shutting down");
      if (max_queued_ > 0 && tasks_.size() >= max_queued_) {
        return ResourceExhausted("{} tasks are waiting already (at most {})", tasks_.size(),
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
    changed_.notify_one();
    if (thread_.joinable()) thread_.join();
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
      task = UniqueFunction<void()>();  // whatever it holds goes outside the lock
      lock.lock();
    }
  }

  const std::string name_;
  const size_t max_queued_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<UniqueFunction<void()>> tasks_;  // guarded by mutex_
  bool stopping_ = false;                     // guarded by mutex_
  std::thread thread_;                        // last: starts after the members it uses
};

}  // namespace rampart
