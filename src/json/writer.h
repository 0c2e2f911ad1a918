#pragma once

// Fast JSON writing (RapidJSON's Writer underneath) into a std::string-like buffer.
// Not synchronised; one Writer per response.

#include <cstdint>
#include <string>
#include <string_view>

#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

namespace rampart::json {

class Writer {
 public:
  Writer() : writer_(buffer_) {}

  void StartObject() { writer_.StartObject(); }
  void EndObject() { writer_.EndObject(); }
  void StartArray() { writer_.StartArray(); }
  void EndArray() { writer_.EndArray(); }
  void Key(std::string_view key) {
    writer_.Key(key.data(), static_cast<rapidjson::SizeType>(key.size()));
  }
  void String(std::string_view value) {
    writer_.String(value.data(), static_cast<rapidjson::SizeType>(value.size()));
  }
  void Bool(bool value) { writer_.Bool(value); }
  void Null() { writer_.Null(); }
  void Int64(int64_t value) { writer_.Int64(value); }
  void Uint64(uint64_t value) { writer_.Uint64(value); }
  void Double(double value) { writer_.Double(value); }
  // Shortest text that reads back as the same float (so FP32 0.1 prints as 0.1).
  void Float(float value);
  // Inserts already-serialized JSON as one value.
  void Raw(std::string_view json) {
    writer_.RawValue(json.data(), json.size(), rapidjson::kObjectType);
  }

  std::string_view view() const { return {buffer_.GetString(), buffer_.GetSize()}; }
  std::string str() const { return std::string(view()); }

 private:
  rapidjson::StringBuffer buffer_;
  rapidjson::Writer<rapidjson::StringBuffer, rapidjson::UTF8<>, rapidjson::UTF8<>,
                    rapidjson::CrtAllocator, rapidjson::kWriteNanAndInfFlag>
      writer_;
};

}  // namespace rampart::json
