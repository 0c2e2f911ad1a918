#pragma once

// SerialWorker: one owned thread that runs posted tasks in order, for slow work (loading models)
// that must not run on an I/O thread. Post is thread-safe; Stop (and the destructor) run what is
// already queued, then join.

#include <condition_variable>
#include <deque>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>

#include "core/thread_name.h"
#include "core/unique_function.h"

namespace rampart {

class SerialWorker {
 public:
  // `name` names the thread (see core/thread_name.h).
  explicit SerialWorker(std::string_view name = "worker")
      : thread_([this, name = std::string(name)] {
          NameThisThread(name);
          Run();
        }) {}
  ~SerialWorker() { Stop(); }
  SerialWorker(const SerialWorker&) = delete;
  SerialWorker& operator=(const SerialWorker&) = delete;

  // Returns false (and drops the task) once stopping.
  bool Post(UniqueFunction<void()> task) {
    {
      std::lock_guard lock(mutex_);
      if (stopping_) return false;
      tasks_.push_back(std::move(task));
    }
    changed_.notify_one();
    return true;
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
      task();
      lock.lock();
    }
  }

  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<UniqueFunction<void()>> tasks_;  // guarded by mutex_
  bool stopping_ = false;                     // guarded by mutex_
  std::thread thread_;                        // last: starts after the members it uses
};

}  // namespace rampart
