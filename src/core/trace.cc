#include "core/trace.h"

#include <algorithm>
#include <random>

namespace rampart {
namespace {

template <size_t N>
void FillRandom(std::array<uint8_t, N>& bytes) {
  thread_local std::mt19937_64 generator(std::random_device{}());
  do {
    for (size_t i = 0; i < N; i += 8) {
      uint64_t value = generator();
      for (size_t j = i; j < N && j < i + 8; ++j, value >>= 8) bytes[j] = value & 0xff;
    }
  } while (std::all_of(bytes.begin(), bytes.end(), [](uint8_t b) { return b == 0; }));
}

// Writes `bytes` as 2 * N lower-case hex digits at `out`; returns the end.
template <size_t N>
char* WriteHex(const std::array<uint8_t, N>& bytes, char* out) {
  static constexpr char kDigits[] = "0123456789abcdef";
  for (uint8_t byte : bytes) {
    *out++ = kDigits[byte >> 4];
    *out++ = kDigits[byte & 0xf];
  }
  return out;
}

template <size_t N>
std::string Hex(const std::array<uint8_t, N>& bytes) {
  std::string out(2 * N, '0');
  WriteHex(bytes, out.data());
  return out;
}

int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;  // the spec allows lower case only
}

template <size_t N>
bool ParseHex(std::string_view text, std::array<uint8_t, N>& bytes) {
  if (text.size() != 2 * N) return false;
  bool any = false;
  for (size_t i = 0; i < N; ++i) {
    const int high = HexDigit(text[2 * i]);
    const int low = HexDigit(text[2 * i + 1]);
    if (high < 0 || low < 0) return false;
    bytes[i] = static_cast<uint8_t>(high * 16 + low);
    any = any || bytes[i] != 0;
  }
  return any;
}

}  // namespace

TraceContext TraceContext::Start() {
  TraceContext context;
  FillRandom(context.trace_id_);
  FillRandom(context.span_id_);
  return context;
}

std::optional<TraceContext> TraceContext::Parse(std::string_view traceparent) {
  // version "-" trace-id "-" parent-id "-" flags; versions after 00 may append "-" fields.
  if (traceparent.size() < 55 || traceparent[2] != '-' || traceparent[35] != '-' ||
      traceparent[52] != '-') {
    return std::nullopt;
  }
  const std::string_view version = traceparent.substr(0, 2);
  if (HexDigit(version[0]) < 0 || HexDigit(version[1]) < 0 || version == "ff") return std::nullopt;
  if (version == "00" ? traceparent.size() != 55
                      : traceparent.size() > 55 && traceparent[55] != '-') {
    return std::nullopt;
  }
  TraceContext context;
  if (!ParseHex(traceparent.substr(3, 32), context.trace_id_) ||
      !ParseHex(traceparent.substr(36, 16), context.span_id_)) {
    return std::nullopt;
  }
  const int high = HexDigit(traceparent[53]);
  const int low = HexDigit(traceparent[54]);
  if (high < 0 || low < 0) return std::nullopt;
  context.flags_ = static_cast<uint8_t>(high * 16 + low);
  return context;
}

TraceContext TraceContext::Child() const {
  TraceContext child = *this;
  FillRandom(child.span_id_);
  return child;
}

std::string TraceContext::Traceparent() const {
  // "00-" trace-id "-" span-id "-" flags: 55 characters, written in place (one per response).
  std::string out(55, '-');
  char* at = out.data();
  *at++ = '0';
  *at++ = '0';
  at = WriteHex(trace_id_, at + 1);
  at = WriteHex(span_id_, at + 1);
  WriteHex(std::array<uint8_t, 1>{flags_}, at + 1);
  return out;
}

std::string TraceContext::TraceId() const { return Hex(trace_id_); }
std::string TraceContext::SpanId() const { return Hex(span_id_); }

}  // namespace rampart
