#pragma once

// EventLoop: one thread's epoll loop, for sockets whose readiness is watched edge-triggered.
//
// A file descriptor is added once, for every event it will ever need (EPOLLIN | EPOLLOUT |
// EPOLLRDHUP | EPOLLET for a connection), and never modified: watching costs no epoll_ctl per
// request. Its owner keeps track of readiness itself (after a read that returned less than it
// asked for, the socket is drained until the next edge), so a keep-alive request costs one recv.
// Boost.Asio's reactor cannot: it tries a read the moment one is started, which finds nothing
// when the client has not sent its next request yet, and only then waits (an extra recv for
// many requests), and rearming a wait instead costs an epoll_ctl.
//
// Tasks posted from other threads run on the loop thread in order; the loop is woken through an
// eventfd only when it sleeps, so a burst of posts (a batch's answers) costs one wake-up.
//
// Thread safety: Post, Dispatch (from other threads), Stop and InThisThread from any thread;
// everything else on the loop thread only (Add and Every also before Run).

#include <sys/epoll.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "core/status.h"
#include "core/unique_function.h"

namespace rampart::net {

class EventLoop {
 public:
  // What gets a descriptor's events. Not owned by the loop.
  class Watcher {
   public:
    virtual void OnEvents(uint32_t events) = 0;

   protected:
    virtual ~Watcher() = default;
  };

  // Errors: Internal with the OS reason when epoll or eventfd cannot be created.
  static Result<std::unique_ptr<EventLoop>> Create();
  ~EventLoop();
  EventLoop(const EventLoop&) = delete;
  EventLoop& operator=(const EventLoop&) = delete;

  // Watches `fd` for `events`; `watcher` must outlive the registration (closing the descriptor
  // ends it). An event already collected for a descriptor closed while the same batch of events
  // is being handled still reaches its watcher: keep the watcher alive with KeepUntilIdle.
  Status Add(int fd, uint32_t events, Watcher* watcher);

  // Runs `task` on the loop thread, after the events and tasks already pending.
  void Post(UniqueFunction<void()> task);
  // Runs `task` at once when called on the loop thread, else as Post.
  template <typename F>
  void Dispatch(F&& task) {
    if (InThisThread()) {
      task();
    } else {
      Post(UniqueFunction<void()>(std::forward<F>(task)));
    }
  }
  bool InThisThread() const {
    return std::this_thread::get_id() == thread_.load(std::memory_order_relaxed);
  }

  // Calls `tick` on the loop thread about every `period` (not before it), from Run on.
  void Every(std::chrono::milliseconds period, std::function<void()> tick);

  // Holds `object` until the events of the current batch have been handled.
  void KeepUntilIdle(std::shared_ptr<void> object) { kept_.push_back(std::move(object)); }

  // Calls `hook` on the loop thread once per turn: after a batch of events and the tasks posted
  // meanwhile have run (and after due ticks), before the loop waits again. Set before Run.
  void AtBatchEnd(std::function<void()> hook) { batch_end_ = std::move(hook); }

  // Handles events, tasks and ticks on the calling thread until Stop. Tasks still queued then
  // are destroyed without running.
  void Run();
  void Stop();

 private:
  // Events collected per epoll_wait; more wait for the next turn.
  static constexpr int kEventsPerWait = 256;

  EventLoop(int epoll_fd, int wake_fd);
  void RunPosted();
  // Milliseconds until the next tick is due (-1 when there is none); runs the ones that are.
  int RunDueTicks();

  struct Tick {
    std::chrono::milliseconds period;
    std::function<void()> tick;
    std::chrono::steady_clock::time_point due;
  };

  const int epoll_fd_;
  const int wake_fd_;
  std::atomic<std::thread::id> thread_{};  // Run's
  std::vector<Tick> ticks_;
  std::vector<std::shared_ptr<void>> kept_;
  std::function<void()> batch_end_;

  std::mutex mutex_;
  std::vector<UniqueFunction<void()>> posted_;   // guarded by mutex_
  std::vector<UniqueFunction<void()>> running_;  // the loop thread's swap partner
  bool sleeping_ = false;                        // guarded by mutex_: in epoll_wait, wake it
  bool stopped_ = false;                         // guarded by mutex_
};

}  // namespace rampart::net
