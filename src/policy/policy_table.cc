#include "policy/policy_table.h"

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <sstream>

#include <fmt/ranges.h>
#include <yaml-cpp/yaml.h>

namespace rampart::policy {
namespace {

// Reads requests and tables from YAML; errors name the file and the line.
class CaseReader {
 public:
  explicit CaseReader(std::string_view name) : name_(name) {}

  template <typename... Args>
  Status Error(const YAML::Node& node, fmt::format_string<Args...> format, Args&&... args) const {
    return InvalidArgument("{}:{}: {}", name_, node.Mark().line + 1,
                           fmt::format(format, std::forward<Args>(args)...));
  }

  Status CheckKeys(const YAML::Node& map, std::string_view what,
                   std::initializer_list<std::string_view> known) const {
    if (!map.IsMap()) return Error(map, "'{}' must be a map", what);
    for (const auto& entry : map) {
      const std::string key = entry.first.Scalar();
      if (std::find(known.begin(), known.end(), key) == known.end()) {
        return Error(entry.first, "unknown key '{}' in {} (known: {})", key, what,
                     fmt::join(known, ", "));
      }
    }
    return Status::Ok();
  }

  Status Text(const YAML::Node& node, std::string_view key, std::string& into) const {
    if (!node) return Status::Ok();
    if (!node.IsScalar()) return Error(node, "'{}' must be a single value", key);
    into = node.Scalar();
    return Status::Ok();
  }

  // A scalar, or a list of scalars joined by ','.
  Status Joined(const YAML::Node& node, std::string_view key, std::string& into) const {
    if (!node.IsSequence()) return Text(node, key, into);
    std::vector<std::string> items;
    for (const YAML::Node& item : node) {
      if (!item.IsScalar()) return Error(item, "'{}' holds single values", key);
      items.push_back(item.Scalar());
    }
    into = fmt::format("{}", fmt::join(items, ","));
    return Status::Ok();
  }

  Status List(const YAML::Node& node, std::string_view key, std::vector<std::string>& into) const {
    if (!node) return Status::Ok();
    if (node.IsScalar()) {
      into = {node.Scalar()};
      return Status::Ok();
    }
    if (!node.IsSequence()) return Error(node, "'{}' must be a list", key);
    for (const YAML::Node& item : node) {
      if (!item.IsScalar()) return Error(item, "'{}' holds single values", key);
      into.push_back(item.Scalar());
    }
    return Status::Ok();
  }

  Status Attributes(const YAML::Node& node, std::string_view key, store::Attributes& into) const {
    if (!node) return Status::Ok();
    if (!node.IsMap()) return Error(node, "'{}' must be a map of names to values", key);
    for (const auto& entry : node) {
      RETURN_IF_ERROR(Joined(entry.second, entry.first.Scalar(), into[entry.first.Scalar()]));
    }
    return Status::Ok();
  }

