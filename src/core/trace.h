#pragma once

// W3C Trace Context (https://www.w3.org/TR/trace-context/): parse an incoming `traceparent`,
// or start a trace when there is none, so one id follows a request through logs and replies.
// Values; thread-safe.

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace rampart {

class TraceContext {
 public:
  // A new trace with random ids, sampled.
  static TraceContext Start();
  // "00-<32 hex trace id>-<16 hex parent id>-<2 hex flags>"; nullopt when malformed or all-zero
  // ids (the spec says to start a new trace then).
  static std::optional<TraceContext> Parse(std::string_view traceparent);

  // The same trace with a new span id: this server's span.
  TraceContext Child() const;

  std::string Traceparent() const;
  std::string TraceId() const;  // 32 lower-case hex digits
  std::string SpanId() const;   // 16 lower-case hex digits

 private:
  std::array<uint8_t, 16> trace_id_{};
  std::array<uint8_t, 8> span_id_{};
  uint8_t flags_ = 1;
};

}  // namespace rampart
