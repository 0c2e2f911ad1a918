#pragma once

// Pinecone's metadata filters (docs/vector-indexes.md, "Filters"): parsed from a request's JSON
// into a FilterNode (knowledge/index/vector_types.h states the semantics), and a brute-force
// evaluator against one record's metadata. The engine answers filters from its inverted indexes
// (knowledge/index/metadata_index.h); FilterMatches is the reference it must agree with, and what
// it uses to check a small candidate set.

#include <cstddef>

#include "core/status.h"
#include "json/reader.h"
#include "knowledge/index/vector_types.h"

namespace rampart::knowledge {

// Bounds on what a filter may hold, so that an untrusted filter cannot take unbounded stack or
// time: nesting of $and/$or and operator objects, and the comparisons plus $in/$nin operands.
inline constexpr size_t kMaxFilterDepth = 10;
inline constexpr size_t kMaxFilterTerms = 10000;

// Parses a filter object. An empty object matches everything. Errors: InvalidArgument naming the
// path from "filter", e.g. "filter.genre: unknown operator '$regex'", "filter.year.$gt: $gt needs
// a number", "filter.$or: $or needs a non-empty array of filters".
Result<FilterNode> ParseFilter(const json::Value& filter);

// Whether `metadata` (sorted by key, as ParseMetadata makes it) satisfies `filter`.
bool FilterMatches(const FilterNode& filter, const Metadata& metadata);

// The value of `key` in `metadata`, or null when absent (binary search: metadata is sorted).
const MetadataValue* FindField(const Metadata& metadata, std::string_view key);

// Whether a filter is the empty $and that matches every record.
inline bool MatchesAll(const FilterNode& filter) {
  return filter.op == FilterNode::Op::kAnd && filter.children.empty();
}

}  // namespace rampart::knowledge
