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

// RapidJSON's output stream concept over a std::string. The string is sized ahead of the
// writing (RapidJSON reserves before each value) and `size_` counts what is written, so a
// character is one store, not a push_back that also moves the terminator.
class StringOutput {
 public:
  using Ch = char;
  void Put(char c) {
    Reserve(1);
    text_[size_++] = c;
  }
  void PutUnchecked(char c) { text_[size_++] = c; }  // REQUIRES: room from Reserve
  void Flush() {}
  void Reserve(size_t count) {
    if (text_.size() - size_ < count) text_.resize(std::max(size_ + count, 2 * text_.size()));
  }
  std::string_view view() const { return {text_.data(), size_}; }
  std::string Take() {
    // RapidJSON reserves for the worst case (six bytes per character of a string): a large
    // answer gives back what it left unused rather than hold it while it is sent.
    if (text_.size() - size_ > size_ + kKeptSlack) {
      std::string exact(text_.data(), size_);
      text_ = std::string();
      size_ = 0;
      return exact;
    }
    text_.resize(size_);
    size_ = 0;
    return std::move(text_);
  }

 private:
  static constexpr size_t kKeptSlack = 64 * 1024;
  std::string text_;
  size_t size_ = 0;
};
// Found by argument-dependent lookup from RapidJSON's Writer, ahead of its generic versions.
inline void PutReserve(StringOutput& stream, size_t count) { stream.Reserve(count); }
inline void PutUnsafe(StringOutput& stream, char c) { stream.PutUnchecked(c); }

class Writer {
 public:
  Writer()
      : stack_(stack_buffer_, sizeof(stack_buffer_), kStackChunk),
        writer_(output_, &stack_, kLevels) {}
  Writer(const Writer&) = delete;  // the RapidJSON writer points into this object
  Writer& operator=(const Writer&) = delete;

  // Sizes the text buffer for a document of about `bytes` (a hint; it grows as needed).
  void Reserve(size_t bytes) { output_.Reserve(bytes); }

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

  std::string_view view() const { return output_.view(); }
  // The text written so far; the Writer is done with afterwards.
  std::string Take() { return output_.Take(); }

 private:
  // RapidJSON keeps a stack of open objects and arrays; it starts in stack_buffer_ (16 levels
  // of 16 bytes, beside the pool's header) so that a typical document allocates only its text.
  static constexpr size_t kStackChunk = 1024;
  using StackAllocator = rapidjson::MemoryPoolAllocator<rapidjson::CrtAllocator>;
  static constexpr size_t kLevels = 16;

  StringOutput output_;
  alignas(std::max_align_t) char stack_buffer_[kLevels * 16 + 64];
  StackAllocator stack_;
  rapidjson::Writer<StringOutput, rapidjson::UTF8<>, rapidjson::UTF8<>, StackAllocator,
                    rapidjson::kWriteNanAndInfFlag>
      writer_;
};

}  // namespace rampart::json
