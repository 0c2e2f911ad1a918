// HttpClient's values: endpoints, header fields, error names.

#include <algorithm>
#include <cctype>
#include <charconv>

#include "net/http_client.h"

namespace rampart::net {
namespace {

char Lower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }

bool EqualsIgnoringCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (Lower(a[i]) != Lower(b[i])) return false;
  }
  return true;
}

bool IsHostCharacter(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '.' || c == '_';
}

}  // namespace

std::string Endpoint::Key() const {
  const bool ipv6 = host.find(':') != std::string::npos;
  return fmt::format("{}://{}{}{}:{}", tls ? "https" : "http", ipv6 ? "[" : "", host,
                     ipv6 ? "]" : "", port);
}

Result<Endpoint> ParseEndpoint(std::string_view url) {
  Endpoint endpoint;
  std::string_view rest;
  if (url.substr(0, 7) == "http://") {
    rest = url.substr(7);
  } else if (url.substr(0, 8) == "https://") {
    endpoint.tls = true;
    rest = url.substr(8);
  } else {
    return InvalidArgument("URL '{}' must start with http:// or https://", url);
  }
  if (rest.find_first_of("?#") != std::string_view::npos) {
    return InvalidArgument("URL '{}' may not have a query or fragment", url);
  }
  const size_t slash = rest.find('/');
  std::string_view authority = rest.substr(0, slash);
  std::string_view path = slash == std::string_view::npos ? "" : rest.substr(slash);
  if (authority.find('@') != std::string_view::npos) {
    return InvalidArgument("URL '{}' may not carry user info (send an Authorization header)", url);
  }
  std::string_view host;
  std::string_view port;
  bool has_port = false;
  if (!authority.empty() && authority.front() == '[') {
    const size_t close = authority.find(']');
    if (close == std::string_view::npos) {
      return InvalidArgument("URL '{}' has an unclosed '[' in its host", url);
    }
    host = authority.substr(1, close - 1);
    const std::string_view after = authority.substr(close + 1);
    if (!after.empty() && after.front() != ':') {
      return InvalidArgument("URL '{}' has text after its IPv6 host", url);
    }
    has_port = !after.empty();
    if (has_port) port = after.substr(1);
    const bool ipv6 = !host.empty() && std::all_of(host.begin(), host.end(), [](char c) {
      return c == ':' || c == '.' || std::isxdigit(static_cast<unsigned char>(c));
    });
    if (!ipv6) return InvalidArgument("URL '{}' has an invalid IPv6 host", url);
  } else {
    const size_t colon = authority.rfind(':');
    host = authority.substr(0, colon);
    has_port = colon != std::string_view::npos;
    if (has_port) port = authority.substr(colon + 1);
    if (!std::all_of(host.begin(), host.end(), IsHostCharacter)) {
      return InvalidArgument("URL '{}' has an invalid host", url);
    }
  }
  if (host.empty()) return InvalidArgument("URL '{}' has no host", url);
  endpoint.host = std::string(host);
  if (has_port && port.empty()) return InvalidArgument("URL '{}' has an empty port", url);
  if (!has_port) {
    endpoint.port = endpoint.tls ? 443 : 80;
  } else {
    unsigned value = 0;
    const auto [end, error] = std::from_chars(port.data(), port.data() + port.size(), value);
    if (error != std::errc() || end != port.data() + port.size() || value == 0 || value > 65535) {
      return InvalidArgument("URL '{}' has an invalid port '{}'", url, port);
    }
    endpoint.port = static_cast<uint16_t>(value);
  }
  while (!path.empty() && path.back() == '/') path.remove_suffix(1);
  for (char c : path) {
    if (static_cast<unsigned char>(c) <= ' ' || c == 0x7f) {
      return InvalidArgument("URL '{}' has a space or control character in its path", url);
    }
  }
  endpoint.path_prefix = std::string(path);
  return endpoint;
}

void HttpHeaders::Add(std::string_view name, std::string_view value) {
  Field field;
  field.name = static_cast<uint32_t>(text_.size());
  field.name_size = static_cast<uint32_t>(name.size());
  text_.append(name);
  field.value = static_cast<uint32_t>(text_.size());
  field.value_size = static_cast<uint32_t>(value.size());
  text_.append(value);
  fields_.push_back(field);
}

void HttpHeaders::Set(std::string_view name, std::string_view value) {
  // The text of removed fields stays in the buffer until Clear: cheap, and rare.
  std::erase_if(fields_, [&](const Field& field) {
    return EqualsIgnoringCase(Slice(field.name, field.name_size), name);
  });
  Add(name, value);
}

std::optional<std::string_view> HttpHeaders::Get(std::string_view name) const {
  for (const Field& field : fields_) {
    if (EqualsIgnoringCase(Slice(field.name, field.name_size), name)) {
      return Slice(field.value, field.value_size);
    }
  }
  return std::nullopt;
}

void HttpHeaders::Clear() {
  text_.clear();
  fields_.clear();
}

void HttpHeaders::Reserve(size_t fields, size_t bytes) {
  fields_.reserve(fields);
  text_.reserve(bytes);
}

std::string_view HttpClientErrorName(HttpClientError error) {
  switch (error) {
    case HttpClientError::kNone: return "none";
    case HttpClientError::kInvalidRequest: return "invalid_request";
    case HttpClientError::kConnectFailed: return "connect_failed";
    case HttpClientError::kConnectTimeout: return "connect_timeout";
    case HttpClientError::kTlsFailed: return "tls_failed";
    case HttpClientError::kSendFailed: return "send_failed";
    case HttpClientError::kFirstByteTimeout: return "first_byte_timeout";
    case HttpClientError::kIdleTimeout: return "idle_timeout";
    case HttpClientError::kDeadlineExceeded: return "deadline_exceeded";
    case HttpClientError::kResponseTooLarge: return "response_too_large";
    case HttpClientError::kMalformedResponse: return "malformed_response";
    case HttpClientError::kConnectionClosed: return "connection_closed";
    case HttpClientError::kCancelled: return "cancelled";
    case HttpClientError::kShutdown: return "shutdown";
    case HttpClientError::kSinkFailed: return "sink_failed";
    case HttpClientError::kInternal: return "internal";
  }
  return "unknown";
}

}  // namespace rampart::net
