#pragma once

// Records' metadata and the checks every record passes before it is stored: parsed from a
// request's JSON (ParseMetadata), written back (WriteMetadata), and validated whole
// (ValidateRecord). The front end and the engine both use them, so a record is held to the same
// limits whichever way it arrives (docs/vector-indexes.md, "Limits").

#include <cstddef>
#include <string_view>

#include "core/status.h"
#include "json/reader.h"
#include "json/writer.h"
#include "knowledge/index/vector_types.h"

namespace rampart::knowledge {

// Parses flat metadata: an object whose values are strings, numbers, booleans or lists of
// strings. Null values, nested objects and lists of anything but strings are refused, as are
// duplicate keys and metadata whose JSON text is over kMaxMetadataBytes. `what` names the field
// in errors ("vectors[3].metadata"). The result is sorted by key.
Result<Metadata> ParseMetadata(const json::Value& object, std::string_view what);

// Writes `metadata` as a JSON object (integral numbers without a fraction).
void WriteMetadata(const Metadata& metadata, json::Writer& writer);

// The size of `metadata` as WriteMetadata writes it, for the kMaxMetadataBytes limit.
size_t MetadataJsonBytes(const Metadata& metadata);

// Checks one record for an index of `dimension` and `metric`: a non-empty id of at most
// kMaxIdBytes, exactly `dimension` finite values (not all zero for cosine), sparse values of
// equal length with strictly increasing indices, finite values and at most kMaxSparseValues
// entries, metadata sorted with unique keys and within kMaxMetadataBytes. InvalidArgument
// naming the part ("values", "sparseValues.indices", "metadata", "id").
Status ValidateRecord(const VectorRecord& record, size_t dimension, Metric metric);

// The checks on sparse values alone (also for a query's sparse vector).
Status ValidateSparse(const SparseValues& sparse);

// The checks on a dense vector alone (also for a query vector).
Status ValidateDense(const std::vector<float>& values, size_t dimension, Metric metric,
                     std::string_view what);

}  // namespace rampart::knowledge
