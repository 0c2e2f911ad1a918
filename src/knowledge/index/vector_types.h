#pragma once

// The vocabulary of Rampart's vector indexes (docs/vector-indexes.md): a record is an id, dense
// values, optional sparse values and flat metadata, kept in a namespace of an index whose
// dimension and metric are fixed at creation. The shapes and limits follow Pinecone's data plane,
// so that its clients work unchanged; the API front end (api/pinecone_http) turns JSON into these
// types and back, and every backend (the embedded engine, or an external engine behind the same
// interface) takes them as they are.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "core/status.h"

namespace rampart::knowledge {

// Pinecone's limits (its documentation's "Limits" page), checked by the front end and again by
// the engine, so that a backend never holds what a client could not have written.
inline constexpr size_t kMaxDimension = 20000;
inline constexpr size_t kMaxIdBytes = 512;
inline constexpr size_t kMaxMetadataBytes = 40 * 1024;  // per record, as its JSON text
inline constexpr size_t kMaxSparseValues = 2048;        // non-zero entries per record
inline constexpr size_t kMaxUpsertRecords = 1000;
inline constexpr size_t kMaxUpsertBytes = 2 * 1024 * 1024;  // request body
inline constexpr size_t kMaxTopK = 10000;
inline constexpr size_t kMaxIdsPerCall = 1000;  // fetch and delete by ids
inline constexpr size_t kMaxListLimit = 100;
inline constexpr size_t kMaxNamespaceBytes = 512;
inline constexpr size_t kMaxIndexNameBytes = 45;  // lower-case letters, digits and '-'

enum class Metric { kCosine, kDotProduct, kEuclidean };

// "cosine", "dotproduct", "euclidean" (Pinecone's spelling), and back.
std::string_view MetricName(Metric metric);
Result<Metric> ParseMetric(std::string_view name);

// The default namespace is "" on the wire as "", "__default__" or absent; stored as "".
inline std::string_view CanonicalNamespace(std::string_view name) {
  return name == "__default__" ? std::string_view() : name;
}

// A metadata value: string, number, bool, or a list of strings (Pinecone has no nesting).
using MetadataValue = std::variant<std::string, double, bool, std::vector<std::string>>;
// Flat metadata, sorted by key, keys unique.
using Metadata = std::vector<std::pair<std::string, MetadataValue>>;

struct SparseValues {
  std::vector<uint32_t> indices;  // strictly increasing once validated
  std::vector<float> values;      // same length as indices
  bool empty() const { return indices.empty(); }
};

struct VectorRecord {
  std::string id;
  std::vector<float> values;  // exactly the index's dimension
  SparseValues sparse;
  Metadata metadata;
};

// A metadata filter with Pinecone's semantics: an implicit AND of its top-level fields;
// {"f": v} means {"f": {"$eq": v}}; $eq/$ne on strings, numbers and bools; $gt/$gte/$lt/$lte on
// numbers; $in/$nin on arrays of strings, numbers or bools; $exists on bools; $and/$or on arrays
// of filters. A list-of-strings field matches a comparison when any of its elements does ($ne
// and $nin: when none does). A record lacking the field matches only $ne, $nin and
// {"$exists": false}. Built by ParseFilter (knowledge/index/filter.h), evaluated by the engine.
struct FilterNode {
  enum class Op { kAnd, kOr, kEq, kNe, kGt, kGte, kLt, kLte, kIn, kNin, kExists };
  using Scalar = std::variant<std::string, double, bool>;

  Op op = Op::kAnd;
  std::string field;                 // comparisons and $exists
  std::vector<FilterNode> children;  // $and / $or (the top level is an $and)
  std::vector<Scalar> operands;      // one for comparisons and $exists (a bool), any for $in/$nin
};

// ---- writes -------------------------------------------------------------------------------

// Records to insert or replace, whole.
struct UpsertOp {
  std::vector<VectorRecord> records;
};
// Ids to remove (absent ones are ignored).
struct DeleteIdsOp {
  std::vector<std::string> ids;
};
// Every record of the namespace.
struct DeleteAllOp {};

// One logged, replayable write to one namespace. Updates and deletes by filter are resolved by
// the engine into these before they are logged (IndexEngine::Resolve), so that replaying the
// log never depends on what the index held when the write was made.
struct WriteOp {
  std::string name_space;  // canonical (CanonicalNamespace)
  std::variant<UpsertOp, DeleteIdsOp, DeleteAllOp> change;
};

// A write as the front end asks for it, before resolution.
struct UpdateRequest {
  std::string name_space;
  std::string id;
  std::optional<std::vector<float>> values;
  std::optional<SparseValues> sparse;
  std::optional<Metadata> set_metadata;  // merged into the record's metadata, key by key
};
struct DeleteRequest {
  std::string name_space;
  std::vector<std::string> ids;      // or
  bool delete_all = false;           // or
  std::optional<FilterNode> filter;  // (exactly one of the three)
};

// ---- reads --------------------------------------------------------------------------------

struct QueryRequest {
  std::string name_space;
  size_t top_k = 10;
  std::vector<float> vector;           // or
  std::optional<std::string> id;       // query by a stored record's values (exactly one)
  std::optional<SparseValues> sparse;  // adds the sparse dot product to the score (dotproduct)
  std::optional<FilterNode> filter;
  bool include_values = false;
  bool include_metadata = false;
  size_t ef = 0;  // HNSW search breadth for this query; 0: the index's default
};

struct Match {
  std::string id;
  // As Pinecone reports it: cosine similarity and dot product (higher is closer), or the squared
  // euclidean distance (lower is closer); matches are ordered closest first either way.
  float score = 0;
  std::optional<std::vector<float>> values;
  std::optional<SparseValues> sparse;
  std::optional<Metadata> metadata;
};

struct QueryResult {
  std::vector<Match> matches;  // best first
  // How the engine answered (for metrics and the docs' figures): "hnsw", "hnsw+filter",
  // "exact" (a selective filter's subset scanned), "empty".
  std::string_view plan;
  size_t candidates_scored = 0;
};

struct ListPage {
  std::vector<std::string> ids;  // in id order
  std::string next_token;        // empty on the last page
};

struct NamespaceStats {
  std::string name_space;
  uint64_t vector_count = 0;
};

struct IndexStats {
  std::vector<NamespaceStats> namespaces;  // by name; those with a count of 0 are left out
  uint64_t total_vector_count = 0;
  size_t dimension = 0;
  Metric metric = Metric::kCosine;
  double fullness = 0;  // memory in use / the configured limit, 0..1
};

}  // namespace rampart::knowledge
