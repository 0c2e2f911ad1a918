#pragma once

// Chunking: an extracted text (extract.h) -> chunks for embedding and BM25, each with its byte
// range in the extracted text, its page and its heading path for citations.
//
// Two strategies, after OpenAI's chunking_strategy:
//   - static: a window of at most max_chunk_size_tokens tokens sliding over the whole text,
//     consecutive chunks sharing about chunk_overlap_tokens tokens. OpenAI's bounds apply
//     (ValidateChunkingOptions): 100 <= max_chunk_size_tokens <= 4096 (default 800),
//     0 <= chunk_overlap_tokens <= max_chunk_size_tokens / 2 (default 400).
//   - auto: structure-aware, at most 800 tokens. A heading starts a new chunk (consecutive
//     headings stay together), so a chunk never crosses a heading boundary; inside a section
//     whole blocks (paragraphs, list items, table rows, code) are packed; a block over the limit
//     is split at sentences, a sentence over the limit at words. Consecutive chunks of a section
//     share up to 200 tokens of whole sentences or blocks.
// Boundaries come from ICU's BreakIterator (word and sentence; dictionary-based for Chinese and
// Japanese), so a cut never falls inside a word or a CJK character; the only exception is a
// single "word" longer than the whole chunk (a base64 blob), cut at code point boundaries.
// Token counts are tokens.h's approximation of cl100k_base.
//
// Thread safety: free functions over values; any number of calls may run at once.

#include <cstddef>
#include <string>
#include <vector>

#include "core/status.h"
#include "knowledge/hub/extract.h"

namespace rampart::knowledge::hub {

enum class ChunkingStrategy { kAuto, kStatic };

struct ChunkingOptions {
  ChunkingStrategy strategy = ChunkingStrategy::kAuto;
  int max_chunk_size_tokens = 800;
  int chunk_overlap_tokens = 400;

  // OpenAI's "auto": 800 tokens, structure-aware, up to 200 tokens of overlap.
  static ChunkingOptions Auto() { return {ChunkingStrategy::kAuto, 800, 200}; }
  static ChunkingOptions Static(int max_chunk_size_tokens = 800, int chunk_overlap_tokens = 400) {
    return {ChunkingStrategy::kStatic, max_chunk_size_tokens, chunk_overlap_tokens};
  }
};

// OpenAI's bounds; InvalidArgument naming the field ("max_chunk_size_tokens must be between 100
// and 4096, got 50"; "chunk_overlap_tokens must not exceed half of max_chunk_size_tokens (400),
// got 500").
Status ValidateChunkingOptions(const ChunkingOptions& options);

struct Chunk {
  std::string text;  // text.substr(begin, end - begin)
  size_t begin = 0;  // byte range in ExtractedText::text
  size_t end = 0;
  int page = 0;              // the PDF page the chunk starts on; 0 for other types
  std::string heading_path;  // "Install > Debian"; empty before the first heading
  size_t token_count = 0;    // tokens.h's estimate
};

// Chunks `extracted`. Only needs max_chunk_size_tokens >= 1 and
// 0 <= chunk_overlap_tokens < max_chunk_size_tokens (InvalidArgument otherwise), so tests can use
// small sizes; the API validates with ValidateChunkingOptions first.
Result<std::vector<Chunk>> ChunkText(const ExtractedText& extracted,
                                     const ChunkingOptions& options);

}  // namespace rampart::knowledge::hub
