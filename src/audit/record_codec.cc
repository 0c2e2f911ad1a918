#include "audit/record_codec.h"

#include <algorithm>
#include <array>
#include <bitset>
#include <cstring>
#include <functional>
#include <limits>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "json/reader.h"

namespace rampart::audit {
namespace {

// The length of the valid UTF-8 sequence at text[i], or 0 when the bytes there are not one.
size_t Utf8Length(std::string_view text, size_t i) {
  const auto byte = [&](size_t at) { return static_cast<unsigned char>(text[at]); };
  const unsigned char lead = byte(i);
  if (lead < 0x80) return 1;
  size_t length = 0;
  unsigned char low = 0x80;
  unsigned char high = 0xBF;
  if (lead >= 0xC2 && lead <= 0xDF) {
    length = 2;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    length = 3;
    if (lead == 0xE0) low = 0xA0;   // no overlong forms
    if (lead == 0xED) high = 0x9F;  // no surrogates
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    length = 4;
    if (lead == 0xF0) low = 0x90;
    if (lead == 0xF4) high = 0x8F;  // <= U+10FFFF
  } else {
    return 0;
  }
  if (i + length > text.size()) return 0;
  if (byte(i + 1) < low || byte(i + 1) > high) return 0;
  for (size_t k = 2; k < length; ++k) {
    if (byte(i + k) < 0x80 || byte(i + k) > 0xBF) return 0;
  }
  return length;
}

// Whether `c` is printable ASCII that JCS writes as it is.
bool Plain(char c) {
  const auto byte = static_cast<unsigned char>(c);
  return byte >= 0x20 && byte < 0x80 && c != '"' && c != '\\';
}

Result<std::vector<std::string>> ReadStrings(const json::Value& value, std::string_view what) {
  if (!value.IsArray()) return InvalidArgument("{} must be an array", what);
  std::vector<std::string> strings;
  for (simdjson::dom::element element : value.Array()) {
    ASSIGN_OR_RETURN(const std::string_view text, json::Value(element).GetString(what));
    strings.emplace_back(text);
  }
  return strings;
}

template <typename Number>
Result<NamedCounts<Number>> ReadCounts(const json::Value& value, std::string_view what) {
  if (!value.IsObject()) return InvalidArgument("{} must be an object", what);
  NamedCounts<Number> counts;
  for (auto [key, element] : value.Object()) {
    ASSIGN_OR_RETURN(const int64_t count, json::Value(element).GetInt64(what));
    if (count < std::numeric_limits<Number>::min() || count > std::numeric_limits<Number>::max()) {
      return InvalidArgument("{} holds an out-of-range count", what);
    }
    if (!counts.contains(key)) counts[key] = static_cast<Number>(count);  // the first kept
  }
  return counts;
}

}  // namespace

std::string ValidUtf8(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    const size_t length = Utf8Length(text, i);
    if (length == 0) {
      out += "\xEF\xBF\xBD";
      ++i;
    } else {
      out.append(text.substr(i, length));
      i += length;
    }
  }
  return out;
}

bool IsValidUtf8(std::string_view text) {
  size_t i = 0;
  // ASCII (nearly all text) eight bytes at a time.
  for (uint64_t word = 0; i + 8 <= text.size(); i += 8) {
    std::memcpy(&word, text.data() + i, 8);
    if ((word & 0x8080808080808080) != 0) break;
  }
  while (i < text.size()) {
    if (static_cast<unsigned char>(text[i]) < 0x80) {
      ++i;
      continue;
    }
    const size_t length = Utf8Length(text, i);
    if (length == 0) return false;
    i += length;
  }
  return true;
}

bool IsIndexText(std::string_view text) {
  return std::all_of(text.begin(), text.end(),
                     [](char c) { return Plain(c) || c == '"' || c == '\\'; });
}

