// HTML -> blocks with a small tolerant tokenizer: one pass, no tree and no recursion, so neither
// malformed nor deeply nested markup can hurt it. script, style, noscript, template, head's title
// and comments are dropped; h1..h6 become headings, li list items, pre code, tr table rows (cells
// joined by " | "), and p, div, br and the other block elements end the block they are in.
// Character references are decoded (numeric ones and the common named ones).
#include <algorithm>
#include <array>
#include <cctype>
#include <string>
#include <utility>

#include "knowledge/hub/extract.h"
#include "knowledge/hub/text.h"

namespace rampart::knowledge::hub {
namespace {

struct NamedEntity {
  std::string_view name;
  char32_t code_point;
};
constexpr std::array<NamedEntity, 28> kEntities = {{
    {"amp", '&'},      {"lt", '<'},        {"gt", '>'},       {"quot", '"'},     {"apos", '\''},
    {"nbsp", 0xA0},    {"copy", 0xA9},     {"reg", 0xAE},     {"trade", 0x2122}, {"mdash", 0x2014},
    {"ndash", 0x2013}, {"hellip", 0x2026}, {"lsquo", 0x2018}, {"rsquo", 0x2019}, {"ldquo", 0x201C},
    {"rdquo", 0x201D}, {"laquo", 0xAB},    {"raquo", 0xBB},   {"middot", 0xB7},  {"bull", 0x2022},
    {"deg", 0xB0},     {"times", 0xD7},    {"euro", 0x20AC},  {"pound", 0xA3},   {"yen", 0xA5},
    {"sect", 0xA7},    {"shy", 0xAD},      {"ensp", 0x2002},
}};

// Decodes the reference at text[i] == '&' into `out`; returns the bytes consumed (0: not one).
size_t DecodeReference(std::string_view text, size_t i, std::string* out) {
  // The longest reference decoded is "&#x10FFFF;"; looking no further keeps "&&&&..." linear.
  size_t semicolon = text.substr(i + 1, 12).find(';');
  if (semicolon == std::string_view::npos) return 0;
  semicolon += i + 1;
  std::string_view name = text.substr(i + 1, semicolon - i - 1);
  if (name.size() >= 2 && name[0] == '#') {
    char32_t value = 0;
    bool hex = name[1] == 'x' || name[1] == 'X';
    std::string_view digits = name.substr(hex ? 2 : 1);
    if (digits.empty()) return 0;
    for (char c : digits) {
      int digit = std::isdigit(static_cast<unsigned char>(c))                ? c - '0'
                  : hex && std::isxdigit(static_cast<unsigned char>(c)) != 0 ? (c | 0x20) - 'a' + 10
                                                                             : -1;
      if (digit < 0) return 0;
      value = value * (hex ? 16 : 10) + static_cast<char32_t>(digit);
      if (value > 0x10FFFF) break;
    }
    if (value == 0 || value > 0x10FFFF || (value >= 0xD800 && value <= 0xDFFF) ||
        (value < 0x20 && value != '\n' && value != '\t') || (value >= 0x7F && value <= 0x9F)) {
      value = 0xFFFD;
    }
    AppendUtf8(value, out);
    return semicolon - i + 1;
  }
  for (const NamedEntity& entity : kEntities) {
    if (entity.name == name) {
      if (entity.code_point != 0xAD) AppendUtf8(entity.code_point, out);  // soft hyphen: drop
      return semicolon - i + 1;
    }
  }
  return 0;
}

std::string LowerName(std::string_view name) {
  std::string out(name);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

bool IsBlockElement(std::string_view name) {
  static constexpr std::array<std::string_view, 30> kBlocks = {
      "p",       "div",     "br",      "ul",         "ol",       "dl",         "dt",     "dd",
      "table",   "thead",   "tbody",   "tfoot",      "section",  "article",    "header", "footer",
      "nav",     "aside",   "main",    "blockquote", "figure",   "figcaption", "form",   "hr",
      "address", "details", "summary", "caption",    "fieldset", "body"};
  return std::find(kBlocks.begin(), kBlocks.end(), name) != kBlocks.end();
}

// Elements whose content is not text.
bool IsHiddenElement(std::string_view name) {
  return name == "script" || name == "style" || name == "noscript" || name == "template" ||
         name == "title" || name == "svg" || name == "math" || name == "iframe" || name == "object";
}

size_t FindCaseInsensitive(std::string_view text, std::string_view needle, size_t from) {
  auto it = std::search(text.begin() + static_cast<std::ptrdiff_t>(from), text.end(),
                        needle.begin(), needle.end(), [](char a, char b) {
                          return std::tolower(static_cast<unsigned char>(a)) ==
                                 std::tolower(static_cast<unsigned char>(b));
                        });
  return it == text.end() ? std::string_view::npos : static_cast<size_t>(it - text.begin());
}

// The end of the tag starting at text[i] == '<' (one past its '>'), quotes respected; npos if it
// never closes.
size_t TagEnd(std::string_view text, size_t i) {
  char quote = 0;
  for (size_t k = i + 1; k < text.size(); ++k) {
    char c = text[k];
    if (quote != 0) {
      if (c == quote) quote = 0;
    } else if (c == '"' || c == '\'') {
      quote = c;
    } else if (c == '>') {
      return k + 1;
    }
  }
  return std::string_view::npos;
}

}  // namespace

ExtractedText ParseHtml(std::string_view text) {
  BlockWriter writer(DocumentType::kHtml);
  std::string current;
  BlockKind kind = BlockKind::kParagraph;
  int level = 0;
  int pre_depth = 0;
  auto flush = [&] {
    writer.Add(pre_depth > 0 ? BlockKind::kCode : kind, current, level);
    current.clear();
  };

  size_t i = 0;
  while (i < text.size()) {
    char c = text[i];
    if (c == '&') {
      size_t used = DecodeReference(text, i, &current);
      if (used != 0) {
        i += used;
        continue;
      }
      current.push_back(c);
      ++i;
      continue;
    }
    if (c != '<') {
      current.push_back(c);
      ++i;
      continue;
    }
    if (text.substr(i, 4) == "<!--") {
      size_t end = text.find("-->", i + 4);
      i = end == std::string_view::npos ? text.size() : end + 3;
      continue;
    }
    bool closing = i + 1 < text.size() && text[i + 1] == '/';
    size_t name_begin = i + (closing ? 2 : 1);
    size_t name_end = name_begin;
    while (name_end < text.size() && (std::isalnum(static_cast<unsigned char>(text[name_end])) ||
                                      text[name_end] == '-' || text[name_end] == ':')) {
      ++name_end;
    }
    bool declaration = !closing && name_begin < text.size() &&
                       (text[name_begin] == '!' || text[name_begin] == '?');
    if (name_end == name_begin && !declaration) {
      current.push_back(c);  // a lone '<' is text
      ++i;
      continue;
    }
    size_t end = TagEnd(text, i);
    if (end == std::string_view::npos) break;  // an unclosed tag ends the document
    i = end;
    if (declaration) continue;
    std::string name = LowerName(text.substr(name_begin, name_end - name_begin));

    if (!closing && IsHiddenElement(name) && text[end - 2] != '/') {
      size_t close = FindCaseInsensitive(text, "</" + name, i);
      if (close == std::string_view::npos) break;
      size_t close_end = TagEnd(text, close);
      i = close_end == std::string_view::npos ? text.size() : close_end;
      continue;
    }
    if (name.size() == 2 && name[0] == 'h' && name[1] >= '1' && name[1] <= '6') {
      flush();
      kind = closing ? BlockKind::kParagraph : BlockKind::kHeading;
      level = closing ? 0 : name[1] - '0';
    } else if (name == "li") {
      flush();
      kind = closing ? BlockKind::kParagraph : BlockKind::kListItem;
    } else if (name == "tr") {
      flush();
      kind = closing ? BlockKind::kParagraph : BlockKind::kTableRow;
    } else if (name == "td" || name == "th") {
      if (!closing && kind == BlockKind::kTableRow &&
          current.find_first_not_of(" \t\n") != std::string::npos) {
        current.append(" | ");
      }
      if (kind != BlockKind::kTableRow) current.push_back(' ');
    } else if (name == "pre") {
      flush();
      pre_depth = closing ? std::max(0, pre_depth - 1) : std::min(pre_depth + 1, 64);
    } else if (IsBlockElement(name)) {
      flush();
      if (kind != BlockKind::kTableRow || name == "table") {
        kind = BlockKind::kParagraph;
        level = 0;
      }
    }
  }
  flush();
  return std::move(writer).Finish();
}

}  // namespace rampart::knowledge::hub
