// The stream redactor against the real detector: texts of the labelled corpus (every entity
// type, look-alikes, near-misses) split at every byte, and in small pieces, redact exactly as
// the whole text does.

#include <gtest/gtest.h>

#include "guard/corpus.h"
#include "guard/stream_redactor.h"

namespace rampart::guard {
namespace {

class StreamRedactorRealTest : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    DetectorOptions options;
    options.internal_domains = {"corp.example.com"};
    options.internal_path_roots = {"/srv/secret"};
    options.force_re2 = GetParam();
    Result<std::unique_ptr<Detector>> detector = Detector::Create(options);
    ASSERT_TRUE(detector.ok()) << detector.status().ToString();
    detector_ = std::move(detector).value();
  }

  std::string Whole(std::string_view text) {
    return Redact(text, detector_->Detect(text).value(), operators_, keys_).text;
  }

  std::string Stream(std::string_view text, const std::vector<size_t>& cuts) {
    StreamRedactor redactor(*detector_, operators_, keys_);
    std::string out;
    size_t from = 0;
    for (size_t cut : cuts) {
      out += redactor.Push(text.substr(from, cut - from)).value();
      from = cut;
    }
    out += redactor.Push(text.substr(from)).value();
    out += redactor.Finish().value();
    return out;
  }

  std::unique_ptr<Detector> detector_;
  OperatorChoice operators_;
  TenantKeys keys_ = GuardKeys::FromBytes(std::string(32, 'r')).value().ForTenant("t");
};

TEST_P(StreamRedactorRealTest, EverySplitOfTheCorpusEqualsTheWholeRedaction) {
  const std::vector<testing::Sample> corpus = testing::MakeCorpus(7, 200);
  size_t mismatches = 0;
  for (const testing::Sample& sample : corpus) {
    const std::string expected = Whole(sample.text);
    for (size_t split = 0; split <= sample.text.size(); ++split) {
      const std::string streamed = Stream(sample.text, {split});
      if (streamed != expected && ++mismatches <= 5) {
        ADD_FAILURE() << "split at " << split << " of: " << sample.text
                      << "\n  whole:    " << expected << "\n  streamed: " << streamed;
      }
    }
    std::vector<size_t> small;
    for (size_t cut = 3; cut < sample.text.size(); cut += 3) small.push_back(cut);
    EXPECT_EQ(Stream(sample.text, small), expected) << sample.text;
  }
  EXPECT_EQ(mismatches, 0u);
}

TEST_P(StreamRedactorRealTest, HoldsLittleOfOrdinaryText) {
  StreamRedactor redactor(*detector_, operators_, keys_);
  for (std::string_view piece : {"你好，请问", "今天的天气", "怎么样？ ", "It is sunny today. "}) {
    EXPECT_EQ(redactor.Push(piece).value(), piece);
    EXPECT_EQ(redactor.held_bytes(), 0u);
  }
}

TEST_P(StreamRedactorRealTest, WaitsForAContextWordThatMayFollow) {
  // A passport number is reported only with a context word near it, which may come after it:
  // found by the fuzzer (pii_detect_fuzzer), the stream released the number before its word came.
  for (std::string_view text : {"ref G12345622 is the passport on file, thanks.",
                                "号码 E24690678 护照", "SSN 078051120 was given",
                                // A secret's value may hold '|': cut there, it scored otherwise.
                                "api_key=Y-bbbbb-kI|njnnnnnnnnnnnnn|||||si:n "}) {
    const std::string expected = Whole(text);
    for (size_t split = 0; split <= text.size(); ++split) {
      EXPECT_EQ(Stream(text, {split}), expected) << "split at " << split << " of: " << text;
    }
  }
}

TEST_P(StreamRedactorRealTest, APemBlockAfterAFullWidthHyphen) {
  // Found by pii_detect_fuzzer: a PEM header whose run of dashes begins with a full-width
  // hyphen (U+FF0D), its body holding a key assignment, cut into pieces of 43 bytes.
  const std::string text =
      "*--\xEF\xBC\x8D---BEGIN PRIVATE KEY-----\nMIIB=V021pi_ke\x1CseeaQIBADANqhw0BAQEFAASC$"
      "TAQEFAASC$@::8wgg\n-----END PRIVY-----";
  const std::string expected = Whole(text);
  std::vector<size_t> cuts;
  for (size_t cut = 43; cut < text.size(); cut += 43) cuts.push_back(cut);
  EXPECT_EQ(Stream(text, cuts), expected);
  for (size_t split = 0; split <= text.size(); ++split) {
    EXPECT_EQ(Stream(text, {split}), expected) << "split at " << split;
  }
}

INSTANTIATE_TEST_SUITE_P(Engines, StreamRedactorRealTest, ::testing::Values(false, true),
                         [](const auto& engine) { return engine.param ? "re2" : "hyperscan"; });

}  // namespace
}  // namespace rampart::guard
