#include "guard/patterns.h"

namespace rampart::guard {
namespace {

// The GB 32100 alphabet (0-9, A-Z without I O S V Z).
constexpr std::string_view kUsccClass = "[0-9A-HJ-NPQRTUWXY]";
constexpr std::string_view kHex = "[0-9A-Fa-f]";

std::string Escape(std::string_view literal) {
  std::string out;
  for (char c : literal) {
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))) {
      out.push_back('\\');
    }
    out.push_back(c);
  }
  return out;
}

bool IsHostName(std::string_view name) {
  if (name.empty() || name.size() > 253 || name.front() == '.' || name.back() == '.') return false;
  for (char c : name) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '-' || c == '.';
    if (!ok) return false;
  }
  return name.find("..") == std::string_view::npos;
}

bool IsPathRoot(std::string_view root) {
  if (root.size() < 2 || root.size() > 256 || root.front() != '/') return false;
  for (char c : root) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '-' || c == '.' || c == '_' || c == '/' || c == '~';
    if (!ok) return false;
  }
  return true;
}

}  // namespace

Result<std::vector<Pattern>> BuildPatterns(const DetectorOptions& options) {
  const std::string uscc(kUsccClass);
  const std::string hex(kHex);
  std::vector<Pattern> patterns = {
      {Shape::kResidentId18, R"(\d{17}[0-9Xx])"},
      {Shape::kResidentId15, R"(\d{15})"},
      {Shape::kMobile, R"((?:(?:\+|00)?86[ \-]?)?1[3-9]\d[ \-]?\d{4}[ \-]?\d{4})"},
      {Shape::kCard, R"(\d(?:[ \-]?\d){12,18})"},
      {Shape::kUscc, uscc + "{2}\\d{6}" + uscc + "{10}"},
      {Shape::kPassport, R"([EG]\d{8}|E[A-HJ-NP-Z]\d{7})"},
      {Shape::kEmail, R"([A-Za-z0-9._%+\-]+@[A-Za-z0-9\-]+(?:\.[A-Za-z0-9\-]+)+)", false, true},
      {Shape::kPhone, R"(\+[1-9]\d{0,2}(?:[ \-.]?\(\d{1,4}\))?(?:[ \-.]?\d){5,14})"},
      {Shape::kIpv4, R"(\d{1,3}\.\d{1,3}\.\d{1,3}\.\d{1,3})"},
      {Shape::kIpv6, hex + "{0,4}(?::" + hex + "{0,4}){2,7}"},
      {Shape::kIpv6WithIpv4,
       hex + "{0,4}(?::" + hex + "{0,4}){1,6}:\\d{1,3}\\.\\d{1,3}\\.\\d{1,3}\\.\\d{1,3}"},
      {Shape::kMac, hex + "{2}(?::" + hex + "{2}){5}|" + hex + "{2}(?:-" + hex + "{2}){5}|" + hex +
                        "{4}\\." + hex + "{4}\\." + hex + "{4}"},
      {Shape::kIban, R"([A-Z]{2}\d{2}(?: ?[A-Z0-9]){11,30})"},
      {Shape::kSsn, R"(\d{3}[ \-]?\d{2}[ \-]?\d{4})"},
      {Shape::kPemBegin, R"(-----BEGIN (?:[A-Z0-9]+ ){0,3}PRIVATE KEY-----)"},
      {Shape::kAwsKeyId, R"((?:AKIA|ASIA)[A-Z0-9]{16})"},
      {Shape::kAwsSecret,
       R"(aws_?secret_?access_?key["']?[ \t]{0,4}[:=][ \t]{0,4}["']?[A-Za-z0-9/+]{40})", true},
      {Shape::kBearer, R"([Bb]earer[ \t]+[A-Za-z0-9\-._~+/]{8,}=*)", false, true},
      {Shape::kJwt, R"(eyJ[A-Za-z0-9_\-]{5,}\.[A-Za-z0-9_\-]{5,}\.[A-Za-z0-9_\-]*)", false, true},
      {Shape::kKeyAssignment,
       R"((?:api[_\-]?key|access[_\-]?token|auth[_\-]?token|client[_\-]?secret|password|passwd|pwd|secret|token)["']?[ \t]{0,4}[:=])",
       true},
  };
  for (const std::string& domain : options.internal_domains) {
    if (!IsHostName(domain)) {
      return InvalidArgument("internal domain '{}' is not a host name", domain);
    }
    patterns.push_back(
        {Shape::kInternalHost, "(?:[A-Za-z0-9\\-]+\\.)*" + Escape(domain), true, true, domain});
  }
  // Private, loopback and link-local addresses inside URLs (with an optional user part).
  patterns.push_back(
      {Shape::kInternalUrlIpv4,
       R"(://(?:[A-Za-z0-9._~%!$&'*+,;=:\-]{1,64}@)?\d{1,3}\.\d{1,3}\.\d{1,3}\.\d{1,3})"});
  patterns.push_back({Shape::kInternalUrlIpv6, R"(://\[[0-9A-Fa-f:.]{2,45}\])"});
  for (const std::string& root : options.internal_path_roots) {
    if (!IsPathRoot(root)) {
      return InvalidArgument("internal path root '{}' is not an absolute path", root);
    }
    std::string trimmed = root;
    while (trimmed.size() > 1 && trimmed.back() == '/') trimmed.pop_back();
    patterns.push_back({Shape::kInternalPath, Escape(trimmed) + "(?:/[A-Za-z0-9._~%+@=\\-/]*)?",
                        false, true, trimmed});
  }
  return patterns;
}

}  // namespace rampart::guard
