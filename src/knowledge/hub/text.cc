#include "knowledge/hub/text.h"

#include <unicode/normalizer2.h>
#include <unicode/unistr.h>

namespace rampart::knowledge::hub {

Status ValidateUtf8(std::string_view text) {
  const auto* bytes = reinterpret_cast<const unsigned char*>(text.data());
  size_t size = text.size();
  size_t i = 0;
  while (i < size) {
    unsigned char lead = bytes[i];
    if (lead < 0x80) {
      ++i;
      continue;
    }
    size_t length = 0;
    char32_t code_point = 0;
    char32_t minimum = 0;
    if (lead >= 0xC2 && lead <= 0xDF) {
      length = 2;
      code_point = lead & 0x1F;
      minimum = 0x80;
    } else if (lead >= 0xE0 && lead <= 0xEF) {
      length = 3;
      code_point = lead & 0x0F;
      minimum = 0x800;
    } else if (lead >= 0xF0 && lead <= 0xF4) {
      length = 4;
      code_point = lead & 0x07;
      minimum = 0x10000;
    } else {
      return InvalidArgument("invalid UTF-8 at byte {}", i);
    }
    if (i + length > size) return InvalidArgument("invalid UTF-8 at byte {} (truncated)", i);
    for (size_t k = 1; k < length; ++k) {
      unsigned char next = bytes[i + k];
      if ((next & 0xC0) != 0x80) return InvalidArgument("invalid UTF-8 at byte {}", i);
      code_point = (code_point << 6) | (next & 0x3F);
    }
    if (code_point < minimum || code_point > 0x10FFFF ||
        (code_point >= 0xD800 && code_point <= 0xDFFF)) {
      return InvalidArgument("invalid UTF-8 at byte {}", i);
    }
    i += length;
  }
  return Status::Ok();
}

char32_t DecodeUtf8(std::string_view text, size_t offset, size_t* length) {
  auto lead = static_cast<unsigned char>(text[offset]);
  size_t count = lead < 0x80 ? 1 : lead < 0xE0 ? 2 : lead < 0xF0 ? 3 : 4;
  if (offset + count > text.size()) count = text.size() - offset;
  char32_t code_point = count == 1   ? lead
                        : count == 2 ? (lead & 0x1F)
                        : count == 3 ? (lead & 0x0F)
                                     : (lead & 0x07);
  for (size_t k = 1; k < count; ++k) {
    code_point = (code_point << 6) | (static_cast<unsigned char>(text[offset + k]) & 0x3F);
  }
  *length = count;
  return code_point;
}

void AppendUtf8(char32_t code_point, std::string* out) {
  if (code_point < 0x80) {
    out->push_back(static_cast<char>(code_point));
  } else if (code_point < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (code_point >> 6)));
    out->push_back(static_cast<char>(0x80 | (code_point & 0x3F)));
  } else if (code_point < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (code_point >> 12)));
    out->push_back(static_cast<char>(0x80 | ((code_point >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (code_point & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (code_point >> 18)));
    out->push_back(static_cast<char>(0x80 | ((code_point >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((code_point >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (code_point & 0x3F)));
  }
}

bool IsCjk(char32_t c) {
  return (c >= 0x4E00 && c <= 0x9FFF) ||    // CJK unified ideographs
         (c >= 0x3400 && c <= 0x4DBF) ||    // extension A
         (c >= 0x20000 && c <= 0x3134F) ||  // extensions B..G
         (c >= 0xF900 && c <= 0xFAFF) ||    // compatibility ideographs
         (c >= 0x3040 && c <= 0x30FF) ||    // hiragana, katakana
         (c >= 0x3100 && c <= 0x312F) ||    // bopomofo
         (c >= 0xAC00 && c <= 0xD7AF);      // Hangul syllables
}

bool ContainsCjk(std::string_view text) {
  for (size_t i = 0; i < text.size();) {
    if (static_cast<unsigned char>(text[i]) < 0x80) {
      ++i;
      continue;
    }
    size_t length = 0;
    if (IsCjk(DecodeUtf8(text, i, &length))) return true;
    i += length;
  }
  return false;
}

Result<std::string> NormalizeText(std::string_view text) {
  // Line ends and control characters first, in one pass over the bytes.
  std::string cleaned;
  cleaned.reserve(text.size());
  bool ascii = true;
  for (size_t i = 0; i < text.size();) {
    auto byte = static_cast<unsigned char>(text[i]);
    if (byte < 0x80) {
      if (byte == '\r') {
        cleaned.push_back('\n');
        if (i + 1 < text.size() && text[i + 1] == '\n') ++i;
      } else if (byte == '\n' || byte == '\t' || (byte >= 0x20 && byte != 0x7F)) {
        cleaned.push_back(static_cast<char>(byte));
      }
      ++i;
      continue;
    }
    ascii = false;
    size_t length = 0;
    char32_t code_point = DecodeUtf8(text, i, &length);
    if (code_point == 0x2028 || code_point == 0x2029) {
      cleaned.push_back('\n');
    } else if (!(code_point >= 0x80 && code_point <= 0x9F) && code_point != 0xFEFF) {
      cleaned.append(text.substr(i, length));
    }
    i += length;
  }
  if (ascii) return cleaned;  // ASCII is NFC already

  UErrorCode error = U_ZERO_ERROR;
  const icu::Normalizer2* nfc = icu::Normalizer2::getNFCInstance(error);
  if (U_FAILURE(error)) return Internal("ICU's NFC normaliser: {}", u_errorName(error));
  icu::UnicodeString unicode = icu::UnicodeString::fromUTF8(cleaned);
  if (nfc->isNormalized(unicode, error) && U_SUCCESS(error)) return cleaned;
  error = U_ZERO_ERROR;
  icu::UnicodeString normalized = nfc->normalize(unicode, error);
  if (U_FAILURE(error)) return Internal("NFC normalisation: {}", u_errorName(error));
  std::string out;
  normalized.toUTF8String(out);
  return out;
}

}  // namespace rampart::knowledge::hub
