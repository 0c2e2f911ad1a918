#include "api/pinecone_codec.h"

#include <charconv>
#include <cmath>
#include <limits>
#include <utility>

#include "core/strings.h"
#include "knowledge/index/filter.h"
#include "knowledge/index/metadata.h"

namespace rampart::api::pinecone {
namespace {

using knowledge::kMaxIdBytes;

// gRPC's status codes, which Pinecone's error body carries as "code".
int GrpcCodeOf(int http_status) {
  switch (http_status) {
    case 400: return 3;   // INVALID_ARGUMENT
    case 401: return 16;  // UNAUTHENTICATED
    case 403: return 7;   // PERMISSION_DENIED
    case 404: return 5;   // NOT_FOUND
    case 405: return 12;  // UNIMPLEMENTED (no such method on the route)
    case 409: return 6;   // ALREADY_EXISTS
    case 429: return 8;   // RESOURCE_EXHAUSTED
    case 501: return 12;  // UNIMPLEMENTED
    case 503: return 14;  // UNAVAILABLE
    default: return 13;   // INTERNAL
  }
}

Result<json::Value> ParseObject(json::Parser& parser, std::string_view body) {
  if (TrimWhitespace(body).empty()) return InvalidArgument("the request needs a JSON body");
  ASSIGN_OR_RETURN(json::Value root, parser.Parse(body));
  if (!root.IsObject()) {
    return InvalidArgument("the request body must be a JSON object, not {}", root.KindName());
  }
  return root;
}

// An optional member of a given kind; null counts as absent (the client sends what it has).
std::optional<json::Value> Member(const json::Value& object, std::string_view key) {
  std::optional<json::Value> value = object.Find(key);
  if (value && value->IsNull()) return std::nullopt;
  return value;
}

Result<std::string> ReadNamespace(const json::Value& root) {
  std::optional<json::Value> value = Member(root, "namespace");
  if (!value) return std::string();
  ASSIGN_OR_RETURN(std::string_view name, value->GetString("namespace"));
  if (name.size() > knowledge::kMaxNamespaceBytes) {
    return InvalidArgument("namespace: {} bytes, over the limit of {}", name.size(),
                           knowledge::kMaxNamespaceBytes);
  }
  return std::string(knowledge::CanonicalNamespace(name));
}

Status CheckId(std::string_view id, std::string_view what) {
  if (id.empty()) return InvalidArgument("{}: an id must not be empty", what);
  if (id.size() > kMaxIdBytes) {
    return InvalidArgument("{}: the id is {} bytes, over the limit of {}", what, id.size(),
                           kMaxIdBytes);
  }
  return Status::Ok();
}

Result<std::string> ReadId(const json::Value& value, std::string_view what) {
  ASSIGN_OR_RETURN(std::string_view id, value.GetString(what));
  RETURN_IF_ERROR(CheckId(id, what));
  return std::string(id);
}

// A JSON number as a finite 32-bit float (1e39 is a valid JSON number but not a float).
Result<float> ReadFloat(const json::Value& value, std::string_view what) {
  ASSIGN_OR_RETURN(double number, value.GetDouble(what));
  const auto single = static_cast<float>(number);
  if (!std::isfinite(single)) {
    return InvalidArgument("{}: {} is not a finite 32-bit float", what, number);
  }
  return single;
}

Result<std::vector<float>> ReadValues(const json::Value& value, std::string_view what,
                                      size_t dimension) {
  if (!value.IsArray()) {
    return InvalidArgument("{}: must be an array of numbers, not {}", what, value.KindName());
  }
  std::vector<float> values;
  values.reserve(dimension);
  size_t i = 0;
  for (simdjson::dom::element item : value.Array()) {
    if (i == dimension) break;
    ASSIGN_OR_RETURN(float single, ReadFloat(json::Value(item), fmt::format("{}[{}]", what, i)));
    values.push_back(single);
    ++i;
  }
  const size_t given = value.Array().size();
  if (given != dimension) {
    return InvalidArgument("{}: {} values, but the index's dimension is {}", what, given,
                           dimension);
  }
  return values;
}

Result<knowledge::SparseValues> ReadSparse(const json::Value& value, std::string_view what) {
  if (!value.IsObject()) {
    return InvalidArgument("{}: must be an object {{indices, values}}, not {}", what,
                           value.KindName());
  }
  std::optional<json::Value> indices = value.Find("indices");
  std::optional<json::Value> values = value.Find("values");
  if (!indices || !values || !indices->IsArray() || !values->IsArray()) {
    return InvalidArgument("{}: needs the arrays 'indices' and 'values'", what);
  }
  knowledge::SparseValues sparse;
  size_t i = 0;
  for (simdjson::dom::element item : indices->Array()) {
    const std::string where = fmt::format("{}.indices[{}]", what, i++);
    ASSIGN_OR_RETURN(uint64_t index, json::Value(item).GetUint64(where));
    if (index > std::numeric_limits<uint32_t>::max()) {
      return InvalidArgument("{}: {} is over 2^32 - 1", where, index);
    }
    if (!sparse.indices.empty() && index <= sparse.indices.back()) {
      return InvalidArgument("{}: indices must be strictly increasing", where);
    }
    sparse.indices.push_back(static_cast<uint32_t>(index));
  }
  i = 0;
  for (simdjson::dom::element item : values->Array()) {
    ASSIGN_OR_RETURN(float single,
                     ReadFloat(json::Value(item), fmt::format("{}.values[{}]", what, i++)));
    sparse.values.push_back(single);
  }
  if (sparse.indices.size() != sparse.values.size()) {
    return InvalidArgument("{}: {} indices but {} values", what, sparse.indices.size(),
                           sparse.values.size());
  }
  if (sparse.indices.size() > knowledge::kMaxSparseValues) {
    return InvalidArgument("{}: {} non-zero values, over the limit of {}", what,
                           sparse.indices.size(), knowledge::kMaxSparseValues);
  }
  return sparse;
}

Result<bool> ReadBool(const json::Value& root, std::string_view key) {
  std::optional<json::Value> value = Member(root, key);
  if (!value) return false;
  return value->GetBool(key);
}

}  // namespace

// ---- errors -------------------------------------------------------------------------------

int HttpStatusOf(const Status& status) {
  switch (status.code()) {
    case StatusCode::kOk: return 200;
    case StatusCode::kInvalidArgument:
    case StatusCode::kFailedPrecondition:
    case StatusCode::kPayloadTooLarge: return 400;
    case StatusCode::kUnauthenticated: return 401;
    case StatusCode::kPermissionDenied: return 403;
    case StatusCode::kNotFound: return 404;
    case StatusCode::kAlreadyExists: return 409;
    case StatusCode::kResourceExhausted: return 429;
    case StatusCode::kUnimplemented: return 501;
    case StatusCode::kUnavailable: return 503;
    default: return 500;
  }
}

std::string ErrorJson(int http_status, std::string_view message) {
  json::Writer writer;
  writer.StartObject();
  writer.Key("code");
  writer.Int64(GrpcCodeOf(http_status));
  writer.Key("message");
  writer.String(message);
  writer.Key("details");
  writer.StartArray();
  writer.EndArray();
  writer.EndObject();
  return writer.Take();
}

net::HttpResponse ErrorResponse(int http_status, std::string_view message) {
  net::HttpResponse response;
  response.status = http_status;
  response.body = ErrorJson(http_status, message);
  return response;
}

net::HttpResponse ErrorResponse(const Status& status) {
  return ErrorResponse(HttpStatusOf(status), status.message());
}

// ---- data plane requests ------------------------------------------------------------------

Result<UpsertRequest> ParseUpsert(json::Parser& parser, std::string_view body, size_t dimension) {
  if (body.size() > knowledge::kMaxUpsertBytes) {
    return InvalidArgument("the upsert request is {} bytes, over the limit of {}", body.size(),
                           knowledge::kMaxUpsertBytes);
  }
  ASSIGN_OR_RETURN(json::Value root, ParseObject(parser, body));
  UpsertRequest request;
  ASSIGN_OR_RETURN(request.name_space, ReadNamespace(root));
  std::optional<json::Value> vectors = root.Find("vectors");
  if (!vectors || !vectors->IsArray()) {
    return InvalidArgument("vectors: an array of records is required");
  }
  const size_t count = vectors->Array().size();
  if (count == 0) return InvalidArgument("vectors: must not be empty");
  if (count > knowledge::kMaxUpsertRecords) {
    return InvalidArgument("vectors: {} records, over the limit of {} per upsert", count,
                           knowledge::kMaxUpsertRecords);
  }
  request.records.reserve(count);
  size_t i = 0;
  for (simdjson::dom::element item : vectors->Array()) {
    const std::string what = fmt::format("vectors[{}]", i++);
    const json::Value vector(item);
    if (!vector.IsObject()) {
      return InvalidArgument("{}: must be an object, not {}", what, vector.KindName());
    }
    knowledge::VectorRecord record;
    std::optional<json::Value> id = vector.Find("id");
    if (!id) return InvalidArgument("{}.id: is required", what);
    ASSIGN_OR_RETURN(record.id, ReadId(*id, what + ".id"));
    std::optional<json::Value> values = vector.Find("values");
    if (!values) return InvalidArgument("{}.values: is required (a dense index)", what);
    ASSIGN_OR_RETURN(record.values, ReadValues(*values, what + ".values", dimension));
    if (std::optional<json::Value> sparse = Member(vector, "sparseValues")) {
      ASSIGN_OR_RETURN(record.sparse, ReadSparse(*sparse, what + ".sparseValues"));
    }
    if (std::optional<json::Value> metadata = Member(vector, "metadata")) {
      ASSIGN_OR_RETURN(record.metadata, knowledge::ParseMetadata(*metadata, what + ".metadata"));
    }
    request.records.push_back(std::move(record));
  }
  return request;
}

Result<knowledge::QueryRequest> ParseQuery(json::Parser& parser, std::string_view body,
                                           size_t dimension) {
  ASSIGN_OR_RETURN(json::Value root, ParseObject(parser, body));
  knowledge::QueryRequest request;
  ASSIGN_OR_RETURN(request.name_space, ReadNamespace(root));
  std::optional<json::Value> top_k = root.Find("topK");
  if (!top_k) return InvalidArgument("topK: is required");
  ASSIGN_OR_RETURN(int64_t k, top_k->GetInt64("topK"));
  if (k < 1 || static_cast<uint64_t>(k) > knowledge::kMaxTopK) {
    return InvalidArgument("topK: {} is out of range [1, {}]", k, knowledge::kMaxTopK);
  }
  request.top_k = static_cast<size_t>(k);
  std::optional<json::Value> vector = Member(root, "vector");
  std::optional<json::Value> id = Member(root, "id");
  if (vector.has_value() == id.has_value()) {
    return InvalidArgument("give exactly one of 'vector' and 'id' to query by");
  }
  if (vector) {
    ASSIGN_OR_RETURN(request.vector, ReadValues(*vector, "vector", dimension));
  } else {
    ASSIGN_OR_RETURN(request.id, ReadId(*id, "id"));
  }
  if (std::optional<json::Value> sparse = Member(root, "sparseVector")) {
    ASSIGN_OR_RETURN(request.sparse, ReadSparse(*sparse, "sparseVector"));
  }
  if (std::optional<json::Value> filter = Member(root, "filter")) {
    ASSIGN_OR_RETURN(request.filter, knowledge::ParseFilter(*filter));
  }
  ASSIGN_OR_RETURN(request.include_values, ReadBool(root, "includeValues"));
  ASSIGN_OR_RETURN(request.include_metadata, ReadBool(root, "includeMetadata"));
  if (std::optional<json::Value> ef = Member(root, "ef")) {
    ASSIGN_OR_RETURN(uint64_t breadth, ef->GetUint64("ef"));
    if (breadth < 1 || breadth > knowledge::kMaxTopK) {
      return InvalidArgument("ef: {} is out of range [1, {}]", breadth, knowledge::kMaxTopK);
    }
    request.ef = static_cast<size_t>(breadth);
  }
  return request;
}

Result<knowledge::UpdateRequest> ParseUpdate(json::Parser& parser, std::string_view body,
                                             size_t dimension) {
  ASSIGN_OR_RETURN(json::Value root, ParseObject(parser, body));
  knowledge::UpdateRequest request;
  ASSIGN_OR_RETURN(request.name_space, ReadNamespace(root));
  if (Member(root, "filter")) {
    return Unimplemented("updating the records a filter matches is not supported; update by id");
  }
  std::optional<json::Value> id = Member(root, "id");
  if (!id) return InvalidArgument("id: is required");
  ASSIGN_OR_RETURN(request.id, ReadId(*id, "id"));
  if (std::optional<json::Value> values = Member(root, "values")) {
    ASSIGN_OR_RETURN(request.values, ReadValues(*values, "values", dimension));
  }
  if (std::optional<json::Value> sparse = Member(root, "sparseValues")) {
    ASSIGN_OR_RETURN(request.sparse, ReadSparse(*sparse, "sparseValues"));
  }
  if (std::optional<json::Value> metadata = Member(root, "setMetadata")) {
    ASSIGN_OR_RETURN(request.set_metadata, knowledge::ParseMetadata(*metadata, "setMetadata"));
  }
  return request;
}

Result<knowledge::DeleteRequest> ParseDelete(json::Parser& parser, std::string_view body) {
  ASSIGN_OR_RETURN(json::Value root, ParseObject(parser, body));
  knowledge::DeleteRequest request;
  ASSIGN_OR_RETURN(request.name_space, ReadNamespace(root));
  std::optional<json::Value> ids = Member(root, "ids");
  std::optional<json::Value> filter = Member(root, "filter");
  ASSIGN_OR_RETURN(request.delete_all, ReadBool(root, "deleteAll"));
  if (ids.has_value() + filter.has_value() + request.delete_all != 1) {
    return InvalidArgument("give exactly one of 'ids', 'filter' and \"deleteAll\": true");
  }
  if (ids) {
    if (!ids->IsArray()) return InvalidArgument("ids: must be an array of strings");
    const size_t count = ids->Array().size();
    if (count == 0) return InvalidArgument("ids: must not be empty");
    if (count > knowledge::kMaxIdsPerCall) {
      return InvalidArgument("ids: {} ids, over the limit of {}", count, knowledge::kMaxIdsPerCall);
    }
    size_t i = 0;
    for (simdjson::dom::element item : ids->Array()) {
      ASSIGN_OR_RETURN(std::string id, ReadId(json::Value(item), fmt::format("ids[{}]", i++)));
      request.ids.push_back(std::move(id));
    }
  }
  if (filter) {
    ASSIGN_OR_RETURN(request.filter, knowledge::ParseFilter(*filter));
  }
  return request;
}

Result<std::optional<knowledge::FilterNode>> ParseStatsRequest(json::Parser& parser,
                                                               std::string_view body) {
  if (TrimWhitespace(body).empty()) return std::optional<knowledge::FilterNode>();
  ASSIGN_OR_RETURN(json::Value root, ParseObject(parser, body));
  std::optional<json::Value> filter = Member(root, "filter");
  if (!filter) return std::optional<knowledge::FilterNode>();
  ASSIGN_OR_RETURN(knowledge::FilterNode node, knowledge::ParseFilter(*filter));
  return std::optional<knowledge::FilterNode>(std::move(node));
}

std::optional<std::string> DecodeQueryComponent(std::string_view text) {
  std::string decoded;
  decoded.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '+') {
      decoded.push_back(' ');
    } else if (text[i] == '%') {
      if (i + 2 >= text.size()) return std::nullopt;
      const int high = HexDigitValue(text[i + 1]);
      const int low = HexDigitValue(text[i + 2]);
      if (high < 0 || low < 0) return std::nullopt;
      decoded.push_back(static_cast<char>(high * 16 + low));
      i += 2;
    } else {
      decoded.push_back(text[i]);
    }
  }
  return decoded;
}