std::string IndexText(std::string_view text) {
  // Nearly every value is printable ASCII, which stays as it is.
  if (IsIndexText(text)) return std::string(text);
  std::string valid = ValidUtf8(text);
  std::string out;
  out.reserve(valid.size());
  for (const char c : valid) {
    if (c == '\0') {
      out += "\xEF\xBF\xBD";
    } else {
      out += c;
    }
  }
  return out;
}

std::string EncodeRecord(const AuditRecord& record) {
  std::string out;
  const size_t size = EncodeRecordInto(record, out).size();
  out.resize(size);
  return out;
}

namespace {

// The encoder proper: the fields in their keys' byte order (RFC 8785), written through a pointer
// into a buffer sized once for the worst case (every byte of every string escaped as \u00xx),
// the keys and their punctuation as literals. record_codec_test holds its output against a
// straightforward encoding of the same rules on varied records.

constexpr size_t kMaxEscaped = 6;  // "\u00xx" for one byte
constexpr size_t kMaxNumber = 20;  // "-9223372036854775808"

// Bytes JCS writes as they are: printable ASCII except '"' and '\\'.
constexpr std::array<bool, 256> kPlain = [] {
  std::array<bool, 256> plain{};
  for (int c = 0x20; c < 0x80; ++c) plain[c] = c != '"' && c != '\\';
  return plain;
}();

// Whether all eight bytes of `word` are plain: none has its high bit set, is below 0x20, or is
// '"' or '\\' (the classic tests for a byte below n and for a zero byte, exact for "any").
constexpr bool AllPlain(uint64_t word) {
  constexpr uint64_t kOnes = 0x0101010101010101;
  constexpr uint64_t kHighs = 0x8080808080808080;
  const auto has_zero = [](uint64_t v) { return (v - kOnes) & ~v & kHighs; };
  return ((word | ((word - kOnes * 0x20) & ~word)) & kHighs) == 0 &&
         has_zero(word ^ (kOnes * '"')) == 0 && has_zero(word ^ (kOnes * '\\')) == 0;
}

class Writer {
 public:
  explicit Writer(char* at) : at_(at) {}
  char* at() const { return at_; }

  template <size_t N>
  void Literal(const char (&text)[N]) {
    std::memcpy(at_, text, N - 1);
    at_ += N - 1;
  }
  void Number(int64_t value) {
    const fmt::format_int digits(value);
    for (const char digit : std::string_view(digits.data(), digits.size())) *at_++ = digit;
  }
  void String(std::string_view value) {
    *at_++ = '"';
    const auto* bytes = reinterpret_cast<const unsigned char*>(value.data());
    const size_t size = value.size();
    for (size_t i = 0; i < size;) {
      // Eight bytes at a time while all are plain, then byte by byte.
      while (i + 8 <= size) {
        uint64_t word = 0;
        std::memcpy(&word, bytes + i, 8);
        if (!AllPlain(word)) break;
        std::memcpy(at_, &word, 8);
        at_ += 8;
        i += 8;
      }
      // The rest of the run (under eight bytes unless a special byte ended the words) byte by
      // byte: a call to memcpy per short run cost more than the copy.
      while (i < size && kPlain[bytes[i]]) *at_++ = static_cast<char>(bytes[i++]);
      if (i == size) break;
      i = Special(value, i);
    }
    *at_++ = '"';
  }
  void Strings(const std::vector<std::string>& values) {
    *at_++ = '[';
    for (size_t i = 0; i < values.size(); ++i) {
      if (i > 0) *at_++ = ',';
      String(values[i]);
    }
    *at_++ = ']';
  }
  template <typename Map>
  void Counts(const Map& counts) {
    *at_++ = '{';
    // JCS sorts the escaped keys' bytes, quotes included; for keys of plain bytes above '"'
    // (nearly all: "queue", "EMAIL") that is the map's own order.
    const bool in_order = std::all_of(counts.begin(), counts.end(), [](const auto& entry) {
      return std::all_of(entry.first.begin(), entry.first.end(), [](char c) {
        return kPlain[static_cast<unsigned char>(c)] && static_cast<unsigned char>(c) > '"';
      });
    });
    if (in_order) {
      bool first = true;
      for (const auto& [key, value] : counts) {
        if (!first) *at_++ = ',';
        first = false;
        String(key);
        *at_++ = ':';
        Number(value);
      }
    } else {
      std::vector<std::pair<std::string, int64_t>> sorted;
      for (const auto& [key, value] : counts) {
        std::string text(key.size() * kMaxEscaped + 2, '\0');
        Writer into(text.data());
        into.String(key);
        text.resize(static_cast<size_t>(into.at() - text.data()));
        sorted.emplace_back(std::move(text), int64_t{value});
      }
      std::sort(sorted.begin(), sorted.end());
      for (size_t i = 0; i < sorted.size(); ++i) {
        if (i > 0) *at_++ = ',';
        std::memcpy(at_, sorted[i].first.data(), sorted[i].first.size());
        at_ += sorted[i].first.size();
        *at_++ = ':';
        Number(sorted[i].second);
      }
    }
    *at_++ = '}';
  }

