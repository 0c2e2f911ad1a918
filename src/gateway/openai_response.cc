#include "gateway/openai_response.h"

#include "json/reader.h"
#include "json/writer.h"

namespace rampart::gateway {
namespace {

json::Parser& ThreadParser() {
  thread_local json::Parser parser;
  return parser;
}

std::optional<Usage> ReadUsage(const json::Value& root) {
  const auto usage = root.Find("usage");
  if (!usage || !usage->IsObject()) return std::nullopt;
  Usage out;
  const auto read = [&usage](std::string_view name, int64_t& into) {
    if (const auto value = usage->Find(name)) {
      Result<int64_t> count = value->GetInt64(name);
      if (count.ok()) into = *count;
    }
  };
  read("prompt_tokens", out.prompt_tokens);
  read("completion_tokens", out.completion_tokens);
  read("total_tokens", out.total_tokens);
  if (out.total_tokens == 0) out.total_tokens = out.prompt_tokens + out.completion_tokens;
  return out;
}

std::optional<std::string> ErrorMessage(const json::Value& root) {
  const auto error = root.Find("error");
  if (error && error->IsObject()) {
    const auto message = error->Find("message");
    if (message && message->kind() == json::Kind::kString) {
      return std::string(message->GetString("message").value());
    }
    return std::string("the upstream reported an error");
  }
  if (error && error->kind() == json::Kind::kString) {  // TGI
    return std::string(error->GetString("error").value());
  }
  const auto object = root.Find("object");
  if (object && object->kind() == json::Kind::kString &&
      object->GetString("object").value() == "error") {  // older vLLM
    const auto message = root.Find("message");
    if (message && message->kind() == json::Kind::kString) {
      return std::string(message->GetString("message").value());
    }
    return std::string("the upstream reported an error");
  }
  return std::nullopt;
}

// Generated characters in one choice of a chunk (delta.content, delta.tool_calls' arguments,
// a completion's text); sets `token` when the choice carries anything generated.
size_t ChoiceContent(const json::Value& choice, bool& token, bool& finished) {
  size_t chars = 0;
  const auto text_of = [&](const std::optional<json::Value>& value) {
    if (value && value->kind() == json::Kind::kString) {
      const size_t size = value->GetString("content").value().size();
      chars += size;
      if (size > 0) token = true;
    }
  };
  text_of(choice.Find("text"));
  if (const auto delta = choice.Find("delta"); delta && delta->IsObject()) {
    text_of(delta->Find("content"));
    text_of(delta->Find("reasoning_content"));
    if (const auto calls = delta->Find("tool_calls"); calls && calls->IsArray()) {
      token = true;
      for (simdjson::dom::element call : calls->Array()) {
        const auto function = json::Value(call).Find("function");
        if (function) text_of(function->Find("arguments"));
      }
    }
  }
  if (const auto finish = choice.Find("finish_reason"); finish && !finish->IsNull()) {
    token = true;
    finished = true;
  }
  return chars;
}

}  // namespace

int64_t EstimateTokens(size_t chars) {
  if (chars == 0) return 0;
  return static_cast<int64_t>((chars + 3) / 4);
}

Result<StreamEvent> InspectStreamEvent(std::string_view data, Operation /*operation*/) {
  StreamEvent event;
  if (data == "[DONE]") {
    event.done = true;
    return event;
  }
  ASSIGN_OR_RETURN(json::Value root, ThreadParser().Parse(data));
  if (!root.IsObject()) {
    return InvalidArgument("a stream event must be a JSON object, got {}", root.KindName());
  }
  event.error = ErrorMessage(root);
  if (event.error) return event;
  event.usage = ReadUsage(root);
  const auto choices = root.Find("choices");
  if (choices && choices->IsArray()) {
    size_t count = 0;
    for (simdjson::dom::element choice : choices->Array()) {
      ++count;
      event.content_chars += ChoiceContent(json::Value(choice), event.token, event.finished);
    }
    event.usage_only = count == 0 && event.usage.has_value();
  } else if (!event.usage) {
    return InvalidArgument("a stream event has no 'choices'");
  }
  return event;
}

Result<Usage> InspectAnswer(std::string_view body, Operation operation) {
  ASSIGN_OR_RETURN(json::Value root, ThreadParser().Parse(body));
  if (!root.IsObject()) {
    return InvalidArgument("the answer must be a JSON object, got {}", root.KindName());
  }
  const std::string_view list = operation == Operation::kEmbeddings ? "data" : "choices";
  const auto items = root.Find(list);
  if (!items || !items->IsArray()) return InvalidArgument("the answer has no '{}' array", list);
  Usage usage = ReadUsage(root).value_or(Usage{});
  if (!root.Find("usage")) {
    size_t chars = 0;
    bool token = false;
    bool finished = false;
    if (operation != Operation::kEmbeddings) {
      for (simdjson::dom::element choice : items->Array()) {
        const json::Value value(choice);
        chars += ChoiceContent(value, token, finished);
        if (const auto message = value.Find("message")) {
          const auto content = message->Find("content");
          if (content && content->kind() == json::Kind::kString) {
            chars += content->GetString("content").value().size();
          }
        }
      }
    }
    usage.completion_tokens = EstimateTokens(chars);
    usage.estimated = true;
  }
  return usage;
}

std::optional<std::string> UpstreamErrorMessage(std::string_view body) {
  Result<json::Value> root = ThreadParser().Parse(body);
  if (!root.ok() || !root->IsObject()) return std::nullopt;
  return ErrorMessage(*root);
}

std::string ErrorJson(std::string_view message, std::string_view type, std::string_view param,
                      std::string_view code) {
  json::Writer writer;
  writer.Reserve(message.size() + 96);
  writer.StartObject();
  writer.Key("error");
  writer.StartObject();
  writer.Key("message");
  writer.String(message);
  writer.Key("type");
  writer.String(type);
  writer.Key("param");
  if (param.empty()) {
    writer.Null();
  } else {
    writer.String(param);
  }
  writer.Key("code");
  if (code.empty()) {
    writer.Null();
  } else {
    writer.String(code);
  }
  writer.EndObject();
  writer.EndObject();
  return writer.Take();
}

int HttpStatusOf(const Status& status) {
  switch (status.code()) {
    case StatusCode::kOk: return 200;
    case StatusCode::kInvalidArgument:
    case StatusCode::kFailedPrecondition:
    case StatusCode::kAlreadyExists: return 400;
    case StatusCode::kUnauthenticated: return 401;
    case StatusCode::kPermissionDenied: return 403;
    case StatusCode::kNotFound: return 404;
    case StatusCode::kPayloadTooLarge: return 413;
    case StatusCode::kResourceExhausted: return 429;
    case StatusCode::kCancelled: return 499;
    case StatusCode::kUnimplemented: return 501;
    case StatusCode::kUnavailable: return 503;
    case StatusCode::kInternal: return 500;
  }
  return 500;
}

std::string_view ErrorType(int http_status) {
  switch (http_status) {
    case 400:
    case 404:
    case 409:
    case 413:
    case 422: return "invalid_request_error";
    case 401: return "authentication_error";
    case 403: return "permission_error";
    case 408: return "timeout_error";
    case 429: return "rate_limit_error";
    default: return http_status >= 500 ? "server_error" : "invalid_request_error";
  }
}

}  // namespace rampart::gateway
