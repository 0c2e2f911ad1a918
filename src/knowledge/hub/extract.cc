#include "knowledge/hub/extract.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <utility>

#include "knowledge/hub/text.h"

namespace rampart::knowledge::hub {
namespace {

std::string Lower(std::string_view text) {
  std::string out(text);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

std::string_view Trim(std::string_view text) {
  size_t begin = text.find_first_not_of(" \t\n");
  if (begin == std::string_view::npos) return {};
  size_t end = text.find_last_not_of(" \t\n");
  return text.substr(begin, end - begin + 1);
}

bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\n'; }

bool StartsWithMarkdownSyntax(std::string_view line) {
  if (line.starts_with("# ") || line.starts_with("## ") || line.starts_with("### ")) return true;
  if (line.starts_with("```") || line.starts_with("~~~")) return true;
  if (line.starts_with("- ") || line.starts_with("* ")) return true;
  return line.starts_with("===") || line.starts_with("---");
}

}  // namespace

std::string_view DocumentTypeMime(DocumentType type) {
  switch (type) {
    case DocumentType::kPlainText: return "text/plain";
    case DocumentType::kMarkdown: return "text/markdown";
    case DocumentType::kHtml: return "text/html";
    case DocumentType::kPdf: return "application/pdf";
  }
  return "application/octet-stream";
}

std::string_view BlockKindName(BlockKind kind) {
  switch (kind) {
    case BlockKind::kHeading: return "heading";
    case BlockKind::kParagraph: return "paragraph";
    case BlockKind::kListItem: return "list_item";
    case BlockKind::kCode: return "code";
    case BlockKind::kTableRow: return "table_row";
  }
  return "unknown";
}

Result<DocumentType> DocumentTypeFromMime(std::string_view media_type) {
  std::string type = Lower(Trim(media_type.substr(0, media_type.find(';'))));
  if (type == "text/plain") return DocumentType::kPlainText;
  if (type == "text/markdown" || type == "text/x-markdown") return DocumentType::kMarkdown;
  if (type == "text/html" || type == "application/xhtml+xml") return DocumentType::kHtml;
  if (type == "application/pdf") return DocumentType::kPdf;
  return InvalidArgument(
      "unsupported file type '{}' (text/plain, text/markdown, text/html and "
      "application/pdf are)",
      type);
}

Result<DocumentType> DocumentTypeFromFilename(std::string_view filename) {
  size_t dot = filename.rfind('.');
  std::string extension = dot == std::string_view::npos ? "" : Lower(filename.substr(dot + 1));
  static constexpr std::array<std::pair<std::string_view, DocumentType>, 9> kExtensions = {{
      {"txt", DocumentType::kPlainText},
      {"text", DocumentType::kPlainText},
      {"md", DocumentType::kMarkdown},
      {"markdown", DocumentType::kMarkdown},
      {"mdx", DocumentType::kMarkdown},
      {"html", DocumentType::kHtml},
      {"htm", DocumentType::kHtml},
      {"xhtml", DocumentType::kHtml},
      {"pdf", DocumentType::kPdf},
  }};
  for (const auto& [name, type] : kExtensions) {
    if (extension == name) return type;
  }
  return InvalidArgument("unsupported file type '.{}' (.txt, .md, .html and .pdf are)", extension);
}

std::optional<DocumentType> SniffDocumentType(std::string_view bytes) {
  if (bytes.starts_with("%PDF-")) return DocumentType::kPdf;
  std::string_view head = bytes.substr(0, 1024);
  if (head.find('\0') != std::string_view::npos) return std::nullopt;
  std::string lowered = Lower(head);
  std::string_view start = Trim(lowered);
  if (start.starts_with("\xef\xbb\xbf")) start.remove_prefix(3);
  if (start.starts_with("<!doctype html") || start.starts_with("<html") ||
      lowered.find("<head>") != std::string::npos || lowered.find("<body") != std::string::npos) {
    return DocumentType::kHtml;
  }
  if (!ValidateUtf8(bytes).ok()) return std::nullopt;
  size_t line_start = 0;
  while (line_start < head.size()) {
    size_t line_end = head.find('\n', line_start);
    if (line_end == std::string_view::npos) line_end = head.size();
    if (StartsWithMarkdownSyntax(head.substr(line_start, line_end - line_start))) {
      return DocumentType::kMarkdown;
    }
    line_start = line_end + 1;
  }
  return DocumentType::kPlainText;
}

void BlockWriter::Add(BlockKind kind, std::string_view text, int level, int page) {
  std::string& out = result_.text;
  size_t separator = out.empty() ? 0 : 2;
  size_t begin = out.size() + separator;
  std::string body;
  if (kind == BlockKind::kCode) {
    // Verbatim, less blank lines around it.
    size_t first = text.find_first_not_of('\n');
    if (first == std::string_view::npos) return;
    text.remove_prefix(first);
    while (!text.empty() && IsSpace(text.back())) text.remove_suffix(1);
    body.assign(text);
  } else {
    body.reserve(text.size());
    bool pending_space = false;
    for (char c : text) {
      if (IsSpace(c)) {
        pending_space = !body.empty();
        continue;
      }
      if (pending_space) body.push_back(' ');
      pending_space = false;
      body.push_back(c);
    }
  }
  if (body.empty()) return;
  if (separator != 0) out.append("\n\n");
  out.append(body);
  result_.blocks.push_back(
      Block{kind, kind == BlockKind::kHeading ? level : 0, page, begin, out.size()});
}

ExtractedText ParsePlainText(std::string_view text) {
  BlockWriter writer(DocumentType::kPlainText);
  // Paragraphs are separated by blank lines; line breaks inside a paragraph are kept as spaces.
  size_t start = 0;
  while (start < text.size()) {
    size_t blank = text.find("\n\n", start);
    size_t end = blank == std::string_view::npos ? text.size() : blank;
    writer.Add(BlockKind::kParagraph, text.substr(start, end - start));
    start = end + 2;
  }
  return std::move(writer).Finish();
}

Result<ExtractedText> Extract(std::string_view bytes, DocumentType type,
                              const ExtractOptions& options) {
  if (bytes.empty()) return InvalidArgument("the file is empty (0 bytes)");
  if (bytes.size() > options.max_input_bytes) {
    return PayloadTooLarge("the file is {} bytes, over the limit of {}", bytes.size(),
                           options.max_input_bytes);
  }
  ExtractedText result;
  if (type == DocumentType::kPdf) {
    ASSIGN_OR_RETURN(result, ExtractPdf(bytes, options));
  } else {
    RETURN_IF_ERROR(ValidateUtf8(bytes));
    ASSIGN_OR_RETURN(std::string text, NormalizeText(bytes));
    if (type == DocumentType::kMarkdown) {
      result = ParseMarkdown(text);
    } else if (type == DocumentType::kHtml) {
      result = ParseHtml(text);
    } else {
      result = ParsePlainText(text);
    }
  }
  if (result.text.size() > options.max_text_bytes) {
    return PayloadTooLarge("the extracted text is {} bytes, over the limit of {}",
                           result.text.size(), options.max_text_bytes);
  }
  if (result.blocks.empty()) return InvalidArgument("the file holds no text");
  return result;
}

Result<ExtractedText> ExtractAuto(std::string_view bytes, std::optional<DocumentType> declared,
                                  const ExtractOptions& options) {
  if (bytes.empty()) return InvalidArgument("the file is empty (0 bytes)");
  if (declared) return Extract(bytes, *declared, options);
  std::optional<DocumentType> sniffed = SniffDocumentType(bytes);
  if (!sniffed) {
    Status utf8 = ValidateUtf8(bytes);
    if (!utf8.ok()) return utf8;
    return InvalidArgument("unsupported file type (binary data)");
  }
  return Extract(bytes, *sniffed, options);
}

}  // namespace rampart::knowledge::hub