  // One request; `table_keys` allows expect, rules and obligations (read by the caller).
  Status Request(const YAML::Node& node, bool table_keys, RequestCase& into) const {
    if (table_keys) {
      RETURN_IF_ERROR(CheckKeys(node, "a case",
                                {"name", "principal", "action", "resource", "context", "expect",
                                 "rules", "obligations"}));
    } else {
      RETURN_IF_ERROR(
          CheckKeys(node, "a request", {"name", "principal", "action", "resource", "context"}));
    }
    RETURN_IF_ERROR(Text(node["name"], "name", into.name));
    const YAML::Node principal = node["principal"];
    if (!principal) return Error(node, "a request needs a 'principal'");
    RETURN_IF_ERROR(CheckKeys(principal, "principal",
                              {"tenant", "name", "roles", "method", "attributes", "key_id"}));
    RETURN_IF_ERROR(Text(principal["tenant"], "tenant", into.principal.tenant));
    RETURN_IF_ERROR(Text(principal["name"], "name", into.principal.principal));
    RETURN_IF_ERROR(List(principal["roles"], "roles", into.principal.roles));
    RETURN_IF_ERROR(Text(principal["key_id"], "key_id", into.principal.key_id));
    std::sort(into.principal.roles.begin(), into.principal.roles.end());
    RETURN_IF_ERROR(Attributes(principal["attributes"], "attributes", into.principal.attributes));
    if (const YAML::Node method = principal["method"]) {
      static constexpr identity::Method kMethods[] = {
          identity::Method::kAnonymous, identity::Method::kApiKey, identity::Method::kJwt,
          identity::Method::kMtls};
      const auto found = std::find_if(std::begin(kMethods), std::end(kMethods), [&](auto m) {
        return identity::MethodName(m) == method.Scalar();
      });
      if (found == std::end(kMethods)) {
        return Error(method, "unknown method '{}' (anonymous, api_key, jwt, mtls)",
                     method.Scalar());
      }
      into.principal.method = *found;
    }
    if (!node["action"]) return Error(node, "a request needs an 'action'");
    RETURN_IF_ERROR(Text(node["action"], "action", into.action));
    const YAML::Node resource = node["resource"];
    if (!resource) return Error(node, "a request needs a 'resource'");
    RETURN_IF_ERROR(CheckKeys(resource, "resource", {"type", "name", "attributes"}));
    RETURN_IF_ERROR(Text(resource["type"], "type", into.resource_type));
    RETURN_IF_ERROR(Text(resource["name"], "name", into.resource_name));
    RETURN_IF_ERROR(Attributes(resource["attributes"], "attributes", into.resource_attributes));
    if (const YAML::Node context = node["context"]) {
      RETURN_IF_ERROR(CheckKeys(context, "context", {"source_ip", "time", "attributes"}));
      RETURN_IF_ERROR(Text(context["source_ip"], "source_ip", into.source_ip));
      if (const YAML::Node time = context["time"]) {
        std::string text;
        RETURN_IF_ERROR(Text(time, "time", text));
        Result<int64_t> instant = ParseRfc3339(text);
        if (!instant.ok()) return Error(time, "{}", instant.status().message());
        into.now_unix = *instant;
      }
      RETURN_IF_ERROR(Attributes(context["attributes"], "attributes", into.context));
    }
    return Status::Ok();
  }

  const std::string& name() const { return name_; }

