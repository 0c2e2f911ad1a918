#pragma once

// Full-width forms read as ASCII: the text the patterns scan, and the way back to the original
// byte offsets.
//
// U+FF01..U+FF5E (full-width digits, letters and punctuation: ０ Ａ ａ － ＋ ＠ ． （ ） ...)
// become the ASCII character 0xFEE0 below them, and U+3000 (the ideographic space) a space; every
// other byte is kept. Thread safety: a value; one per call.

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace rampart::guard {

class NormalizedText {
 public:
  // Reads `original` (valid UTF-8; not copied, must outlive this object). When it holds no
  // full-width form, text() is `original` itself and no copy is made.
  explicit NormalizedText(std::string_view original);

  // What the patterns scan.
  std::string_view text() const { return text_; }
  // The byte offset in the original of normalised offset `offset` (0..text().size()).
  size_t ToOriginal(size_t offset) const {
    return original_offsets_.empty() ? offset : original_offsets_[offset];
  }
  bool changed() const { return !original_offsets_.empty(); }

 private:
  std::string_view text_;
  std::string storage_;
  std::vector<size_t> original_offsets_;  // size text_.size() + 1 when changed
};

}  // namespace rampart::guard
