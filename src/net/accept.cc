#include "net/accept.h"

#include <sys/socket.h>

#include <cerrno>
#include <cstring>

#include "core/logging.h"

namespace rampart::net {

int AcceptNext(int listener, bool& stalled, std::string_view what) {
  while (true) {
    const int fd = ::accept4(listener, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd >= 0) {
      if (stalled) {
        LOG_INFO("{}: accepting connections again", what);
        stalled = false;
      }
      return fd;
    }
    if (errno == EINTR || errno == ECONNABORTED) continue;
    const bool drained = errno == EAGAIN || errno == EWOULDBLOCK;
    if (!drained && !stalled) {
      LOG_WARN("{}: accept failed: {}; connections wait until it succeeds", what,
               std::strerror(errno));
    }
    stalled = !drained;
    return -1;
  }
}

}  // namespace rampart::net
