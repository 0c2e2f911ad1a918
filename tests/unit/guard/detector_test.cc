// The detector on hand-written sentences, with both engines (Hyperscan and the RE2 fallback).
#include "guard/detector.h"

#include <gtest/gtest.h>

#include <string>

namespace rampart::guard {
namespace {

class DetectorTest : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    DetectorOptions options;
    options.internal_domains = {"corp.example.com"};
    options.internal_path_roots = {"/srv/secret"};
    options.force_re2 = GetParam();
    auto detector = Detector::Create(options);
    ASSERT_TRUE(detector.ok()) << detector.status().ToString();
    detector_ = std::move(detector).value();
  }

  // "TYPE:text" for each entity, joined by " | ".
  std::string Find(std::string_view text, const std::vector<std::string_view>& types = {}) {
    auto entities = detector_->Detect(text, types);
    EXPECT_TRUE(entities.ok()) << entities.status().ToString();
    if (!entities.ok()) return "<error>";
    std::string out;
    for (const Entity& e : *entities) {
      if (!out.empty()) out += " | ";
      out += std::string(e.type) + ":" + std::string(text.substr(e.start, e.end - e.start));
    }
    return out;
  }

  std::unique_ptr<Detector> detector_;
};

TEST_P(DetectorTest, Engine) {
  EXPECT_EQ(detector_->engine(), GetParam() ? "re2" : "hyperscan");
  EXPECT_EQ(detector_->max_entity_bytes(), 8192u);
  EXPECT_EQ(MaxEntityBytes(kCnResidentId), 54u);
  EXPECT_EQ(AllEntityTypes().size(), 13u);
}

TEST_P(DetectorTest, ResidentId) {
  EXPECT_EQ(Find("身份证号：11010519491231002X，请核对"), "CN_RESIDENT_ID:11010519491231002X");
  EXPECT_EQ(Find("ID 110105491231002 (old)"), "CN_RESIDENT_ID:110105491231002");
  EXPECT_EQ(Find("订单号 110105194912310021 已发货"), "");  // wrong check digit
  EXPECT_EQ(Find("1234567110105194912310020X8"), "");       // inside a longer run
  // Full-width digits: offsets into the original bytes.
  EXPECT_EQ(Find("身份证１１０１０５１９４９１２３１００２Ｘ"),
            "CN_RESIDENT_ID:１１０１０５１９４９１２３１００２Ｘ");
}

TEST_P(DetectorTest, Mobile) {
  EXPECT_EQ(Find("手机13800138000"), "CN_MOBILE:13800138000");
  EXPECT_EQ(Find("call 138 0013 8000 now"), "CN_MOBILE:138 0013 8000");
  EXPECT_EQ(Find("tel +86-138-0013-8000."), "CN_MOBILE:+86-138-0013-8000");
  EXPECT_EQ(Find("电话 0086 13800138000"), "CN_MOBILE:0086 13800138000");
  EXPECT_EQ(Find("号码 12000138000"), "");
  EXPECT_EQ(Find("手机 １３８００１３８０００"), "CN_MOBILE:１３８００１３８０００");
  EXPECT_EQ(Find("ref 9913800138000"), "");
}

TEST_P(DetectorTest, PaymentCard) {
  EXPECT_EQ(Find("卡号 6222 0212 3456 7890 128"), "PAYMENT_CARD:6222 0212 3456 7890 128");
  EXPECT_EQ(Find("card 4111-1111-1111-1111 exp 12/29"), "PAYMENT_CARD:4111-1111-1111-1111");
  EXPECT_EQ(Find("amex 378282246310005"), "PAYMENT_CARD:378282246310005");
  EXPECT_EQ(Find("card 4111 1111 1111 1112"), "");  // Luhn
  EXPECT_EQ(Find("13800138000 4111111111111111"),
            "CN_MOBILE:13800138000 | PAYMENT_CARD:4111111111111111");
}

TEST_P(DetectorTest, UsccAndPassport) {
  EXPECT_EQ(Find("统一社会信用代码 91350100M000100Y43"), "CN_USCC:91350100M000100Y43");
  EXPECT_EQ(Find("code 91350100M000100Y44"), "");
  EXPECT_EQ(Find("护照号码 E12345678"), "CN_PASSPORT:E12345678");
  EXPECT_EQ(Find("Passport No. EA1234567"), "CN_PASSPORT:EA1234567");
  EXPECT_EQ(Find("part E12345678 in stock"), "");  // no context word
}

