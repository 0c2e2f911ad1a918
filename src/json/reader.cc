#include "json/reader.h"

namespace rampart::json {

Kind Value::kind() const {
  switch (element_.type()) {
    case simdjson::dom::element_type::ARRAY: return Kind::kArray;
    case simdjson::dom::element_type::OBJECT: return Kind::kObject;
    case simdjson::dom::element_type::INT64:
    case simdjson::dom::element_type::UINT64:
    case simdjson::dom::element_type::DOUBLE: return Kind::kNumber;
    case simdjson::dom::element_type::STRING: return Kind::kString;
    case simdjson::dom::element_type::BOOL: return Kind::kBool;
    case simdjson::dom::element_type::NULL_VALUE: return Kind::kNull;
  }
  return Kind::kNull;
}

std::string_view Value::KindName() const {
  switch (kind()) {
    case Kind::kNull: return "null";
    case Kind::kBool: return "boolean";
    case Kind::kNumber: return "number";
    case Kind::kString: return "string";
    case Kind::kArray: return "array";
    case Kind::kObject: return "object";
  }
  return "unknown";
}

std::optional<Value> Value::Find(std::string_view key) const {
  simdjson::dom::object object;
  if (element_.get_object().get(object) != simdjson::SUCCESS) return std::nullopt;
  simdjson::dom::element member;
  if (object.at_key(key).get(member) != simdjson::SUCCESS) return std::nullopt;
  return Value(member);
}

Result<std::string_view> Value::GetString(std::string_view what) const {
  std::string_view out;
  if (element_.get_string().get(out) != simdjson::SUCCESS) {
    return InvalidArgument("'{}' must be a string, got {}", what, KindName());
  }
  return out;
}

Result<bool> Value::GetBool(std::string_view what) const {
  bool out = false;
  if (element_.get_bool().get(out) != simdjson::SUCCESS) {
    return InvalidArgument("'{}' must be a boolean, got {}", what, KindName());
  }
  return out;
}

Result<int64_t> Value::GetInt64(std::string_view what) const {
  int64_t out = 0;
  if (element_.get_int64().get(out) != simdjson::SUCCESS) {
    return InvalidArgument("'{}' must be an integer, got {}", what, KindName());
  }
  return out;
}

Result<uint64_t> Value::GetUint64(std::string_view what) const {
  uint64_t out = 0;
  if (element_.get_uint64().get(out) != simdjson::SUCCESS) {
    return InvalidArgument("'{}' must be a non-negative integer, got {}", what, KindName());
  }
  return out;
}

Result<double> Value::GetDouble(std::string_view what) const {
  double out = 0;
  if (element_.get_double().get(out) != simdjson::SUCCESS) {
    return InvalidArgument("'{}' must be a number, got {}", what, KindName());
  }
  return out;
}

Result<Value> Parser::Parse(std::string_view text) {
  simdjson::dom::element root;
  const auto error = parser_.parse(text.data(), text.size(), /*realloc_if_needed=*/true).get(root);
  if (error == simdjson::MEMALLOC) {
    // simdjson leaves a parser whose allocation failed half-sized (a later parse of any document
    // then crashed in it): start afresh.
    parser_ = simdjson::dom::parser{};
    // The server's condition, not the document's fault (HTTP 503, as a thrown bad_alloc).
    return Unavailable("out of memory while parsing {} bytes of JSON", text.size());
  }
  if (error != simdjson::SUCCESS) {
    return InvalidArgument("malformed JSON: {}", simdjson::error_message(error));
  }
  return Value(root);
}

void Parser::ShrinkTo(size_t keep_bytes) {
  if (parser_.capacity() > keep_bytes) parser_ = simdjson::dom::parser{};
}

}  // namespace rampart::json
