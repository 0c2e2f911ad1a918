#pragma once

// Timers: one thread that runs callbacks at their due time (retry backoff, stream keep-alives,
// health check rounds). Callbacks run on that thread, one at a time, and must be short and not
// block. Schedule and Cancel are thread-safe; Stop (and the destructor) drops callbacks not yet
// due (their captures are destroyed) and joins, after which Schedule drops what it is given.

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <thread>
#include <utility>

#include "core/clock.h"
#include "core/unique_function.h"

namespace rampart::gateway {

class Timers {
 public:
  using Id = uint64_t;

  Timers();
  ~Timers();  // Stop
  // Waits for a callback running now, drops the rest, and stops the thread. Not from a callback.
  void Stop();
  Timers(const Timers&) = delete;
  Timers& operator=(const Timers&) = delete;

  // Runs `callback` once, `delay` from now (at once when not positive). Returns an id for
  // Cancel (0 once stopped: the callback is dropped).
  Id Schedule(std::chrono::nanoseconds delay, UniqueFunction<void()> callback);
  // Drops a callback not yet started; returns whether it did.
  bool Cancel(Id id);

 private:
  void Run();

  std::mutex mutex_;
  std::condition_variable wake_;
  // Due time and id -> callback, earliest first.
  std::map<std::pair<SteadyTime, Id>, UniqueFunction<void()>> due_;  // guarded by mutex_
  std::map<Id, SteadyTime> when_;                                    // guarded by mutex_
  Id next_id_ = 1;                                                   // guarded by mutex_
  bool stopping_ = false;                                            // guarded by mutex_
  std::thread thread_;
};

}  // namespace rampart::gateway
