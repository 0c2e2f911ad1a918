#pragma once

// Inverted indexes over one namespace's metadata, for the engine's planner
// (knowledge/index/hnsw_engine.cc): per field, value -> slots for strings (each element of a list
// field too) and booleans, and slots by number for ranges. They answer "which slots can match
// this filter" with a bounded superset, or say the filter is too broad to enumerate cheaply.
//
// Not synchronised: the engine mutates it under its exclusive lock and reads it under its shared
// lock.

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "knowledge/index/vector_types.h"

namespace rampart::knowledge {

class MetadataIndex {
 public:
  using Postings = std::vector<uint32_t>;  // sorted, unique

  void Add(uint32_t slot, const Metadata& metadata);
  // REQUIRES: `metadata` is what Add was given for `slot`.
  void Remove(uint32_t slot, const Metadata& metadata);
  void Clear() { fields_.clear(); }

  // A sorted superset of the slots that match `filter`, when the indexes can bound it by
  // `limit` slots; nullopt when they cannot ($ne, $nin and {"$exists": false} alone, ranges or
  // values with more than `limit` slots). An $and is bounded by its smallest bounded part, an
  // $or when every part is. `exact` (when given) is set to whether the set is exactly the
  // matching slots (a comparison, $in, $exists: true, or an $or/$and of one such); otherwise
  // the caller checks each slot against the filter itself.
  std::optional<Postings> Candidates(const FilterNode& filter, size_t limit,
                                     bool* exact = nullptr) const;

  // Approximate heap bytes held (for the engine's memory accounting).
  size_t MemoryBytes() const { return bytes_; }

 private:
  struct Field {
    std::unordered_map<std::string, Postings> strings;
    std::map<double, Postings> numbers;
    Postings true_slots;
    Postings false_slots;
    Postings empty_lists;  // slots whose value is an empty list (they exist, match no value)
    size_t records = 0;    // slots that have the field
  };

  // Whether the slot was added / removed (a list may name a value twice).
  static bool Insert(Postings& postings, uint32_t slot);
  static bool Erase(Postings& postings, uint32_t slot);
  const Postings* ValuePostings(const Field& field, const FilterNode::Scalar& value) const;
  std::optional<Postings> FieldCandidates(const FilterNode& filter, size_t limit) const;

  std::unordered_map<std::string, Field> fields_;
  size_t bytes_ = 0;
};

}  // namespace rampart::knowledge
