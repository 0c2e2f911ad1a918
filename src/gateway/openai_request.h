#pragma once

// OpenAI requests as the gateway reads them: the few fields it decides on (model, stream, n, the
// text a routing rule looks at, an embedding request's inputs), checked for type, while the body
// itself is forwarded to an upstream as received. Unknown fields pass through untouched; only
// `model` (the upstream's own name) and `stream_options` (to ask for usage) are ever rewritten.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace rampart::gateway {

enum class Operation { kChatCompletions, kCompletions, kEmbeddings };
// "chat.completions", "completions", "embeddings": labels for metrics and logs.
std::string_view OperationName(Operation operation);
// The path under an upstream's base URL: "/chat/completions", "/completions", "/embeddings".
std::string_view OperationPath(Operation operation);

enum class EncodingFormat { kFloat, kBase64 };

struct ParseLimits {
  int64_t max_n = 8;                   // choices per request
  size_t max_embedding_inputs = 2048;  // OpenAI's own limit
};

struct OpenAiRequest {
  Operation operation = Operation::kChatCompletions;
  std::string body;  // as received
  std::string model;
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  int64_t n = 1;
  // max_tokens or max_completion_tokens (the larger when both are given); 0 when neither is.
  // Quotas reserve it before the call.
  int64_t max_tokens = 0;
  // What routing rules match keywords and patterns against: the last user message's text (chat)
  // or the prompt (completions); empty for embeddings.
  std::string routed_text;
  // Characters of every message or prompt, for estimating prompt tokens when an upstream reports
  // none.
  size_t prompt_chars = 0;
  // Embeddings: the texts, or, when the caller sent token ids, nothing (upstream targets only).
  std::vector<std::string> inputs;
  bool input_is_tokens = false;
  EncodingFormat encoding_format = EncodingFormat::kFloat;
  int64_t dimensions = 0;  // 0 = the model's own
  // Every top-level field's name, so a local target can refuse what it cannot honour.
  std::vector<std::string> fields;
};

// An invalid request: InvalidArgument with a message for the caller, and `param`, the field at
// fault (OpenAI's error.param), or empty.
struct RequestError {
  Status status;
  std::string param;
};

// Parses `body` for `operation`. On error fills `error` and returns its status.
Result<OpenAiRequest> ParseOpenAiRequest(Operation operation, std::string body,
                                         const ParseLimits& limits, RequestError& error);

// The body to send upstream: `request.body` with `model` set to `upstream_model` and, when
// `ask_usage`, `stream_options.include_usage` set to true (other stream_options members kept).
// Returns the body unchanged (no copy made by the caller) when nothing changes.
Result<std::string> UpstreamBody(const OpenAiRequest& request, std::string_view upstream_model,
                                 bool ask_usage);

}  // namespace rampart::gateway
