#include "net/http.h"

namespace rampart::net {

std::string_view HttpRequest::path() const {
  std::string_view view = target;
  return view.substr(0, view.find('?'));
}

std::string_view HttpRequest::query() const {
  std::string_view view = target;
  const size_t at = view.find('?');
  return at == std::string_view::npos ? std::string_view() : view.substr(at + 1);
}

std::optional<std::string_view> HttpRequest::Header(std::string_view lower_name) const {
  for (const auto& [name, value] : headers) {
    if (name == lower_name) return std::string_view(value);
  }
  return std::nullopt;
}

}  // namespace rampart::net
