#include "gateway/timer.h"

#include "core/exceptions.h"
#include "core/thread_name.h"

namespace rampart::gateway {

Timers::Timers()
    : thread_([this] {
        NameThisThread("gateway-timers");
        Run();
      }) {}

Timers::~Timers() { Stop(); }

void Timers::Stop() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_one();
  if (thread_.joinable()) thread_.join();
  std::map<std::pair<SteadyTime, Id>, UniqueFunction<void()>> dropped;
  std::lock_guard lock(mutex_);
  dropped.swap(due_);
  when_.clear();
}

Timers::Id Timers::Schedule(std::chrono::nanoseconds delay, UniqueFunction<void()> callback) {
  const SteadyTime at = std::chrono::steady_clock::now() + std::max(delay, {});
  std::unique_lock lock(mutex_);
  if (stopping_) {
    lock.unlock();  // the callback's captures are destroyed outside the lock
    return 0;
  }
  const Id id = next_id_++;
  const bool earliest = due_.empty() || at < due_.begin()->first.first;
  due_.emplace(std::pair{at, id}, std::move(callback));
  when_.emplace(id, at);
  if (earliest) wake_.notify_one();
  return id;
}

bool Timers::Cancel(Id id) {
  UniqueFunction<void()> dropped;  // destroyed outside the lock
  std::lock_guard lock(mutex_);
  auto found = when_.find(id);
  if (found == when_.end()) return false;
  auto entry = due_.find({found->second, id});
  dropped = std::move(entry->second);
  due_.erase(entry);
  when_.erase(found);
  return true;
}

void Timers::Run() {
  std::unique_lock lock(mutex_);
  while (!stopping_) {
    if (due_.empty()) {
      wake_.wait(lock);
      continue;
    }
    const SteadyTime at = due_.begin()->first.first;
    if (std::chrono::steady_clock::now() < at) {
      wake_.wait_until(lock, at);
      continue;
    }
    auto entry = due_.begin();
    UniqueFunction<void()> callback = std::move(entry->second);
    when_.erase(entry->first.second);
    due_.erase(entry);
    lock.unlock();
    RunLoggingExceptions("a gateway timer", [&callback] { callback(); });
    callback = UniqueFunction<void()>();
    lock.lock();
  }
}

}  // namespace rampart::gateway
