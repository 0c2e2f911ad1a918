#pragma once

// The texts of OpenAI bodies the guard reads, found and rewritten in place: every other member
// is written back as it was (minified), in its order.

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "core/status.h"
#include "gateway/openai_request.h"

namespace rampart::gateway {

enum class GuardedShape {
  kChatRequest,        // messages[].content (string or parts' text), tool_calls[].function
                       // .arguments, function_call.arguments
  kCompletionRequest,  // prompt (string or strings)
  kEmbeddingRequest,   // input (string or strings)
  kChatAnswer,         // choices[].message: content, reasoning_content, tool call arguments
  kCompletionAnswer,   // choices[].text
  kChatChunk,          // choices[].delta: content, reasoning_content, tool call arguments
  kCompletionChunk,    // choices[].text
};
GuardedShape RequestShape(Operation operation);
// kChatAnswer or kChatChunk, ... ; embeddings answers hold no text (nullopt).
std::optional<GuardedShape> AnswerShape(Operation operation, bool chunk);

// One text of a body.
struct GuardedText {
  std::string_view text;
  // Where it is, with array items named by their "index" member when they have one (choices and
  // tool calls in chunks), e.g. "choices.0.delta.tool_calls.1.function.arguments".
  std::string path;
  int64_t choice = 0;      // choices[].index (answers and chunks)
  int64_t tool = -1;       // tool_calls[].index, or -1
  std::string_view field;  // the member's name: "content", "arguments", "text", ...
};

// What replaces a text (nullopt: it stays).
using TextVisitor = std::function<Result<std::optional<std::string>>(const GuardedText&)>;

// Calls `visit` on each text of `json` in document order; returns the rewritten body when a
// visit replaced anything, else nullopt. Errors: InvalidArgument when `json` is not JSON, and
// whatever `visit` returns.
Result<std::optional<std::string>> RewriteTexts(std::string_view json, GuardedShape shape,
                                                const TextVisitor& visit);

}  // namespace rampart::gateway
