#include "api/kserve_grpc_cork.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <charconv>
#include <cstring>
#include <string_view>

namespace rampart::api::grpc_calls {
namespace {

// An int socket option of `fd`, or -1 when it has none (not a socket, say).
int SocketOption(int fd, int level, int option) {
  int value = 0;
  socklen_t length = sizeof(value);
  if (getsockopt(fd, level, option, &value, &length) != 0) return -1;
  return value;
}

// The local port of socket `fd`, or 0.
int LocalPort(int fd) {
  sockaddr_storage address{};
  socklen_t length = sizeof(address);
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) return 0;
  if (address.ss_family == AF_INET) {
    return ntohs(reinterpret_cast<const sockaddr_in*>(&address)->sin_port);
  }
  if (address.ss_family == AF_INET6) {
    return ntohs(reinterpret_cast<const sockaddr_in6*>(&address)->sin6_port);
  }
  return 0;
}

void SetCork(int fd, int value) {
  // A socket closed (or reused by something that is not a TCP socket) since it was found makes
  // this fail, which is harmless.
  setsockopt(fd, IPPROTO_TCP, TCP_CORK, &value, sizeof(value));
}

}  // namespace

SocketCork::SocketCork(int port, std::chrono::steady_clock::duration rescan_interval)
    : port_(port), rescan_interval_(rescan_interval) {}

SocketCork::~SocketCork() { Uncork(); }

void SocketCork::Cork() {
  if (port_ == 0 || corked_) return;
  const auto now = std::chrono::steady_clock::now();
  if (!scanned_ || now - last_scan_ >= rescan_interval_) {
    Scan();
    scanned_ = true;
    last_scan_ = now;
  }
  for (int fd : sockets_) SetCork(fd, 1);
  corked_ = true;
}

void SocketCork::Uncork() {
  if (!corked_) return;
  for (int fd : sockets_) SetCork(fd, 0);
  corked_ = false;
}

void SocketCork::Scan() {
  sockets_.clear();
  DIR* directory = opendir("/proc/self/fd");
  if (directory == nullptr) return;  // no /proc: nothing is corked
  const int own = dirfd(directory);
  while (const dirent* entry = readdir(directory)) {
    const std::string_view name = entry->d_name;
    int fd = -1;
    const auto [end, error] = std::from_chars(name.data(), name.data() + name.size(), fd);
    if (error != std::errc() || end != name.data() + name.size() || fd == own) continue;
    // Accepted TCP connections on the port; not the listening socket itself.
    if (SocketOption(fd, SOL_SOCKET, SO_ACCEPTCONN) != 0) continue;
    if (SocketOption(fd, SOL_SOCKET, SO_PROTOCOL) != IPPROTO_TCP) continue;
    if (LocalPort(fd) == port_) sockets_.push_back(fd);
  }
  closedir(directory);
}

}  // namespace rampart::api::grpc_calls
