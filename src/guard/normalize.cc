#include "guard/normalize.h"

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
  return static_cast<char>(code_point - 0xFEE0);
}

// The first position of a full-width form, or text.size(). Linear: each lead byte's next
// position is searched for only once it has been passed.
size_t FindFullWidth(std::string_view text) {
  const auto* data = reinterpret_cast<const unsigned char*>(text.data());
  const size_t size = text.size();
  auto next = [&](unsigned char lead, size_t from) -> size_t {
    if (from >= size) return size;
    const void* hit = std::memchr(data + from, lead, size - from);
    return hit == nullptr ? size : static_cast<const unsigned char*>(hit) - data;
  };
  size_t next_ef = next(0xEF, 0);
  size_t next_e3 = next(0xE3, 0);
  while (true) {
    size_t at = next_ef < next_e3 ? next_ef : next_e3;
    if (at + 2 >= size) return size;
    if (FullWidthToAscii(data + at) != 0) return at;
    if (at == next_ef) next_ef = next(0xEF, at + 1);
    if (at == next_e3) next_e3 = next(0xE3, at + 1);
  }
}

}  // namespace

NormalizedText::NormalizedText(std::string_view original) : text_(original) {
  size_t first = FindFullWidth(original);
  if (first >= original.size()) return;
  const auto* data = reinterpret_cast<const unsigned char*>(original.data());
  storage_.reserve(original.size());
  original_offsets_.reserve(original.size() + 1);
  storage_.append(original.data(), first);
  for (size_t i = 0; i < first; ++i) original_offsets_.push_back(i);
  size_t i = first;
  while (i < original.size()) {
    char ascii = i + 2 < original.size() ? FullWidthToAscii(data + i) : 0;
    if (ascii != 0) {
      storage_.push_back(ascii);
      original_offsets_.push_back(i);
      i += 3;
    } else {
      storage_.push_back(original[i]);
      original_offsets_.push_back(i);
      ++i;
    }
  }
  original_offsets_.push_back(original.size());
  text_ = storage_;
}

}  // namespace rampart::guard
