#pragma once

// What the gateway reads from an upstream's OpenAI answers (usage, tokens, errors) and the error
// body it writes. Answers themselves are forwarded as received; nothing here re-serialises them.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "core/status.h"
#include "gateway/openai_request.h"

namespace rampart::gateway {

struct Usage {
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;
  int64_t total_tokens = 0;
  bool estimated = false;  // counted by the gateway (the upstream reported none)
};

// Tokens of `chars` characters of text, as estimated when an upstream reports none: about four
// characters a token (OpenAI's rule of thumb for English), and at least one for any text.
int64_t EstimateTokens(size_t chars);

// One `data:` event of a streamed answer.
struct StreamEvent {
  bool done = false;        // "[DONE]"
  bool token = false;       // carries generated content, a tool call or a finish reason
  bool finished = false;    // a choice has its finish_reason
  bool usage_only = false;  // the usage chunk: empty `choices` and a `usage` object
  std::optional<Usage> usage;
  size_t content_chars = 0;          // generated characters it carries
  std::optional<std::string> error;  // an error event's message
};

// Reads one event's data. Errors: InvalidArgument when it is neither "[DONE]" nor a JSON object.
Result<StreamEvent> InspectStreamEvent(std::string_view data, Operation operation);

// Reads a whole (not streamed) answer. Errors: InvalidArgument when it is not a JSON object
// with the operation's shape (`choices` for completions, `data` for embeddings).
Result<Usage> InspectAnswer(std::string_view body, Operation operation);

// The message of an upstream's error body in any of the shapes engines use: OpenAI's
// {"error":{"message"}}, older vLLM's {"object":"error","message"}, TGI's {"error":"..."}; or
// nullopt when the body has none of them.
std::optional<std::string> UpstreamErrorMessage(std::string_view body);

// OpenAI's error body: {"error":{"message","type","param","code"}} (param and code null when
// empty).
std::string ErrorJson(std::string_view message, std::string_view type, std::string_view param,
                      std::string_view code);
// The HTTP status a gateway error answers with: InvalidArgument and FailedPrecondition 400,
// Unauthenticated 401, PermissionDenied 403, NotFound 404, PayloadTooLarge 413,
// ResourceExhausted 429, Unimplemented 501, Unavailable 503, others 500.
int HttpStatusOf(const Status& status);
// OpenAI's error type for an HTTP status: invalid_request_error, authentication_error,
// permission_error, not_found_error, rate_limit_error, server_error, ...
std::string_view ErrorType(int http_status);

}  // namespace rampart::gateway
