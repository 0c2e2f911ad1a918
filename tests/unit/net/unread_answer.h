#pragma once

// For the plain and TLS engines' tests of an answer the client never reads.

#include <gtest/gtest.h>

#include <chrono>
#include <cstddef>

#include "net/http_server.h"

namespace rampart::net {

// A body far larger than loopback socket buffers hold: unread, it stays half written.
inline constexpr size_t kUnreadBodyBytes = size_t{32} << 20;

// With a client that stopped reading such an answer and a server whose idle timeout is 1 s: the
// server gives the answer up at the timeout, so a shutdown returns well before its own 20 s, and
// the request is not counted as served.
inline void ExpectShutdownGivesUpTheUnreadAnswer(HttpServer& server) {
  const auto started = std::chrono::steady_clock::now();
  server.Shutdown(std::chrono::seconds(20));
  const auto elapsed = std::chrono::steady_clock::now() - started;
  EXPECT_GE(elapsed, std::chrono::milliseconds(900));
  EXPECT_LT(elapsed, std::chrono::seconds(10));  // not the shutdown's own timeout
  EXPECT_EQ(server.stats().requests, 0u);        // never written in full
}

}  // namespace rampart::net
