#include "knowledge/hub/analyzer.h"

#include <libstemmer.h>
#include <unicode/brkiter.h>
#include <unicode/rbbi.h>
#include <unicode/unistr.h>
#include <unicode/utext.h>

#include <algorithm>
#include <array>

#include "knowledge/hub/text.h"

namespace rampart::knowledge::hub {
namespace {

// Lucene's English stop words (EnglishAnalyzer.ENGLISH_STOP_WORDS_SET), sorted.
constexpr std::array<std::string_view, 33> kEnglishStopWords = {
    "a",   "an",    "and",  "are",   "as",    "at",   "be",   "but", "by",  "for",  "if",
    "in",  "into",  "is",   "it",    "no",    "not",  "of",   "on",  "or",  "such", "that",
    "the", "their", "then", "there", "these", "they", "this", "to",  "was", "will", "with"};

static_assert(std::is_sorted(kEnglishStopWords.begin(), kEnglishStopWords.end()));

// Chinese function words that carry no meaning for retrieval, sorted by bytes.
constexpr std::array<std::string_view, 16> kChineseStopWords = {
    "一个", "也", "了", "和", "在", "就", "我们", "或",
    "把",   "是", "的", "而", "被", "这", "那",   "都"};

bool IsEnglishStopWord(std::string_view word) {
  return std::binary_search(kEnglishStopWords.begin(), kEnglishStopWords.end(), word);
}

bool IsChineseStopWord(std::string_view word) {
  return std::find(kChineseStopWords.begin(), kChineseStopWords.end(), word) !=
         kChineseStopWords.end();
}

std::string FoldCase(std::string_view word) {
  bool ascii = std::all_of(word.begin(), word.end(),
                           [](char c) { return static_cast<unsigned char>(c) < 0x80; });
  std::string out;
  if (ascii) {
    out.assign(word);
    for (char& c : out) {
      if (c >= 'A' && c <= 'Z') c = static_cast<char>(c + ('a' - 'A'));
    }
    return out;
  }
  icu::UnicodeString unicode = icu::UnicodeString::fromUTF8(
      icu::StringPiece(word.data(), static_cast<int32_t>(word.size())));
  unicode.foldCase();
  unicode.toUTF8String(out);
  return out;
}

struct UTextCloser {
  void operator()(UText* text) const { utext_close(text); }
};

}  // namespace

struct Analyzer::Workspace {
  std::unique_ptr<icu::BreakIterator> words;
  sb_stemmer* stemmer = nullptr;
  ~Workspace() {
    if (stemmer != nullptr) sb_stemmer_delete(stemmer);
  }
};

AnalyzerLanguage DetectLanguage(std::string_view text) {
  return ContainsCjk(text) ? AnalyzerLanguage::kChinese : AnalyzerLanguage::kEnglish;
}

Result<std::unique_ptr<Analyzer>> Analyzer::Create(const AnalyzerOptions& options) {
  std::unique_ptr<Analyzer> analyzer(new Analyzer(options));
  // Load once now, so a missing ICU data file or stemmer fails here rather than per call.
  ASSIGN_OR_RETURN(std::unique_ptr<Workspace> workspace, analyzer->Borrow());
  analyzer->Return(std::move(workspace));
  return analyzer;
}

Analyzer::Analyzer(const AnalyzerOptions& options) : options_(options) {}
Analyzer::~Analyzer() = default;

Result<std::unique_ptr<Analyzer::Workspace>> Analyzer::Borrow() const {
  {
    std::lock_guard lock(mutex_);
    if (!pool_.empty()) {
      std::unique_ptr<Workspace> workspace = std::move(pool_.back());
      pool_.pop_back();
      return workspace;
    }
  }
  auto workspace = std::make_unique<Workspace>();
  UErrorCode error = U_ZERO_ERROR;
  workspace->words.reset(icu::BreakIterator::createWordInstance(icu::Locale::getRoot(), error));
  if (U_FAILURE(error) || workspace->words == nullptr) {
    return Internal("ICU word break iterator: {}", u_errorName(error));
  }
  workspace->stemmer = sb_stemmer_new("english", "UTF_8");
  if (workspace->stemmer == nullptr) return Internal("libstemmer has no English stemmer");
  return workspace;
}

void Analyzer::Return(std::unique_ptr<Workspace> workspace) const {
  std::lock_guard lock(mutex_);
  if (pool_.size() < 64) pool_.push_back(std::move(workspace));
}

Result<std::vector<std::string>> Analyzer::Analyze(std::string_view text) const {
  std::vector<std::string> terms;
  if (text.empty()) return terms;
  AnalyzerLanguage language =
      options_.language == AnalyzerLanguage::kAuto ? DetectLanguage(text) : options_.language;
  bool chinese = language == AnalyzerLanguage::kChinese;
  bool want_words = options_.chinese_terms != ChineseTerms::kBigrams;
  bool want_bigrams = options_.chinese_terms != ChineseTerms::kWords;

  ASSIGN_OR_RETURN(std::unique_ptr<Workspace> workspace, Borrow());
  UErrorCode error = U_ZERO_ERROR;
  std::unique_ptr<UText, UTextCloser> utext(
      utext_openUTF8(nullptr, text.data(), static_cast<int64_t>(text.size()), &error));
  if (U_FAILURE(error)) return Internal("ICU UText: {}", u_errorName(error));
  icu::BreakIterator& words = *workspace->words;
  words.setText(utext.get(), error);
  if (U_FAILURE(error)) return Internal("ICU word break iterator: {}", u_errorName(error));

  // The open CJK run: its byte range and the starts of its two-character words.
  size_t run_begin = 0;
  size_t run_end = 0;
  std::vector<size_t> two_character_words;
  auto close_run = [&] {
    if (run_begin == run_end) return;
    std::string_view run = text.substr(run_begin, run_end - run_begin);
    std::vector<size_t> starts;  // code point starts within the run
    for (size_t i = 0; i < run.size();) {
      size_t length = 0;
      DecodeUtf8(run, i, &length);
      starts.push_back(i);
      i += length;
    }
    starts.push_back(run.size());
    if (starts.size() == 2) {
      if (!want_words) terms.emplace_back(run);  // a lone character (a word term already)
    } else {
      for (size_t k = 0; k + 2 < starts.size(); ++k) {
        size_t at = run_begin + starts[k];
        if (want_words && std::find(two_character_words.begin(), two_character_words.end(), at) !=
                              two_character_words.end()) {
          continue;
        }
        terms.emplace_back(run.substr(starts[k], starts[k + 2] - starts[k]));
      }
    }
    run_begin = run_end = 0;
    two_character_words.clear();
  };

  int32_t begin = words.first();
  for (int32_t end = words.next(); end != icu::BreakIterator::DONE;
       begin = end, end = words.next()) {
    int32_t status = words.getRuleStatus();
    if (status < UBRK_WORD_NONE_LIMIT) continue;  // spaces and punctuation
    auto segment_begin = static_cast<size_t>(begin);
    auto segment_end = static_cast<size_t>(end);
    std::string_view segment = text.substr(segment_begin, segment_end - segment_begin);
    bool cjk = chinese && (status >= UBRK_WORD_KANA || ContainsCjk(segment));
    if (cjk) {
      if (want_bigrams) {
        if (run_end != segment_begin) close_run();
        if (run_begin == run_end) run_begin = segment_begin;
        run_end = segment_end;
      }
      if (want_words && !(options_.remove_stop_words && IsChineseStopWord(segment))) {
        terms.emplace_back(segment);
        size_t length = 0;
        DecodeUtf8(segment, 0, &length);
        if (length < segment.size()) {
          size_t second = 0;
          DecodeUtf8(segment, length, &second);
          if (length + second == segment.size()) two_character_words.push_back(segment_begin);
        }
      }
      continue;
    }
    close_run();
    std::string folded = FoldCase(segment);
    if (options_.remove_stop_words && IsEnglishStopWord(folded)) continue;
    bool number = status < UBRK_WORD_NUMBER_LIMIT;
    if (options_.stem && !number) {
      const sb_symbol* stemmed =
          sb_stemmer_stem(workspace->stemmer, reinterpret_cast<const sb_symbol*>(folded.data()),
                          static_cast<int>(folded.size()));
      if (stemmed != nullptr) {
        folded.assign(reinterpret_cast<const char*>(stemmed),
                      static_cast<size_t>(sb_stemmer_length(workspace->stemmer)));
      }
    }
    terms.push_back(std::move(folded));
  }
  close_run();
  Return(std::move(workspace));
  return terms;
}

}  // namespace rampart::knowledge::hub
