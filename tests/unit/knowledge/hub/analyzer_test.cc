// The English analyser (case folding, stop words, Snowball stems) and the Chinese one (ICU
// dictionary words, character bigrams, both), mixed text and language detection.
#include "knowledge/hub/analyzer.h"

#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

namespace rampart::knowledge::hub {
namespace {

using Terms = std::vector<std::string>;

Terms Analyze(std::string_view text, AnalyzerOptions options = {}) {
  Result<std::unique_ptr<Analyzer>> analyzer = Analyzer::Create(options);
  EXPECT_TRUE(analyzer.ok()) << analyzer.status().ToString();
  Result<Terms> terms = (*analyzer)->Analyze(text);
  EXPECT_TRUE(terms.ok()) << terms.status().ToString();
  return terms.ok() ? *terms : Terms{};
}

TEST(AnalyzerTest, English) {
  EXPECT_EQ(Analyze("The Servers are RUNNING quickly, and connections were cached in 2024!"),
            (Terms{"server", "run", "quick", "connect", "were", "cach", "2024"}));
  // Case folding beyond ASCII (ß -> ss) and NFC input.
  EXPECT_EQ(Analyze("Straße CAFÉ"), (Terms{"strass", "café"}));
  AnalyzerOptions plain;
  plain.stem = false;
  plain.remove_stop_words = false;
  EXPECT_EQ(Analyze("The Servers, running.", plain), (Terms{"the", "servers", "running"}));
  EXPECT_TRUE(Analyze("").empty());
  EXPECT_TRUE(Analyze(" ,.;  !").empty());
}

TEST(AnalyzerTest, ChineseWordsBigramsAndBoth) {
  AnalyzerOptions words;
  words.chinese_terms = ChineseTerms::kWords;
  // ICU's dictionary words, less the stop words 我们 and 的.
  EXPECT_EQ(Analyze("我们的知识库支持中文检索", words),
            (Terms{"知识", "库", "支持", "中文", "检索"}));
  AnalyzerOptions bigrams;
  bigrams.chinese_terms = ChineseTerms::kBigrams;
  EXPECT_EQ(Analyze("知识库", bigrams), (Terms{"知识", "识库"}));
  EXPECT_EQ(Analyze("库", bigrams), (Terms{"库"}));
  // Both (the default): the words, then the run's bigrams less those equal to a two-character
  // word at the same place (知识, 支持, 中文, 检索).
  EXPECT_EQ(Analyze("我们的知识库支持中文检索"),
            (Terms{"知识", "库", "支持", "中文", "检索", "我们", "们的", "的知", "识库", "库支",
                   "持中", "文检"}));
}

TEST(AnalyzerTest, MixedTextSendsLatinThroughEnglish) {
  EXPECT_EQ(Analyze("用 Rampart 服务器 serving Models"),
            (Terms{"用", "rampart", "服务", "器", "务器", "serv", "model"}));
  EXPECT_EQ(DetectLanguage("plain English"), AnalyzerLanguage::kEnglish);
  EXPECT_EQ(DetectLanguage("English 和中文"), AnalyzerLanguage::kChinese);
  AnalyzerOptions english;
  english.language = AnalyzerLanguage::kEnglish;
  // Fixed to English: CJK stays ICU's words, without bigrams.
  EXPECT_EQ(Analyze("知识库 Servers", english), (Terms{"知识", "库", "server"}));
}

TEST(AnalyzerTest, ConcurrentCallsAgree) {
  Result<std::unique_ptr<Analyzer>> analyzer = Analyzer::Create();
  ASSERT_TRUE(analyzer.ok());
  Terms expected = *(*analyzer)->Analyze("running servers 知识库检索");
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 200; ++i) {
        Result<Terms> terms = (*analyzer)->Analyze("running servers 知识库检索");
        ASSERT_TRUE(terms.ok());
        EXPECT_EQ(*terms, expected);
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
}

}  // namespace
}  // namespace rampart::knowledge::hub
