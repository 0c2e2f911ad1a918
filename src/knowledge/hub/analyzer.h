#pragma once

// Analysers: text -> the terms BM25 indexes and searches (bm25.h).
//
//   - English: ICU word boundaries, Unicode case folding, Lucene's English stop words (a, an,
//     and, are, as, at, be, but, by, for, if, in, into, is, it, no, not, of, on, or, such, that,
//     the, their, then, there, these, they, this, to, was, will, with), then the Snowball English
//     (Porter 2) stemmer from libstemmer. Numbers are kept as they are.
//   - Chinese (and Japanese kana, Korean Hangul): ICU's dictionary-based word segmentation, and
//     character bigrams over each run of CJK characters (a lone character is its own term); the
//     words, the bigrams, or both (the default: a bigram equal to a two-character word at the
//     same place is not repeated). A few function words (的, 了, 是, ...) are stop words for the
//     word terms. Latin runs inside Chinese text go through the English path.
// The language is chosen per text (kAuto: the Chinese analyser when the text holds a CJK
// character, else English) or fixed; with kEnglish, CJK segments are kept as ICU's words.
//
// Thread safety: Analyze may be called from any number of threads at once; each call borrows an
// ICU break iterator and a Snowball stemmer (neither is thread-safe) from a pool.

#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace rampart::knowledge::hub {

enum class AnalyzerLanguage { kAuto, kEnglish, kChinese };
enum class ChineseTerms { kWords, kBigrams, kWordsAndBigrams };

struct AnalyzerOptions {
  AnalyzerLanguage language = AnalyzerLanguage::kAuto;
  ChineseTerms chinese_terms = ChineseTerms::kWordsAndBigrams;
  bool stem = true;
  bool remove_stop_words = true;
};

// kChinese when `text` holds a CJK character, else kEnglish.
AnalyzerLanguage DetectLanguage(std::string_view text);

class Analyzer {
 public:
  // Internal when ICU's word break data or the Snowball English stemmer cannot be loaded.
  static Result<std::unique_ptr<Analyzer>> Create(const AnalyzerOptions& options = {});
  ~Analyzer();
  Analyzer(const Analyzer&) = delete;
  Analyzer& operator=(const Analyzer&) = delete;

  // The terms of `text` (valid UTF-8), in text order (a CJK run's bigrams after its words).
  // Internal on an ICU failure.
  Result<std::vector<std::string>> Analyze(std::string_view text) const;

  const AnalyzerOptions& options() const { return options_; }

 private:
  struct Workspace;
  explicit Analyzer(const AnalyzerOptions& options);
  Result<std::unique_ptr<Workspace>> Borrow() const;
  void Return(std::unique_ptr<Workspace> workspace) const;

  AnalyzerOptions options_;
  mutable std::mutex mutex_;
  mutable std::vector<std::unique_ptr<Workspace>> pool_;  // guarded by mutex_
};

}  // namespace rampart::knowledge::hub
