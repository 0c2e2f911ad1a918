#include "guard/operators.h"

#include <gtest/gtest.h>

#include "guard/redact.h"
#include "testing/fake_detector.h"

namespace rampart::guard {
namespace {

TenantKeys Keys(char fill = 'k') {
  return GuardKeys::FromBytes(std::string(32, fill)).value().ForTenant(kDefaultTenant);
}

std::string Apply(std::string_view op, std::string_view type, std::string_view value) {
  return ApplyOperator(ParseOperator(op).value(), type, value, Keys());
}

TEST(OperatorsTest, ReplaceNamesTheType) {
  EXPECT_EQ(Apply("replace", kCnResidentId, "11010519491231002X"), "[CN_RESIDENT_ID]");
}

TEST(OperatorsTest, MaskKeepsEachTypesDefaults) {
  EXPECT_EQ(Apply("mask", kCnResidentId, "11010519491231002X"), "110***********002X");
  EXPECT_EQ(Apply("mask", kCnMobile, "13800138000"), "138****8000");
  EXPECT_EQ(Apply("mask", kCnMobile, "+86 138-0013-8000"), "+86 138-****-8000");
  EXPECT_EQ(Apply("mask", kCnMobile, "8613800138000"), "86138****8000");
  EXPECT_EQ(Apply("mask", kPaymentCard, "6222 0212 3456 7890"), "**** **** **** 7890");
  EXPECT_EQ(Apply("mask", kEmailAddress, "zhang.san@example.com"), "z****.***@example.com");
  EXPECT_EQ(Apply("mask", kIpAddress, "10.1.2.3"), "**.*.*.*");
  EXPECT_EQ(Apply("mask:2:1", kUsSsn, "123-45-6789"), "12*-**-***9");
}

TEST(OperatorsTest, MaskCountsCharactersNotBytes) {
  // Full-width digits are one character (three bytes) each.
  EXPECT_EQ(Apply("mask", kCnMobile, "１３８００１３８０００"), "１３８****８０００");
  // Nothing would be hidden: everything is.
  EXPECT_EQ(Apply("mask:4:4", kCnPassport, "E1234567"), "********");
}

TEST(OperatorsTest, HashIsKeyedCanonicalAndKeepsTheEmailDomain) {
  const std::string hashed = Apply("hash", kCnMobile, "13800138000");
  EXPECT_EQ(hashed.rfind("CN_MOBILE_", 0), 0u);
  EXPECT_EQ(hashed.size(), std::string("CN_MOBILE_").size() + 16);
  EXPECT_EQ(Apply("hash", kCnMobile, "+86 138 0013 8000"), hashed);
  EXPECT_EQ(Apply("hash", kCnMobile, "１３８００１３８０００"), hashed);
  // Another key, another hash: never an unkeyed digest.
  EXPECT_NE(ApplyOperator({.kind = OperatorKind::kHash}, kCnMobile, "13800138000", Keys('q')),
            hashed);
  const std::string email = Apply("hash", kEmailAddress, "Zhang.San@example.com");
  EXPECT_EQ(email.rfind("EMAIL_ADDRESS_", 0), 0u);
  EXPECT_EQ(email.substr(email.size() - 12), "@example.com");
  EXPECT_EQ(Apply("hash", kEmailAddress, "zhang.san@example.com"), email);
}

TEST(OperatorsTest, TokensRestoreUnderTheSameKeyOnly) {
  const TenantKeys keys = Keys();
  const std::string token =
      ApplyOperator({.kind = OperatorKind::kTokenize}, kCnMobile, "138 0013 8000", keys);
  EXPECT_EQ(token.rfind("<<PII:CN_MOBILE:", 0), 0u);
  EXPECT_EQ(token.substr(token.size() - 2), ">>");
  const std::string text = "call " + token + " or <<PII:CN_MOBILE:nonsense>> today";
  size_t restored = 0;
  EXPECT_EQ(RestoreTokens(text, keys, &restored),
            "call 138 0013 8000 or <<PII:CN_MOBILE:nonsense>> today");
  EXPECT_EQ(restored, 1u);
  // Another tenant's key, or a changed type (the associated data), restores nothing.
  const TenantKeys other = GuardKeys::FromBytes(std::string(32, 'k')).value().ForTenant("acme");
  EXPECT_EQ(RestoreTokens(text, other), text);
  std::string retyped = token;
  retyped.replace(6, 9, "US_SSN___");
  EXPECT_EQ(RestoreTokens(retyped, keys), retyped);
}

TEST(OperatorsTest, ParsesAndNamesOperators) {
  EXPECT_EQ(OperatorText(ParseOperator("mask:3:4").value()), "mask:3:4");
  EXPECT_EQ(OperatorText(ParseOperator("tokenize").value()), "tokenize");
  for (std::string_view bad : {"erase", "mask:3", "mask:a:b", "hash:1:2", "mask:1:99"}) {
    EXPECT_FALSE(ParseOperator(bad).ok()) << bad;
  }
  EXPECT_EQ(DefaultOperator(kEmailAddress).kind, OperatorKind::kHash);
  EXPECT_EQ(DefaultOperator(kCnMobile).kind, OperatorKind::kMask);
  EXPECT_EQ(DefaultOperator(kSecret).kind, OperatorKind::kReplace);
  EXPECT_TRUE(KnownEntityType("IBAN_CODE").has_value());
  EXPECT_FALSE(KnownEntityType("iban").has_value());
}

TEST(KeysTest, ReadsHexOrRawKeyFiles) {
  const std::string dir = ::testing::TempDir();
  const auto write = [&](const std::string& name, const std::string& content) {
    std::FILE* file = std::fopen((dir + name).c_str(), "wb");
    std::fwrite(content.data(), 1, content.size(), file);
    std::fclose(file);
    return dir + name;
  };
  auto hex = GuardKeys::FromFile(write("hex.key", std::string(64, 'a') + "\n"));
  auto raw = GuardKeys::FromFile(write("raw.key", std::string(32, '\xaa')));
  ASSERT_TRUE(hex.ok()) << hex.status().ToString();
  ASSERT_TRUE(raw.ok()) << raw.status().ToString();
  EXPECT_EQ(hex->ForTenant("t").hash, raw->ForTenant("t").hash);
  EXPECT_NE(hex->ForTenant("t").hash, hex->ForTenant("u").hash);
  EXPECT_NE(hex->ForTenant("t").hash, hex->ForTenant("t").token);
  EXPECT_FALSE(GuardKeys::FromFile(write("short.key", "abc")).ok());
  EXPECT_EQ(GuardKeys::FromFile(dir + "missing.key").status().code(), StatusCode::kNotFound);
}

TEST(RedactTest, ReplacesEntitiesAndReportsOriginalOffsets) {
  testing::FakeDetector detector;
  const std::string text = "张三的手机是13800138000，邮箱 zs@example.com。";
  RedactOptions options;
  options.operators.by_type.emplace(std::string(kEmailAddress), Operator{});
  Result<RedactedText> redacted =
      RedactText(detector, GuardKeys::FromBytes(std::string(32, 'k')).value(), text, options);
  ASSERT_TRUE(redacted.ok());
  EXPECT_EQ(redacted->text, "张三的手机是138****8000，邮箱 [EMAIL_ADDRESS]。");
  ASSERT_EQ(redacted->entities.size(), 2u);
  const Redaction& mobile = redacted->entities[0];
  EXPECT_EQ(text.substr(mobile.start, mobile.end - mobile.start), "13800138000");
  EXPECT_EQ(mobile.op, OperatorKind::kMask);
  EXPECT_DOUBLE_EQ(mobile.score, 0.9);
  EXPECT_EQ(text.substr(redacted->entities[1].start, 14), "zs@example.com");
}

TEST(RedactTest, SkipsEntitiesABrokenDetectorCouldReport) {
  const std::string text = "手机13800138000";
  const std::vector<Entity> entities = {{kCnMobile, 1, 8, 1},     // inside a character
                                        {kCnMobile, 6, 17, 1},    // fine
                                        {kCnMobile, 10, 12, 1},   // overlaps the one before
                                        {kCnMobile, 16, 99, 1}};  // past the end
  RedactedText redacted = Redact(text, entities, {}, Keys());
  EXPECT_EQ(redacted.text, "手机138****8000");
  EXPECT_EQ(redacted.entities.size(), 1u);
}

TEST(RedactTest, BlockedTypesAreNamedNotShown) {
  testing::FakeDetector detector;
  RedactOptions options;
  options.operators.by_type.emplace(std::string(kSecret), Operator{.kind = OperatorKind::kBlock});
  Result<RedactedText> redacted =
      RedactText(detector, GuardKeys::Generate(), "key sk-abcdefghijklmnopqrstu", options);
  ASSERT_FALSE(redacted.ok());
  EXPECT_EQ(redacted.status().message(), "the text contains data the guard blocks: SECRET");
}

}  // namespace
}  // namespace rampart::guard
