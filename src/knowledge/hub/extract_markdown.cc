// Markdown -> blocks: a line-based subset of CommonMark that keeps what chunking and citations
// need. ATX (#) and setext (=== / ---) headings, fenced code (``` and ~~~), list items (-, *, +,
// 1. and 1)) with their indented continuation lines, pipe tables (one block per row, the
// delimiter row dropped), block quotes (markers dropped) and paragraphs. Indented code blocks are
// read as paragraphs. Inline markup is stripped by StripMarkdownInline.
#include <string>
#include <utility>

#include "knowledge/hub/extract.h"

namespace rampart::knowledge::hub {
namespace {

size_t LeadingSpaces(std::string_view line) {
  size_t count = 0;
  while (count < line.size() && line[count] == ' ') ++count;
  return count;
}

bool IsBlank(std::string_view line) {
  return line.find_first_not_of(" \t") == std::string_view::npos;
}

// "```lang" or "~~~": the fence's character and length, or 0.
size_t FenceLength(std::string_view line, char* fence_char) {
  size_t indent = LeadingSpaces(line);
  if (indent > 3 || indent >= line.size()) return 0;
  char c = line[indent];
  if (c != '`' && c != '~') return 0;
  size_t length = 0;
  while (indent + length < line.size() && line[indent + length] == c) ++length;
  if (length < 3) return 0;
  *fence_char = c;
  return length;
}

// "## Title ##" -> level 2, "Title"; 0 when not an ATX heading.
int AtxHeading(std::string_view line, std::string_view* title) {
  size_t indent = LeadingSpaces(line);
  if (indent > 3) return 0;
  line.remove_prefix(indent);
  int level = 0;
  while (level < static_cast<int>(line.size()) && line[level] == '#') ++level;
  if (level == 0 || level > 6) return 0;
  if (static_cast<size_t>(level) < line.size() && line[level] != ' ' && line[level] != '\t') {
    return 0;
  }
  std::string_view rest = line.substr(level);
  while (!rest.empty() && (rest.back() == ' ' || rest.back() == '\t')) rest.remove_suffix(1);
  size_t closing = rest.size();
  while (closing > 0 && rest[closing - 1] == '#') --closing;
  if (closing == 0 || rest[closing - 1] == ' ' || rest[closing - 1] == '\t') {
    rest = rest.substr(0, closing);
  }
  *title = rest;
  return level;
}

// A setext underline: 1 for "===", 2 for "---".
int SetextLevel(std::string_view line) {
  size_t indent = LeadingSpaces(line);
  if (indent > 3) return 0;
  line.remove_prefix(indent);
  while (!line.empty() && (line.back() == ' ' || line.back() == '\t')) line.remove_suffix(1);
  if (line.empty()) return 0;
  char c = line[0];
  if (c != '=' && c != '-') return 0;
  if (line.find_first_not_of(c) != std::string_view::npos) return 0;
  return c == '=' ? 1 : 2;
}

bool IsThematicBreak(std::string_view line) {
  int count = 0;
  char mark = 0;
  for (char c : line) {
    if (c == ' ' || c == '\t') continue;
    if (c != '-' && c != '*' && c != '_') return false;
    if (mark != 0 && c != mark) return false;
    mark = c;
    ++count;
  }
  return count >= 3;
}

// The byte length of a list marker and its following space ("- ", "12. "), or 0.
size_t ListMarker(std::string_view line) {
  size_t indent = LeadingSpaces(line);
  if (indent >= line.size()) return 0;
  size_t i = indent;
  if (line[i] == '-' || line[i] == '*' || line[i] == '+') {
    ++i;
  } else {
    size_t digits = 0;
    while (i < line.size() && line[i] >= '0' && line[i] <= '9' && digits < 9) {
      ++i;
      ++digits;
    }
    if (digits == 0 || i >= line.size() || (line[i] != '.' && line[i] != ')')) return 0;
    ++i;
  }
  if (i < line.size() && line[i] != ' ' && line[i] != '\t') return 0;
  return i < line.size() ? i + 1 : i;
}

bool IsTableDelimiterRow(std::string_view line) {
  bool dash = false;
  for (char c : line) {
    if (c == '-') {
      dash = true;
    } else if (c != '|' && c != ':' && c != ' ' && c != '\t') {
      return false;
    }
  }
  return dash;
}

std::string TableRow(std::string_view line) {
  size_t first = line.find_first_not_of(" \t");
  line.remove_prefix(first);
  if (!line.empty() && line.front() == '|') line.remove_prefix(1);
  while (!line.empty() && (line.back() == ' ' || line.back() == '\t')) line.remove_suffix(1);
  if (!line.empty() && line.back() == '|') line.remove_suffix(1);
  std::string row;
  size_t start = 0;
  while (start <= line.size()) {
    size_t bar = line.find('|', start);
    if (bar == std::string_view::npos) bar = line.size();
    std::string cell = StripMarkdownInline(line.substr(start, bar - start));
    if (!row.empty()) row.append(" | ");
    row.append(cell);
    start = bar + 1;
  }
  return row;
}

// Strips "> " block quote markers, however many.
std::string_view StripQuote(std::string_view line) {
  while (true) {
    size_t indent = LeadingSpaces(line);
    if (indent > 3 || indent >= line.size() || line[indent] != '>') return line;
    line.remove_prefix(indent + 1);
    if (!line.empty() && line.front() == ' ') line.remove_prefix(1);
  }
}

// The next `c` at or after `from` in one text, for positions that never go backwards: each
// answer is remembered, so a line full of '[' or '<' costs one scan rather than one per
// character. A link's text, its address and an autolink must be under kInlineWindow bytes.
constexpr size_t kInlineWindow = 2048;
class NextFinder {
 public:
  NextFinder(std::string_view text, char c) : text_(text), c_(c) {}
  // REQUIRES: `from` no smaller than in the previous call.
  size_t Find(size_t from) {
    if (!known_ || (found_ != std::string_view::npos && found_ < from)) {
      found_ = from >= text_.size() ? std::string_view::npos : text_.find(c_, from);
      known_ = true;
    }
    if (found_ == std::string_view::npos || found_ - from > kInlineWindow) {
      return std::string_view::npos;
    }
    return found_;
  }

