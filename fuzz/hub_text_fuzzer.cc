// libFuzzer target: the knowledge hub's text side (knowledge/hub/) on untrusted files: extraction
// of every type, both chunking strategies and the analyser.
//
// Input layout: byte 0 picks the type (bits 0-1: plain text, Markdown, HTML, PDF), the strategy
// (bit 2: auto or static) and the chunk size (bits 3-7: 1 + value * 8 tokens, overlap a quarter
// of it); the rest is the file.
//
// Checks: extraction either fails with a status or gives valid UTF-8 whose blocks are in order,
// non-empty and inside the text; every chunk is its byte range of the text, valid UTF-8 and
// within the token limit; analysing any chunk succeeds.

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string_view>

#include "knowledge/hub/analyzer.h"
#include "knowledge/hub/chunker.h"
#include "knowledge/hub/extract.h"
#include "knowledge/hub/text.h"

namespace hub = rampart::knowledge::hub;

namespace {

void Check(bool condition, const char* what) {
  if (condition) return;
  std::fprintf(stderr, "fuzz check failed: %s\n", what);
  std::abort();
}

const hub::Analyzer& TheAnalyzer() {
  static const std::unique_ptr<hub::Analyzer> analyzer = [] {
    auto created = hub::Analyzer::Create();
    Check(created.ok(), "the analyser does not build");
    return std::move(created).value();
  }();
  return *analyzer;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const uint8_t control = data[0];
  const std::string_view bytes(reinterpret_cast<const char*>(data) + 1, size - 1);
  static constexpr hub::DocumentType kTypes[] = {hub::DocumentType::kPlainText,
                                                 hub::DocumentType::kMarkdown,
                                                 hub::DocumentType::kHtml, hub::DocumentType::kPdf};
  hub::ExtractOptions limits;
  limits.max_pdf_pages = 50;
  auto extracted = hub::Extract(bytes, kTypes[control & 3], limits);
  if (!extracted.ok()) return 0;
  Check(hub::ValidateUtf8(extracted->text).ok(), "extracted text is not UTF-8");
  size_t previous_end = 0;
  for (const hub::Block& block : extracted->blocks) {
    Check(block.begin < block.end && block.begin >= previous_end &&
              block.end <= extracted->text.size(),
          "blocks out of order or outside the text");
    previous_end = block.end;
  }

  hub::ChunkingOptions options =
      (control & 4) != 0 ? hub::ChunkingOptions::Static() : hub::ChunkingOptions::Auto();
  options.max_chunk_size_tokens = 1 + (control >> 3) * 8;
  options.chunk_overlap_tokens = options.max_chunk_size_tokens / 4;
  auto chunks = hub::ChunkText(*extracted, options);
  Check(chunks.ok(), "chunking failed on extracted text");
  for (const hub::Chunk& chunk : *chunks) {
    Check(chunk.begin < chunk.end && chunk.end <= extracted->text.size(), "chunk range");
    Check(std::string_view(extracted->text).substr(chunk.begin, chunk.end - chunk.begin) ==
              chunk.text,
          "chunk text is not its range");
    Check(hub::ValidateUtf8(chunk.text).ok(), "chunk cut inside a character");
    Check(chunk.token_count <= static_cast<size_t>(options.max_chunk_size_tokens),
          "chunk over the token limit");
    Check(TheAnalyzer().Analyze(chunk.text).ok(), "analysis failed");
  }
  return 0;
}
