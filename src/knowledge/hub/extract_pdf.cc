// PDF -> blocks through poppler-cpp, page by page (the one file that includes poppler). Each
// page's text is split into paragraphs at blank lines; lines inside a paragraph are joined.
// poppler's own error output is silenced; what it cannot open is "not a readable PDF".
#include <poppler-document.h>
#include <poppler-global.h>
#include <poppler-page.h>

#include <memory>
#include <mutex>
#include <string>

#include "knowledge/hub/extract.h"
#include "knowledge/hub/text.h"

namespace rampart::knowledge::hub {
namespace {

void IgnorePopplerMessage(const std::string& /*message*/, void* /*closure*/) {}

}  // namespace

Result<ExtractedText> ExtractPdf(std::string_view bytes, const ExtractOptions& options) {
  static std::once_flag silence;
  std::call_once(silence, [] { poppler::set_debug_error_function(IgnorePopplerMessage, nullptr); });
  if (!bytes.starts_with("%PDF-")) {
    return InvalidArgument("not a readable PDF: the file does not start with %PDF-");
  }
  if (bytes.size() > static_cast<size_t>(INT32_MAX)) {
    return PayloadTooLarge("the PDF is {} bytes, over poppler's limit", bytes.size());
  }
  std::unique_ptr<poppler::document> document(
      poppler::document::load_from_raw_data(bytes.data(), static_cast<int>(bytes.size())));
  if (document == nullptr) {
    return InvalidArgument("not a readable PDF: poppler could not parse it");
  }
  if (document->is_locked()) {
    return InvalidArgument("not a readable PDF: it is encrypted with a password");
  }
  int pages = document->pages();
  if (pages <= 0) return InvalidArgument("not a readable PDF: it has no pages");
  if (pages > options.max_pdf_pages) {
    return PayloadTooLarge("the PDF has {} pages, over the limit of {}", pages,
                           options.max_pdf_pages);
  }
  BlockWriter writer(DocumentType::kPdf);
  for (int index = 0; index < pages; ++index) {
    std::unique_ptr<poppler::page> page(document->create_page(index));
    if (page == nullptr) continue;
    poppler::byte_array utf8 = page->text().to_utf8();
    std::string_view raw(utf8.data(), utf8.size());
    if (!ValidateUtf8(raw).ok()) {
      return InvalidArgument("not a readable PDF: page {} holds text that is not UTF-8", index + 1);
    }
    ASSIGN_OR_RETURN(std::string text, NormalizeText(raw));
    size_t start = 0;
    while (start < text.size()) {
      size_t blank = text.find("\n\n", start);
      size_t end = blank == std::string::npos ? text.size() : blank;
      writer.Add(BlockKind::kParagraph, std::string_view(text).substr(start, end - start), 0,
                 index + 1);
      start = end + 2;
    }
    if (writer.text_size() > options.max_text_bytes) {
      return PayloadTooLarge("the extracted text is over the limit of {} bytes at page {}",
                             options.max_text_bytes, index + 1);
    }
  }
  ExtractedText result = std::move(writer).Finish();
  result.page_count = pages;
  return result;
}

}  // namespace rampart::knowledge::hub
