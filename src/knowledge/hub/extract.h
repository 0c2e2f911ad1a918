#pragma once

// Extraction: a file's bytes and its declared or sniffed type -> normalised UTF-8 text with
// structure (a list of blocks), the input of chunking (chunker.h).
//
// Types: plain text, Markdown, HTML and PDF (poppler-cpp, page by page). The text is NFC with LF
// line ends and no control characters (text.h); blocks are joined by one blank line ("\n\n") and
// each block's byte range points into ExtractedText::text. Errors are meant to become a file's
// `last_error`: InvalidArgument for a 0-byte file, invalid UTF-8, an unsupported type or an
// unreadable PDF ("not a readable PDF: ..."); PayloadTooLarge for input or text over the limits.
//
// Parsers are loops over the input, never recursive, so nesting depth cannot exhaust the stack.
// Thread safety: free functions over values; any number of calls may run at once.

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace rampart::knowledge::hub {

enum class DocumentType { kPlainText, kMarkdown, kHtml, kPdf };

// "text/plain", "text/markdown", "text/html", "application/pdf".
std::string_view DocumentTypeMime(DocumentType type);
// From a media type ("text/html; charset=utf-8", "text/x-markdown", "application/pdf", ...) or a
// file name's extension (".txt", ".md", ".markdown", ".html", ".htm", ".pdf", ...);
// InvalidArgument "unsupported file type ..." otherwise.
Result<DocumentType> DocumentTypeFromMime(std::string_view media_type);
Result<DocumentType> DocumentTypeFromFilename(std::string_view filename);
// The type the bytes look like: "%PDF-" -> PDF; an HTML doctype or <html>/<head>/<body> near the
// start -> HTML; otherwise, when the bytes are valid UTF-8, Markdown if a heading, fence or list
// marker starts a line, else plain text. nullopt for binary data (NUL bytes, invalid UTF-8).
std::optional<DocumentType> SniffDocumentType(std::string_view bytes);

enum class BlockKind { kHeading, kParagraph, kListItem, kCode, kTableRow };
std::string_view BlockKindName(BlockKind kind);

struct Block {
  BlockKind kind = BlockKind::kParagraph;
  int level = 0;     // 1..6 for a heading, 0 otherwise
  int page = 0;      // 1-based page of a PDF, 0 for other types
  size_t begin = 0;  // byte range in ExtractedText::text
  size_t end = 0;
};

struct ExtractedText {
  DocumentType type = DocumentType::kPlainText;
  std::string text;
  std::vector<Block> blocks;  // in text order, non-empty, not overlapping
  int page_count = 0;         // PDF only

  std::string_view BlockText(const Block& block) const {
    return std::string_view(text).substr(block.begin, block.end - block.begin);
  }
};

struct ExtractOptions {
  size_t max_input_bytes = size_t{512} << 20;  // the file as uploaded
  size_t max_text_bytes = size_t{64} << 20;    // the extracted text
  int max_pdf_pages = 5000;
};

// Extracts `bytes` as `type`.
Result<ExtractedText> Extract(std::string_view bytes, DocumentType type,
                              const ExtractOptions& options = {});
// Extracts with the declared type when there is one, else the sniffed one.
Result<ExtractedText> ExtractAuto(std::string_view bytes, std::optional<DocumentType> declared,
                                  const ExtractOptions& options = {});

// Builds an ExtractedText block by block (used by the parsers; public for tests and for callers
// with their own structure). Text given to Add* is normalised already; whitespace runs inside
// paragraphs, list items, headings and table rows collapse to one space, code is kept verbatim
// (trailing blank lines dropped). Empty blocks are dropped.
class BlockWriter {
 public:
  explicit BlockWriter(DocumentType type) { result_.type = type; }
  void Add(BlockKind kind, std::string_view text, int level = 0, int page = 0);
  size_t text_size() const { return result_.text.size(); }
  ExtractedText Finish() && { return std::move(result_); }

 private:
  ExtractedText result_;
};

// Parsers, each over normalised UTF-8 (extract_markdown.cc, extract_html.cc, extract_pdf.cc).
ExtractedText ParsePlainText(std::string_view text);
ExtractedText ParseMarkdown(std::string_view text);
ExtractedText ParseHtml(std::string_view text);
// Strips Markdown's inline markup: links and images keep their text, emphasis markers (** and
// __) and code spans' backticks go, autolinks keep their address.
std::string StripMarkdownInline(std::string_view text);
Result<ExtractedText> ExtractPdf(std::string_view bytes, const ExtractOptions& options);

}  // namespace rampart::knowledge::hub
