// Bad input: invalid UTF-8, NUL bytes, oversized text, and pathological texts that must finish
// (time linear in the text). Throughput is printed, never asserted (figures: docs/benchmarks.md).
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <string>

#include "guard/detector.h"

namespace rampart::guard {
namespace {

std::string Repeat(std::string_view unit, size_t bytes) {
  std::string out;
  out.reserve(bytes + unit.size());
  while (out.size() < bytes) out.append(unit);
  return out;
}

class BadInputTest : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    DetectorOptions options;
    options.internal_domains = {"corp.example.com"};
    options.internal_path_roots = {"/srv"};
    options.force_re2 = GetParam();
    auto detector = Detector::Create(options);
    ASSERT_TRUE(detector.ok()) << detector.status().ToString();
    detector_ = std::move(detector).value();
  }
  // Detects, prints MB/s, returns the number of entities.
  size_t Run(std::string_view name, const std::string& text) {
    auto begin = std::chrono::steady_clock::now();
    auto entities = detector_->Detect(text);
    double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
    EXPECT_TRUE(entities.ok()) << name << ": " << entities.status().ToString();
    std::printf("[ guard ] %-10s %-28s %6.1f MB in %7.3f s: %8.1f MB/s, %zu entities\n",
                std::string(detector_->engine()).c_str(), std::string(name).c_str(),
                text.size() / 1e6, seconds, text.size() / 1e6 / seconds,
                entities.ok() ? entities->size() : 0);
    return entities.ok() ? entities->size() : 0;
  }
  std::unique_ptr<Detector> detector_;
};

TEST_P(BadInputTest, InvalidUtf8IsInvalidArgument) {
  for (std::string text : {std::string("abc\xff"), std::string("\xe4\xb8"), std::string("\xc0\xaf"),
                           std::string("\xed\xa0\x80")}) {
    auto entities = detector_->Detect(text);
    ASSERT_FALSE(entities.ok());
    EXPECT_EQ(entities.status().code(), StatusCode::kInvalidArgument);
  }
}

TEST_P(BadInputTest, NulBytesAreText) {
  std::string text("a\0b 13800138000\0", 17);
  auto entities = detector_->Detect(text);
  ASSERT_TRUE(entities.ok());
  ASSERT_EQ(entities->size(), 1u);
  EXPECT_EQ((*entities)[0].start, 4u);
}

TEST_P(BadInputTest, OversizedTextIsInvalidArgument) {
  DetectorOptions options;
  options.max_text_bytes = 10;
  options.force_re2 = GetParam();
  auto detector = Detector::Create(options);
  ASSERT_TRUE(detector.ok());
  EXPECT_EQ((*detector)->Detect("01234567890").status().code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE((*detector)->Detect("0123456789").ok());
}

TEST_P(BadInputTest, PathologicalTextsFinish) {
  const size_t mb = 1 << 20;
  EXPECT_EQ(Run("10 MB of digits", std::string(10 * mb, '7')), 0u);
  EXPECT_EQ(Run("1-1-1-1-...", Repeat("1-", 4 * mb)), 0u);
  EXPECT_EQ(Run("1 1 1 1 ...", Repeat("1 ", 4 * mb)), 0u);
  Run("a@a@a@...", Repeat("a@", 4 * mb));
  EXPECT_EQ(Run("separators - - -", Repeat("- ", 4 * mb)), 0u);
  EXPECT_EQ(Run("colons :::", std::string(4 * mb, ':')), 0u);
  EXPECT_EQ(Run("dots 1.1.1.1.1...", Repeat("1.", 4 * mb)), 0u);
  Run("hex pairs 0a:0a:...", Repeat("0a:", 4 * mb));
  Run("BEGIN PRIVATE KEY x N", Repeat("-----BEGIN PRIVATE KEY-----\n", 2 * mb));
  Run("Bearer + 4 MB token", "Bearer " + Repeat("aB3", 4 * mb));
  Run("password=... x N", Repeat("password=Ab3dEf9hIj ", 2 * mb));
  Run("eyJ x N", Repeat("eyJ", 2 * mb));
  EXPECT_EQ(Run("full-width digits", Repeat("１", 3 * mb)), 0u);
  Run("domains a.a.a.a...", Repeat("a.", 2 * mb) + "corp.example.com");
  Run("paths /srv/srv/...", Repeat("/srv", 2 * mb));
}

INSTANTIATE_TEST_SUITE_P(Engines, BadInputTest, ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool>& param) {
                           return param.param ? "Re2" : "Hyperscan";
                         });

}  // namespace
}  // namespace rampart::guard
