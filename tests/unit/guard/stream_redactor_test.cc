#include "guard/stream_redactor.h"

#include <gtest/gtest.h>

#include "testing/fake_detector.h"

namespace rampart::guard {
namespace {

class StreamRedactorTest : public ::testing::Test {
 protected:
  StreamRedactorTest() : keys_(GuardKeys::FromBytes(std::string(32, 's')).value().ForTenant("t")) {
    operators_.by_type.emplace(std::string(kSecret), Operator{});
  }

  std::string Whole(std::string_view text) {
    return Redact(text, detector_.Detect(text).value(), operators_, keys_).text;
  }

  // Pushes `pieces` one after another; returns what came out, and each Push's output in `outs`.
  std::string Stream(const std::vector<std::string_view>& pieces,
                     std::vector<std::string>* outs = nullptr) {
    StreamRedactor redactor(detector_, operators_, keys_);
    std::string out;
    for (std::string_view piece : pieces) {
      Result<std::string> released = redactor.Push(piece);
      EXPECT_TRUE(released.ok()) << released.status().ToString();
      if (outs) outs->push_back(*released);
      out += *released;
    }
    out += redactor.Finish().value();
    return out;
  }

  testing::FakeDetector detector_;
  OperatorChoice operators_;
  TenantKeys keys_;
};

const std::vector<std::string> kTexts = {
    "我的手机号是13800138000，邮箱是 zhang.san@example.com，谢谢。",
    "call 13912345678 or mail a.b+c@mail.example.org now; key sk-ABCDEFGHIJKLMNOPqrstu end",
    "身份证11010519491231002X和手机13800138000连在一起13800138000",
    "no entities at all, only words and 数字 12345 and 文字。",
    "edge@a.b is not an email but x@y.co is",
    "１３８００１３８０００ full width digits, then 15912345678",
};

TEST_F(StreamRedactorTest, EverySplitInTwoEqualsTheWholeRedaction) {
  for (const std::string& text : kTexts) {
    const std::string expected = Whole(text);
    for (size_t split = 0; split <= text.size(); ++split) {
      const std::string_view view = text;
      EXPECT_EQ(Stream({view.substr(0, split), view.substr(split)}), expected)
          << "split at " << split << " of: " << text;
    }
  }
}

TEST_F(StreamRedactorTest, ByteByByteEqualsTheWholeRedaction) {
  for (const std::string& text : kTexts) {
    std::vector<std::string_view> pieces;
    for (size_t i = 0; i < text.size(); ++i) pieces.push_back(std::string_view(text).substr(i, 1));
    EXPECT_EQ(Stream(pieces), Whole(text)) << text;
  }
}

TEST_F(StreamRedactorTest, ReleasesAtOnceWhatCannotBeAnEntity) {
  std::vector<std::string> outs;
  const std::string out = Stream({"你好，世界。", "hello world ", "手机", "1380013", "8000。",
                                  "then a long sentence without any digit in it. ", "done"},
                                 &outs);
  ASSERT_EQ(outs.size(), 7u);
  EXPECT_EQ(outs[0], "你好，世界。");  // CJK ends nothing
  EXPECT_EQ(outs[1], "hello world ");  // a space after a word holds nothing
  EXPECT_EQ(outs[2], "手机");
  EXPECT_EQ(outs[3], "");  // digits could be a mobile's start
  // Digits near the end: the last kRightContextBytes wait for a context word that may follow.
  EXPECT_EQ(outs[4], "");
  EXPECT_EQ(outs[5].rfind("138****8000。then", 0), 0u) << outs[5];
  // The digits are out of reach now: the rest goes, but for a word at the end, which could go on.
  EXPECT_EQ(outs[6], "without any digit in it. ");
  EXPECT_EQ(out,
            "你好，世界。hello world 手机138****8000。then a long sentence without any "
            "digit in it. done");
}

TEST_F(StreamRedactorTest, HoldsDigitGroupsAndSecretsAcrossSpaces) {
  EXPECT_EQ(HeldTailStart("card 6222 0212 ", 0, 15), 5u);
  EXPECT_EQ(HeldTailStart("Authorization: Bearer ", 0, 22), 0u);
  EXPECT_EQ(HeldTailStart("password: ", 0, 10), 0u);
  EXPECT_EQ(HeldTailStart("hello world ", 0, 12), 12u);
  EXPECT_EQ(HeldTailStart("line\n", 0, 5), 5u);
  const std::string pem = "x\n-----BEGIN PRIVATE KEY-----\nMIIE\nabc def\n";
  EXPECT_EQ(HeldTailStart(pem, 0, pem.size()), 2u);
  const std::string closed = pem + "-----END PRIVATE KEY-----\nok. ";
  EXPECT_EQ(HeldTailStart(closed, 0, closed.size()), closed.size());
}

TEST_F(StreamRedactorTest, ReportsEachEntityOnceWithOffsetsIntoTheWholeText) {
  StreamRedactor redactor(detector_, operators_, keys_);
  const std::string text = kTexts[0];
  std::vector<Redaction> found;
  for (size_t i = 0; i < text.size(); i += 5) {
    ASSERT_TRUE(redactor.Push(std::string_view(text).substr(i, 5)).ok());
    for (Redaction& r : redactor.TakeReleased()) found.push_back(std::move(r));
  }
  ASSERT_TRUE(redactor.Finish().ok());
  for (Redaction& r : redactor.TakeReleased()) found.push_back(std::move(r));
  ASSERT_EQ(found.size(), 2u);
  EXPECT_EQ(text.substr(found[0].start, found[0].end - found[0].start), "13800138000");
  EXPECT_EQ(text.substr(found[1].start, found[1].end - found[1].start), "zhang.san@example.com");
  EXPECT_DOUBLE_EQ(found[0].score, 0.9);  // "手机" was in an earlier piece: context kept
}

TEST_F(StreamRedactorTest, TheTailNeverExceedsTheLongestEntity) {
  StreamRedactor redactor(detector_, operators_, keys_);
  const std::string run(10000, 'a');
  size_t out = 0;
  for (size_t i = 0; i < run.size(); i += 100) {
    Result<std::string> released = redactor.Push(std::string_view(run).substr(i, 100));
    ASSERT_TRUE(released.ok());
    out += released->size();
    EXPECT_LE(redactor.held_bytes(), detector_.max_entity_bytes());
  }
  out += redactor.Finish().value().size();
  EXPECT_EQ(out, run.size());
}

TEST_F(StreamRedactorTest, AUtf8SequenceCutByAPieceWaitsForItsEnd) {
  const std::string text = "号";  // three bytes
  std::vector<std::string> outs;
  EXPECT_EQ(Stream({text.substr(0, 1), text.substr(1, 1), text.substr(2)}, &outs), text);
  EXPECT_EQ(outs[0], "");
  EXPECT_EQ(outs[2], text);
}

}  // namespace
}  // namespace rampart::guard