 private:
  std::string name_;
};

Result<YAML::Node> LoadYaml(std::string_view text, std::string_view name) {
  try {
    return YAML::Load(std::string(text));
  } catch (const YAML::ParserException& error) {
    return InvalidArgument("{}:{}: {}", name, error.mark.line + 1, error.msg);
  }
}

Result<std::string> ReadWholeFile(const std::string& path, std::string_view what) {
  std::ifstream file(path, std::ios::binary);
  if (!file) return InvalidArgument("{}: cannot open the {}", path, what);
  std::ostringstream text;
  text << file.rdbuf();
  return text.str();
}

int64_t DaysFromCivil(int64_t year, unsigned month, unsigned day) {  // Howard Hinnant's
  year -= month <= 2;
  const int64_t era = (year >= 0 ? year : year - 399) / 400;
  const auto year_of_era = static_cast<unsigned>(year - era * 400);
  const unsigned day_of_year = (153 * (month + (month > 2 ? -3 : 9)) + 2) / 5 + day - 1;
  const unsigned day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
  return era * 146097 + static_cast<int64_t>(day_of_era) - 719468;
}

Status CompareCase(const YAML::Node& node, const RequestCase& request, const Decision& decision,
                   const CaseReader& reader, std::vector<std::string>& mismatches) {
  const std::string expect = node["expect"].Scalar();
  const std::string prefix =
      fmt::format("{}:{}: case '{}'", reader.name(), node.Mark().line + 1, request.name);
  const auto got = [&] {
    return fmt::format("{}{}", decision.allowed ? "allow" : "deny",
                       decision.reason.empty() ? "" : fmt::format(" ({})", decision.reason));
  };
  if ((expect == "allow") != decision.allowed) {
    mismatches.push_back(fmt::format("{}: expected {}, got {}", prefix, expect, got()));
    return Status::Ok();
  }
  if (node["rules"]) {
    std::vector<std::string> rules;
    RETURN_IF_ERROR(reader.List(node["rules"], "rules", rules));
    std::sort(rules.begin(), rules.end());
    if (rules != decision.rules) {
      mismatches.push_back(fmt::format("{}: expected rules [{}], got [{}]", prefix,
                                       fmt::join(rules, ", "), fmt::join(decision.rules, ", ")));
    }
  }
  if (node["obligations"]) {
    std::vector<std::string> obligations;
    RETURN_IF_ERROR(reader.List(node["obligations"], "obligations", obligations));
    std::sort(obligations.begin(), obligations.end());
    if (obligations != decision.obligations) {
      mismatches.push_back(fmt::format("{}: expected obligations [{}], got [{}]", prefix,
                                       fmt::join(obligations, ", "),
                                       fmt::join(decision.obligations, ", ")));
    }
  }
  return Status::Ok();
}

}  // namespace

AccessRequest RequestCase::View() const {
  AccessRequest request;
  request.principal = &principal;
  request.action = action;
  request.resource = {resource_type, resource_name, &resource_attributes};
  request.source_address = source_ip;
  request.now_unix = now_unix;
  request.context = &context;
  return request;
}

Result<RequestCase> ParseRequest(std::string_view text, std::string_view name) {
  ASSIGN_OR_RETURN(const YAML::Node root, LoadYaml(text, name));
  const CaseReader reader(name);
  if (!root.IsMap()) return reader.Error(root, "a request is a map (principal, action, ...)");
  RequestCase request;
  try {
    RETURN_IF_ERROR(reader.Request(root, /*table_keys=*/false, request));
  } catch (const YAML::Exception& error) {
    return InvalidArgument("{}:{}: {}", name, error.mark.line + 1, error.msg);
  }
  return request;
}

Result<RequestCase> ReadRequest(const std::string& file_or_text) {
  const size_t first = file_or_text.find_first_not_of(" \t\r\n");
  if (first != std::string::npos && file_or_text[first] == '{') {
    return ParseRequest(file_or_text, "<request>");
  }
  ASSIGN_OR_RETURN(const std::string text, ReadWholeFile(file_or_text, "request file"));
  return ParseRequest(text, file_or_text);
}

Result<int64_t> ParseRfc3339(std::string_view text) {
  const auto bad = [&] {
    return InvalidArgument("bad time '{}': expected RFC 3339, as in 2026-12-01T10:00:00+08:00",
                           text);
  };
  const auto number = [&](size_t at, size_t digits, int& into) {
    if (at + digits > text.size()) return false;
    const auto [end, error] = std::from_chars(text.data() + at, text.data() + at + digits, into);
    return error == std::errc() && end == text.data() + at + digits;
  };
  int year = 0, month = 0, day = 0, hour = 0, minute = 0, second = 0;
  if (text.size() < 20 || !number(0, 4, year) || text[4] != '-' || !number(5, 2, month) ||
      text[7] != '-' || !number(8, 2, day) || (text[10] != 'T' && text[10] != 't') ||
      !number(11, 2, hour) || text[13] != ':' || !number(14, 2, minute) || text[16] != ':' ||
      !number(17, 2, second)) {
    return bad();
  }
  static constexpr int kDaysInMonth[] = {31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  const bool leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
  if (month < 1 || month > 12 || day < 1 || day > kDaysInMonth[month - 1] ||
      (month == 2 && day == 29 && !leap) || hour > 23 || minute > 59 || second > 60) {
    return bad();
  }
  size_t at = 19;
  if (at < text.size() && text[at] == '.') {
    ++at;
    while (at < text.size() && text[at] >= '0' && text[at] <= '9') ++at;
  }
  int offset = 0;
  const std::string_view zone = text.substr(at);
  if (zone == "Z" || zone == "z") {
    offset = 0;
  } else {
    int offset_hours = 0, offset_minutes = 0;
    if (zone.size() != 6 || (zone[0] != '+' && zone[0] != '-') || zone[3] != ':' ||
        !number(at + 1, 2, offset_hours) || !number(at + 4, 2, offset_minutes) ||
        offset_hours > 23 || offset_minutes > 59) {
      return bad();
    }
    offset = (offset_hours * 60 + offset_minutes) * 60 * (zone[0] == '-' ? -1 : 1);
  }
  const int64_t days =
      DaysFromCivil(year, static_cast<unsigned>(month), static_cast<unsigned>(day));
  return days * 86400 + hour * 3600 + minute * 60 + second - offset;
}

std::string FormatExplanation(const Explanation& explanation) {
  const Decision& decision = explanation.decision;
  std::string text = fmt::format("decision: {}\n", decision.allowed ? "allow" : "deny");
  if (!decision.reason.empty()) text += fmt::format("reason: {}\n", decision.reason);
  if (!decision.rules.empty()) text += fmt::format("rules: {}\n", fmt::join(decision.rules, ", "));
  if (!decision.obligations.empty()) {
    text += fmt::format("obligations: {}\n", fmt::join(decision.obligations, ", "));
  }
  const auto section = [&](std::string_view title,
                           const std::vector<Explanation::RuleTrace>& traces) {
    text += fmt::format("{}:{}\n", title, traces.empty() ? " none" : "");
    for (const Explanation::RuleTrace& trace : traces) {
      text += fmt::format("  {} {} ({}){}\n", trace.effect, trace.id, trace.where,
                          trace.detail.empty() ? "" : ": " + trace.detail);
    }
  };
  section("matched", explanation.matched);
  section("unmatched", explanation.unmatched);
  section("erroring", explanation.erroring);
  return text;
}

Result<std::vector<std::string>> RunPolicyTests(const std::string& table_path) {
  ASSIGN_OR_RETURN(const std::string text, ReadWholeFile(table_path, "decision table"));
  ASSIGN_OR_RETURN(const YAML::Node root, LoadYaml(text, table_path));
  const CaseReader reader(table_path);
  std::vector<std::string> mismatches;
  try {
    RETURN_IF_ERROR(reader.CheckKeys(root, "a decision table", {"policies", "cases"}));
    std::vector<std::string> policies;
    RETURN_IF_ERROR(reader.List(root["policies"], "policies", policies));
    if (policies.empty()) return reader.Error(root, "a decision table names its 'policies'");
    const std::filesystem::path directory = std::filesystem::path(table_path).parent_path();
    for (std::string& policy : policies) policy = (directory / policy).string();
    ASSIGN_OR_RETURN(const std::shared_ptr<const PolicySet> set, PolicySet::LoadFiles(policies));

    const YAML::Node cases = root["cases"];
    if (!cases || !cases.IsSequence() || cases.size() == 0) {
      return reader.Error(cases ? cases : root, "a decision table needs a list of 'cases'");
    }
    for (const YAML::Node& node : cases) {
      RequestCase request;
      RETURN_IF_ERROR(reader.Request(node, /*table_keys=*/true, request));
      const YAML::Node expect = node["expect"];
      if (!expect || !expect.IsScalar() ||
          (expect.Scalar() != "allow" && expect.Scalar() != "deny")) {
        return reader.Error(expect ? expect : node,
                            "a case needs 'expect: allow' or 'expect: deny'");
      }
      const Decision decision = set->Decide(request.View());
      RETURN_IF_ERROR(CompareCase(node, request, decision, reader, mismatches));
    }
  } catch (const YAML::Exception& error) {
    return InvalidArgument("{}:{}: {}", table_path, error.mark.line + 1, error.msg);
  }
  return mismatches;
}

}  // namespace rampart::policy
