#pragma once

// Fast JSON writing (RapidJSON's Writer underneath) into a std::string that Take() hands over,
// so a finished document is moved into a response, not copied. Not synchronised; one Writer
// per document.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include <rapidjson/allocators.h>
#include <rapidjson/writer.h>

namespace rampart::json {

// RapidJSON's output stream concept over a std::string.
struct StringOutput {
  using Ch = char;
  std::string* out;
  void Put(char c) { out->push_back(c); }
  void Flush() {}
};
// Found by argument-dependent lookup from RapidJSON's Writer, ahead of its generic versions:
// a reservation grows the string geometrically, and unchecked puts follow it.
inline void PutReserve(StringOutput& stream, size_t count) {
  std::string& out = *stream.out;
  if (out.capacity() - out.size() < count) {
    out.reserve(std::max(out.size() + count, 2 * out.size()));
  }
}
inline void PutUnsafe(StringOutput& stream, char c) { stream.out->push_back(c); }

class Writer {
 public:
  Writer()
      : stack_(stack_buffer_, sizeof(stack_buffer_), kStackChunk),
        writer_(output_, &stack_, kLevels) {}
  Writer(const Writer&) = delete;  // the RapidJSON writer points into this object
  Writer& operator=(const Writer&) = delete;

  // Sizes the text buffer for a document of about `bytes` (a hint; it grows as needed).
  void Reserve(size_t bytes) { text_.reserve(bytes); }

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

  std::string_view view() const { return text_; }
  // The text written so far; the Writer is done with afterwards.
  std::string Take() { return std::move(text_); }

 private:
  // RapidJSON keeps a stack of open objects and arrays; it starts in stack_buffer_ (16 levels
  // of 16 bytes, beside the pool's header) so that a typical document allocates only its text.
  static constexpr size_t kStackChunk = 1024;
  using StackAllocator = rapidjson::MemoryPoolAllocator<rapidjson::CrtAllocator>;
  static constexpr size_t kLevels = 16;

  std::string text_;
  StringOutput output_{&text_};
  alignas(std::max_align_t) char stack_buffer_[kLevels * 16 + 64];
  StackAllocator stack_;
  rapidjson::Writer<StringOutput, rapidjson::UTF8<>, rapidjson::UTF8<>, StackAllocator,
                    rapidjson::kWriteNanAndInfFlag>
      writer_;
};

}  // namespace rampart::json