TEST_P(DetectorTest, EmailPhoneIpMac) {
  EXPECT_EQ(Find("mail zhang.san@example.com.cn."), "EMAIL_ADDRESS:zhang.san@example.com.cn");
  EXPECT_EQ(Find("邮箱 ｌｉ＠ｅｘａｍｐｌｅ．ｃｏｍ"),
            "EMAIL_ADDRESS:ｌｉ＠ｅｘａｍｐｌｅ．ｃｏｍ");
  EXPECT_EQ(Find("call +1 415-555-2671"), "PHONE_NUMBER:+1 415-555-2671");
  EXPECT_EQ(Find("+44 20 7946 0958"), "PHONE_NUMBER:+44 20 7946 0958");
  EXPECT_EQ(Find("host 8.8.8.8 and 2001:db8::1"), "IP_ADDRESS:8.8.8.8 | IP_ADDRESS:2001:db8::1");
  EXPECT_EQ(Find("version 1.2.3 and 1.2.3.4.5 and 999.1.1.1"), "");
  EXPECT_EQ(Find("mapped ::ffff:192.0.2.1 ok"), "IP_ADDRESS:::ffff:192.0.2.1");
  EXPECT_EQ(Find("at 12:30:45 std::vector"), "");
  EXPECT_EQ(Find("mac 00:1A:2B:3C:4D:5E / 0011.2233.4455"),
            "MAC_ADDRESS:00:1A:2B:3C:4D:5E | MAC_ADDRESS:0011.2233.4455");
}

TEST_P(DetectorTest, IbanAndSsn) {
  EXPECT_EQ(Find("IBAN GB82 WEST 1234 5698 7654 32 thanks"),
            "IBAN_CODE:GB82 WEST 1234 5698 7654 32");
  EXPECT_EQ(Find("DE89370400440532013000"), "IBAN_CODE:DE89370400440532013000");
  EXPECT_EQ(Find("DE89370400440532013001"), "");
  EXPECT_EQ(Find("SSN 123-45-6789"), "US_SSN:123-45-6789");
  EXPECT_EQ(Find("ssn: 123456789"), "US_SSN:123456789");
  EXPECT_EQ(Find("number 123456789"), "");
  EXPECT_EQ(Find("SSN 000-45-6789 666-45-6789 912-45-6789 123-00-6789"), "");
}

TEST_P(DetectorTest, Secrets) {
  std::string pem =
      "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA7bq\nAbCd==\n-----END RSA PRIVATE "
      "KEY-----";
  EXPECT_EQ(Find("key:\n" + pem + "\nbye"), "SECRET:" + pem);
  EXPECT_EQ(Find("AKIAIOSFODNN7EXAMPLE"), "SECRET:AKIAIOSFODNN7EXAMPLE");
  EXPECT_EQ(Find("aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"),
            "SECRET:wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY");
  EXPECT_EQ(Find("Authorization: Bearer 9f8a7B6c5D4e3F2a1b0C"), "SECRET:9f8a7B6c5D4e3F2a1b0C");
  std::string jwt =
      "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_"
      "XgL0n3I9PlFUP0THsR8U";
  EXPECT_EQ(Find("token " + jwt + " end"), "SECRET:" + jwt);
  EXPECT_EQ(Find("api_key=Zx9Qm2Lp8Rt4Vw7Y"), "SECRET:Zx9Qm2Lp8Rt4Vw7Y");
  EXPECT_EQ(Find("password: \"Summer2024!\""), "SECRET:Summer2024!");
  EXPECT_EQ(Find("password=changeme token=********"), "");
  EXPECT_EQ(Find("Bearer authentication is described"), "");
}

TEST_P(DetectorTest, InternalEndpoints) {
  EXPECT_EQ(Find("see https://git.corp.example.com:8443/x"),
            "INTERNAL_ENDPOINT:git.corp.example.com");
  EXPECT_EQ(Find("evilcorp.example.com corp.example.com.cn"), "");
  EXPECT_EQ(Find("GET http://10.1.2.3:8080/api"), "INTERNAL_ENDPOINT:10.1.2.3");
  EXPECT_EQ(Find("http://[fe80::1]/"), "INTERNAL_ENDPOINT:fe80::1");
  EXPECT_EQ(Find("http://8.8.8.8/"), "IP_ADDRESS:8.8.8.8");
  EXPECT_EQ(Find("read /srv/secret/keys/a.txt."), "INTERNAL_ENDPOINT:/srv/secret/keys/a.txt");
  EXPECT_EQ(Find("/srv/secretary/x"), "");
}

TEST_P(DetectorTest, TypesFilterAndOrder) {
  std::string text = "手机13800138000 mail a@b.cn 身份证11010519491231002X";
  EXPECT_EQ(Find(text, {kEmailAddress}), "EMAIL_ADDRESS:a@b.cn");
  auto all = detector_->Detect(text);
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->size(), 3u);
  EXPECT_LT((*all)[0].start, (*all)[1].start);
  for (const Entity& e : *all) EXPECT_GT(e.score, 0.8);
}

TEST_P(DetectorTest, BadOptions) {
  DetectorOptions options;
  options.internal_domains = {"bad domain"};
  EXPECT_FALSE(Detector::Create(options).ok());
  options.internal_domains = {};
  options.internal_path_roots = {"relative/path"};
  EXPECT_FALSE(Detector::Create(options).ok());
}

INSTANTIATE_TEST_SUITE_P(Engines, DetectorTest, ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool>& param) {
                           return param.param ? "Re2" : "Hyperscan";
                         });

}  // namespace
}  // namespace rampart::guard
