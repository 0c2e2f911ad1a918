#include "api/admin_audit.h"

#include <charconv>
#include <ctime>
#include <limits>
#include <optional>

#include "audit/record_codec.h"
#include "audit/record_compact.h"
#include "json/writer.h"

namespace rampart::api {
namespace {

// The value of `name` in `query`, percent-decoded; nullopt when absent.
Result<std::optional<std::string>> Parameter(std::string_view query, std::string_view name) {
  while (!query.empty()) {
    const size_t end = query.find('&');
    const std::string_view pair = query.substr(0, end);
    const size_t equals = pair.find('=');
    if (equals != std::string_view::npos && pair.substr(0, equals) == name) {
      const std::string_view raw = pair.substr(equals + 1);
      std::string value;
      for (size_t i = 0; i < raw.size(); ++i) {
        if (raw[i] == '+') {
          value += ' ';
        } else if (raw[i] == '%') {
          int byte = 0;
          if (i + 2 >= raw.size()) {
            return InvalidArgument("'{}': a bad percent escape", name);
          }
          auto [next, error] = std::from_chars(raw.data() + i + 1, raw.data() + i + 3, byte, 16);
          if (error != std::errc() || next != raw.data() + i + 3) {
            return InvalidArgument("'{}': a bad percent escape", name);
          }
          value += static_cast<char>(byte);
          i += 2;
        } else {
          value += raw[i];
        }
      }
      return std::optional<std::string>(std::move(value));
    }
    if (end == std::string_view::npos) break;
    query.remove_prefix(end + 1);
  }
  return std::optional<std::string>();
}

Result<int64_t> Integer(const std::string& text, std::string_view name, int64_t low, int64_t high) {
  int64_t value = 0;
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size() || value < low || value > high) {
    return InvalidArgument("'{}' must be an integer in {}..{}, not '{}'", name, low, high, text);
  }
  return value;
}

// Unix seconds or "2026-12-01T00:00:00Z", as Unix nanoseconds.
Result<int64_t> Time(const std::string& text, std::string_view name) {
  if (!text.empty() && text.find_first_not_of("0123456789") == std::string::npos) {
    ASSIGN_OR_RETURN(const int64_t seconds, Integer(text, name, 0, int64_t{1} << 34));
    return seconds * 1'000'000'000;
  }
  std::tm utc{};
  const char* end = strptime(text.c_str(), "%Y-%m-%dT%H:%M:%SZ", &utc);
  if (end == nullptr || *end != '\0') {
    return InvalidArgument("'{}' must be Unix seconds or YYYY-MM-DDTHH:MM:SSZ, not '{}'", name,
                           text);
  }
  return int64_t{timegm(&utc)} * 1'000'000'000;
}

}  // namespace

Result<store::AuditQuery> ParseAuditQuery(std::string_view query) {
  store::AuditQuery parsed;
  parsed.limit = kAuditQueryDefaultLimit;
  ASSIGN_OR_RETURN(std::optional<std::string> from, Parameter(query, "from"));
  if (from) {
    ASSIGN_OR_RETURN(parsed.from_unix_ns, Time(*from, "from"));
  }
  ASSIGN_OR_RETURN(std::optional<std::string> to, Parameter(query, "to"));
  if (to) {
    ASSIGN_OR_RETURN(parsed.to_unix_ns, Time(*to, "to"));
  }
  ASSIGN_OR_RETURN(std::optional<std::string> tenant, Parameter(query, "tenant"));
  if (tenant) parsed.tenant = std::move(*tenant);
  ASSIGN_OR_RETURN(std::optional<std::string> principal, Parameter(query, "principal"));
  if (principal) parsed.principal = std::move(*principal);
  ASSIGN_OR_RETURN(std::optional<std::string> trace_id, Parameter(query, "trace_id"));
  if (trace_id) parsed.trace_id = std::move(*trace_id);
  ASSIGN_OR_RETURN(std::optional<std::string> after, Parameter(query, "after"));
  if (after) {
    ASSIGN_OR_RETURN(parsed.after_sequence,
                     Integer(*after, "after", 0, std::numeric_limits<int64_t>::max()));
  }
  ASSIGN_OR_RETURN(std::optional<std::string> limit, Parameter(query, "limit"));
  if (limit) {
    ASSIGN_OR_RETURN(parsed.limit, Integer(*limit, "limit", 1, kAuditQueryMaxLimit));
  }
  return parsed;
}

Result<std::string> QueryAuditRecordsJson(store::Store& store, const store::AuditQuery& query) {
  ASSIGN_OR_RETURN(const std::vector<store::AuditRow> rows, store.QueryAuditRows(query));
  json::Writer writer;
  writer.StartObject();
  writer.Key("records");
  writer.StartArray();
  for (const store::AuditRow& row : rows) {
    Result<audit::AuditRecord> record =
        row.compact ? audit::DecodeCompactRow(row) : audit::DecodeRecord(row.record);
    if (!record.ok()) {
      return Internal("audit record {} does not decode: {}", row.sequence,
                      record.status().message());
    }
    // Digests only: sealed content never leaves through this API.
    record->request_sealed.clear();
    record->response_sealed.clear();
    writer.Raw(audit::EncodeRecord(*record));
  }
  writer.EndArray();
  writer.Key("next_after");
  writer.Int64(
      static_cast<int64_t>(rows.size()) == query.limit && !rows.empty() ? rows.back().sequence : 0);
  writer.EndObject();
  return writer.Take();
}

}  // namespace rampart::api
