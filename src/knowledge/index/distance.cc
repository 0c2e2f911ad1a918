#include "knowledge/index/distance.h"

#include <cmath>

namespace rampart::knowledge {

// Sixteen independent partial sums: the loop's body is one vector multiply-add per eight or
// sixteen floats once vectorised, and it needs no reassociation of a single float sum (which
// the compiler may not do without -ffast-math).
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define RAMPART_SIMD_CLONES __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define RAMPART_SIMD_CLONES
#endif

namespace {
constexpr size_t kLanes = 16;
}

RAMPART_SIMD_CLONES float DotProduct(const float* a, const float* b, size_t count) {
  float partial[kLanes] = {};
  size_t i = 0;
  for (; i + kLanes <= count; i += kLanes) {
    for (size_t lane = 0; lane < kLanes; ++lane) partial[lane] += a[i + lane] * b[i + lane];
  }
  float sum = 0;
  for (; i < count; ++i) sum += a[i] * b[i];
  for (size_t lane = 0; lane < kLanes; ++lane) sum += partial[lane];
  return sum;
}

RAMPART_SIMD_CLONES float SquaredL2(const float* a, const float* b, size_t count) {
  float partial[kLanes] = {};
  size_t i = 0;
  for (; i + kLanes <= count; i += kLanes) {
    for (size_t lane = 0; lane < kLanes; ++lane) {
      float difference = a[i + lane] - b[i + lane];
      partial[lane] += difference * difference;
    }
  }
  float sum = 0;
  for (; i < count; ++i) {
    float difference = a[i] - b[i];
    sum += difference * difference;
  }
  for (size_t lane = 0; lane < kLanes; ++lane) sum += partial[lane];
  return sum;
}

void Normalize(std::span<float> values) {
  double squares = 0;
  for (float value : values) squares += static_cast<double>(value) * value;
  if (squares == 0) return;
  float scale = static_cast<float>(1.0 / std::sqrt(squares));
  for (float& value : values) value *= scale;
}

}  // namespace rampart::knowledge
