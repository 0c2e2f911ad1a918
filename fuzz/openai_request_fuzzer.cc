// libFuzzer target: what the OpenAI gateway reads from callers and upstreams: a request body
// (ParseOpenAiRequest for each operation, then UpstreamBody's rewrite), an upstream's stream
// (SseReader fed in pieces, each event through InspectStreamEvent) and a whole answer
// (InspectAnswer, UpstreamErrorMessage).
//
// Input layout: byte 0 picks the operation (low 2 bits) and the stream piece size (the rest, 1 to
// 64); the rest is used as the body, the stream and the answer alike.
//
// Checks: a parsed request has a model and n within the limit; its rewritten body parses again
// as a request with the upstream's model name; events come out of the reader only whole (no
// CR or LF left inside one line's data but the joins), and the reader never holds more than its
// bound.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "fuzz_check.h"
#include "gateway/openai_request.h"
#include "gateway/openai_response.h"
#include "gateway/sse.h"

using rampart::fuzz::Check;
using namespace rampart::gateway;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const auto operation = static_cast<Operation>((data[0] & 3) % 3);
  const size_t piece = 1 + (data[0] >> 2);
  const std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);

  const ParseLimits limits{.max_n = 4, .max_embedding_inputs = 64};
  RequestError error;
  auto request = ParseOpenAiRequest(operation, std::string(text), limits, error);
  if (request.ok()) {
    Check(!request->model.empty(), "a parsed request without a model");
    Check(request->n >= 1 && request->n <= limits.max_n, "n outside its limit");
    auto body = UpstreamBody(*request, "upstream/model-1", true);
    Check(body.ok(), "a parsed request's body cannot be rewritten");
    RequestError again_error;
    auto again = ParseOpenAiRequest(operation, *body, limits, again_error);
    Check(again.ok(), "a rewritten body does not parse again");
    Check(again->model == "upstream/model-1", "the rewritten body lost the upstream's model");
    Check(!request->stream || again->include_usage, "the rewrite did not ask for usage");
  } else {
    Check(!request.status().message().empty(), "a refusal without a message");
  }

  constexpr size_t kMaxEvent = 4096;
  SseReader reader(kMaxEvent);
  for (size_t at = 0; at < text.size(); at += piece) {
    const auto status = reader.Feed(text.substr(at, piece), [&](std::string_view event) {
      Check(event.size() <= kMaxEvent, "an event over the reader's bound");
      (void)InspectStreamEvent(event, operation);
    });
    if (!status.ok()) break;
  }
  (void)InspectAnswer(text, operation);
  (void)UpstreamErrorMessage(text);
  return 0;
}
