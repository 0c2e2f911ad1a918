#pragma once

// Checked reading of untrusted JSON (simdjson underneath).
//
// A Parser owns reusable buffers; the Values it returns stay valid until its next Parse or its
// destruction. One Parser per thread (it is not synchronised). Every accessor checks the JSON
// type and returns InvalidArgument naming the field, so request parsers read like the schema.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <simdjson.h>

#include "core/status.h"

namespace rampart::json {

enum class Kind { kNull, kBool, kNumber, kString, kArray, kObject };

class Value {
 public:
  Value() = default;
  explicit Value(simdjson::dom::element element) : element_(element) {}

  Kind kind() const;
  bool IsObject() const { return kind() == Kind::kObject; }
  bool IsArray() const { return kind() == Kind::kArray; }
  bool IsNull() const { return kind() == Kind::kNull; }
  // JSON type names for messages: "object", "string", ...
  std::string_view KindName() const;

  // Object member; nullopt when absent (or when this is not an object).
  std::optional<Value> Find(std::string_view key) const;

  // Typed reads; `what` names the field in the error ("inputs[0].name").
  Result<std::string_view> GetString(std::string_view what) const;
  Result<bool> GetBool(std::string_view what) const;
  Result<int64_t> GetInt64(std::string_view what) const;
  Result<uint64_t> GetUint64(std::string_view what) const;
  Result<double> GetDouble(std::string_view what) const;

  // Iteration; REQUIRES: IsArray() / IsObject() respectively.
  simdjson::dom::array Array() const { return element_.get_array().value_unsafe(); }
  simdjson::dom::object Object() const { return element_.get_object().value_unsafe(); }

  simdjson::dom::element raw() const { return element_; }

 private:
  simdjson::dom::element element_;
};

class Parser {
 public:
  // Errors: InvalidArgument with simdjson's reason ("malformed JSON: ..."); Unavailable when its
  // buffers cannot be allocated (the parser is then as new).
  Result<Value> Parse(std::string_view text);
  // simdjson grows its buffers to the largest document parsed (about 15 bytes per byte of JSON)
  // and never shrinks them: this frees them when they were sized for more than `keep_bytes` of
  // JSON. Values from earlier Parse calls are invalid afterwards.
  void ShrinkTo(size_t keep_bytes);

 private:
  simdjson::dom::parser parser_;
};

}  // namespace rampart::json
