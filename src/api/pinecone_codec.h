#pragma once

// Pinecone's wire shapes (docs/vector-indexes.md, "The Pinecone API"): JSON request bodies and
// query strings turned into the index vocabulary (knowledge/index/vector_types.h), checked
// against Pinecone's limits, and answers written back in its camelCase shapes.
//
// Every parser returns InvalidArgument naming the field ("vectors[3].values[7]: ...") for a
// request the index must not take; the front end answers it 400 in Pinecone's error shape
// (PineconeError). The parsers check what the request alone decides (shapes, types, limits, the
// index's dimension); the engine checks again what depends on the index's content.
//
// Pure functions; thread-safe. A json::Parser passed in is used for that call only.

#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "json/reader.h"
#include "json/writer.h"
#include "knowledge/index/backend.h"
#include "knowledge/index/vector_types.h"
#include "net/http.h"

namespace rampart::api::pinecone {

// ---- errors -------------------------------------------------------------------------------

// The HTTP status Pinecone answers a Status with: InvalidArgument, FailedPrecondition and
// PayloadTooLarge 400, Unauthenticated 401, PermissionDenied 403, NotFound 404, AlreadyExists
// 409, ResourceExhausted 429, Unimplemented 501, Unavailable 503, anything else 500.
int HttpStatusOf(const Status& status);
// {"code":<gRPC code>,"message":"...","details":[]} with `http_status`.
net::HttpResponse ErrorResponse(int http_status, std::string_view message);
net::HttpResponse ErrorResponse(const Status& status);
// The body alone, for answers built elsewhere (access refusals).
std::string ErrorJson(int http_status, std::string_view message);

// ---- control plane ------------------------------------------------------------------------

// POST /pinecone/indexes in either shape: this API version's
//   {"name","deployment":{...},"schema":{"fields":{"_values":{"type":"dense_vector",
//    "dimension","metric"}}},"deletion_protection"?}
// or the older {"name","dimension","metric"?,"spec"?,"deletion_protection"?}. The engine's
// options start from `defaults`; dimension and metric come from the request (metric: cosine when
// absent). The name is checked (1..45 bytes of [a-z0-9-], not starting or ending with '-').
Result<knowledge::IndexSpec> ParseCreateIndex(json::Parser& parser, std::string_view body,
                                              const knowledge::EngineOptions& defaults);
Status CheckIndexName(std::string_view name);
// One index's description, with `host` (scheme included) as its data plane's address.
void WriteIndexDescription(json::Writer& writer, const knowledge::IndexSpec& spec,
                           std::string_view host);

// ---- data plane requests ------------------------------------------------------------------

struct UpsertRequest {
  std::string name_space;  // canonical
  std::vector<knowledge::VectorRecord> records;
};
// POST vectors/upsert: {"vectors":[{id, values, sparseValues?, metadata?}], "namespace"?}; at
// most kMaxUpsertRecords records of exactly `dimension` finite values.
Result<UpsertRequest> ParseUpsert(json::Parser& parser, std::string_view body, size_t dimension);

// POST query: {topK, vector | id, sparseVector?, filter?, includeValues?, includeMetadata?,
// namespace?, ef?}. topK in 1..kMaxTopK; `ef` is Rampart's own (HNSW breadth for this query).
Result<knowledge::QueryRequest> ParseQuery(json::Parser& parser, std::string_view body,
                                           size_t dimension);

// POST vectors/update: {id, values?, sparseValues?, setMetadata?, namespace?}. An update by
// filter is Unimplemented.
Result<knowledge::UpdateRequest> ParseUpdate(json::Parser& parser, std::string_view body,
                                             size_t dimension);

// POST vectors/delete: exactly one of {ids}, {deleteAll: true}, {filter}; namespace?.
Result<knowledge::DeleteRequest> ParseDelete(json::Parser& parser, std::string_view body);

// POST describe_index_stats: {filter?}; an empty body is no filter.
Result<std::optional<knowledge::FilterNode>> ParseStatsRequest(json::Parser& parser,
                                                               std::string_view body);

struct FetchRequest {
  std::string name_space;
  std::vector<std::string> ids;
};
// GET vectors/fetch?ids=a&ids=b&namespace=ns: 1..kMaxIdsPerCall ids.
Result<FetchRequest> ParseFetchQuery(std::string_view query);

struct ListRequest {
  std::string name_space;
  std::string prefix;
  size_t limit = knowledge::kMaxListLimit;
  std::string pagination_token;
};
// GET vectors/list?prefix=&limit=&paginationToken=&namespace=: limit in 1..kMaxListLimit.
Result<ListRequest> ParseListQuery(std::string_view query);

// The namespace as answers report it: "__default__" for the default one.
std::string_view ReportedNamespace(std::string_view name_space);

// ---- data plane answers -------------------------------------------------------------------

std::string UpsertAnswer(size_t upserted);
std::string QueryAnswer(const knowledge::QueryResult& result, std::string_view name_space);
std::string FetchAnswer(std::span<const knowledge::VectorRecord> records,
                        std::string_view name_space);
std::string StatsAnswer(const knowledge::IndexStats& stats);
std::string ListAnswer(const knowledge::ListPage& page, std::string_view name_space);

// ---- query strings ------------------------------------------------------------------------

// Percent-decodes a query-string component ('+' is a space). nullopt on a malformed escape.
std::optional<std::string> DecodeQueryComponent(std::string_view text);

}  // namespace rampart::api::pinecone