 private:
  // Writes the byte (or UTF-8 sequence) at value[i] that is not plain ASCII; returns the index
  // after it.
  size_t Special(std::string_view value, size_t i) {
    const size_t length = Utf8Length(value, i);
    if (length == 0) {
      Literal("\xEF\xBF\xBD");  // U+FFFD
      return i + 1;
    }
    if (length > 1) {
      std::memcpy(at_, value.data() + i, length);
      at_ += length;
      return i + length;
    }
    const char c = value[i];
    switch (c) {
      case '"': Literal("\\\""); break;
      case '\\': Literal("\\\\"); break;
      case '\b': Literal("\\b"); break;
      case '\f': Literal("\\f"); break;
      case '\n': Literal("\\n"); break;
      case '\r': Literal("\\r"); break;
      case '\t': Literal("\\t"); break;
      default: {
        static constexpr char kDigits[] = "0123456789abcdef";
        const auto byte = static_cast<unsigned char>(c);  // a control character
        Literal("\\u00");
        *at_++ = kDigits[byte >> 4];
        *at_++ = kDigits[byte & 0xf];
      }
    }
    return i + 1;
  }

  char* at_;
};

size_t StringsBound(const std::vector<std::string>& values) {
  size_t bound = 2;
  for (const std::string& value : values) bound += value.size() * kMaxEscaped + 3;
  return bound;
}

template <typename Map>
size_t CountsBound(const Map& counts) {
  size_t bound = 2;
  for (const auto& entry : counts) bound += entry.first.size() * kMaxEscaped + 4 + kMaxNumber;
  return bound;
}

}  // namespace