namespace {

// Calls `take(name, value)` for each decoded name=value pair of `query`.
template <typename Take>
Status ForEachParameter(std::string_view query, Take take) {
  while (!query.empty()) {
    const size_t end = query.find('&');
    const std::string_view pair = query.substr(0, end);
    query = end == std::string_view::npos ? std::string_view() : query.substr(end + 1);
    if (pair.empty()) continue;
    const size_t equals = pair.find('=');
    std::optional<std::string> name = DecodeQueryComponent(pair.substr(0, equals));
    std::optional<std::string> value = DecodeQueryComponent(
        equals == std::string_view::npos ? std::string_view() : pair.substr(equals + 1));
    if (!name || !value) return InvalidArgument("malformed query string near '{}'", pair);
    RETURN_IF_ERROR(take(*name, std::move(*value)));
  }
  return Status::Ok();
}

Status TakeNamespace(std::string value, std::string& into) {
  if (value.size() > knowledge::kMaxNamespaceBytes) {
    return InvalidArgument("namespace: {} bytes, over the limit of {}", value.size(),
                           knowledge::kMaxNamespaceBytes);
  }
  into = std::string(knowledge::CanonicalNamespace(value));
  return Status::Ok();
}

}  // namespace

Result<FetchRequest> ParseFetchQuery(std::string_view query) {
  FetchRequest request;
  const Status parsed = ForEachParameter(query, [&](const std::string& name, std::string value) {
    if (name == "ids") {
      RETURN_IF_ERROR(CheckId(value, fmt::format("ids[{}]", request.ids.size())));
      if (request.ids.size() == knowledge::kMaxIdsPerCall) {
        return InvalidArgument("ids: over the limit of {} per fetch", knowledge::kMaxIdsPerCall);
      }
      request.ids.push_back(std::move(value));
    } else if (name == "namespace") {
      RETURN_IF_ERROR(TakeNamespace(std::move(value), request.name_space));
    }
    return Status::Ok();
  });
  RETURN_IF_ERROR(parsed);
  if (request.ids.empty()) return InvalidArgument("ids: give at least one id to fetch");
  return request;
}

Result<ListRequest> ParseListQuery(std::string_view query) {
  ListRequest request;
  const Status parsed = ForEachParameter(query, [&](const std::string& name, std::string value) {
    if (name == "prefix") {
      request.prefix = std::move(value);
    } else if (name == "paginationToken") {
      request.pagination_token = std::move(value);
    } else if (name == "namespace") {
      RETURN_IF_ERROR(TakeNamespace(std::move(value), request.name_space));
    } else if (name == "limit") {
      size_t limit = 0;
      const auto [end, error] = std::from_chars(value.data(), value.data() + value.size(), limit);
      if (error != std::errc() || end != value.data() + value.size() || limit < 1 ||
          limit > knowledge::kMaxListLimit) {
        return InvalidArgument("limit: '{}' is not a number in [1, {}]", value,
                               knowledge::kMaxListLimit);
      }
      request.limit = limit;
    }
    return Status::Ok();
  });
  RETURN_IF_ERROR(parsed);
  return request;
}

std::string_view ReportedNamespace(std::string_view name_space) {
  return name_space.empty() ? std::string_view("__default__") : name_space;
}

}  // namespace rampart::api::pinecone
