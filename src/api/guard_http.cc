#include "api/guard_http.h"

#include "gateway/openai_response.h"
#include "guard/redact.h"
#include "json/reader.h"
#include "json/writer.h"

namespace rampart::api {
namespace {

net::HttpResponse Json(int status, std::string body) {
  net::HttpResponse response;
  response.status = status;
  response.content_type = "application/json";
  response.body = std::move(body);
  return response;
}

net::HttpResponse Error(int status, std::string_view message, std::string_view param = {}) {
  return Json(status, gateway::ErrorJson(message, gateway::ErrorType(status), param, ""));
}

// The request's fields, read and checked.
struct GuardRequest {
  std::string text;
  std::vector<std::string_view> types;
  guard::OperatorChoice operators;
};

Status ReadRequest(std::string_view body, bool with_types, bool with_operators, GuardRequest& out,
                   std::string& param) {
  json::Parser parser;
  Result<json::Value> root = parser.Parse(body);
  if (!root.ok()) return InvalidArgument("the body is not valid JSON: {}", root.status().message());
  if (!root->IsObject()) return InvalidArgument("the body must be a JSON object");
  for (auto [key, element] : root->Object()) {
    const json::Value value(element);
    param = std::string(key);
    if (key == "text") {
      ASSIGN_OR_RETURN(std::string_view text, value.GetString("text"));
      out.text = std::string(text);
    } else if (key == "types" && with_types) {
      if (!value.IsArray()) return InvalidArgument("'types' must be an array of type names");
      for (simdjson::dom::element item : value.Array()) {
        ASSIGN_OR_RETURN(std::string_view name, json::Value(item).GetString("types[]"));
        const auto known = guard::KnownEntityType(name);
        if (!known) return InvalidArgument("'types': unknown entity type '{}'", name);
        out.types.push_back(*known);
      }
    } else if (key == "operators" && with_operators) {
      if (!value.IsObject()) return InvalidArgument("'operators' must be an object");
      for (auto [type, op] : value.Object()) {
        const auto known = guard::KnownEntityType(type);
        if (!known) return InvalidArgument("'operators': unknown entity type '{}'", type);
        ASSIGN_OR_RETURN(std::string_view text, json::Value(op).GetString("operators"));
        ASSIGN_OR_RETURN(guard::Operator parsed, guard::ParseOperator(text));
        out.operators.by_type[std::string(*known)] = parsed;
      }
    } else {
      return InvalidArgument("unknown field '{}'", key);
    }
  }
  param = "text";
  if (!root->Find("text")) return InvalidArgument("'text' is required");
  param.clear();
  return Status::Ok();
}

void WriteEntity(json::Writer& writer, std::string_view text, std::string_view type, size_t start,
                 size_t end, double score) {
  writer.Key("type");
  writer.String(type);
  writer.Key("text");
  writer.String(text.substr(start, end - start));
  writer.Key("start");
  writer.Uint64(start);
  writer.Key("end");
  writer.Uint64(end);
  writer.Key("score");
  writer.Double(score);
}

// The operations and the actions they are decided as.
struct GuardOperation {
  std::string_view path;
  std::string_view action;
};
constexpr GuardOperation kOperations[] = {
    {"/v1/guard/pii/detect", "guard:detect"},
    {"/v1/guard/pii/redact", "guard:redact"},
    {"/v1/guard/pii/restore", "guard:restore"},
};

}  // namespace

bool GuardHttp::Owns(std::string_view path) {
  return path == "/v1/guard" || path.substr(0, 10) == "/v1/guard/";
}

std::string_view GuardHttp::ActionOf(std::string_view path) {
  for (const GuardOperation& operation : kOperations) {
    if (operation.path == path) return operation.action;
  }
  return kOperations[0].action;
}

std::vector<std::string_view> GuardHttp::Actions() {
  std::vector<std::string_view> actions;
  for (const GuardOperation& operation : kOperations) actions.push_back(operation.action);
  return actions;
}

net::HttpResponse GuardHttp::Answer(const net::HttpRequest& request, std::string_view tenant) {
  const std::string_view path = request.path();
  const bool detect = path == kOperations[0].path;
  const bool redact = path == kOperations[1].path;
  const bool restore = path == kOperations[2].path;
  if (!detect && !redact && !restore) {
    return Error(404, fmt::format("no route for {} {}", request.method, path));
  }
  if (request.method != "POST") {
    return Error(405, fmt::format("use POST {}", path));
  }
  const std::shared_ptr<const gateway::GuardRuntime> guard = gateway_.guard();
  if (guard->detector == nullptr && !restore) {
    return Error(503, "the guard has no PII detector in this build");
  }
  GuardRequest fields;
  std::string param;
  const Status read = ReadRequest(request.body, detect, redact, fields, param);
  if (!read.ok()) {
    return Error(400, read.message(), param);
  }
  if (fields.text.size() > guard->config->guard.max_text_bytes) {
    return Error(413,
                 fmt::format("'text' is {} bytes; the guard takes at most {}", fields.text.size(),
                             guard->config->guard.max_text_bytes),
                 "text");
  }
  if (!guard::IsValidUtf8(fields.text)) {
    return Error(400, "'text' is not valid UTF-8", "text");
  }
  const guard::TenantKeys keys = guard->KeysFor(tenant);
  gateway::GatewayMetrics& metrics = gateway_.metrics();
  json::Writer writer;
  writer.StartObject();
  if (restore) {
    writer.Key("text");
    writer.String(guard::RestoreTokens(fields.text, keys));
  } else if (detect) {
    Result<std::vector<guard::Entity>> entities =
        guard->detector->Detect(fields.text, fields.types);
    if (!entities.ok()) {
      return Error(400, entities.status().message(), "text");
    }
    writer.Key("entities");
    writer.StartArray();
    for (const guard::Entity& entity : *entities) {
      metrics.guard_entities.WithLabels({std::string(entity.type), "api", "detected"}).Increment();
      writer.StartObject();
      WriteEntity(writer, fields.text, entity.type, entity.start, entity.end, entity.score);
      writer.EndObject();
    }
    writer.EndArray();
  } else {
    Result<std::vector<guard::Entity>> entities = guard->detector->Detect(fields.text);
    if (!entities.ok()) {
      return Error(400, entities.status().message(), "text");
    }
    guard::RedactedText redacted = guard::Redact(fields.text, *entities, fields.operators, keys);
    std::vector<std::string_view> blocked;
    for (const guard::Redaction& entity : redacted.entities) {
      const bool blocks = entity.op == guard::OperatorKind::kBlock;
      if (blocks) blocked.push_back(entity.type);
      metrics.guard_entities
          .WithLabels({std::string(entity.type), "api", blocks ? "blocked" : "redacted"})
          .Increment();
    }
    if (!blocked.empty()) {
      return Error(400, guard::BlockedMessage(blocked), "text");
    }
    writer.Key("text");
    writer.String(redacted.text);
    writer.Key("entities");
    writer.StartArray();
    for (const guard::Redaction& entity : redacted.entities) {
      writer.StartObject();
      WriteEntity(writer, fields.text, entity.type, entity.start, entity.end, entity.score);
      writer.Key("operator");
      writer.String(guard::OperatorKindName(entity.op));
      writer.Key("replacement");
      writer.String(entity.replacement);
      writer.EndObject();
    }
    writer.EndArray();
  }
  writer.EndObject();
  return Json(200, writer.Take());
}

}  // namespace rampart::api
