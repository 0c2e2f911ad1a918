// The control plane's wire shapes (pinecone_codec.h): creating an index and describing one.

#include <utility>

#include "api/pinecone_codec.h"

namespace rampart::api::pinecone {
namespace {

Result<size_t> ReadDimension(const json::Value& value, std::string_view what) {
  ASSIGN_OR_RETURN(int64_t dimension, value.GetInt64(what));
  if (dimension < 1 || static_cast<uint64_t>(dimension) > knowledge::kMaxDimension) {
    return InvalidArgument("{}: {} is out of range [1, {}]", what, dimension,
                           knowledge::kMaxDimension);
  }
  return static_cast<size_t>(dimension);
}

Result<knowledge::Metric> ReadMetric(const std::optional<json::Value>& value,
                                     std::string_view what) {
  if (!value || value->IsNull()) return knowledge::Metric::kCosine;
  ASSIGN_OR_RETURN(std::string_view name, value->GetString(what));
  Result<knowledge::Metric> metric = knowledge::ParseMetric(name);
  if (!metric.ok()) {
    return InvalidArgument("{}: '{}' is not one of cosine, dotproduct, euclidean", what, name);
  }
  return metric;
}

// This API version's schema: {"fields":{"_values":{"type":"dense_vector","dimension","metric"}}}.
Status ReadSchema(const json::Value& schema, knowledge::EngineOptions& engine) {
  std::optional<json::Value> fields = schema.Find("fields");
  if (!fields || !fields->IsObject()) return InvalidArgument("schema.fields: is required");
  bool dense = false;
  for (auto [name, member] : fields->Object()) {
    const json::Value field(member);
    const std::string what = fmt::format("schema.fields.{}", name);
    std::optional<json::Value> type = field.Find("type");
    if (!type) return InvalidArgument("{}.type: is required", what);
    ASSIGN_OR_RETURN(std::string_view type_name, type->GetString(what + ".type"));
    if (type_name != "dense_vector") {
      return Unimplemented("{}: fields of type '{}' are not supported (dense_vector only)", what,
                           type_name);
    }
    if (dense) return InvalidArgument("{}: an index has one dense_vector field", what);
    dense = true;
    std::optional<json::Value> dimension = field.Find("dimension");
    if (!dimension) return InvalidArgument("{}.dimension: is required", what);
    ASSIGN_OR_RETURN(engine.dimension, ReadDimension(*dimension, what + ".dimension"));
    ASSIGN_OR_RETURN(engine.metric, ReadMetric(field.Find("metric"), what + ".metric"));
  }
  if (!dense) return InvalidArgument("schema.fields: needs a field of type dense_vector");
  return Status::Ok();
}

}  // namespace

Status CheckIndexName(std::string_view name) {
  if (name.empty() || name.size() > knowledge::kMaxIndexNameBytes) {
    return InvalidArgument("name: an index name is 1 to {} characters, got {}",
                           knowledge::kMaxIndexNameBytes, name.size());
  }
  for (char c : name) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-')) {
      return InvalidArgument(
          "name: '{}' must consist of lower-case letters, digits and '-' (found '{}')", name, c);
    }
  }
  if (name.front() == '-' || name.back() == '-') {
    return InvalidArgument("name: '{}' must not start or end with '-'", name);
  }
  return Status::Ok();
}

Result<knowledge::IndexSpec> ParseCreateIndex(json::Parser& parser, std::string_view body,
                                              const knowledge::EngineOptions& defaults) {
  if (body.find_first_not_of(" \t\r\n") == std::string_view::npos) {
    return InvalidArgument("the request needs a JSON body");
  }
  ASSIGN_OR_RETURN(json::Value root, parser.Parse(body));
  if (!root.IsObject()) return InvalidArgument("the request body must be a JSON object");
  knowledge::IndexSpec spec;
  spec.engine = defaults;
  std::optional<json::Value> name = root.Find("name");
  if (!name) return InvalidArgument("name: is required");
  ASSIGN_OR_RETURN(std::string_view name_text, name->GetString("name"));
  spec.name = std::string(name_text);
  RETURN_IF_ERROR(CheckIndexName(spec.name));
  std::optional<json::Value> schema = root.Find("schema");
  std::optional<json::Value> dimension = root.Find("dimension");
  if (schema.has_value() == dimension.has_value()) {
    return InvalidArgument(
        "give the vectors' dimension and metric either in 'schema' (schema.fields._values) or as "
        "'dimension' and 'metric', once");
  }
  if (schema) {
    if (!schema->IsObject()) return InvalidArgument("schema: must be an object");
    RETURN_IF_ERROR(ReadSchema(*schema, spec.engine));
  } else {
    ASSIGN_OR_RETURN(spec.engine.dimension, ReadDimension(*dimension, "dimension"));
    ASSIGN_OR_RETURN(spec.engine.metric, ReadMetric(root.Find("metric"), "metric"));
    if (std::optional<json::Value> type = root.Find("vector_type"); type && !type->IsNull()) {
      ASSIGN_OR_RETURN(std::string_view type_name, type->GetString("vector_type"));
      if (type_name != "dense") {
        return Unimplemented("vector_type: '{}' indexes are not supported (dense only)", type_name);
      }
    }
  }
  if (std::optional<json::Value> protection = root.Find("deletion_protection");
      protection && !protection->IsNull()) {
    ASSIGN_OR_RETURN(std::string_view value, protection->GetString("deletion_protection"));
    if (value != "enabled" && value != "disabled") {
      return InvalidArgument("deletion_protection: '{}' is not one of enabled, disabled", value);
    }
    spec.deletion_protection = value == "enabled";
  }
  return spec;
}

void WriteIndexDescription(json::Writer& writer, const knowledge::IndexSpec& spec,
                           std::string_view host) {
  const std::string_view metric = knowledge::MetricName(spec.engine.metric);
  writer.StartObject();
  writer.Key("name");
  writer.String(spec.name);
  writer.Key("host");
  writer.String(host);
  writer.Key("status");
  writer.StartObject();
  writer.Key("ready");
  writer.Bool(true);
  writer.Key("state");
  writer.String("Ready");
  writer.EndObject();
  // This API version's shape: where it runs, and its vector field.
  writer.Key("deployment");
  writer.StartObject();
  writer.Key("deployment_type");
  writer.String("managed");
  writer.Key("cloud");
  writer.String("rampart");
  writer.Key("region");
  writer.String("local");
  writer.EndObject();
  writer.Key("schema");
  writer.StartObject();
  writer.Key("fields");
  writer.StartObject();
  writer.Key("_values");
  writer.StartObject();
  writer.Key("type");
  writer.String("dense_vector");
  writer.Key("dimension");
  writer.Uint64(spec.engine.dimension);
  writer.Key("metric");
  writer.String(metric);
  writer.EndObject();
  writer.EndObject();
  writer.EndObject();
  // The older shape's fields, for clients of earlier API versions.
  writer.Key("dimension");
  writer.Uint64(spec.engine.dimension);
  writer.Key("metric");
  writer.String(metric);
  writer.Key("vector_type");
  writer.String("dense");
  writer.Key("spec");
  writer.StartObject();
  writer.Key("serverless");
  writer.StartObject();
  writer.Key("cloud");
  writer.String("rampart");
  writer.Key("region");
  writer.String("local");
  writer.EndObject();
  writer.EndObject();
  writer.Key("deletion_protection");
  writer.String(spec.deletion_protection ? "enabled" : "disabled");
  writer.EndObject();
}

}  // namespace rampart::api::pinecone
