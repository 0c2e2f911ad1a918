#pragma once

// Waiting in tests for a state that can only be polled (queue lengths, counters).

#include <chrono>
#include <functional>
#include <thread>

namespace rampart::testing {

// Polls `condition` every millisecond; false if it does not hold within 10 s.
inline bool Eventually(const std::function<bool()>& condition) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!condition()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

}  // namespace rampart::testing
