#include "audit/record_codec.h"

#include <algorithm>
#include <bitset>
#include <functional>
#include <limits>
#include <map>
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

void AppendString(std::string& out, std::string_view value) {
  out += '"';
  for (size_t i = 0; i < value.size();) {
    // Runs of plain ASCII (nearly every field) are copied at once.
    size_t run = i;
    while (run < value.size() && Plain(value[run])) ++run;
    if (run > i) {
      out.append(value.substr(i, run - i));
      i = run;
      continue;
    }
    const char c = value[i];
    const size_t length = Utf8Length(value, i);
    if (length == 0) {
      out += "\xEF\xBF\xBD";  // U+FFFD
      ++i;
      continue;
    }
    if (length > 1) {
      out.append(value.substr(i, length));
      i += length;
      continue;
    }
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          out += fmt::format("\\u{:04x}", static_cast<unsigned char>(c));
        } else {
          out += c;
        }
    }
    ++i;
  }
  out += '"';
}

void AppendNumber(std::string& out, int64_t value) {
  const fmt::format_int digits(value);
  out.append(digits.data(), digits.size());
}

std::string String(std::string_view value) {
  std::string out;
  AppendString(out, value);
  return out;
}

void AppendStrings(std::string& out, const std::vector<std::string>& values) {
  out += '[';
  for (size_t i = 0; i < values.size(); ++i) {
    if (i > 0) out += ',';
    AppendString(out, values[i]);
  }
  out += ']';
}

template <typename Map>
void AppendCounts(std::string& out, const Map& counts) {
  // std::map orders std::string keys by their bytes; keys made valid UTF-8 keep that order
  // except where replacement characters tie, which a sort settles.
  std::vector<std::pair<std::string, int64_t>> sorted;
  for (const auto& [key, value] : counts) sorted.emplace_back(String(key), int64_t{value});
  std::sort(sorted.begin(), sorted.end());
  out += '{';
  for (size_t i = 0; i < sorted.size(); ++i) {
    if (i > 0) out += ',';
    out += sorted[i].first;
    out += ':';
    AppendNumber(out, sorted[i].second);
  }
  out += '}';
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
Result<std::map<std::string, Number>> ReadCounts(const json::Value& value, std::string_view what) {
  if (!value.IsObject()) return InvalidArgument("{} must be an object", what);
  std::map<std::string, Number> counts;
  for (auto [key, element] : value.Object()) {
    ASSIGN_OR_RETURN(const int64_t count, json::Value(element).GetInt64(what));
    if (count < std::numeric_limits<Number>::min() || count > std::numeric_limits<Number>::max()) {
      return InvalidArgument("{} holds an out-of-range count", what);
    }
    counts.emplace(std::string(key), static_cast<Number>(count));
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
  const EncodedRecord parts = EncodeRecordAroundSequence(record);
  return parts.Join(record.sequence);
}

std::string EncodedRecord::Join(int64_t sequence) const {
  std::string out;
  JoinInto(sequence, out);
  return out;
}

void EncodedRecord::JoinInto(int64_t sequence, std::string& out) const {
  const fmt::format_int number(sequence);
  out.clear();
  out.reserve(before_sequence.size() + number.size() + after_sequence.size());
  out += before_sequence;
  out.append(number.data(), number.size());
  out += after_sequence;
}

EncodedRecord EncodeRecordAroundSequence(const AuditRecord& r) {
  // The fields in the order of their keys' bytes (RFC 8785), written straight into the output:
  // record_codec_test holds the order against a sorted encoding.
  EncodedRecord parts;
  std::string& out = parts.before_sequence;
  // Keys, punctuation and numbers take under 600 bytes; the strings as long as they are (more
  // only when escaped), so that the buffer is sized once.
  size_t text = 0;
  for (const std::string* field :
       {&r.action, &r.api, &r.auth_method, &r.key_id, &r.model_version, &r.outcome, &r.principal,
        &r.request_digest, &r.request_id, &r.request_sealed, &r.resource, &r.resource_type,
        &r.response_digest, &r.response_sealed, &r.route}) {
    text += field->size();
  }
  for (const std::vector<std::string>* list : {&r.documents, &r.obligations, &r.rules}) {
    for (const std::string& item : *list) text += item.size() + 3;
  }
  out.reserve(400 + text + 32 * r.pii_input.size() + 32 * r.pii_output.size());
  const auto key = [](std::string& to, std::string_view name, bool first = false) {
    if (!first) to += ',';
    to += '"';
    to += name;
    to += "\":";
  };
  out += '{';
  key(out, "action", true);
  AppendString(out, r.action);
  key(out, "allowed");
  out += r.allowed ? "true" : "false";
  key(out, "api");
  AppendString(out, r.api);
  key(out, "auth_method");
  AppendString(out, r.auth_method);
  if (!r.documents.empty()) {  // optional: records before it had none
    key(out, "documents");
    AppendStrings(out, r.documents);
  }
  key(out, "instance_ns");
  AppendNumber(out, r.instance_ns);
  key(out, "key_id");
  AppendString(out, r.key_id);
  key(out, "latency_ns");
  AppendNumber(out, r.latency_ns);
  key(out, "model_version");
  AppendString(out, r.model_version);
  key(out, "obligations");
  AppendStrings(out, r.obligations);
  key(out, "outcome");
  AppendString(out, r.outcome);
  key(out, "pii_input");
  AppendCounts(out, r.pii_input);
  key(out, "pii_output");
  AppendCounts(out, r.pii_output);
  key(out, "principal");
  AppendString(out, r.principal);
  key(out, "request_digest");
  AppendString(out, r.request_digest);
  key(out, "request_id");
  AppendString(out, r.request_id);
  key(out, "request_sealed");
  AppendString(out, r.request_sealed);
  key(out, "resource");
  AppendString(out, r.resource);
  key(out, "resource_type");
  AppendString(out, r.resource_type);
  key(out, "response_digest");
  AppendString(out, r.response_digest);
  key(out, "response_sealed");
  AppendString(out, r.response_sealed);
  key(out, "route");
  AppendString(out, r.route);
  key(out, "rules");
  AppendStrings(out, r.rules);
  key(out, "sequence");
  // The sequence's digits go here (EncodedRecord::Join).
  std::string& rest = parts.after_sequence;
  rest.reserve(200 + r.source_address.size() + r.trace_id.size() + r.tenant.size() +
               r.target.size() + 40 * r.stages_ns.size());
  key(rest, "source_address");
  AppendString(rest, r.source_address);
  key(rest, "stages_ns");
  AppendCounts(rest, r.stages_ns);
  key(rest, "status");
  AppendNumber(rest, r.status);
  key(rest, "target");
  AppendString(rest, r.target);
  key(rest, "tenant");
  AppendString(rest, r.tenant);
  key(rest, "time_unix_ns");
  AppendNumber(rest, r.time_unix_ns);
  key(rest, "tokens_in");
  AppendNumber(rest, r.tokens_in);
  key(rest, "tokens_out");
  AppendNumber(rest, r.tokens_out);
  key(rest, "trace_id");
  AppendString(rest, r.trace_id);
  key(rest, "v");
  AppendNumber(rest, kRecordEncodingVersion);
  rest += '}';
  return parts;
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
