#include "gateway/sse.h"

namespace rampart::gateway {

bool SseReader::Line(std::string_view line) {
  if (line.empty()) return has_data_;
  if (line[0] == ':') return false;  // a comment
  const size_t colon = line.find(':');
  const std::string_view field = line.substr(0, colon);
  if (field != "data") return false;  // event, id, retry: nothing an OpenAI stream needs
  std::string_view value = colon == std::string_view::npos ? "" : line.substr(colon + 1);
  if (!value.empty() && value[0] == ' ') value.remove_prefix(1);
  if (has_data_) data_.push_back('\n');
  data_.append(value);
  has_data_ = true;
  return false;
}

}  // namespace rampart::gateway
