#pragma once

// Accepting on an edge-triggered, non-blocking listening socket, for the servers on Rampart's own
// event loops (the plain HTTP/1.1 engine and the native gRPC transport).

#include <string_view>

namespace rampart::net {

// The next connection waiting on `listener` (non-blocking, close-on-exec), or -1 once none is
// left. An accept that fails for another reason than an empty backlog (out of descriptors or
// memory) also answers -1 and sets `stalled`, logged once with `what` naming the server, until an
// accept succeeds again: the caller retries on a tick, since no new edge may come.
int AcceptNext(int listener, bool& stalled, std::string_view what);

}  // namespace rampart::net
