#include "net/event_loop.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>

#include "core/exceptions.h"

namespace rampart::net {

namespace {

Status OsError(std::string_view what) { return Internal("{}: {}", what, std::strerror(errno)); }

}  // namespace

Result<std::unique_ptr<EventLoop>> EventLoop::Create() {
  const int epoll_fd = epoll_create1(EPOLL_CLOEXEC);
  if (epoll_fd < 0) return OsError("epoll_create1");
  const int wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (wake_fd < 0) {
    Status error = OsError("eventfd");
    close(epoll_fd);
    return error;
  }
  std::unique_ptr<EventLoop> loop(new EventLoop(epoll_fd, wake_fd));
  // The wake-up descriptor's watcher is the null pointer: Run recognises it.
  epoll_event event{};
  event.events = EPOLLIN | EPOLLET;
  event.data.ptr = nullptr;
  if (epoll_ctl(epoll_fd, EPOLL_CTL_ADD, wake_fd, &event) != 0) return OsError("epoll_ctl");
  return loop;
}

EventLoop::EventLoop(int epoll_fd, int wake_fd) : epoll_fd_(epoll_fd), wake_fd_(wake_fd) {}

EventLoop::~EventLoop() {
  close(wake_fd_);
  close(epoll_fd_);
}

Status EventLoop::Add(int fd, uint32_t events, Watcher* watcher) {
  epoll_event event{};
  event.events = events;
  event.data.ptr = watcher;
  if (epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &event) != 0) return OsError("epoll_ctl add");
  return Status::Ok();
}

void EventLoop::Post(UniqueFunction<void()> task) {
  bool wake = false;
  {
    std::lock_guard lock(mutex_);
    if (stopped_) return;  // destroyed (outside the lock) as the loop would have
    posted_.push_back(std::move(task));
    wake = sleeping_;
    sleeping_ = false;
  }
  if (wake) {
    const uint64_t one = 1;
    [[maybe_unused]] const ssize_t written = write(wake_fd_, &one, sizeof(one));
  }
}

void EventLoop::Every(std::chrono::milliseconds period, std::function<void()> tick) {
  ticks_.push_back({period, std::move(tick), std::chrono::steady_clock::now() + period});
}

void EventLoop::Stop() {
  std::lock_guard lock(mutex_);
  stopped_ = true;
  const uint64_t one = 1;
  [[maybe_unused]] const ssize_t written = write(wake_fd_, &one, sizeof(one));
}

void EventLoop::RunPosted() {
  {
    std::lock_guard lock(mutex_);
    running_.swap(posted_);
  }
  for (auto& task : running_) RunLoggingExceptions("an I/O thread's task", [&] { task(); });
  running_.clear();
}

int EventLoop::RunDueTicks() {
  if (ticks_.empty()) return -1;
  const auto now = std::chrono::steady_clock::now();
  auto next = std::chrono::steady_clock::time_point::max();
  for (Tick& tick : ticks_) {
    if (tick.due <= now) {
      RunLoggingExceptions("an I/O thread's timer", [&] { tick.tick(); });
      tick.due = now + tick.period;
    }
    next = std::min(next, tick.due);
  }
  // Rounded up, so the loop never wakes just before a tick is due and spins.
  const auto wait = std::chrono::ceil<std::chrono::milliseconds>(next - now);
  return static_cast<int>(std::max<int64_t>(0, wait.count()));
}

void EventLoop::Run() {
  thread_.store(std::this_thread::get_id(), std::memory_order_relaxed);
  std::array<epoll_event, kEventsPerWait> events;
  while (true) {
    int timeout = RunDueTicks();
    // The last turn's events and tasks, and the ticks, are done.
    if (batch_end_) RunLoggingExceptions("an I/O thread's turn", [&] { batch_end_(); });
    {
      std::lock_guard lock(mutex_);
      if (stopped_) break;
      if (posted_.empty()) {
        sleeping_ = true;
      } else {
        timeout = 0;
      }
    }
    const int count =
        epoll_wait(epoll_fd_, events.data(), static_cast<int>(events.size()), timeout);
    {
      std::lock_guard lock(mutex_);
      sleeping_ = false;
    }
    for (int i = 0; i < count; ++i) {
      if (events[i].data.ptr == nullptr) {
        uint64_t ignored = 0;
        [[maybe_unused]] const ssize_t read_bytes = read(wake_fd_, &ignored, sizeof(ignored));
        continue;
      }
      // A watcher is expected to handle its own failures; this only keeps the loop serving.
      auto* watcher = static_cast<Watcher*>(events[i].data.ptr);
      RunLoggingExceptions("an I/O thread's event", [&] { watcher->OnEvents(events[i].events); });
    }
    RunPosted();
    kept_.clear();
  }
  std::vector<UniqueFunction<void()>> dropped;
  {
    std::lock_guard lock(mutex_);
    dropped.swap(posted_);
  }
  kept_.clear();
  // Thread ids are reused: a later thread must not pass for this loop's.
  thread_.store(std::thread::id(), std::memory_order_relaxed);
}

}  // namespace rampart::net
