#include "gateway/openai_request.h"

#include <algorithm>

#include "json/reader.h"
#include "json/writer.h"

namespace rampart::gateway {
namespace {

// One parser per thread: requests are parsed on HTTP I/O threads, bodies rewritten on client
// threads, and a Parser is not synchronised.
json::Parser& ThreadParser() {
  thread_local json::Parser parser;
  return parser;
}

Status Fail(RequestError& error, std::string param, Status status) {
  error.param = std::move(param);
  error.status = status;
  return status;
}

// A message's `content`: a string, null, or a list of parts whose text parts count.
Status AppendContent(const json::Value& content, std::string_view what, std::string& text) {
  if (content.IsNull()) return Status::Ok();
  if (content.kind() == json::Kind::kString) {
    text.append(content.GetString(what).value());
    return Status::Ok();
  }
  if (!content.IsArray()) {
    return InvalidArgument("'{}' must be a string or an array of content parts, got {}", what,
                           content.KindName());
  }
  for (simdjson::dom::element element : content.Array()) {
    const json::Value part(element);
    if (!part.IsObject()) return InvalidArgument("each part of '{}' must be an object", what);
    const auto type = part.Find("type");
    if (!type) return InvalidArgument("each part of '{}' needs a 'type'", what);
    ASSIGN_OR_RETURN(std::string_view type_name, type->GetString("type"));
    if (type_name != "text") continue;
    const auto part_text = part.Find("text");
    if (!part_text) return InvalidArgument("a text part of '{}' needs 'text'", what);
    ASSIGN_OR_RETURN(std::string_view value, part_text->GetString("text"));
    if (!text.empty()) text.push_back('\n');
    text.append(value);
  }
  return Status::Ok();
}

Status ReadMessages(const json::Value& messages, OpenAiRequest& request, RequestError& error) {
  if (!messages.IsArray()) {
    return Fail(error, "messages",
                InvalidArgument("'messages' must be an array, got {}", messages.KindName()));
  }
  size_t index = 0;
  for (simdjson::dom::element element : messages.Array()) {
    const std::string what = fmt::format("messages[{}]", index++);
    const json::Value message(element);
    if (!message.IsObject()) {
      return Fail(error, what, InvalidArgument("'{}' must be an object", what));
    }
    const auto role = message.Find("role");
    if (!role) return Fail(error, what + ".role", InvalidArgument("'{}' needs a 'role'", what));
    Result<std::string_view> role_name = role->GetString(what + ".role");
    if (!role_name.ok()) return Fail(error, what + ".role", role_name.status());
    std::string text;
    if (const auto content = message.Find("content")) {
      Status read = AppendContent(*content, what + ".content", text);
      if (!read.ok()) return Fail(error, what + ".content", read);
    }
    request.prompt_chars += text.size();
    if (*role_name == "user") request.routed_text = std::move(text);
  }
  if (index == 0) {
    return Fail(error, "messages", InvalidArgument("'messages' must not be empty"));
  }
  return Status::Ok();
}

// A completion's `prompt`: a string or a list of strings (token-id prompts pass unread).
Status ReadPrompt(const json::Value& prompt, OpenAiRequest& request) {
  if (prompt.kind() == json::Kind::kString) {
    request.routed_text = std::string(prompt.GetString("prompt").value());
  } else if (prompt.IsArray()) {
    for (simdjson::dom::element element : prompt.Array()) {
      std::string_view text;
      if (element.get_string().get(text) != simdjson::SUCCESS) continue;
      if (!request.routed_text.empty()) request.routed_text.push_back('\n');
      request.routed_text.append(text);
    }
  } else {
    return InvalidArgument("'prompt' must be a string or an array, got {}", prompt.KindName());
  }
  request.prompt_chars = request.routed_text.size();
  return Status::Ok();
}

Status ReadEmbeddingInput(const json::Value& input, const ParseLimits& limits,
                          OpenAiRequest& request) {
  if (input.kind() == json::Kind::kString) {
    request.inputs.emplace_back(input.GetString("input").value());
  } else if (input.IsArray()) {
    for (simdjson::dom::element element : input.Array()) {
      std::string_view text;
      if (element.get_string().get(text) == simdjson::SUCCESS) {
        if (request.input_is_tokens) {
          return InvalidArgument("'input' must not mix strings and token ids");
        }
        request.inputs.emplace_back(text);
      } else if (element.is_number() || element.is_array()) {
        if (!request.inputs.empty()) {
          return InvalidArgument("'input' must not mix strings and token ids");
        }
        request.input_is_tokens = true;
      } else {
        return InvalidArgument("'input' items must be strings or token ids");
      }
      if (request.inputs.size() > limits.max_embedding_inputs) {
        return InvalidArgument("'input' may hold at most {} items", limits.max_embedding_inputs);
      }
    }
    if (request.inputs.empty() && !request.input_is_tokens) {
      return InvalidArgument("'input' must not be empty");
    }
  } else {
    return InvalidArgument("'input' must be a string or an array, got {}", input.KindName());
  }
  for (const std::string& text : request.inputs) request.prompt_chars += text.size();
  return Status::Ok();
}

Status ReadFields(const json::Value& root, const ParseLimits& limits, OpenAiRequest& request,
                  RequestError& error) {
  for (auto [key, element] : root.Object()) {
    request.fields.emplace_back(key);
    const json::Value value(element);
    const std::string param(key);
    Status read = Status::Ok();
    if (key == "model") {
      Result<std::string_view> model = value.GetString("model");
      read = model.status();
      if (model.ok()) request.model = std::string(*model);
    } else if (key == "stream") {
      if (!value.IsNull()) {
        Result<bool> stream = value.GetBool("stream");
        read = stream.status();
        if (stream.ok()) request.stream = *stream;
      }
    } else if (key == "stream_options" && !value.IsNull()) {
      if (!value.IsObject()) {
        read = InvalidArgument("'stream_options' must be an object, got {}", value.KindName());
      } else if (const auto usage = value.Find("include_usage")) {
        Result<bool> include = usage->GetBool("stream_options.include_usage");
        read = include.status();
        if (include.ok()) request.include_usage = *include;
      }
    } else if (key == "n" && !value.IsNull()) {
      Result<int64_t> n = value.GetInt64("n");
      read = n.status();
      if (n.ok() && (*n < 1 || *n > limits.max_n)) {
        read = InvalidArgument("'n' must be between 1 and {}, got {}", limits.max_n, *n);
      }
      if (read.ok()) request.n = *n;
    } else if ((key == "max_tokens" || key == "max_completion_tokens") && !value.IsNull() &&
               request.operation != Operation::kEmbeddings) {
      Result<int64_t> max_tokens = value.GetInt64(key);
      read = max_tokens.status();
      if (max_tokens.ok() && *max_tokens < 0) {
        read = InvalidArgument("'{}' must not be negative, got {}", key, *max_tokens);
      }
      // Both given: the larger bounds the answer (the upstream honours one of them).
      if (read.ok()) request.max_tokens = std::max(request.max_tokens, *max_tokens);
    } else if (key == "messages" && request.operation == Operation::kChatCompletions) {
      RETURN_IF_ERROR(ReadMessages(value, request, error));
    } else if (key == "prompt" && request.operation == Operation::kCompletions) {
      read = ReadPrompt(value, request);
    } else if (key == "input" && request.operation == Operation::kEmbeddings) {
      read = ReadEmbeddingInput(value, limits, request);
    } else if (key == "encoding_format" && request.operation == Operation::kEmbeddings) {
      Result<std::string_view> format = value.GetString("encoding_format");
      read = format.status();
      if (format.ok()) {
        if (*format == "float") {
          request.encoding_format = EncodingFormat::kFloat;
        } else if (*format == "base64") {
          request.encoding_format = EncodingFormat::kBase64;
        } else {
          read =
              InvalidArgument("'encoding_format' must be 'float' or 'base64', got '{}'", *format);
        }
      }
    } else if (key == "dimensions" && request.operation == Operation::kEmbeddings &&
               !value.IsNull()) {
      Result<int64_t> dimensions = value.GetInt64("dimensions");
      read = dimensions.status();
      if (dimensions.ok() && *dimensions < 1) {
        read = InvalidArgument("'dimensions' must be positive, got {}", *dimensions);
      }
      if (read.ok()) request.dimensions = *dimensions;
    }
    if (!read.ok()) return Fail(error, param, read);
  }
  return Status::Ok();
}

}  // namespace

std::string_view OperationName(Operation operation) {
  switch (operation) {
    case Operation::kChatCompletions: return "chat.completions";
    case Operation::kCompletions: return "completions";
    case Operation::kEmbeddings: return "embeddings";
  }
  return "unknown";
}

std::string_view OperationPath(Operation operation) {
  switch (operation) {
    case Operation::kChatCompletions: return "/chat/completions";
    case Operation::kCompletions: return "/completions";
    case Operation::kEmbeddings: return "/embeddings";
  }
  return "/";
}

Result<OpenAiRequest> ParseOpenAiRequest(Operation operation, std::string body,
                                         const ParseLimits& limits, RequestError& error) {
  OpenAiRequest request;
  request.operation = operation;
  Result<json::Value> root = ThreadParser().Parse(body);
  if (!root.ok()) {
    if (root.status().code() != StatusCode::kInvalidArgument) return root.status();
    return Fail(error, "",
                InvalidArgument("the body is not valid JSON: {}", root.status().message()));
  }
  if (!root->IsObject()) {
    return Fail(error, "",
                InvalidArgument("the body must be a JSON object, got {}", root->KindName()));
  }
  RETURN_IF_ERROR(ReadFields(*root, limits, request, error));

  const auto missing = [&](std::string_view field) {
    return Fail(error, std::string(field), InvalidArgument("'{}' is required", field));
  };
  if (request.model.empty()) return missing("model");
  switch (operation) {
    case Operation::kChatCompletions:
      if (!root->Find("messages")) return missing("messages");
      break;
    case Operation::kCompletions:
      if (!root->Find("prompt")) return missing("prompt");
      break;
    case Operation::kEmbeddings:
      if (!root->Find("input")) return missing("input");
      if (request.stream) {
        return Fail(error, "stream", InvalidArgument("embeddings cannot be streamed"));
      }
      break;
  }
  request.body = std::move(body);
  return request;
}

Result<std::string> UpstreamBody(const OpenAiRequest& request, std::string_view upstream_model,
                                 bool ask_usage) {
  const bool set_usage = ask_usage && !request.include_usage;
  if (upstream_model == request.model && !set_usage) return request.body;

  ASSIGN_OR_RETURN(json::Value root, ThreadParser().Parse(request.body));
  json::Writer writer;
  writer.Reserve(request.body.size() + upstream_model.size() + 48);
  writer.StartObject();
  bool wrote_options = false;
  for (auto [key, element] : root.Object()) {
    writer.Key(key);
    if (key == "model") {
      writer.String(upstream_model);
    } else if (key == "stream_options" && set_usage && element.is_object()) {
      writer.StartObject();
      simdjson::dom::object options;
      if (element.get_object().get(options) != simdjson::SUCCESS) return Internal("not an object");
      for (auto [option, value] : options) {
        if (option == "include_usage") continue;
        writer.Key(option);
        writer.Raw(simdjson::minify(value));
      }
      writer.Key("include_usage");
      writer.Bool(true);
      writer.EndObject();
      wrote_options = true;
    } else if (key == "stream_options" && set_usage) {
      writer.StartObject();  // was null
      writer.Key("include_usage");
      writer.Bool(true);
      writer.EndObject();
      wrote_options = true;
    } else {
      writer.Raw(simdjson::minify(element));
    }
  }
  if (set_usage && !wrote_options) {
    writer.Key("stream_options");
    writer.StartObject();
    writer.Key("include_usage");
    writer.Bool(true);
    writer.EndObject();
  }
  writer.EndObject();
  return writer.Take();
}

}  // namespace rampart::gateway
