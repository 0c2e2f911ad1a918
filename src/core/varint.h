#pragma once

// LEB128 varints and zigzag encoding, for the compact binary forms written to disk (the audit
// log's batch blobs and compact records). A reader accepts only the shortest form of a value, so
// every value has exactly one encoding: a changed byte always reads back as a different value or
// fails, which is what tamper detection over re-encoded data relies on.

#include <cstdint>
#include <string>
#include <string_view>

namespace rampart {

// Appends `value` as LEB128: 7 bits a byte, low first, the high bit set on all but the last.
inline void PutVarint(std::string& out, uint64_t value) {
  while (value >= 0x80) {
    out.push_back(static_cast<char>((value & 0x7f) | 0x80));
    value >>= 7;
  }
  out.push_back(static_cast<char>(value));
}

// Reads a LEB128 value from the front of `in`, advancing it. False when `in` ends first, the form
// is not the shortest (a trailing zero byte), or it holds bits beyond the 64th.
inline bool GetVarint(std::string_view& in, uint64_t& value) {
  value = 0;
  for (int shift = 0; shift < 64; shift += 7) {
    if (in.empty()) return false;
    const auto byte = static_cast<unsigned char>(in.front());
    in.remove_prefix(1);
    value |= static_cast<uint64_t>(byte & 0x7f) << shift;
    if (shift == 63 && byte > 1) return false;
    if ((byte & 0x80) == 0) return byte != 0 || shift == 0;
  }
  return false;
}

// Zigzag: small magnitudes of either sign become small unsigned values (0, -1, 1, -2 ... ->
// 0, 1, 2, 3 ...). Modulo 2^64, so every 64-bit pattern round-trips.
inline uint64_t ZigZag(uint64_t bits) { return (bits << 1) ^ (0 - (bits >> 63)); }
inline uint64_t UnZigZag(uint64_t zigzag) { return (zigzag >> 1) ^ (0 - (zigzag & 1)); }

}  // namespace rampart
