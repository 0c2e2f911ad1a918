#pragma once

// InFlight: a count of work under way that a shutdown can drain. Enter and Leave take no lock;
// only a Leave that brings the count to zero while a drain waits takes one, to wake it.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>

namespace rampart {

class InFlight {
 public:
  void Enter() { count_.fetch_add(1); }
  void Leave() {
    if (count_.fetch_sub(1) == 1 && draining_.load()) {
      std::lock_guard lock(mutex_);
      drained_.notify_all();
    }
  }

  // Marks the count as draining and waits up to `timeout` until it is zero. Returns what is left.
  int64_t Drain(std::chrono::milliseconds timeout) {
    draining_.store(true);
    std::unique_lock lock(mutex_);
    drained_.wait_for(lock, timeout, [this] { return count_.load() == 0; });
    return count_.load();
  }
  // Whether Drain has been called.
  bool draining() const { return draining_.load(); }

 private:
  std::atomic<int64_t> count_{0};
  std::atomic<bool> draining_{false};
  std::mutex mutex_;  // only for drained_
  std::condition_variable drained_;
};

}  // namespace rampart
