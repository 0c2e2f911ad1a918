#pragma once

// OpenAI's Vector Stores API on the wire (docs/knowledge-hub.md, "Vector Stores API"): request
// bodies and query strings turned into the service's vocabulary (knowledge/hub/vector_stores.h),
// checked against OpenAI's limits, and the service's answers written in OpenAI's object shapes.
//
// Every parser returns InvalidArgument whose message starts with the offending field's path
// ("filters.filters[1].value: must be a string, number or boolean"); ParamOf gives that path
// back for the error body's `param`. The parsers check what the request alone decides; the
// service checks again what depends on its state (unknown file ids, a store's limits).
//
// Pure functions; thread-safe. A json::Parser passed in is used for that call only.

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "json/reader.h"
#include "knowledge/hub/vector_stores.h"
#include "net/http.h"

namespace rampart::api::vector_stores {

namespace hub = knowledge::hub;

// OpenAI's limits.
inline constexpr size_t kMaxAttributes = 16;
inline constexpr size_t kMaxAttributeKeyBytes = 64;
inline constexpr size_t kMaxAttributeStringBytes = 512;
inline constexpr size_t kMaxMetadataPairs = 16;
inline constexpr size_t kMaxMetadataKeyBytes = 64;
inline constexpr size_t kMaxMetadataValueBytes = 512;
inline constexpr size_t kMaxNameBytes = 256;
inline constexpr size_t kMaxFilesPerCall = 500;
inline constexpr size_t kMaxQueries = 10;
inline constexpr size_t kMaxQueryBytes = 4096;
inline constexpr int kMaxFilterDepth = 8;
inline constexpr size_t kMaxFilterNodes = 1000;

// ---- errors -------------------------------------------------------------------------------

// The field path an InvalidArgument from these parsers starts with ("" when none).
std::string ParamOf(const Status& status);
// OpenAI's error body with `status`'s HTTP status (gateway::HttpStatusOf), its message and
// `param` (ParamOf when empty), and x-request-id.
net::HttpResponse ErrorResponse(const Status& status, std::string_view request_id);
net::HttpResponse ErrorResponse(int http_status, std::string_view message,
                                std::string_view request_id, std::string_view param = {});

// ---- requests -----------------------------------------------------------------------------

// POST /v1/vector_stores: {name?, file_ids?, metadata?, chunking_strategy?, expires_after?}.
Result<hub::CreateStoreRequest> ParseCreateStore(json::Parser& parser, std::string_view body);
// POST /v1/vector_stores/{id}: {name?, metadata?, expires_after? (null clears)}.
Result<hub::ModifyStoreRequest> ParseModifyStore(json::Parser& parser, std::string_view body);
// POST .../files: {file_id, attributes?, chunking_strategy?}.
Result<hub::AddFileRequest> ParseAddFile(json::Parser& parser, std::string_view body);
// POST .../files/{file_id}: {attributes} (null or absent: none).
Result<hub::FileAttributes> ParseUpdateFile(json::Parser& parser, std::string_view body);
// POST .../file_batches: {file_ids, attributes?, chunking_strategy?} or
// {files: [{file_id, attributes?, chunking_strategy?}]}; 1..500 files.
Result<hub::CreateBatchRequest> ParseCreateBatch(json::Parser& parser, std::string_view body);
// POST .../search: {query: string | [string], filters?, max_num_results? (1..50),
// ranking_options?: {ranker?, score_threshold? (0..1)}, rewrite_query? (accepted, ignored)}.
// Rankers: OpenAI's "auto", "default-2024-11-15" (hybrid) and "none" (vector), and Rampart's own
// "hybrid", "keyword", "vector". may_read is left null (the front end sets it).
struct ParsedSearch {
  hub::SearchRequest request;
  bool query_was_array = false;  // answered back as given
};
Result<ParsedSearch> ParseSearch(json::Parser& parser, std::string_view body);

// The pieces, for tests and other front ends.
Result<hub::FileAttributes> ParseAttributes(const json::Value& value, std::string_view path);
Result<hub::AttributeFilter> ParseFilter(const json::Value& value, std::string_view path);
Result<hub::ChunkingOptions> ParseChunkingStrategy(const json::Value& value, std::string_view path);

// ?limit (1..100, default 20)&order (asc|desc, default desc)&after&before.
Result<hub::PageRequest> ParsePageQuery(std::string_view query);
// ?filter=in_progress|completed|failed|cancelled (absent: every status).
Result<std::optional<hub::IngestStatus>> ParseStatusFilter(std::string_view query);

// ---- answers ------------------------------------------------------------------------------

std::string StoreJson(const hub::VectorStoreInfo& store);
std::string StoreListJson(const hub::Page<hub::VectorStoreInfo>& page);
std::string FileJson(const hub::VectorStoreFileInfo& file);
std::string FileListJson(const hub::Page<hub::VectorStoreFileInfo>& page);
std::string BatchJson(const hub::FileBatchInfo& batch);
// {id, object, deleted: true}: object "vector_store.deleted" or "vector_store.file.deleted".
std::string DeletedJson(std::string_view id, std::string_view object);
// {object:"vector_store.file_content.page", file_id, filename, attributes,
//  data:[{type:"text", text}], has_more:false, next_page:null}.
std::string FileContentJson(const hub::VectorStoreFileInfo& file,
                            const std::vector<std::string>& chunks);
// {object:"vector_store.search_results.page", search_query, data:[{file_id, filename, score,
// attributes, content:[{type:"text", text}]}], has_more:false, next_page:null}; search_query is
// the query as given (a string, or the array).
std::string SearchPageJson(const std::vector<std::string>& queries, bool query_was_array,
                           const hub::SearchResults& results);

// A file's attributes as policy resource attributes: strings as they are, booleans "true" or
// "false", numbers in their shortest form ("3", "2.5").
std::map<std::string, std::string> StringifyAttributes(const hub::FileAttributes& attributes);

}  // namespace rampart::api::vector_stores
