#include "guard/normalize.h"

#include <algorithm>
#include <cstring>

namespace rampart::guard {
namespace {

// The ASCII character a 3-byte sequence at `p` stands for, or 0.
char FullWidthToAscii(const unsigned char* p) {
  if (p[0] == 0xE3 && p[1] == 0x80 && p[2] == 0x80) return ' ';  // U+3000
  if (p[0] != 0xEF) return 0;
  // U+FF01..U+FF3F: EF BC 81..BF; U+FF40..U+FF5E: EF BD 80..9E.
  unsigned code_point = 0;
  if (p[1] == 0xBC && p[2] >= 0x81 && p[2] <= 0xBF) {
    code_point = 0xFF00 + (p[2] - 0x80);
  } else if (p[1] == 0xBD && p[2] >= 0x80 && p[2] <= 0x9E) {
    code_point = 0xFF40 + (p[2] - 0x80);
  } else {
    return 0;
  }
  char ascii = static_cast<char>(code_point - 0xFEE0);
  // Punctuation that never occurs inside an entity stays as it is, so everyday Chinese text
  // (full-width commas, colons and semicolons in every sentence) is scanned without a copy.
  if (ascii == ',' || ascii == ':' || ascii == ';' || ascii == '!' || ascii == '?' ||
      ascii == '"' || ascii == '\'') {
    return 0;
  }
  return ascii;
}

// Finds full-width forms left to right. Linear: each lead byte's next position is searched for
// only once the previous one has been passed.
class FullWidthFinder {
 public:
  explicit FullWidthFinder(std::string_view text)
      : data_(reinterpret_cast<const unsigned char*>(text.data())),
        size_(text.size()),
        next_ef_(Next(0xEF, 0)),
        next_e3_(Next(0xE3, 0)) {}

  // The first full-width form at or after `from`, or the text's size.
  size_t Find(size_t from) {
    while (true) {
      if (next_ef_ < from) next_ef_ = Next(0xEF, from);
      if (next_e3_ < from) next_e3_ = Next(0xE3, from);
      size_t at = std::min(next_ef_, next_e3_);
      if (at + 2 >= size_) return size_;
      if (FullWidthToAscii(data_ + at) != 0) return at;
      from = at + 1;
    }
  }

 private:
  size_t Next(unsigned char lead, size_t from) const {
    if (from >= size_) return size_;
    const void* hit = std::memchr(data_ + from, lead, size_ - from);
    return hit == nullptr ? size_ : static_cast<const unsigned char*>(hit) - data_;
  }

  const unsigned char* data_;
  size_t size_;
  size_t next_ef_;
  size_t next_e3_;
};

}  // namespace

NormalizedText::NormalizedText(std::string_view original) : text_(original) {
  FullWidthFinder finder(original);
  size_t next = finder.Find(0);
  if (next >= original.size()) return;
  const auto* data = reinterpret_cast<const unsigned char*>(original.data());
  storage_.reserve(original.size());
  size_t copied = 0;  // original bytes consumed
  while (next < original.size()) {
    storage_.append(original.data() + copied, next - copied);
    storage_.push_back(FullWidthToAscii(data + next));
    copied = next + 3;
    shifts_.push_back({storage_.size(), copied - storage_.size()});
    next = finder.Find(copied);
  }
  storage_.append(original.data() + copied, original.size() - copied);
  text_ = storage_;
}

size_t NormalizedText::ToOriginal(size_t offset) const {
  // The last shift at or before `offset`.
  auto it =
      std::upper_bound(shifts_.begin(), shifts_.end(), offset,
                       [](size_t value, const Shift& shift) { return value < shift.normalized; });
  return it == shifts_.begin() ? offset : offset + std::prev(it)->added;
}

}  // namespace rampart::guard
