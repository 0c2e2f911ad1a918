#include "api/vector_stores_codec.h"

#include <cmath>

#include "knowledge/hub/chunker.h"

namespace rampart::api::vector_stores {
namespace {

std::string Path(std::string_view parent, std::string_view child) {
  return parent.empty() ? std::string(child) : fmt::format("{}.{}", parent, child);
}

Result<json::Value> ParseObject(json::Parser& parser, std::string_view body) {
  if (body.empty()) return InvalidArgument("the request body must be a JSON object");
  Result<json::Value> root = parser.Parse(body);
  if (!root.ok())
    return InvalidArgument("the request body is not JSON: {}", root.status().message());
  if (!root->IsObject()) {
    return InvalidArgument("the request body must be a JSON object, got {}", root->KindName());
  }
  return root;
}

// A member that is absent or null is nullopt.
std::optional<json::Value> Member(const json::Value& object, std::string_view key) {
  std::optional<json::Value> value = object.Find(key);
  if (!value || value->IsNull()) return std::nullopt;
  return value;
}

Result<std::string> String(const json::Value& value, std::string_view path) {
  if (value.kind() != json::Kind::kString) {
    return InvalidArgument("{}: must be a string, got {}", path, value.KindName());
  }
  ASSIGN_OR_RETURN(std::string_view text, value.GetString(path));
  return std::string(text);
}

Result<int64_t> Integer(const json::Value& value, std::string_view path) {
  if (value.kind() != json::Kind::kNumber) {
    return InvalidArgument("{}: must be an integer, got {}", path, value.KindName());
  }
  Result<int64_t> number = value.GetInt64(path);
  if (!number.ok()) return InvalidArgument("{}: must be an integer", path);
  return number;
}

Result<hub::AttributeValue> AttributeValueOf(const json::Value& value, std::string_view path) {
  switch (value.kind()) {
    case json::Kind::kString: {
      ASSIGN_OR_RETURN(std::string text, String(value, path));
      return hub::AttributeValue(std::move(text));
    }
    case json::Kind::kBool: {
      ASSIGN_OR_RETURN(bool flag, value.GetBool(path));
      return hub::AttributeValue(flag);
    }
    case json::Kind::kNumber: {
      ASSIGN_OR_RETURN(double number, value.GetDouble(path));
      if (!std::isfinite(number)) return InvalidArgument("{}: must be a finite number", path);
      return hub::AttributeValue(number);
    }
    default:
      return InvalidArgument("{}: must be a string, number or boolean, got {}", path,
                             value.KindName());
  }
}

Result<std::map<std::string, std::string>> Metadata(const json::Value& value,
                                                    std::string_view path) {
  if (!value.IsObject()) return InvalidArgument("{}: must be an object", path);
  std::map<std::string, std::string> metadata;
  for (auto [key, element] : value.Object()) {
    const std::string field = Path(path, key);
    if (metadata.size() == kMaxMetadataPairs) {
      return InvalidArgument("{}: at most {} pairs", path, kMaxMetadataPairs);
    }
    if (key.empty() || key.size() > kMaxMetadataKeyBytes) {
      return InvalidArgument("{}: keys must be 1 to {} characters", path, kMaxMetadataKeyBytes);
    }
    ASSIGN_OR_RETURN(std::string text, String(json::Value(element), field));
    if (text.size() > kMaxMetadataValueBytes) {
      return InvalidArgument("{}: at most {} characters", field, kMaxMetadataValueBytes);
    }
    metadata.emplace(std::string(key), std::move(text));
  }
  return metadata;
}

Result<hub::ExpiryPolicy> Expiry(const json::Value& value, std::string_view path) {
  if (!value.IsObject()) return InvalidArgument("{}: must be an object", path);
  std::optional<json::Value> anchor = Member(value, "anchor");
  if (!anchor) return InvalidArgument("{}: 'anchor' is required", Path(path, "anchor"));
  ASSIGN_OR_RETURN(std::string anchor_name, String(*anchor, Path(path, "anchor")));
  if (anchor_name != "last_active_at") {
    return InvalidArgument("{}: must be 'last_active_at'", Path(path, "anchor"));
  }
  std::optional<json::Value> days = Member(value, "days");
  if (!days) return InvalidArgument("{}: 'days' is required", Path(path, "days"));
  ASSIGN_OR_RETURN(int64_t count, Integer(*days, Path(path, "days")));
  if (count < 1 || count > 365) {
    return InvalidArgument("{}: must be between 1 and 365, got {}", Path(path, "days"), count);
  }
  return hub::ExpiryPolicy{.days = count};
}

Result<std::vector<std::string>> FileIds(const json::Value& value, std::string_view path) {
  if (!value.IsArray()) return InvalidArgument("{}: must be an array of file ids", path);
  std::vector<std::string> ids;
  for (simdjson::dom::element element : value.Array()) {
    const std::string field = fmt::format("{}[{}]", path, ids.size());
    if (ids.size() == kMaxFilesPerCall) {
      return InvalidArgument("{}: at most {} files", path, kMaxFilesPerCall);
    }
    ASSIGN_OR_RETURN(std::string id, String(json::Value(element), field));
    if (id.empty()) return InvalidArgument("{}: must not be empty", field);
    ids.push_back(std::move(id));
  }
  return ids;
}

Result<hub::AttributeFilter::Op> OpOf(std::string_view type, std::string_view path) {
  using Op = hub::AttributeFilter::Op;
  static constexpr std::pair<std::string_view, Op> kOps[] = {
      {"eq", Op::kEq},   {"ne", Op::kNe}, {"gt", Op::kGt},   {"gte", Op::kGte}, {"lt", Op::kLt},
      {"lte", Op::kLte}, {"in", Op::kIn}, {"nin", Op::kNin}, {"and", Op::kAnd}, {"or", Op::kOr},
  };
  for (const auto& [name, op] : kOps) {
    if (name == type) return op;
  }
  return InvalidArgument("{}: must be one of eq, ne, gt, gte, lt, lte, in, nin, and, or; got '{}'",
                         path, type);
}

Result<hub::AttributeFilter> Filter(const json::Value& value, std::string_view path, int depth,
                                    size_t& nodes) {
  using Op = hub::AttributeFilter::Op;
  if (!value.IsObject()) return InvalidArgument("{}: must be an object", path);
  if (depth > kMaxFilterDepth) {
    return InvalidArgument("{}: filters nest at most {} levels", path, kMaxFilterDepth);
  }
  if (++nodes > kMaxFilterNodes) {
    return InvalidArgument("{}: at most {} filters and values in all", path, kMaxFilterNodes);
  }
  std::optional<json::Value> type = Member(value, "type");
  if (!type) return InvalidArgument("{}: 'type' is required", Path(path, "type"));
  ASSIGN_OR_RETURN(std::string type_name, String(*type, Path(path, "type")));
  hub::AttributeFilter filter;
  ASSIGN_OR_RETURN(filter.op, OpOf(type_name, Path(path, "type")));
  if (filter.op == Op::kAnd || filter.op == Op::kOr) {
    std::optional<json::Value> filters = Member(value, "filters");
    const std::string field = Path(path, "filters");
    if (!filters || !filters->IsArray()) {
      return InvalidArgument("{}: a compound filter needs an array of filters", field);
    }
    for (simdjson::dom::element element : filters->Array()) {
      ASSIGN_OR_RETURN(
          hub::AttributeFilter inner,
          Filter(json::Value(element), fmt::format("{}[{}]", field, filter.filters.size()),
                 depth + 1, nodes));
      filter.filters.push_back(std::move(inner));
    }
    if (filter.filters.empty()) return InvalidArgument("{}: must not be empty", field);
    return filter;
  }
  std::optional<json::Value> key = Member(value, "key");
  if (!key) return InvalidArgument("{}: 'key' is required", Path(path, "key"));
  ASSIGN_OR_RETURN(filter.key, String(*key, Path(path, "key")));
  if (filter.key.empty()) return InvalidArgument("{}: must not be empty", Path(path, "key"));
  std::optional<json::Value> operand = value.Find("value");
  const std::string field = Path(path, "value");
  if (!operand) return InvalidArgument("{}: 'value' is required", field);
  if (filter.op == Op::kIn || filter.op == Op::kNin) {
    if (!operand->IsArray()) {
      return InvalidArgument("{}: '{}' needs an array of strings or numbers", field, type_name);
    }
    for (simdjson::dom::element element : operand->Array()) {
      const std::string item = fmt::format("{}[{}]", field, filter.values.size());
      if (++nodes > kMaxFilterNodes) {
        return InvalidArgument("{}: at most {} filters and values in all", path, kMaxFilterNodes);
      }
      ASSIGN_OR_RETURN(hub::AttributeValue one, AttributeValueOf(json::Value(element), item));
      if (std::holds_alternative<bool>(one)) {
        return InvalidArgument("{}: must be a string or number", item);
      }
      filter.values.push_back(std::move(one));
    }
    return filter;
  }
  ASSIGN_OR_RETURN(filter.value, AttributeValueOf(*operand, field));
  const bool ordering = filter.op == Op::kGt || filter.op == Op::kGte || filter.op == Op::kLt ||
                        filter.op == Op::kLte;
  if (ordering && std::holds_alternative<bool>(filter.value)) {
    return InvalidArgument("{}: '{}' compares numbers or strings, not booleans", field, type_name);
  }
  return filter;
}

// Each file's attributes and chunking strategy, as a batch or an added file gives them.
Status ReadFileOptions(const json::Value& object, std::string_view path,
                       hub::AddFileRequest& into) {
  if (std::optional<json::Value> attributes = Member(object, "attributes")) {
    ASSIGN_OR_RETURN(into.attributes, ParseAttributes(*attributes, Path(path, "attributes")));
  }
  if (std::optional<json::Value> chunking = Member(object, "chunking_strategy")) {
    ASSIGN_OR_RETURN(into.chunking,
                     ParseChunkingStrategy(*chunking, Path(path, "chunking_strategy")));
  }
  return Status::Ok();
}

}  // namespace

// ---- errors -------------------------------------------------------------------------------

std::string ParamOf(const Status& status) {
  if (status.code() != StatusCode::kInvalidArgument) return {};
  const std::string_view message = status.message();
  const size_t colon = message.find(": ");
  if (colon == std::string_view::npos || colon == 0) return {};
  const std::string_view path = message.substr(0, colon);
  for (char c : path) {
    const bool allowed = std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' ||
                         c == '[' || c == ']' || c == '-';
    if (!allowed) return {};
  }
  return std::string(path);
}

// ---- requests -----------------------------------------------------------------------------

Result<hub::FileAttributes> ParseAttributes(const json::Value& value, std::string_view path) {
  if (value.IsNull()) return hub::FileAttributes();
  if (!value.IsObject()) return InvalidArgument("{}: must be an object", path);
  hub::FileAttributes attributes;
  for (auto [key, element] : value.Object()) {
    if (attributes.size() == kMaxAttributes) {
      return InvalidArgument("{}: at most {} attributes", path, kMaxAttributes);
    }
    if (key.empty() || key.size() > kMaxAttributeKeyBytes) {
      return InvalidArgument("{}: keys must be 1 to {} characters, got '{}'", path,
                             kMaxAttributeKeyBytes, key.substr(0, 80));
    }
    const std::string field = Path(path, key);
    ASSIGN_OR_RETURN(hub::AttributeValue one, AttributeValueOf(json::Value(element), field));
    if (const auto* text = std::get_if<std::string>(&one);
        text != nullptr && text->size() > kMaxAttributeStringBytes) {
      return InvalidArgument("{}: a string attribute is at most {} characters", field,
                             kMaxAttributeStringBytes);
    }
    attributes.emplace(std::string(key), std::move(one));
  }
  return attributes;
}

Result<hub::AttributeFilter> ParseFilter(const json::Value& value, std::string_view path) {
  size_t nodes = 0;
  return Filter(value, path, 1, nodes);
}

Result<hub::ChunkingOptions> ParseChunkingStrategy(const json::Value& value,
                                                   std::string_view path) {
  if (!value.IsObject()) return InvalidArgument("{}: must be an object", path);
  std::optional<json::Value> type = Member(value, "type");
  if (!type) return InvalidArgument("{}: 'type' is required", Path(path, "type"));
  ASSIGN_OR_RETURN(std::string type_name, String(*type, Path(path, "type")));
  if (type_name == "auto") return hub::ChunkingOptions::Auto();
  if (type_name != "static") {
    return InvalidArgument("{}: must be 'auto' or 'static', got '{}'", Path(path, "type"),
                           type_name);
  }
  const std::string static_path = Path(path, "static");
  std::optional<json::Value> settings = Member(value, "static");
  if (!settings || !settings->IsObject()) {
    return InvalidArgument("{}: the static strategy needs its settings", static_path);
  }
  hub::ChunkingOptions options = hub::ChunkingOptions::Static();
  for (auto [name, target] : {std::pair{"max_chunk_size_tokens", &options.max_chunk_size_tokens},
                              std::pair{"chunk_overlap_tokens", &options.chunk_overlap_tokens}}) {
    std::optional<json::Value> given = Member(*settings, name);
    const std::string field = Path(static_path, name);
    if (!given) return InvalidArgument("{}: is required", field);
    ASSIGN_OR_RETURN(int64_t number, Integer(*given, field));
    if (number < 0 || number > 1'000'000) return InvalidArgument("{}: out of range", field);
    *target = static_cast<int>(number);
  }
  if (Status valid = hub::ValidateChunkingOptions(options); !valid.ok()) {
    const std::string_view message = valid.message();
    const std::string_view field = message.starts_with("chunk_overlap_tokens")
                                       ? "chunk_overlap_tokens"
                                       : "max_chunk_size_tokens";
    return InvalidArgument("{}: {}", Path(static_path, field), message);
  }
  return options;
}

Result<hub::CreateStoreRequest> ParseCreateStore(json::Parser& parser, std::string_view body) {
  ASSIGN_OR_RETURN(json::Value root, ParseObject(parser, body));
  hub::CreateStoreRequest request;
  if (std::optional<json::Value> name = Member(root, "name")) {
    ASSIGN_OR_RETURN(request.name, String(*name, "name"));
    if (request.name.size() > kMaxNameBytes) {
      return InvalidArgument("name: at most {} characters", kMaxNameBytes);
    }
  }
  if (std::optional<json::Value> metadata = Member(root, "metadata")) {
    ASSIGN_OR_RETURN(request.metadata, Metadata(*metadata, "metadata"));
  }
  if (std::optional<json::Value> expiry = Member(root, "expires_after")) {
    ASSIGN_OR_RETURN(request.expires_after, Expiry(*expiry, "expires_after"));
  }
  if (std::optional<json::Value> ids = Member(root, "file_ids")) {
    ASSIGN_OR_RETURN(request.file_ids, FileIds(*ids, "file_ids"));
  }
  if (std::optional<json::Value> chunking = Member(root, "chunking_strategy")) {
    ASSIGN_OR_RETURN(request.chunking, ParseChunkingStrategy(*chunking, "chunking_strategy"));
  }
  return request;
}

Result<hub::ModifyStoreRequest> ParseModifyStore(json::Parser& parser, std::string_view body) {
  ASSIGN_OR_RETURN(json::Value root, ParseObject(parser, body));
  hub::ModifyStoreRequest request;
  if (std::optional<json::Value> name = Member(root, "name")) {
    ASSIGN_OR_RETURN(request.name, String(*name, "name"));
    if (request.name->size() > kMaxNameBytes) {
      return InvalidArgument("name: at most {} characters", kMaxNameBytes);
    }
  }
  if (std::optional<json::Value> metadata = Member(root, "metadata")) {
    ASSIGN_OR_RETURN(request.metadata, Metadata(*metadata, "metadata"));
  }
  if (std::optional<json::Value> expiry = root.Find("expires_after")) {
    if (expiry->IsNull()) {
      request.expires_after = std::optional<hub::ExpiryPolicy>();
    } else {
      ASSIGN_OR_RETURN(hub::ExpiryPolicy policy, Expiry(*expiry, "expires_after"));
      request.expires_after = std::optional<hub::ExpiryPolicy>(policy);
    }
  }
  return request;
}

Result<hub::AddFileRequest> ParseAddFile(json::Parser& parser, std::string_view body) {
  ASSIGN_OR_RETURN(json::Value root, ParseObject(parser, body));
  hub::AddFileRequest request;
  std::optional<json::Value> id = Member(root, "file_id");
  if (!id) return InvalidArgument("file_id: is required");
  ASSIGN_OR_RETURN(request.file_id, String(*id, "file_id"));
  if (request.file_id.empty()) return InvalidArgument("file_id: must not be empty");
  RETURN_IF_ERROR(ReadFileOptions(root, "", request));
  return request;
}

Result<hub::FileAttributes> ParseUpdateFile(json::Parser& parser, std::string_view body) {
  ASSIGN_OR_RETURN(json::Value root, ParseObject(parser, body));
  std::optional<json::Value> attributes = Member(root, "attributes");
  if (!attributes) return hub::FileAttributes();
  return ParseAttributes(*attributes, "attributes");
}

Result<hub::CreateBatchRequest> ParseCreateBatch(json::Parser& parser, std::string_view body) {
  ASSIGN_OR_RETURN(json::Value root, ParseObject(parser, body));
  hub::CreateBatchRequest request;
  std::optional<json::Value> ids = Member(root, "file_ids");
  std::optional<json::Value> files = Member(root, "files");
  if (ids && files) return InvalidArgument("files: give either file_ids or files, not both");
  if (ids) {
    hub::AddFileRequest shared;
    RETURN_IF_ERROR(ReadFileOptions(root, "", shared));
    ASSIGN_OR_RETURN(std::vector<std::string> list, FileIds(*ids, "file_ids"));
    for (std::string& id : list) {
      hub::AddFileRequest one = shared;
      one.file_id = std::move(id);
      request.files.push_back(std::move(one));
    }
    if (request.files.empty()) return InvalidArgument("file_ids: must not be empty");
    return request;
  }
  if (!files) return InvalidArgument("file_ids: file_ids or files is required");
  if (!files->IsArray()) return InvalidArgument("files: must be an array");
  for (simdjson::dom::element element : files->Array()) {
    const std::string path = fmt::format("files[{}]", request.files.size());
    if (request.files.size() == kMaxFilesPerCall) {
      return InvalidArgument("files: at most {} files", kMaxFilesPerCall);
    }
    const json::Value file(element);
    if (!file.IsObject()) return InvalidArgument("{}: must be an object", path);
    hub::AddFileRequest one;
    std::optional<json::Value> id = Member(file, "file_id");
    if (!id) return InvalidArgument("{}: 'file_id' is required", Path(path, "file_id"));
    ASSIGN_OR_RETURN(one.file_id, String(*id, Path(path, "file_id")));
    if (one.file_id.empty()) return InvalidArgument("{}: must not be empty", Path(path, "file_id"));
    RETURN_IF_ERROR(ReadFileOptions(file, path, one));
    request.files.push_back(std::move(one));
  }
  if (request.files.empty()) return InvalidArgument("files: must not be empty");
  return request;
}

Result<ParsedSearch> ParseSearch(json::Parser& parser, std::string_view body) {
  ASSIGN_OR_RETURN(json::Value root, ParseObject(parser, body));
  ParsedSearch parsed;
  hub::SearchRequest& request = parsed.request;
  std::optional<json::Value> query = Member(root, "query");
  if (!query) return InvalidArgument("query: is required");
  if (query->IsArray()) {
    parsed.query_was_array = true;
    for (simdjson::dom::element element : query->Array()) {
      const std::string field = fmt::format("query[{}]", request.queries.size());
      if (request.queries.size() == kMaxQueries) {
        return InvalidArgument("query: at most {} queries", kMaxQueries);
      }
      ASSIGN_OR_RETURN(std::string text, String(json::Value(element), field));
      request.queries.push_back(std::move(text));
    }
    if (request.queries.empty()) return InvalidArgument("query: must not be empty");
  } else {
    ASSIGN_OR_RETURN(std::string text, String(*query, "query"));
    request.queries.push_back(std::move(text));
  }
  for (size_t i = 0; i < request.queries.size(); ++i) {
    const std::string field = parsed.query_was_array ? fmt::format("query[{}]", i) : "query";
    if (request.queries[i].find_first_not_of(" \t\r\n") == std::string::npos) {
      return InvalidArgument("{}: must not be empty", field);
    }
    if (request.queries[i].size() > kMaxQueryBytes) {
      return InvalidArgument("{}: at most {} characters", field, kMaxQueryBytes);
    }
  }
  if (std::optional<json::Value> filters = Member(root, "filters")) {
    ASSIGN_OR_RETURN(request.filter, ParseFilter(*filters, "filters"));
  }
  if (std::optional<json::Value> count = Member(root, "max_num_results")) {
    ASSIGN_OR_RETURN(int64_t number, Integer(*count, "max_num_results"));
    if (number < 1 || number > 50) {
      return InvalidArgument("max_num_results: must be between 1 and 50, got {}", number);
    }
    request.max_num_results = static_cast<int>(number);
  }
  if (std::optional<json::Value> ranking = Member(root, "ranking_options")) {
    if (!ranking->IsObject()) return InvalidArgument("ranking_options: must be an object");
    if (std::optional<json::Value> ranker = Member(*ranking, "ranker")) {
      ASSIGN_OR_RETURN(std::string name, String(*ranker, "ranking_options.ranker"));
      if (name == "auto" || name == "default-2024-11-15" || name == "none" || name == "hybrid") {
        request.ranker = hub::Ranker::kHybrid;
      } else if (name == "keyword") {
        request.ranker = hub::Ranker::kKeyword;
      } else if (name == "vector") {
        request.ranker = hub::Ranker::kVector;
      } else {
        return InvalidArgument(
            "ranking_options.ranker: must be auto, default-2024-11-15, none, hybrid, keyword or "
            "vector; got '{}'",
            name);
      }
    }
    if (std::optional<json::Value> threshold = Member(*ranking, "score_threshold")) {
      if (threshold->kind() != json::Kind::kNumber) {
        return InvalidArgument("ranking_options.score_threshold: must be a number");
      }
      ASSIGN_OR_RETURN(double value, threshold->GetDouble("ranking_options.score_threshold"));
      if (!(value >= 0 && value <= 1)) {
        return InvalidArgument("ranking_options.score_threshold: must be between 0 and 1");
      }
      request.score_threshold = value;
    }
  }
  if (std::optional<json::Value> rewrite = Member(root, "rewrite_query")) {
    if (rewrite->kind() != json::Kind::kBool) {
      return InvalidArgument("rewrite_query: must be a boolean");
    }
  }
  return parsed;
}

}  // namespace rampart::api::vector_stores