 private:
  std::string_view text_;
  char c_;
  bool known_ = false;
  size_t found_ = std::string_view::npos;
};

}  // namespace

std::string StripMarkdownInline(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  NextFinder next_bracket(text, ']');
  NextFinder next_parenthesis(text, ')');
  NextFinder next_angle(text, '>');
  size_t i = 0;
  while (i < text.size()) {
    char c = text[i];
    if (c == '\\' && i + 1 < text.size() &&
        std::string_view("\\`*_{}[]()#+-.!|<>").find(text[i + 1]) != std::string_view::npos) {
      out.push_back(text[i + 1]);
      i += 2;
      continue;
    }
    if ((c == '[' || (c == '!' && i + 1 < text.size() && text[i + 1] == '['))) {
      // [text](url) or ![alt](url): keep the text.
      size_t open = c == '!' ? i + 1 : i;
      size_t close = next_bracket.Find(open + 1);
      if (close != std::string_view::npos && close + 1 < text.size() && text[close + 1] == '(') {
        size_t end = next_parenthesis.Find(close + 2);
        if (end != std::string_view::npos) {
          out.append(StripMarkdownInline(text.substr(open + 1, close - open - 1)));
          i = end + 1;
          continue;
        }
      }
    }
    if (c == '<') {
      // <https://example.com>: keep the address.
      size_t end = next_angle.Find(i + 1);
      std::string_view inside =
          end == std::string_view::npos ? std::string_view() : text.substr(i + 1, end - i - 1);
      if ((inside.starts_with("http://") || inside.starts_with("https://") ||
           inside.starts_with("mailto:")) &&
          inside.find(' ') == std::string_view::npos) {
        out.append(inside);
        i = end + 1;
        continue;
      }
    }
    if ((c == '*' || c == '_') && i + 1 < text.size() && text[i + 1] == c) {
      i += 2;
      continue;
    }
    if (c == '`') {
      ++i;
      continue;
    }
    out.push_back(c);
    ++i;
  }
  return out;
}

ExtractedText ParseMarkdown(std::string_view text) {
  BlockWriter writer(DocumentType::kMarkdown);
  std::string paragraph;  // lines of the open paragraph
  std::string item;       // the open list item
  bool in_item = false;
  bool after_blank = false;
  auto flush = [&] {
    if (!paragraph.empty()) writer.Add(BlockKind::kParagraph, StripMarkdownInline(paragraph));
    paragraph.clear();
    if (in_item) writer.Add(BlockKind::kListItem, StripMarkdownInline(item));
    item.clear();
    in_item = false;
  };

  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(start, end - start);
    start = end + 1;

    char fence_char = 0;
    size_t fence = FenceLength(line, &fence_char);
    if (fence != 0) {
      flush();
      // The code runs to a closing fence of the same character, at least as long, or the end.
      std::string code;
      while (start < text.size()) {
        size_t code_end = text.find('\n', start);
        if (code_end == std::string_view::npos) code_end = text.size();
        std::string_view code_line = text.substr(start, code_end - start);
        start = code_end + 1;
        char closing_char = 0;
        size_t closing = FenceLength(code_line, &closing_char);
        if (closing >= fence && closing_char == fence_char &&
            IsBlank(code_line.substr(code_line.find(fence_char) + closing))) {
          break;
        }
        code.append(code_line);
        code.push_back('\n');
      }
      writer.Add(BlockKind::kCode, code);
      continue;
    }
    if (IsBlank(line)) {
      if (!paragraph.empty()) flush();
      after_blank = true;  // a list item goes on after a blank line only when indented
      continue;
    }
    bool was_after_blank = after_blank;
    after_blank = false;
    std::string_view title;
    if (int level = AtxHeading(line, &title); level != 0) {
      flush();
      writer.Add(BlockKind::kHeading, StripMarkdownInline(title), level);
      continue;
    }
    if (int level = SetextLevel(line); level != 0 && !paragraph.empty() && !in_item) {
      std::string heading = std::move(paragraph);
      paragraph.clear();
      writer.Add(BlockKind::kHeading, StripMarkdownInline(heading), level);
      continue;
    }
    if (IsThematicBreak(line)) {
      flush();
      continue;
    }
    if (size_t marker = ListMarker(line); marker != 0) {
      flush();
      in_item = true;
      item.assign(line.substr(marker));
      continue;
    }
    std::string_view stripped = line.substr(LeadingSpaces(line));
    if (stripped.starts_with('|')) {
      flush();
      if (!IsTableDelimiterRow(stripped)) writer.Add(BlockKind::kTableRow, TableRow(stripped));
      continue;
    }
    if (in_item && (LeadingSpaces(line) >= 2 || !was_after_blank)) {
      // Continuation of the list item: indented, or a lazy line right after it.
      item.push_back(' ');
      item.append(stripped);
      continue;
    }
    if (in_item) flush();
    if (!paragraph.empty()) paragraph.push_back('\n');
    paragraph.append(StripQuote(line));
  }
  flush();
  return std::move(writer).Finish();
}

}  // namespace rampart::knowledge::hub
