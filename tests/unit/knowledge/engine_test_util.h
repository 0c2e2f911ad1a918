#pragma once

// Generated data for the engine's tests: clustered vectors, metadata over a few fields (some
// records lack some fields), and a brute-force reference search.

#include <algorithm>
#include <cmath>
#include <map>
#include <random>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "knowledge/index/engine.h"
#include "knowledge/index/filter.h"
#include "knowledge/index/vector_types.h"

namespace rampart::knowledge::testing {

// A record of `values` and `metadata`, without sparse values.
inline VectorRecord Record(std::string id, std::vector<float> values, Metadata metadata = {}) {
  VectorRecord record;
  record.id = std::move(id);
  record.values = std::move(values);
  record.metadata = std::move(metadata);
  return record;
}

// Resolves and applies an upsert, as the durable layer's writer does; fails the test when the
// upsert is refused.
inline void Upsert(IndexEngine& engine, std::string_view name_space,
                   std::vector<VectorRecord> records) {
  auto op = engine.ResolveUpsert(name_space, std::move(records));
  ASSERT_TRUE(op.ok()) << op.status().ToString();
  engine.Apply(*op);
}

inline const std::vector<std::string> kGenres = {"drama", "comedy", "noir", "sf", "doc"};
inline const std::vector<std::string> kTags = {"a", "b", "c", "d", "e", "f", "g", "h"};

// Metadata: genre (string, missing for 1 in 10), year (number 1950..2024), flag (bool),
// tags (0..3 of kTags; missing for 1 in 5), rare ("x" for 1 in 200).
inline Metadata RandomMetadata(std::mt19937& random) {
  Metadata metadata;
  std::uniform_int_distribution<int> percent(0, 99);
  std::uniform_int_distribution<int> genre(0, static_cast<int>(kGenres.size()) - 1);
  std::uniform_int_distribution<int> year(1950, 2024);
  std::uniform_int_distribution<int> tag(0, static_cast<int>(kTags.size()) - 1);
  metadata.emplace_back("flag", percent(random) < 30);
  if (percent(random) >= 10) metadata.emplace_back("genre", kGenres[genre(random)]);
  if (std::uniform_int_distribution<int>(0, 199)(random) == 0) {
    metadata.emplace_back("rare", std::string("x"));
  }
  if (percent(random) >= 20) {
    std::vector<std::string> tags;
    int count = std::uniform_int_distribution<int>(0, 3)(random);
    for (int i = 0; i < count; ++i) tags.push_back(kTags[tag(random)]);
    metadata.emplace_back("tags", tags);
  }
  metadata.emplace_back("year", static_cast<double>(year(random)));
  std::sort(metadata.begin(), metadata.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  return metadata;
}

// Vectors around `clusters` random centres (Gaussian spread 0.3 around unit-scale centres).
class ClusteredVectors {
 public:
  ClusteredVectors(size_t dimension, size_t clusters, uint32_t seed)
      : dimension_(dimension), random_(seed) {
    std::normal_distribution<float> normal(0, 1);
    for (size_t c = 0; c < clusters; ++c) {
      std::vector<float> centre(dimension);
      for (float& value : centre) value = normal(random_);
      centres_.push_back(std::move(centre));
    }
  }
  std::vector<float> Next() {
    std::normal_distribution<float> normal(0, 0.3f);
    const auto& centre =
        centres_[std::uniform_int_distribution<size_t>(0, centres_.size() - 1)(random_)];
    std::vector<float> values(dimension_);
    for (size_t i = 0; i < dimension_; ++i) values[i] = centre[i] + normal(random_);
    return values;
  }
  std::mt19937& random() { return random_; }

 private:
  size_t dimension_;
  std::mt19937 random_;
  std::vector<std::vector<float>> centres_;
};

// The score Match documents, computed in double.
inline double ReferenceScore(Metric metric, const std::vector<float>& query,
                             const std::vector<float>& values) {
  double dot = 0, query_norm = 0, value_norm = 0, squared = 0;
  for (size_t i = 0; i < query.size(); ++i) {
    dot += static_cast<double>(query[i]) * values[i];
    query_norm += static_cast<double>(query[i]) * query[i];
    value_norm += static_cast<double>(values[i]) * values[i];
    double difference = static_cast<double>(query[i]) - values[i];
    squared += difference * difference;
  }
  switch (metric) {
    case Metric::kCosine: return dot / std::sqrt(query_norm * value_norm);
    case Metric::kDotProduct: return dot;
    case Metric::kEuclidean: return squared;
  }
  return 0;
}

struct Scored {
  double score;
  std::string id;
};

// The exact top `k` of `records` matching `filter` (null: all), closest first.
inline std::vector<Scored> BruteForce(Metric metric,
                                      const std::map<std::string, VectorRecord>& records,
                                      const std::vector<float>& query, const FilterNode* filter,
                                      size_t k) {
  std::vector<Scored> scored;
  for (const auto& [id, record] : records) {
    if (filter != nullptr && !FilterMatches(*filter, record.metadata)) continue;
    scored.push_back({ReferenceScore(metric, query, record.values), id});
  }
  bool lower = metric == Metric::kEuclidean;
  std::sort(scored.begin(), scored.end(), [&](const Scored& a, const Scored& b) {
    return lower ? a.score < b.score : a.score > b.score;
  });
  if (scored.size() > k) scored.resize(k);
  return scored;
}

}  // namespace rampart::knowledge::testing
