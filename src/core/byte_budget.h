#pragma once

// ByteBudget: bytes held at once against a fixed limit, taken and given back from any thread
// (the gRPC front end's requests in flight, the native gRPC transport's messages being read).

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <utility>

namespace rampart {

class ByteBudget {
 public:
  // 0 = no limit.
  explicit ByteBudget(uint64_t limit)
      : limit_(limit > 0 ? limit : std::numeric_limits<uint64_t>::max()) {}
  // Takes `bytes`; false (nothing taken) when they do not fit.
  bool TryTake(uint64_t bytes) {
    uint64_t used = used_.load(std::memory_order_relaxed);
    do {
      if (bytes > limit_ || used > limit_ - bytes) return false;
    } while (!used_.compare_exchange_weak(used, used + bytes, std::memory_order_relaxed));
    return true;
  }
  void Give(uint64_t bytes) { used_.fetch_sub(bytes, std::memory_order_relaxed); }
  uint64_t limit() const { return limit_; }

 private:
  const uint64_t limit_;
  std::atomic<uint64_t> used_{0};
};

// Bytes taken from a ByteBudget, given back when released or destroyed. Move-only.
class ByteReservation {
 public:
  ByteReservation() = default;
  ByteReservation(ByteReservation&& other) noexcept
      : budget_(std::exchange(other.budget_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}
  ByteReservation& operator=(ByteReservation&& other) noexcept {
    if (this != &other) {
      Release();
      budget_ = std::exchange(other.budget_, nullptr);
      bytes_ = std::exchange(other.bytes_, 0);
    }
    return *this;
  }
  ~ByteReservation() { Release(); }

  // Takes `bytes` from `budget` (giving back what was held); false (nothing held) when they do
  // not fit.
  bool Take(ByteBudget& budget, uint64_t bytes) {
    Release();
    if (!budget.TryTake(bytes)) return false;
    budget_ = &budget;
    bytes_ = bytes;
    return true;
  }
  void Release() {
    if (budget_ != nullptr) budget_->Give(bytes_);
    budget_ = nullptr;
    bytes_ = 0;
  }

 private:
  ByteBudget* budget_ = nullptr;
  uint64_t bytes_ = 0;
};

}  // namespace rampart