std::string_view EncodeRecordInto(const AuditRecord& r, std::string& out) {
  // Keys, punctuation and numbers take under 800 bytes; strings at most kMaxEscaped times theirs.
  size_t text = 0;
  for (const std::string* field :
       {&r.action, &r.api, &r.auth_method, &r.key_id, &r.model_version, &r.outcome, &r.principal,
        &r.request_digest, &r.request_id, &r.request_sealed, &r.resource, &r.resource_type,
        &r.response_digest, &r.response_sealed, &r.route, &r.source_address, &r.target, &r.tenant,
        &r.trace_id}) {
    text += field->size();
  }
  const size_t bound = 800 + kMaxEscaped * text + StringsBound(r.documents) +
                       StringsBound(r.obligations) + StringsBound(r.rules) +
                       CountsBound(r.pii_input) + CountsBound(r.pii_output) +
                       CountsBound(r.stages_ns);
  // Sized for the worst case, and never cut (resizing clears only what grows).
  if (out.size() < bound) out.resize(bound);
  Writer w(out.data());
  w.Literal("{\"action\":");
  w.String(r.action);
  if (r.allowed) {
    w.Literal(",\"allowed\":true,\"api\":");
  } else {
    w.Literal(",\"allowed\":false,\"api\":");
  }
  w.String(r.api);
  w.Literal(",\"auth_method\":");
  w.String(r.auth_method);
  if (!r.documents.empty()) {  // optional: records before it had none
    w.Literal(",\"documents\":");
    w.Strings(r.documents);
  }
  w.Literal(",\"instance_ns\":");
  w.Number(r.instance_ns);
  w.Literal(",\"key_id\":");
  w.String(r.key_id);
  w.Literal(",\"latency_ns\":");
  w.Number(r.latency_ns);
  w.Literal(",\"model_version\":");
  w.String(r.model_version);
  w.Literal(",\"obligations\":");
  w.Strings(r.obligations);
  w.Literal(",\"outcome\":");
  w.String(r.outcome);
  w.Literal(",\"pii_input\":");
  w.Counts(r.pii_input);
  w.Literal(",\"pii_output\":");
  w.Counts(r.pii_output);
  w.Literal(",\"principal\":");
  w.String(r.principal);
  w.Literal(",\"request_digest\":");
  w.String(r.request_digest);
  w.Literal(",\"request_id\":");
  w.String(r.request_id);
  w.Literal(",\"request_sealed\":");
  w.String(r.request_sealed);
  w.Literal(",\"resource\":");
  w.String(r.resource);
  w.Literal(",\"resource_type\":");
  w.String(r.resource_type);
  w.Literal(",\"response_digest\":");
  w.String(r.response_digest);
  w.Literal(",\"response_sealed\":");
  w.String(r.response_sealed);
  w.Literal(",\"route\":");
  w.String(r.route);
  w.Literal(",\"rules\":");
  w.Strings(r.rules);
  w.Literal(",\"sequence\":");
  w.Number(r.sequence);
  w.Literal(",\"source_address\":");
  w.String(r.source_address);
  w.Literal(",\"stages_ns\":");
  w.Counts(r.stages_ns);
  w.Literal(",\"status\":");
  w.Number(r.status);
  w.Literal(",\"target\":");
  w.String(r.target);
  w.Literal(",\"tenant\":");
  w.String(r.tenant);
  w.Literal(",\"time_unix_ns\":");
  w.Number(r.time_unix_ns);
  w.Literal(",\"tokens_in\":");
  w.Number(r.tokens_in);
  w.Literal(",\"tokens_out\":");
  w.Number(r.tokens_out);
  w.Literal(",\"trace_id\":");
  w.String(r.trace_id);
  w.Literal(",\"v\":");
  w.Number(kRecordEncodingVersion);
  w.Literal("}");
  return std::string_view(out.data(), static_cast<size_t>(w.at() - out.data()));
}

