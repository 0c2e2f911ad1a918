// The canonical record encoding: sorted keys, every field, JCS escaping, invalid UTF-8 replaced,
// a round trip, and refusal of anything that is not exactly an encoded record.

#include "audit/record_codec.h"

#include <gtest/gtest.h>

namespace rampart::audit {
namespace {

AuditRecord Sample() {
  AuditRecord r;
  r.sequence = 42;
  r.time_unix_ns = 1767225600123456789;
  r.trace_id = "4bf92f3577b34da6a3ce929d0e0e4736";
  r.request_id = "req-1";
  r.api = "kserve_http";
  r.tenant = "acme";
  r.principal = "alice@example.com";
  r.auth_method = "api_key";
  r.key_id = "rk_live_abc";
  r.source_address = "10.0.0.7";
  r.action = "model:infer";
  r.resource_type = "model";
  r.resource = "simple";
  r.allowed = true;
  r.rules = {"analyst-infer", "office-hours"};
  r.obligations = {"redact:pii"};
  r.pii_input = {{"PHONE", 2}, {"EMAIL", 1}};
  r.pii_output = {};
  r.route = "/v2/models/simple/infer";
  r.target = "simple";
  r.model_version = "1";
  r.tokens_in = 12;
  r.tokens_out = -0;
  r.instance_ns = 350000;
  r.stages_ns = {{"queue", 1000}, {"compute", 350000}};
  r.latency_ns = 420000;
  r.status = 200;
  r.outcome = "ok";
  r.request_digest = "sha256:00ff";
  return r;
}

TEST(RecordCodecTest, EncodesEveryFieldWithSortedKeysAndNoWhitespace) {
  const std::string text = EncodeRecord(Sample());
  EXPECT_EQ(
      text,
      R"({"action":"model:infer","allowed":true,"api":"kserve_http","auth_method":"api_key",)"
      R"("instance_ns":350000,"key_id":"rk_live_abc","latency_ns":420000,"model_version":"1",)"
      R"("obligations":["redact:pii"],"outcome":"ok","pii_input":{"EMAIL":1,"PHONE":2},)"
      R"("pii_output":{},"principal":"alice@example.com","request_digest":"sha256:00ff",)"
      R"("request_id":"req-1","request_sealed":"","resource":"simple","resource_type":"model",)"
      R"("response_digest":"","response_sealed":"","route":"/v2/models/simple/infer",)"
      R"("rules":["analyst-infer","office-hours"],"sequence":42,"source_address":"10.0.0.7",)"
      R"("stages_ns":{"compute":350000,"queue":1000},"status":200,"target":"simple",)"
      R"("tenant":"acme","time_unix_ns":1767225600123456789,"tokens_in":12,"tokens_out":0,)"
      R"("trace_id":"4bf92f3577b34da6a3ce929d0e0e4736","v":1})");
  auto decoded = DecodeRecord(text);
  ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
  EXPECT_EQ(EncodeRecord(*decoded), text);
  EXPECT_EQ(decoded->stages_ns.at("compute"), 350000);
  EXPECT_EQ(decoded->pii_input.at("PHONE"), 2);
}

TEST(RecordCodecTest, DocumentsAreEncodedOnlyWhenThereAreSome) {
  AuditRecord record = Sample();
  const std::string without = EncodeRecord(record);
  EXPECT_EQ(without.find("documents"), std::string::npos);
  record.documents = {"file-a", "file-b"};
  const std::string with = EncodeRecord(record);
  EXPECT_NE(with.find(R"("auth_method":"api_key","documents":["file-a","file-b"],"instance_ns")"),
            std::string::npos)
      << with;
  auto decoded = DecodeRecord(with);
  ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
  EXPECT_EQ(decoded->documents, record.documents);
  EXPECT_EQ(EncodeRecord(*decoded), with);
  std::string empty = with;
  empty.replace(empty.find(R"(["file-a","file-b"])"), 19, "[]");
  EXPECT_FALSE(DecodeRecord(empty).ok()) << empty;
  std::string twice = with;
  twice.insert(1, R"("documents":["x"],)");
  EXPECT_FALSE(DecodeRecord(twice).ok());
}

TEST(RecordCodecTest, EncodingIntoAReusedBufferGivesTheSameBytes) {
  AuditRecord record = Sample();
  record.pii_input["sequence"] = 0;  // a map key named like the field does not confuse it
  record.stages_ns["sequence"] = 7;
  std::string buffer(5000, 'x');  // longer than a record: what it held must not show
  for (const int64_t sequence : {int64_t{1}, int64_t{42}, int64_t{9007199254740993}}) {
    record.sequence = sequence;
    const std::string_view encoded = EncodeRecordInto(record, buffer);
    EXPECT_EQ(encoded, EncodeRecord(record));
    auto decoded = DecodeRecord(encoded);
    ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
    EXPECT_EQ(decoded->sequence, sequence);
  }
  EXPECT_EQ(EncodeRecordInto(AuditRecord{}, buffer), EncodeRecord(AuditRecord{}));
  EXPECT_GE(buffer.size(), 5000u);  // the buffer only grows
}

TEST(RecordCodecTest, EscapesLikeJcsAndReplacesInvalidUtf8) {
  AuditRecord r;
  r.principal = "q\"b\\s/\b\f\n\r\t\x01\x1f\x7f é 中 😀";
  r.resource = "bad \xff\xfe end \xc3";  // invalid bytes and a truncated sequence
  r.target = "\xed\xa0\x80";             // an encoded surrogate is not UTF-8
  const std::string text = EncodeRecord(r);
  EXPECT_NE(text.find(R"("principal":"q\"b\\s/\b\f\n\r\t\u0001\u001f)"
                      "\x7f"
                      R"( é 中 😀")"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("\"resource\":\"bad \xEF\xBF\xBD\xEF\xBF\xBD end \xEF\xBF\xBD\""),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("\"target\":\"\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD\""), std::string::npos);
  auto decoded = DecodeRecord(text);
  ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
  EXPECT_EQ(decoded->principal, r.principal);
  EXPECT_EQ(EncodeRecord(*decoded), text);
  EXPECT_EQ(ValidUtf8("ok \xc3\xa9 \xc3"), "ok \xc3\xa9 \xEF\xBF\xBD");
}

TEST(RecordCodecTest, RefusesWhatIsNotExactlyARecord) {
  const std::string good = EncodeRecord(Sample());
  EXPECT_FALSE(DecodeRecord("").ok());
  EXPECT_FALSE(DecodeRecord("[]").ok());
  EXPECT_FALSE(DecodeRecord(good.substr(0, good.size() - 1)).ok());
  // A missing field, an unknown one, a repeated one, a wrong type, another version.
  std::string missing = good;
  missing.replace(missing.find("\"api\":\"kserve_http\","), 19, "");
  EXPECT_FALSE(DecodeRecord(missing).ok()) << missing;
  EXPECT_FALSE(DecodeRecord("{\"extra\":1," + good.substr(1)).ok());
  EXPECT_FALSE(DecodeRecord("{\"api\":\"x\"," + good.substr(1)).ok());
  std::string wrong_type = good;
  wrong_type.replace(wrong_type.find("\"status\":200"), 12, "\"status\":\"200\"");
  EXPECT_FALSE(DecodeRecord(wrong_type).ok());
  std::string version = good;
  version.replace(version.find("\"v\":1"), 5, "\"v\":2");
  EXPECT_FALSE(DecodeRecord(version).ok());
  std::string huge = good;
  huge.replace(huge.find("\"status\":200"), 12, "\"status\":99999999999");
  EXPECT_FALSE(DecodeRecord(huge).ok());
}

}  // namespace
}  // namespace rampart::audit
