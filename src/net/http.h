#pragma once

// Plain HTTP request/response values shared by the server and the API layer; no Beast types
// leak past src/net.

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/clock.h"

namespace rampart::net {

struct HttpRequest {
  std::string method;                                        // "GET", "POST", ...
  std::string target;                                        // path and query as sent
  std::vector<std::pair<std::string, std::string>> headers;  // names lower-cased
  std::string body;
  SteadyTime received{};  // when the whole request had been read
  // Becomes true if the client closes its connection before the answer is written, so work
  // queued for it can be dropped.
  std::shared_ptr<const std::atomic<bool>> client_gone;

  std::string_view path() const;   // target up to '?'
  std::string_view query() const;  // after '?', or empty
  // First header with that (lower-case) name.
  std::optional<std::string_view> Header(std::string_view lower_name) const;
};

struct HttpResponse {
  int status = 200;
  std::string_view content_type = "application/json";  // static text (a literal), not copied
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
};

}  // namespace rampart::net
