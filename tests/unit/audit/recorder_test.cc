// audit::Recorder: digests always, sealed content under audit:full (bound to the record's tenant,
// the region and CONFIDENTIAL), refusals counted and passed on.

#include "audit/recorder.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "audit/merkle.h"

namespace rampart::audit {
namespace {

// "sha256:<hex>" or "sm3:<hex>": `digest` as a record read back from the log holds it.
std::string DigestText(crypto::DigestAlgorithm algorithm, const crypto::Digest& digest) {
  return fmt::format("{}:{}", crypto::DigestName(algorithm), HashHex(digest));
}

struct Appended {
  std::vector<AuditRecord> records;
  Status answer = Status::Ok();  // what each append's callback is told
};

Recorder::Append AppendInto(Appended& appended) {
  return [&appended](const AuditRecord& record, const ContentDigests& digests,
                     UniqueFunction<void(Status)> done) {
    // The log stores the raw digests; read back, a record holds them as text.
    AuditRecord kept = record;
    kept.request_digest = DigestText(digests.algorithm, digests.request);
    kept.response_digest = DigestText(digests.algorithm, digests.response);
    appended.records.push_back(std::move(kept));
    done(appended.answer);
  };
}

TEST(RecorderTest, DigestsBothSidesWithTheConfiguredAlgorithm) {
  for (const auto& [algorithm, abc] :
       {std::pair{crypto::DigestAlgorithm::kSha256,
                  "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"},
        std::pair{crypto::DigestAlgorithm::kSm3,
                  "sm3:66c7f0f462eeedd9d1f2d46bdc10e4e24167c4875cf2f7a2297da02b8f4ba8e0"}}) {
    Appended appended;
    Recorder recorder(AppendInto(appended), nullptr, {.digest = algorithm});
    Status told = Internal("not called");
    recorder.Record({.request_id = "r1"}, {.request = "abc", .response = "abc"},
                    [&told](Status status) { told = status; });
    EXPECT_TRUE(told.ok());
    ASSERT_EQ(appended.records.size(), 1u);
    EXPECT_EQ(appended.records[0].request_id, "r1");
    EXPECT_EQ(appended.records[0].request_digest, abc);
    EXPECT_EQ(appended.records[0].response_digest, abc);
    EXPECT_TRUE(appended.records[0].request_sealed.empty());
  }
}

TEST(RecorderTest, AuditFullSealsBothSidesBoundToTenantRegionAndClass) {
  Appended appended;
  std::vector<std::string> contexts;
  Recorder::Seal seal = [&contexts](std::string_view plaintext,
                                    const Recorder::SealContext& context) -> Result<std::string> {
    contexts.push_back(std::string(context.tenant) + "/" + std::string(context.region) + "/" +
                       std::string(context.data_class));
    return "sealed:" + std::string(plaintext);
  };
  Recorder recorder(AppendInto(appended), seal, {.region = "eu-west"});
  recorder.Record({.tenant = "acme"}, {.request = "question", .response = "answer", .full = true},
                  {});
  ASSERT_EQ(appended.records.size(), 1u);
  const AuditRecord& record = appended.records[0];
  // Base64 of the envelope's bytes.
  EXPECT_EQ(record.request_sealed, "c2VhbGVkOnF1ZXN0aW9u");   // "sealed:question"
  EXPECT_EQ(record.response_sealed, "c2VhbGVkOmFuc3dlcg==");  // "sealed:answer"
  EXPECT_EQ(contexts,
            (std::vector<std::string>{"acme/eu-west/CONFIDENTIAL", "acme/eu-west/CONFIDENTIAL"}));
  EXPECT_FALSE(record.request_digest.empty());  // digests are kept too
}

TEST(RecorderTest, ASealingFailureKeepsTheRecordWithDigestsAndIsCounted) {
  Appended appended;
  std::vector<std::string> refused;
  Recorder::Seal failing = [](std::string_view,
                              const Recorder::SealContext&) -> Result<std::string> {
    return NotFound("no key 'audit-content'");
  };
  Recorder recorder(AppendInto(appended), failing, {},
                    [&refused](std::string_view reason) { refused.emplace_back(reason); });
  recorder.Record({}, {.request = "q", .response = "a", .full = true}, {});
  ASSERT_EQ(appended.records.size(), 1u);
  EXPECT_TRUE(appended.records[0].request_sealed.empty());
  EXPECT_FALSE(appended.records[0].request_digest.empty());
  EXPECT_EQ(refused, (std::vector<std::string>{"seal", "seal"}));

  // No sealer at all: the same.
  Recorder unsealed(AppendInto(appended), nullptr, {},
                    [&refused](std::string_view reason) { refused.emplace_back(reason); });
  unsealed.Record({}, {.request = "q", .response = "a", .full = true}, {});
  EXPECT_EQ(refused.size(), 4u);
}

TEST(RecorderTest, ALogRefusalIsCountedAndPassedOn) {
  Appended appended{.answer = Unavailable("audit queue full")};
  std::vector<std::string> refused;
  Recorder recorder(AppendInto(appended), nullptr, {.sync = true},
                    [&refused](std::string_view reason) { refused.emplace_back(reason); });
  EXPECT_TRUE(recorder.sync());
  Status told;
  recorder.Record({}, {}, [&told](Status status) { told = status; });
  EXPECT_EQ(told.code(), StatusCode::kUnavailable);
  EXPECT_EQ(refused, std::vector<std::string>{"unavailable"});
}

}  // namespace
}  // namespace rampart::audit
