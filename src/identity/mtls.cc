#include "identity/mtls.h"

#include <algorithm>
#include <optional>

#include "core/glob.h"

namespace rampart::identity {
namespace {

constexpr std::string_view kSpiffeScheme = "spiffe://";

std::string ToLower(std::string_view text) {
  std::string lower(text);
  for (char& c : lower) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return lower;
}

// The values templates expand to for one certificate and the rule that matched it.
struct TemplateValues {
  std::string_view cn;
  std::string_view uri;
  std::string_view dns;
};

// "spiffe://trust-domain/a/b" -> "a/b"; empty when `uri` is not a SPIFFE ID with a path.
std::string_view SpiffePath(std::string_view uri) {
  if (uri.substr(0, kSpiffeScheme.size()) != kSpiffeScheme) return {};
  const size_t slash = uri.find('/', kSpiffeScheme.size());
  if (slash == std::string_view::npos) return {};
  return uri.substr(slash + 1);
}

// Expands {cn}, {uri}, {dns} and {spiffe_path} in `text` (a checked template); nullopt when one
// expands to nothing (the rule then does not apply to this certificate).
std::optional<std::string> Expand(std::string_view text, const TemplateValues& values) {
  std::string result;
  size_t position = 0;
  while (position < text.size()) {
    const size_t open = text.find('{', position);
    if (open == std::string_view::npos) {
      result.append(text.substr(position));
      break;
    }
    result.append(text.substr(position, open - position));
    const size_t close = text.find('}', open);
    const std::string_view name = text.substr(open + 1, close - open - 1);
    std::string_view value;
    if (name == "cn") {
      value = values.cn;
    } else if (name == "uri") {
      value = values.uri;
    } else if (name == "dns") {
      value = values.dns;
    } else {
      value = SpiffePath(values.uri);
    }
    if (value.empty()) return std::nullopt;
    result.append(value);
    position = close + 1;
  }
  return result;
}

Status CheckTemplate(std::string_view text) {
  size_t position = 0;
  while (position < text.size()) {
    if (text[position] == '}') return InvalidArgument("unbalanced '}}' in '{}'", text);
    if (text[position] != '{') {
      ++position;
      continue;
    }
    const size_t close = text.find('}', position);
    if (close == std::string_view::npos) {
      return InvalidArgument("unterminated template in '{}'", text);
    }
    const std::string_view name = text.substr(position + 1, close - position - 1);
    if (name != "cn" && name != "uri" && name != "dns" && name != "spiffe_path") {
      return InvalidArgument(
          "unknown template '{{{}}}' in '{}' (known: {{cn}}, {{uri}}, {{dns}}, {{spiffe_path}})",
          name, text);
    }
    position = close + 1;
  }
  return Status::Ok();
}

const std::string* FirstMatching(const std::vector<std::string>& names, std::string_view pattern,
                                 char separator, bool ignore_case) {
  for (const std::string& name : names) {
    const bool matches = ignore_case ? GlobMatches(ToLower(pattern), ToLower(name), separator)
                                     : GlobMatches(pattern, name, separator);
    if (matches) return &name;
  }
  return nullptr;
}

}  // namespace

Result<MtlsMapper> MtlsMapper::Make(std::vector<MtlsRule> rules) {
  for (size_t i = 0; i < rules.size(); ++i) {
    const MtlsRule& rule = rules[i];
    const int selectors = !rule.spiffe.empty() + !rule.subject_cn.empty() + !rule.san_dns.empty() +
                          !rule.subject.empty();
    const std::string where = fmt::format("mtls rule {}", i + 1);
    if (selectors != 1) {
      return InvalidArgument(
          "{}: needs exactly one of spiffe, subject_cn, san_dns and subject (it has {})", where,
          selectors);
    }
    if (!rule.spiffe.empty() && rule.spiffe.substr(0, kSpiffeScheme.size()) != kSpiffeScheme) {
      return InvalidArgument("{}: spiffe '{}' must start with spiffe://", where, rule.spiffe);
    }
    if (rule.tenant.empty()) return InvalidArgument("{}: tenant is required", where);
    if (rule.principal.empty()) return InvalidArgument("{}: principal is required", where);
    RETURN_IF_ERROR(CheckTemplate(rule.principal).WithContext(where));
  }
  MtlsMapper mapper;
  mapper.rules_ = std::move(rules);
  return mapper;
}

Result<Identity> MtlsMapper::Map(const PeerCertificate& certificate) const {
  for (const MtlsRule& rule : rules_) {
    const std::string* uri = nullptr;
    const std::string* dns = nullptr;
    if (!rule.spiffe.empty()) {
      // '*' stays within one path segment: "ns/*/sa/*" does not match deeper paths.
      uri = FirstMatching(certificate.uris, rule.spiffe, '/', /*ignore_case=*/false);
      if (uri == nullptr) continue;
    } else if (!rule.subject_cn.empty()) {
      if (certificate.common_name.empty() ||
          !GlobMatches(rule.subject_cn, certificate.common_name, '.')) {
        continue;
      }
    } else if (!rule.san_dns.empty()) {
      // DNS names compare without case; '*' stays within one label.
      dns = FirstMatching(certificate.dns_names, rule.san_dns, '.', /*ignore_case=*/true);
      if (dns == nullptr) continue;
    } else if (!GlobMatches(rule.subject, certificate.subject, ',')) {
      continue;
    }
    if (uri == nullptr && !certificate.uris.empty()) uri = &certificate.uris.front();
    if (dns == nullptr && !certificate.dns_names.empty()) dns = &certificate.dns_names.front();
    const TemplateValues values{certificate.common_name, uri ? std::string_view(*uri) : "",
                                dns ? std::string_view(*dns) : ""};
    std::optional<std::string> principal = Expand(rule.principal, values);
    if (!principal) continue;

    Identity identity;
    identity.method = Method::kMtls;
    identity.tenant = rule.tenant;
    identity.principal = std::move(*principal);
    identity.roles = rule.roles;
    std::sort(identity.roles.begin(), identity.roles.end());
    identity.roles.erase(std::unique(identity.roles.begin(), identity.roles.end()),
                         identity.roles.end());
    return identity;
  }
  return Unauthenticated("client certificate not mapped to a principal");
}

}  // namespace rampart::identity
