#pragma once

// A labelled corpus for the guard's quality test and benchmark: Chinese and English sentences
// in realistic contexts (customer service, HR, finance, logs, code) holding valid entities of
// every type (generated with correct check characters), invalid look-alikes (wrong check
// digits, impossible dates, bad Luhn, wrong IBAN checksums, SSN area 000, version strings,
// order numbers) and near-misses. Deterministic for a seed.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace rampart::guard::testing {

struct Label {
  std::string_view type;  // an entity type name, or "" for a look-alike that must not be found
  size_t start = 0;
  size_t end = 0;
};

struct Sample {
  std::string text;
  std::vector<Label> labels;
};

// `count` samples of one to three sentences each.
std::vector<Sample> MakeCorpus(uint32_t seed, size_t count);

// Generators, also used by the benchmark: one valid value of a type.
std::string MakeEntity(std::string_view type, uint32_t seed);

}  // namespace rampart::guard::testing
