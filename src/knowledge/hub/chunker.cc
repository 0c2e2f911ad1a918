#include "knowledge/hub/chunker.h"

#include <unicode/brkiter.h>
#include <unicode/utext.h>

#include <algorithm>
#include <memory>
#include <string_view>

#include "knowledge/hub/tokens.h"

namespace rampart::knowledge::hub {
namespace {

constexpr int kMinChunkTokens = 100;
constexpr int kMaxChunkTokens = 4096;

// A piece of text chunks are made of: a word, a sentence or a block.
struct Unit {
  size_t begin = 0;
  size_t end = 0;
  size_t tokens = 0;
  bool section_start = false;  // a chunk must start here
};

struct UTextCloser {
  void operator()(UText* text) const { utext_close(text); }
};
using UTextPtr = std::unique_ptr<UText, UTextCloser>;

// Boundaries of `text` (UTF-8) by `iterator`, as byte offsets, 0 and text.size() included.
Result<std::vector<size_t>> Boundaries(icu::BreakIterator& iterator, std::string_view text) {
  UErrorCode error = U_ZERO_ERROR;
  UTextPtr utext(utext_openUTF8(nullptr, text.data(), static_cast<int64_t>(text.size()), &error));
  if (U_FAILURE(error)) return Internal("ICU UText: {}", u_errorName(error));
  iterator.setText(utext.get(), error);
  if (U_FAILURE(error)) return Internal("ICU break iterator: {}", u_errorName(error));
  std::vector<size_t> boundaries;
  for (int32_t at = iterator.first(); at != icu::BreakIterator::DONE; at = iterator.next()) {
    boundaries.push_back(static_cast<size_t>(at));
  }
  if (boundaries.empty() || boundaries.front() != 0) boundaries.insert(boundaries.begin(), 0);
  if (boundaries.back() != text.size()) boundaries.push_back(text.size());
  return boundaries;
}

Result<std::unique_ptr<icu::BreakIterator>> MakeIterator(bool sentences) {
  UErrorCode error = U_ZERO_ERROR;
  std::unique_ptr<icu::BreakIterator> iterator(
      sentences ? icu::BreakIterator::createSentenceInstance(icu::Locale::getRoot(), error)
                : icu::BreakIterator::createWordInstance(icu::Locale::getRoot(), error));
  if (U_FAILURE(error) || iterator == nullptr) {
    return Internal("ICU break iterator: {}", u_errorName(error));
  }
  return iterator;
}

// Words of `text` with their token counts; a word over `max_tokens` is cut at code points.
Result<std::vector<Unit>> Words(std::string_view text, size_t max_tokens) {
  ASSIGN_OR_RETURN(std::unique_ptr<icu::BreakIterator> iterator, MakeIterator(false));
  ASSIGN_OR_RETURN(std::vector<size_t> boundaries, Boundaries(*iterator, text));
  std::vector<Unit> words;
  words.reserve(boundaries.size());
  for (size_t k = 0; k + 1 < boundaries.size(); ++k) {
    size_t begin = boundaries[k];
    size_t end = boundaries[k + 1];
    size_t tokens = CountTokens(text.substr(begin, end - begin));
    if (tokens <= max_tokens) {
      words.push_back({begin, end, tokens, false});
      continue;
    }
    // The longest prefixes that fit, one after the other. Tokens only grow as a prefix grows
    // and one code point is at most one token, so a binary search over code point boundaries
    // finds each cut; no piece is longer than 16 bytes a token (the search's upper bound).
    auto boundary_at_or_before = [&](size_t at) {
      while (at > begin && (static_cast<unsigned char>(text[at]) & 0xC0) == 0x80) --at;
      return at;
    };
    auto next_boundary = [&](size_t at) {
      ++at;
      while (at < end && (static_cast<unsigned char>(text[at]) & 0xC0) == 0x80) ++at;
      return at;
    };
    auto fits = [&](size_t from, size_t to) {
      return CountTokens(text.substr(from, to - from)) <= max_tokens;
    };
    while (begin < end) {
      size_t low = next_boundary(begin);  // one code point always fits
      size_t high = end;
      if (high - begin > 16 * max_tokens + 4) {
        high = boundary_at_or_before(begin + 16 * max_tokens + 4);
      }
      size_t cut = low;
      if (high > low && fits(begin, high)) {
        cut = high;
      } else {
        while (true) {  // fits(low), and high does not (or is low)
          size_t middle = boundary_at_or_before(low + (high - low) / 2);
          if (middle <= low) middle = next_boundary(low);
          if (middle >= high) break;
          if (fits(begin, middle)) {
            low = middle;
          } else {
            high = middle;
          }
        }
        cut = low;
      }
      words.push_back({begin, cut, CountTokens(text.substr(begin, cut - begin)), false});
      begin = cut;
    }
  }
  return words;
}

// Greedy packing: each chunk takes units while they fit, never past a section start; the next
// chunk starts early enough to repeat up to `overlap` tokens of the previous one.
std::vector<std::pair<size_t, size_t>> Pack(const std::vector<Unit>& units, size_t max_tokens,
                                            size_t overlap) {
  std::vector<std::pair<size_t, size_t>> ranges;
  size_t i = 0;
  while (i < units.size()) {
    size_t j = i;
    size_t tokens = units[i].tokens;
    while (j + 1 < units.size() && !units[j + 1].section_start &&
           tokens + units[j + 1].tokens <= max_tokens) {
      ++j;
      tokens += units[j].tokens;
    }
    ranges.emplace_back(i, j);
    size_t next = j + 1;
    if (next >= units.size() || units[next].section_start || overlap == 0) {
      i = next;
      continue;
    }
    // Step back over the previous chunk's tail while it fits in the overlap and leaves room for
    // the next unit, so every chunk has something new.
    size_t start = next;
    size_t shared = 0;
    while (start - 1 > i && shared + units[start - 1].tokens <= overlap &&
           shared + units[start - 1].tokens + units[next].tokens <= max_tokens) {
      --start;
      shared += units[start].tokens;
    }
    i = start;
  }
  return ranges;
}

bool IsSpaceByte(char c) { return c == ' ' || c == '\n' || c == '\t'; }

}  // namespace

Status ValidateChunkingOptions(const ChunkingOptions& options) {
  if (options.max_chunk_size_tokens < kMinChunkTokens ||
      options.max_chunk_size_tokens > kMaxChunkTokens) {
    return InvalidArgument("max_chunk_size_tokens must be between {} and {}, got {}",
                           kMinChunkTokens, kMaxChunkTokens, options.max_chunk_size_tokens);
  }
  if (options.chunk_overlap_tokens < 0) {
    return InvalidArgument("chunk_overlap_tokens must not be negative, got {}",
                           options.chunk_overlap_tokens);
  }
  if (options.chunk_overlap_tokens > options.max_chunk_size_tokens / 2) {
    return InvalidArgument(
        "chunk_overlap_tokens must not exceed half of max_chunk_size_tokens ({}), got {}",
        options.max_chunk_size_tokens / 2, options.chunk_overlap_tokens);
  }
  return Status::Ok();
}

Result<std::vector<Chunk>> ChunkText(const ExtractedText& extracted,
                                     const ChunkingOptions& options) {
  if (options.max_chunk_size_tokens < 1 || options.chunk_overlap_tokens < 0 ||
      options.chunk_overlap_tokens >= options.max_chunk_size_tokens) {
    return InvalidArgument(
        "chunk sizes: need max_chunk_size_tokens >= 1 and 0 <= "
        "chunk_overlap_tokens < max_chunk_size_tokens, got {} and {}",
        options.max_chunk_size_tokens, options.chunk_overlap_tokens);
  }
  const std::string& text = extracted.text;
  auto max_tokens = static_cast<size_t>(options.max_chunk_size_tokens);
  auto overlap = static_cast<size_t>(options.chunk_overlap_tokens);
  ASSIGN_OR_RETURN(std::vector<Unit> words, Words(text, max_tokens));

  std::vector<Unit> units;
  if (options.strategy == ChunkingStrategy::kStatic) {
    units = std::move(words);
  } else {
    // Prefix sums of word tokens: the tokens of any range of words in O(1).
    std::vector<size_t> prefix(words.size() + 1, 0);
    for (size_t k = 0; k < words.size(); ++k) prefix[k + 1] = prefix[k] + words[k].tokens;
    auto word_index = [&](size_t offset) {
      return static_cast<size_t>(
          std::lower_bound(words.begin(), words.end(), offset,
                           [](const Unit& word, size_t at) { return word.begin < at; }) -
          words.begin());
    };
    auto tokens_between = [&](size_t begin, size_t end) {
      return prefix[word_index(end)] - prefix[word_index(begin)];
    };
    ASSIGN_OR_RETURN(std::unique_ptr<icu::BreakIterator> sentences, MakeIterator(true));
    bool previous_heading = false;
    for (const Block& block : extracted.blocks) {
      bool heading = block.kind == BlockKind::kHeading;
      bool section_start = heading && !previous_heading;
      previous_heading = heading;
      size_t block_tokens = tokens_between(block.begin, block.end);
      if (block_tokens <= max_tokens) {
        units.push_back({block.begin, block.end, block_tokens, section_start});
        continue;
      }
      ASSIGN_OR_RETURN(std::vector<size_t> bounds,
                       Boundaries(*sentences, extracted.BlockText(block)));
      for (size_t k = 0; k + 1 < bounds.size(); ++k) {
        size_t begin = block.begin + bounds[k];
        size_t end = block.begin + bounds[k + 1];
        size_t sentence_tokens = tokens_between(begin, end);
        if (sentence_tokens <= max_tokens) {
          units.push_back({begin, end, sentence_tokens, section_start});
        } else {
          for (size_t w = word_index(begin); w < words.size() && words[w].begin < end; ++w) {
            units.push_back({words[w].begin, words[w].end, words[w].tokens, section_start});
            section_start = false;
          }
        }
        section_start = false;
      }
    }
  }

  // Heading paths as of each block.
  std::vector<std::string> paths;
  paths.reserve(extracted.blocks.size());
  std::vector<std::pair<int, std::string>> stack;
  for (const Block& block : extracted.blocks) {
    if (block.kind == BlockKind::kHeading) {
      while (!stack.empty() && stack.back().first >= block.level) stack.pop_back();
      stack.emplace_back(block.level, std::string(extracted.BlockText(block)));
    }
    std::string path;
    for (const auto& [level, title] : stack) {
      if (!path.empty()) path.append(" > ");
      path.append(title);
    }
    paths.push_back(std::move(path));
  }

  std::vector<Chunk> chunks;
  for (auto [first, last] : Pack(units, max_tokens, overlap)) {
    size_t begin = units[first].begin;
    size_t end = units[last].end;
    while (begin < end && IsSpaceByte(text[begin])) ++begin;
    while (end > begin && IsSpaceByte(text[end - 1])) --end;
    if (begin == end) continue;
    Chunk chunk;
    chunk.text = text.substr(begin, end - begin);
    chunk.begin = begin;
    chunk.end = end;
    for (size_t k = first; k <= last; ++k) chunk.token_count += units[k].tokens;
    auto block = std::upper_bound(extracted.blocks.begin(), extracted.blocks.end(), begin,
                                  [](size_t at, const Block& b) { return at < b.begin; });
    if (block != extracted.blocks.begin()) {
      --block;
      chunk.page = block->page;
      chunk.heading_path = paths[static_cast<size_t>(block - extracted.blocks.begin())];
    }
    chunks.push_back(std::move(chunk));
  }
  return chunks;
}

}  // namespace rampart::knowledge::hub