Result<AuditRecord> DecodeRecord(std::string_view text) {
  thread_local json::Parser parser;
  ASSIGN_OR_RETURN(const json::Value root, parser.Parse(text));
  if (!root.IsObject()) return InvalidArgument("an audit record must be a JSON object");
  AuditRecord r;
  const auto text_field = [](std::string* field) {
    return [field](const json::Value& value, std::string_view what) -> Status {
      ASSIGN_OR_RETURN(const std::string_view read, value.GetString(what));
      *field = std::string(read);
      return Status::Ok();
    };
  };
  const auto int_field = [](int64_t* field) {
    return [field](const json::Value& value, std::string_view what) -> Status {
      ASSIGN_OR_RETURN(*field, value.GetInt64(what));
      return Status::Ok();
    };
  };
  int64_t version = 0;
  int64_t status = 0;
  using Reader = std::function<Status(const json::Value&, std::string_view)>;
  const std::pair<std::string_view, Reader> readers[] = {
      {"v", int_field(&version)},
      {"sequence", int_field(&r.sequence)},
      {"time_unix_ns", int_field(&r.time_unix_ns)},
      {"trace_id", text_field(&r.trace_id)},
      {"request_id", text_field(&r.request_id)},
      {"api", text_field(&r.api)},
      {"tenant", text_field(&r.tenant)},
      {"principal", text_field(&r.principal)},
      {"auth_method", text_field(&r.auth_method)},
      {"key_id", text_field(&r.key_id)},
      {"source_address", text_field(&r.source_address)},
      {"action", text_field(&r.action)},
      {"resource_type", text_field(&r.resource_type)},
      {"resource", text_field(&r.resource)},
      {"allowed",
       [&](const json::Value& value, std::string_view what) -> Status {
         ASSIGN_OR_RETURN(r.allowed, value.GetBool(what));
         return Status::Ok();
       }},
      {"rules",
       [&](const json::Value& value, std::string_view what) -> Status {
         ASSIGN_OR_RETURN(r.rules, ReadStrings(value, what));
         return Status::Ok();
       }},
      {"obligations",
       [&](const json::Value& value, std::string_view what) -> Status {
         ASSIGN_OR_RETURN(r.obligations, ReadStrings(value, what));
         return Status::Ok();
       }},
      {"pii_input",
       [&](const json::Value& value, std::string_view what) -> Status {
         ASSIGN_OR_RETURN(r.pii_input, ReadCounts<int>(value, what));
         return Status::Ok();
       }},
      {"pii_output",
       [&](const json::Value& value, std::string_view what) -> Status {
         ASSIGN_OR_RETURN(r.pii_output, ReadCounts<int>(value, what));
         return Status::Ok();
       }},
      {"route", text_field(&r.route)},
      {"target", text_field(&r.target)},
      {"model_version", text_field(&r.model_version)},
      {"tokens_in", int_field(&r.tokens_in)},
      {"tokens_out", int_field(&r.tokens_out)},
      {"instance_ns", int_field(&r.instance_ns)},
      {"stages_ns",
       [&](const json::Value& value, std::string_view what) -> Status {
         ASSIGN_OR_RETURN(r.stages_ns, ReadCounts<int64_t>(value, what));
         return Status::Ok();
       }},
      {"latency_ns", int_field(&r.latency_ns)},
      {"status", int_field(&status)},
      {"outcome", text_field(&r.outcome)},
      {"request_digest", text_field(&r.request_digest)},
      {"response_digest", text_field(&r.response_digest)},
      {"request_sealed", text_field(&r.request_sealed)},
      {"response_sealed", text_field(&r.response_sealed)},
  };
  std::bitset<std::size(readers)> seen;
  bool documents_seen = false;
  for (auto [key, element] : root.Object()) {
    if (key == "documents") {  // optional, and never empty when present
      if (documents_seen) return InvalidArgument("record field 'documents' appears twice");
      documents_seen = true;
      ASSIGN_OR_RETURN(r.documents, ReadStrings(json::Value(element), "documents"));
      if (r.documents.empty()) return InvalidArgument("record field 'documents' is empty");
      continue;
    }
    const auto reader = std::find_if(std::begin(readers), std::end(readers),
                                     [&](const auto& entry) { return entry.first == key; });
    if (reader == std::end(readers)) return InvalidArgument("unknown record field '{}'", key);
    const size_t index = size_t(reader - std::begin(readers));
    if (seen[index]) return InvalidArgument("record field '{}' appears twice", key);
    seen[index] = true;
    RETURN_IF_ERROR(reader->second(json::Value(element), reader->first));
  }
  if (!seen.all()) {
    return InvalidArgument("an audit record has {} fields, not {}", seen.count(),
                           std::size(readers));
  }
  if (version != kRecordEncodingVersion) {
    return InvalidArgument("audit record encoding version {} is not {}", version,
                           kRecordEncodingVersion);
  }
  if (status < std::numeric_limits<int>::min() || status > std::numeric_limits<int>::max()) {
    return InvalidArgument("status {} is out of range", status);
  }
  r.status = static_cast<int>(status);
  return r;
}

}  // namespace rampart::audit
