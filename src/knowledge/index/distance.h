#pragma once

// Distances for the exact scan and for scoring (knowledge/index/hnsw_engine.cc). On x86-64 each
// is compiled twice, for AVX2+FMA and for the baseline, and the loader picks the one the CPU
// runs (GCC's target_clones), so the binary still runs on any x86-64.

#include <cstddef>
#include <span>

namespace rampart::knowledge {

float DotProduct(const float* a, const float* b, size_t count);
float SquaredL2(const float* a, const float* b, size_t count);

// Scales `values` to unit length (a zero vector is left as it is).
void Normalize(std::span<float> values);

}  // namespace rampart::knowledge
