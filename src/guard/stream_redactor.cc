#include "guard/stream_redactor.h"

#include <algorithm>
#include <array>

#include "guard/normalize.h"
#include "guard/text.h"

namespace rampart::guard {
namespace {

// Must cover every character an entity's text may hold, the key-assignment value alphabet of
// candidates.cc (AddKeyAssignments) included: a value cut short could score differently.
bool EntityCharacter(char32_t c) {
  if (text::IsAsciiAlnum(c)) return true;
  if (c >= 0xFF01 && c <= 0xFF5E) return true;  // full-width ASCII forms
  switch (c) {
    case U'.':
    case U'_':
    case U'%':
    case U'+':
    case U'-':
    case U'@':
    case U':':
    case U'/':
    case U'\\':
    case U'=':
    case U'~':
    case U'#':
    case U'?':
    case U'&':
    case U'[':
    case U']':
    case U'$':
    case U'!':
    case U'*':
    case U'|':
    case U'^': return true;
    default: return false;
  }
}

bool JoiningSpace(char32_t c) { return c == U' ' || c == U'\t' || c == 0x00A0 || c == 0x3000; }

// Words after which a space still belongs to an entity (a secret follows).
constexpr std::array<std::string_view, 15> kSecretWords = {
    "bearer", "basic",         "token",      "password",   "passwd",
    "pwd",    "secret",        "api_key",    "apikey",     "api-key",
    "key",    "authorization", "access_key", "secret_key", "private_key"};

// The start of the character that ends at `end` (REQUIRES: end > 0).
size_t PreviousStart(std::string_view text, size_t end) {
  size_t start = end - 1;
  while (start > 0 && end - start < 4 && text::IsContinuation(text[start])) --start;
  return start;
}

// Whether the ASCII word ending at `end` introduces a secret.
bool SecretWordBefore(std::string_view text, size_t from, size_t end) {
  size_t start = end;
  while (start > from && end - start < 16) {
    const char c = text[start - 1];
    const bool word = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == '-';
    if (!word) break;
    --start;
  }
  if (start == end) return false;
  std::string lower(text.substr(start, end - start));
  for (char& c : lower) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return std::find(kSecretWords.begin(), kSecretWords.end(), lower) != kSecretWords.end();
}

// Whether the word ending at `end` is a group of one to four upper-case letters or digits (an
// IBAN's or a code's group: "GB80 VFLL 6130").
bool UpperGroupBefore(std::string_view text, size_t from, size_t end) {
  size_t start = end;
  while (start > from && end - start <= 4) {
    const char c = text[start - 1];
    if (!((c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))) break;
    --start;
  }
  const size_t length = end - start;
  if (length == 0 || length > 4) return false;
  if (start == from) return true;
  const char before = text[start - 1];
  return !((before >= 'a' && before <= 'z') || (before >= 'A' && before <= 'Z') ||
           (before >= '0' && before <= '9'));
}

// The first character boundary at or after `pos`.
size_t BoundaryAtOrAfter(std::string_view text, size_t pos) {
  while (pos < text.size() && text::IsContinuation(text[pos])) ++pos;
  return pos;
}

// The end of the last whole UTF-8 character in `text` (a sequence cut at the end is left out).
size_t CompleteEnd(std::string_view text) {
  if (text.empty()) return 0;
  const size_t start = PreviousStart(text, text.size());
  const uint8_t lead = static_cast<uint8_t>(text[start]);
  const size_t expected = lead < 0x80             ? 1
                          : (lead & 0xE0) == 0xC0 ? 2
                          : (lead & 0xF0) == 0xE0 ? 3
                          : (lead & 0xF8) == 0xF0 ? 4
                                                  : 1;
  return text.size() - start < expected ? start : text.size();
}

}  // namespace

size_t HeldTailStart(std::string_view text, size_t from, size_t end) {
  size_t pos = end;
  while (pos > from) {
    const size_t start = std::max(PreviousStart(text, pos), from);
    size_t length = 0;
    const char32_t c = text::Decode(text, start, length);
    if (EntityCharacter(c)) {
      pos = start;
      continue;
    }
    if (JoiningSpace(c) && start > from) {
      const size_t before_start = PreviousStart(text, start);
      size_t before_length = 0;
      const char32_t before = text::Decode(text, before_start, before_length);
      if (text::IsDigit(before) || before == U'=' || before == U':' ||
          UpperGroupBefore(text, from, start) || SecretWordBefore(text, from, start)) {
        pos = start;
        continue;
      }
    }
    break;
  }
  // An unclosed PEM block is held from its start. Its markers are looked for as the detector
  // sees them, full-width forms read as ASCII ("－----BEGIN" is a header too).
  const NormalizedText region(text.substr(from, end - from));
  const std::string_view scanned = region.text();
  const size_t begin = scanned.rfind("-----BEGIN");
  if (begin != std::string_view::npos) {
    const size_t end_marker = scanned.find("-----END", begin);
    const bool closed = end_marker != std::string_view::npos &&
                        scanned.find("-----", end_marker + 8) != std::string_view::npos;
    if (!closed) pos = std::min(pos, from + region.ToOriginal(begin));
  }
  return pos;
}

StreamRedactor::StreamRedactor(const Detector& detector, OperatorChoice operators, TenantKeys keys,
                               std::vector<std::string_view> types)
    : detector_(detector),
      operators_(std::move(operators)),
      keys_(keys),
      types_(std::move(types)) {}

Result<std::string> StreamRedactor::Push(std::string_view piece) {
  held_.append(piece);
  return Release(false);
}

Result<std::string> StreamRedactor::Finish() { return Release(true); }

std::vector<Redaction> StreamRedactor::TakeReleased() { return std::exchange(released_, {}); }

// Whether a digit (ASCII or full-width) lies in text[begin, end).
bool HasDigit(std::string_view text, size_t begin, size_t end) {
  for (size_t i = begin; i < end; ++i) {
    const auto byte = static_cast<unsigned char>(text[i]);
    if (byte >= '0' && byte <= '9') return true;
    if (byte == 0xEF && i + 2 < end && static_cast<unsigned char>(text[i + 1]) == 0xBC &&
        static_cast<unsigned char>(text[i + 2]) >= 0x90 &&
        static_cast<unsigned char>(text[i + 2]) <= 0x99) {
      return true;
    }
  }
  return false;
}

Result<std::string> StreamRedactor::Release(bool final) {
  if (held_.empty()) return std::string();
  const std::string buffer = context_ + held_;
  const size_t from = context_.size();
  const size_t complete = from + CompleteEnd(held_);
  ASSIGN_OR_RETURN(std::vector<Entity> entities,
                   detector_.Detect(std::string_view(buffer).substr(0, complete), types_));
  size_t cut = complete;
  if (!final) {
    // Types reported only with a context word (a passport number, an SSN without separators, an
    // all-digit code) may get that word up to kRightContextBytes after them, and every such
    // candidate holds digits: while digits lie within that reach of the end, the last
    // kRightContextBytes wait for what follows, so such a candidate is decided as the whole
    // text would decide it.
    size_t end = complete;
    const size_t reach = kRightContextBytes + kLongestContextCandidate;
    if (HasDigit(buffer, complete > from + reach ? complete - reach : from, complete)) {
      end = complete > from + kRightContextBytes ? complete - kRightContextBytes : from;
      end = std::max(BoundaryAtOrAfter(buffer, end), from);
    }
    cut = HeldTailStart(buffer, from, end);
    const size_t bound = detector_.max_entity_bytes();
    if (complete - cut > bound) cut = BoundaryAtOrAfter(buffer, complete - bound);
    for (auto entity = entities.rbegin(); entity != entities.rend(); ++entity) {
      if (entity->start >= from && entity->end > cut) cut = std::min(cut, entity->start);
    }
  }
  std::vector<Entity> released;
  for (const Entity& entity : entities) {
    if (entity.start < from || entity.end > cut) continue;
    Entity shifted = entity;
    shifted.start -= from;
    shifted.end -= from;
    released.push_back(shifted);
  }
  const std::string_view out_input = std::string_view(buffer).substr(from, cut - from);
  RedactedText redacted = Redact(out_input, released, operators_, keys_);
  for (Redaction& redaction : redacted.entities) {
    redaction.start += held_offset_;
    redaction.end += held_offset_;
    released_.push_back(std::move(redaction));
  }
  if (final) redacted.text.append(std::string_view(buffer).substr(complete));  // a cut sequence
  const size_t taken = final ? held_.size() : cut - from;
  held_offset_ += taken;
  // The context: the last kLeftContextBytes of input released so far, from a character start.
  const size_t context_end = from + taken;
  size_t context_start = context_end > kLeftContextBytes ? context_end - kLeftContextBytes : 0;
  context_start = BoundaryAtOrAfter(buffer, context_start);
  context_ = buffer.substr(context_start, context_end - context_start);
  held_.erase(0, taken);
  return std::move(redacted.text);
}

}  // namespace rampart::guard
