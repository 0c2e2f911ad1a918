// The Vector Stores API's answers and errors in OpenAI's shapes, and its query strings
// (vector_stores_codec.h).

#include <charconv>
#include <cmath>

#include "api/pinecone_codec.h"
#include "api/vector_stores_codec.h"
#include "gateway/openai_response.h"
#include "json/writer.h"

namespace rampart::api::vector_stores {
namespace {

// Integral numbers as integers (3, not 3.0), like OpenAI's answers.
void WriteNumber(json::Writer& writer, double value) {
  if (std::trunc(value) == value && std::fabs(value) < 9.0e15) {
    writer.Int64(static_cast<int64_t>(value));
  } else {
    writer.Double(value);
  }
}

void WriteAttributes(json::Writer& writer, const hub::FileAttributes& attributes) {
  writer.StartObject();
  for (const auto& [key, value] : attributes) {
    writer.Key(key);
    if (const auto* text = std::get_if<std::string>(&value)) {
      writer.String(*text);
    } else if (const auto* flag = std::get_if<bool>(&value)) {
      writer.Bool(*flag);
    } else {
      WriteNumber(writer, std::get<double>(value));
    }
  }
  writer.EndObject();
}

void WriteCounts(json::Writer& writer, const hub::FileCounts& counts) {
  writer.Key("file_counts");
  writer.StartObject();
  writer.Key("in_progress");
  writer.Int64(counts.in_progress);
  writer.Key("completed");
  writer.Int64(counts.completed);
  writer.Key("failed");
  writer.Int64(counts.failed);
  writer.Key("cancelled");
  writer.Int64(counts.cancelled);
  writer.Key("total");
  writer.Int64(counts.total);
  writer.EndObject();
}

void WriteStore(json::Writer& writer, const hub::VectorStoreInfo& store) {
  writer.StartObject();
  writer.Key("id");
  writer.String(store.id);
  writer.Key("object");
  writer.String("vector_store");
  writer.Key("created_at");
  writer.Int64(store.created_at);
  writer.Key("name");
  if (store.name.empty()) {
    writer.Null();
  } else {
    writer.String(store.name);
  }
  writer.Key("usage_bytes");
  writer.Int64(store.usage_bytes);
  WriteCounts(writer, store.file_counts);
  writer.Key("status");
  writer.String(store.status.empty() ? "completed" : store.status);
  writer.Key("last_active_at");
  writer.Int64(store.last_active_at);
  writer.Key("metadata");
  writer.StartObject();
  for (const auto& [key, value] : store.metadata) {
    writer.Key(key);
    writer.String(value);
  }
  writer.EndObject();
  if (store.expires_after) {
    writer.Key("expires_after");
    writer.StartObject();
    writer.Key("anchor");
    writer.String("last_active_at");
    writer.Key("days");
    writer.Int64(store.expires_after->days);
    writer.EndObject();
  }
  writer.Key("expires_at");
  if (store.expires_at) {
    writer.Int64(*store.expires_at);
  } else {
    writer.Null();
  }
  writer.EndObject();
}

// OpenAI answers "auto" as the static strategy it stands for: 800 tokens, 400 of overlap.
void WriteChunking(json::Writer& writer, const hub::ChunkingOptions& chunking) {
  const bool is_static = chunking.strategy == hub::ChunkingStrategy::kStatic;
  writer.StartObject();
  writer.Key("type");
  writer.String("static");
  writer.Key("static");
  writer.StartObject();
  writer.Key("max_chunk_size_tokens");
  writer.Int64(is_static ? chunking.max_chunk_size_tokens : 800);
  writer.Key("chunk_overlap_tokens");
  writer.Int64(is_static ? chunking.chunk_overlap_tokens : 400);
  writer.EndObject();
  writer.EndObject();
}

void WriteFile(json::Writer& writer, const hub::VectorStoreFileInfo& file) {
  writer.StartObject();
  writer.Key("id");
  writer.String(file.id);
  writer.Key("object");
  writer.String("vector_store.file");
  writer.Key("usage_bytes");
  writer.Int64(file.usage_bytes);
  writer.Key("created_at");
  writer.Int64(file.created_at);
  writer.Key("vector_store_id");
  writer.String(file.vector_store_id);
  writer.Key("status");
  writer.String(hub::IngestStatusName(file.status));
  writer.Key("last_error");
  if (file.last_error) {
    writer.StartObject();
    writer.Key("code");
    writer.String(file.last_error->code);
    writer.Key("message");
    writer.String(file.last_error->message);
    writer.EndObject();
  } else {
    writer.Null();
  }
  writer.Key("chunking_strategy");
  WriteChunking(writer, file.chunking);
  writer.Key("attributes");
  WriteAttributes(writer, file.attributes);
  writer.EndObject();
}

template <typename T, typename Write>
std::string ListJson(const hub::Page<T>& page, Write write) {
  json::Writer writer;
  writer.StartObject();
  writer.Key("object");
  writer.String("list");
  writer.Key("data");
  writer.StartArray();
  for (const T& item : page.items) write(writer, item);
  writer.EndArray();
  writer.Key("first_id");
  if (page.items.empty()) {
    writer.Null();
  } else {
    writer.String(page.items.front().id);
  }
  writer.Key("last_id");
  if (page.items.empty()) {
    writer.Null();
  } else {
    writer.String(page.items.back().id);
  }
  writer.Key("has_more");
  writer.Bool(page.has_more);
  writer.EndObject();
  return writer.Take();
}

void WriteTextParts(json::Writer& writer, const std::vector<std::string>& texts) {
  writer.StartArray();
  for (const std::string& text : texts) {
    writer.StartObject();
    writer.Key("type");
    writer.String("text");
    writer.Key("text");
    writer.String(text);
    writer.EndObject();
  }
  writer.EndArray();
}

}  // namespace

net::HttpResponse ErrorResponse(int http_status, std::string_view message,
                                std::string_view request_id, std::string_view param) {
  net::HttpResponse response;
  response.status = http_status;
  if (!request_id.empty()) response.headers.emplace_back("x-request-id", std::string(request_id));
  response.body = gateway::ErrorJson(message, gateway::ErrorType(http_status), param, {});
  return response;
}

net::HttpResponse ErrorResponse(const Status& status, std::string_view request_id) {
  return ErrorResponse(gateway::HttpStatusOf(status), status.message(), request_id,
                       ParamOf(status));
}

std::string StoreJson(const hub::VectorStoreInfo& store) {
  json::Writer writer;
  WriteStore(writer, store);
  return writer.Take();
}

std::string StoreListJson(const hub::Page<hub::VectorStoreInfo>& page) {
  return ListJson(page, WriteStore);
}

std::string FileJson(const hub::VectorStoreFileInfo& file) {
  json::Writer writer;
  WriteFile(writer, file);
  return writer.Take();
}

std::string FileListJson(const hub::Page<hub::VectorStoreFileInfo>& page) {
  return ListJson(page, WriteFile);
}

std::string BatchJson(const hub::FileBatchInfo& batch) {
  json::Writer writer;
  writer.StartObject();
  writer.Key("id");
  writer.String(batch.id);
  writer.Key("object");
  writer.String("vector_store.files_batch");
  writer.Key("created_at");
  writer.Int64(batch.created_at);
  writer.Key("vector_store_id");
  writer.String(batch.vector_store_id);
  writer.Key("status");
  writer.String(hub::IngestStatusName(batch.status));
  WriteCounts(writer, batch.file_counts);
  writer.EndObject();
  return writer.Take();
}

std::string DeletedJson(std::string_view id, std::string_view object) {
  json::Writer writer;
  writer.StartObject();
  writer.Key("id");
  writer.String(id);
  writer.Key("object");
  writer.String(object);
  writer.Key("deleted");
  writer.Bool(true);
  writer.EndObject();
  return writer.Take();
}

std::string FileContentJson(const hub::VectorStoreFileInfo& file,
                            const std::vector<std::string>& chunks) {
  json::Writer writer;
  writer.StartObject();
  writer.Key("object");
  writer.String("vector_store.file_content.page");
  writer.Key("file_id");
  writer.String(file.id);
  writer.Key("filename");
  writer.String(file.filename);
  writer.Key("attributes");
  WriteAttributes(writer, file.attributes);
  writer.Key("data");
  WriteTextParts(writer, chunks);
  writer.Key("has_more");
  writer.Bool(false);
  writer.Key("next_page");
  writer.Null();
  writer.EndObject();
  return writer.Take();
}

std::string SearchPageJson(const std::vector<std::string>& queries, bool query_was_array,
                           const hub::SearchResults& results) {
  json::Writer writer;
  writer.StartObject();
  writer.Key("object");
  writer.String("vector_store.search_results.page");
  writer.Key("search_query");
  if (query_was_array || queries.size() != 1) {
    writer.StartArray();
    for (const std::string& query : queries) writer.String(query);
    writer.EndArray();
  } else {
    writer.String(queries.front());
  }
  writer.Key("data");
  writer.StartArray();
  for (const hub::SearchHit& hit : results.hits) {
    writer.StartObject();
    writer.Key("file_id");
    writer.String(hit.file_id);
    writer.Key("filename");
    writer.String(hit.filename);
    writer.Key("score");
    writer.Double(hit.score);
    writer.Key("attributes");
    WriteAttributes(writer, hit.attributes);
    writer.Key("content");
    WriteTextParts(writer, {hit.text});
    writer.EndObject();
  }
  writer.EndArray();
  writer.Key("has_more");
  writer.Bool(false);
  writer.Key("next_page");
  writer.Null();
  writer.EndObject();
  return writer.Take();
}

std::map<std::string, std::string> StringifyAttributes(const hub::FileAttributes& attributes) {
  std::map<std::string, std::string> strings;
  for (const auto& [key, value] : attributes) {
    if (const auto* text = std::get_if<std::string>(&value)) {
      strings.emplace(key, *text);
    } else if (const auto* flag = std::get_if<bool>(&value)) {
      strings.emplace(key, *flag ? "true" : "false");
    } else {
      const double number = std::get<double>(value);
      strings.emplace(key, std::trunc(number) == number && std::fabs(number) < 9.0e15
                               ? fmt::format("{}", static_cast<int64_t>(number))
                               : fmt::format("{}", number));
    }
  }
  return strings;
}

Result<hub::PageRequest> ParsePageQuery(std::string_view query) {
  hub::PageRequest page;
  while (!query.empty()) {
    const size_t end = query.find('&');
    const std::string_view pair = query.substr(0, end);
    query = end == std::string_view::npos ? std::string_view() : query.substr(end + 1);
    const size_t equals = pair.find('=');
    const std::string_view name = pair.substr(0, equals);
    std::optional<std::string> value = pinecone::DecodeQueryComponent(
        equals == std::string_view::npos ? std::string_view() : pair.substr(equals + 1));
    if (!value) return InvalidArgument("{}: malformed percent-encoding", name);
    if (name == "limit") {
      int limit = 0;
      const auto [last, error] =
          std::from_chars(value->data(), value->data() + value->size(), limit);
      if (error != std::errc() || last != value->data() + value->size() || limit < 1 ||
          limit > 100) {
        return InvalidArgument("limit: must be an integer from 1 to 100");
      }
      page.limit = limit;
    } else if (name == "order") {
      if (*value != "asc" && *value != "desc") return InvalidArgument("order: must be asc or desc");
      page.descending = *value == "desc";
    } else if (name == "after") {
      page.after = std::move(*value);
    } else if (name == "before") {
      page.before = std::move(*value);
    }
  }
  return page;
}

Result<std::optional<hub::IngestStatus>> ParseStatusFilter(std::string_view query) {
  while (!query.empty()) {
    const size_t end = query.find('&');
    const std::string_view pair = query.substr(0, end);
    query = end == std::string_view::npos ? std::string_view() : query.substr(end + 1);
    const size_t equals = pair.find('=');
    if (pair.substr(0, equals) != "filter") continue;
    const std::string_view value =
        equals == std::string_view::npos ? std::string_view() : pair.substr(equals + 1);
    for (hub::IngestStatus status : {hub::IngestStatus::kInProgress, hub::IngestStatus::kCompleted,
                                     hub::IngestStatus::kFailed, hub::IngestStatus::kCancelled}) {
      if (hub::IngestStatusName(status) == value) return std::optional<hub::IngestStatus>(status);
    }
    return InvalidArgument("filter: must be in_progress, completed, failed or cancelled");
  }
  return std::optional<hub::IngestStatus>();
}

}  // namespace rampart::api::vector_stores
