#pragma once

// For the plain and TLS engines' tests of an answer the client never reads.

#include <gtest/gtest.h>

#include <chrono>
#include <cstddef>

#include "net/http_server.h"
#include "testing/fake_clock.h"

namespace rampart::net {

// A body far larger than loopback socket buffers hold: unread, it stays half written.
inline constexpr size_t kUnreadBodyBytes = size_t{32} << 20;

// With a client that stopped reading such an answer, and a server on `clock` whose idle timeout
// is `idle_timeout`: once the clock passes the timeout the server gives the answer up, so a
// shutdown returns at once rather than after its own 20 s, and the request is not counted as
// served.
inline void ExpectShutdownGivesUpTheUnreadAnswer(HttpServer& server, testing::FakeClock& clock,
                                                 std::chrono::seconds idle_timeout) {
  server.CheckDeadlines();  // twice: the server has tried to write, and set its deadline
  server.CheckDeadlines();
  clock.Advance(idle_timeout - std::chrono::milliseconds(1));
  server.CheckDeadlines();
  EXPECT_EQ(server.stats().open_connections, 1u);  // not before the timeout
  clock.Advance(std::chrono::milliseconds(1));
  server.CheckDeadlines();
  const auto started = std::chrono::steady_clock::now();
  server.Shutdown(std::chrono::seconds(20));
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(10));
  EXPECT_EQ(server.stats().requests, 0u);  // never written in full
}

}  // namespace rampart::net
