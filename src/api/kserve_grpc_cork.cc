#include "api/kserve_grpc_cork.h"

#include <dirent.h>
#include <fcntl.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cstring>
#include <string_view>
#include <unordered_map>
#include <unordered_set>

#include "core/thread_name.h"
#include "net/local_port.h"

namespace rampart::api::grpc_calls {
namespace {

// An int socket option of `fd`, or -1 when it has none (not a socket, say).
int SocketOption(int fd, int level, int option) {
  int value = 0;
  socklen_t length = sizeof(value);
  if (getsockopt(fd, level, option, &value, &length) != 0) return -1;
  return value;
}

// Whether `fd` is a TCP connection (not a listening socket) whose local port is `port`.
bool AcceptedOn(int fd, int port) {
  return SocketOption(fd, SOL_SOCKET, SO_ACCEPTCONN) == 0 &&
         SocketOption(fd, SOL_SOCKET, SO_PROTOCOL) == IPPROTO_TCP && net::LocalPort(fd) == port;
}

// The inode of `fd`'s file (a socket's own), or 0.
ino_t InodeOf(int fd) {
  struct stat status {};
  if (fstat(fd, &status) != 0) return 0;
  return status.st_ino;
}

void SetCork(int fd, int value) {
  // The descriptor is our own duplicate, so it is the socket we found; a connection closed
  // meanwhile makes this fail, which is harmless.
  setsockopt(fd, IPPROTO_TCP, TCP_CORK, &value, sizeof(value));
}

}  // namespace

SocketCork::Socket::~Socket() { close(fd); }

SocketCork::SocketCork(int port, std::chrono::steady_clock::duration bound,
                       std::chrono::steady_clock::duration rescan_interval, size_t max_connections)
    : port_(port),
      bound_(bound),
      rescan_interval_(rescan_interval),
      max_connections_(max_connections) {
  sockets_.store(std::make_shared<const Sockets>());
  if (port_ == 0) return;
  flusher_ = std::thread([this] {
    NameThisThread("grpc-cork");
    RunFlusher();
  });
}

SocketCork::~SocketCork() {
  if (flusher_.joinable()) {
    {
      std::lock_guard lock(flusher_mutex_);
      stopping_ = true;
    }
    flusher_wake_.notify_one();
    flusher_.join();
  }
  if (corked_.load()) SetAll(0);
}

bool SocketCork::Cork() {
  if (port_ == 0) return false;
  std::lock_guard lock(rounds_mutex_);
  if (rounds_ > 0) {
    ++rounds_;  // corked by another thread's round
    return true;
  }
  // The first round looks for the connections itself (once; the flusher looks after that), so
  // that it corks those open by then.
  if (!looked_.load()) Rescan();
  if (socket_count() > max_connections_) return false;
  ++rounds_;
  // Marked corked first: the flusher then watches every moment a socket may be corked.
  corked_.store(true);
  changed_at_.store(Now());
  SetAll(1);
  if (flusher_asleep_.load()) {
    std::lock_guard wake(flusher_mutex_);
    flusher_wake_.notify_one();
  }
  return true;
}

void SocketCork::Flush() {
  if (port_ == 0) return;
  std::lock_guard lock(rounds_mutex_);
  changed_at_.store(Now());
  SetAll(0);
  SetAll(1);
}

void SocketCork::Uncork() {
  if (port_ == 0) return;
  std::lock_guard lock(rounds_mutex_);
  if (rounds_ == 0) return;
  changed_at_.store(Now());
  SetAll(0);
  if (--rounds_ > 0) {
    SetAll(1);  // another thread's round goes on
    return;
  }
  corked_.store(false);
}

SocketCork::Clock::rep SocketCork::Now() { return Clock::now().time_since_epoch().count(); }

void SocketCork::SetAll(int value) {
  const std::shared_ptr<const Sockets> sockets = sockets_.load();
  for (const auto& socket : *sockets) SetCork(socket->fd, value);
}

void SocketCork::RunFlusher() {
  Clock::time_point last_scan{};
  Clock::time_point last_corked{};  // when a look last found the connections corked, or a change
  std::unique_lock lock(flusher_mutex_);
  while (!stopping_) {
    const Clock::time_point now = Clock::now();
    if (now - last_corked < rescan_interval_) {
      // Watching: the next look is a bound after the last change (or from now, when nothing is
      // corked), so the flusher wakes about once a bound however busy the queue threads are.
      Clock::time_point next = now + bound_;
      const Clock::time_point changed(Clock::duration(changed_at_.load()));
      if (corked_.load()) {
        last_corked = now;
        if (now - changed >= bound_) {
          // Corked a bound ago or more and not flushed since: the answers written meanwhile go
          // out now. A queue thread that corks again meanwhile only has them sent early.
          // Counted first: whoever sees the answers arrive sees the count too.
          forced_flushes_.fetch_add(1, std::memory_order_relaxed);
          SetAll(0);
        } else {
          next = changed + bound_;
        }
      } else if (now - changed < bound_) {
        last_corked = now;
      }
      flusher_wake_.wait_until(lock, next, [&] { return stopping_; });
    } else {
      // Nothing corked for a while: sleep until a Cork, looking again at the connections held
      // (to let go of closed ones) once a rescan interval while there are any.
      flusher_asleep_.store(true);
      const auto woken = [&] { return stopping_ || corked_.load(); };
      if (socket_count() > 0) {
        flusher_wake_.wait_for(lock, rescan_interval_, woken);
      } else {
        flusher_wake_.wait(lock, woken);
      }
      flusher_asleep_.store(false);
      // Woken by a Cork (its round may be over already): watching from now on, so that the
      // rounds that follow need no wake-up each.
      const Clock::time_point changed(Clock::duration(changed_at_.load()));
      if (corked_.load() || Clock::now() - changed < bound_) last_corked = Clock::now();
    }
    if (stopping_) break;
    if (Clock::now() - last_scan >= rescan_interval_) {
      lock.unlock();
      Rescan();
      lock.lock();
      last_scan = Clock::now();
    }
  }
}

void SocketCork::Rescan() {
  if (port_ == 0) return;
  std::lock_guard lock(scan_mutex_);
  Scan();
  looked_.store(true);
}

void SocketCork::Scan() {
  const std::shared_ptr<const Sockets> held = sockets_.load();
  std::unordered_map<ino_t, std::shared_ptr<const Socket>> known;
  std::unordered_set<int> own;
  for (const auto& socket : *held) {
    known.emplace(socket->inode, socket);
    own.insert(socket->fd);
  }
  auto found = std::make_shared<Sockets>();
  std::unordered_set<ino_t> found_inodes;
  DIR* directory = opendir("/proc/self/fd");
  if (directory == nullptr) return;  // no /proc: nothing more is corked
  own.insert(dirfd(directory));
  while (const dirent* entry = readdir(directory)) {
    const std::string_view name = entry->d_name;
    int fd = -1;
    const auto [end, error] = std::from_chars(name.data(), name.data() + name.size(), fd);
    if (error != std::errc() || end != name.data() + name.size() || own.count(fd) > 0) continue;
    if (!AcceptedOn(fd, port_)) continue;
    const ino_t inode = InodeOf(fd);
    if (inode == 0 || found_inodes.count(inode) > 0) continue;
    if (const auto it = known.find(inode); it != known.end()) {
      found->push_back(it->second);
      found_inodes.insert(inode);
      continue;
    }
    // The duplicate pins the socket: checked through it, it is the one corked later, even if
    // `fd` was closed and reused since the check above.
    const int copy = fcntl(fd, F_DUPFD_CLOEXEC, 0);
    if (copy < 0) continue;
    own.insert(copy);
    const ino_t copy_inode = InodeOf(copy);
    if (copy_inode == 0 || !AcceptedOn(copy, port_) || found_inodes.count(copy_inode) > 0) {
      close(copy);
      continue;
    }
    auto socket = std::make_shared<const Socket>(copy, copy_inode);
    known.emplace(copy_inode, socket);
    found->push_back(std::move(socket));
    found_inodes.insert(copy_inode);
  }
  closedir(directory);
  // The connections gRPC closed are not in `found`: their duplicates close once no queue thread
  // holds the old set.
  sockets_.store(std::move(found));
}

bool SocketCork::Holds(int fd) const {
  const ino_t inode = InodeOf(fd);
  const std::shared_ptr<const Sockets> sockets = sockets_.load();
  return inode != 0 && std::any_of(sockets->begin(), sockets->end(),
                                   [&](const auto& socket) { return socket->inode == inode; });
}

size_t SocketCork::socket_count() const { return sockets_.load()->size(); }

}  // namespace rampart::api::grpc_calls
