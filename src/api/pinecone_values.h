#pragma once

// Pinecone's metadata and metadata filters as JSON (docs/vector-indexes.md, "Metadata" and
// "Filters"), read into and written from the index vocabulary (knowledge/index/vector_types.h).
//
// Metadata is a flat object of strings, numbers, bools and lists of strings, at most
// kMaxMetadataBytes as JSON text; null, nested objects and lists of anything else are refused.
// A filter is an object whose fields are ANDed: {"f": v} means {"f": {"$eq": v}}; the operators
// are $eq $ne (string, number, bool), $gt $gte $lt $lte (number), $in $nin (an array of
// strings, numbers or bools), $exists (bool), and $and $or (a non-empty array of filters).
// Anything else is InvalidArgument naming where it is ("filter.genre.$regex: unknown
// operator"). Pure functions; thread-safe.

#include <string_view>

#include "core/status.h"
#include "json/reader.h"
#include "json/writer.h"
#include "knowledge/index/vector_types.h"

namespace rampart::api::pinecone {

// `what` names the value in errors ("vectors[2].metadata").
Result<knowledge::Metadata> ParseMetadata(const json::Value& value, std::string_view what);
void WriteMetadata(json::Writer& writer, const knowledge::Metadata& metadata);

// Filters nest at most this deep ($and/$or inside each other).
inline constexpr int kMaxFilterDepth = 8;
Result<knowledge::FilterNode> ParseFilter(const json::Value& value, std::string_view what);

}  // namespace rampart::api::pinecone
