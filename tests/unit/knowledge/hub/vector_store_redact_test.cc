// PII redaction at ingestion on both store backends: a file added with redact_pii goes through
// the service's redact hook before chunking, so its chunks, keyword terms and search hits only
// hold the redacted text while an unflagged file is kept as it is; without a hook a flagged file
// fails with server_error, and a hook's error fails it with invalid_file.

#include <gtest/gtest.h>

#include <mutex>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "knowledge/hub/vector_store_service_fixture.h"

namespace rampart::knowledge::hub::testing {
namespace {

template <typename Backend>
using VectorStoreRedactTest = VectorStoreServiceTest<Backend>;
TYPED_TEST_SUITE(VectorStoreRedactTest, Backends, BackendNames);

// Replaces words holding '@' with [EMAIL] and eleven-digit words with [PHONE]; refuses "SECRET"
// as the guard refuses a blocked type, and fails on "OFFLINE" as a guard gone away would. Records
// the tenants it was called for.
class FakeRedactor {
 public:
  Result<std::string> operator()(const std::string& tenant, std::string_view text) {
    {
      std::lock_guard lock(mutex_);
      tenants_.insert(tenant);
    }
    if (text.find("SECRET") != std::string_view::npos) {
      return InvalidArgument("the text contains data the guard blocks: SECRET");
    }
    if (text.find("OFFLINE") != std::string_view::npos) return Unavailable("the guard is away");
    std::string out;
    size_t start = 0;
    while (start <= text.size()) {
      size_t end = text.find(' ', start);
      if (end == std::string_view::npos) end = text.size();
      std::string_view word = text.substr(start, end - start);
      const bool phone = word.size() == 11 && word.find_first_not_of("0123456789") == word.npos;
      if (word.find('@') != std::string_view::npos) {
        out += "[EMAIL]";
      } else if (phone) {
        out += "[PHONE]";
      } else {
        out += word;
      }
      if (end < text.size()) out += ' ';
      start = end + 1;
    }
    return out;
  }
  std::set<std::string> tenants() {
    std::lock_guard lock(mutex_);
    return tenants_;
  }

 private:
  std::mutex mutex_;
  std::set<std::string> tenants_;
};

TYPED_TEST(VectorStoreRedactTest, AFlaggedFileIsChunkedAndFoundOnlyRedacted) {
  FakeRedactor redactor;
  VectorStoreServiceOptions options;
  options.redact = [&](const std::string& tenant, std::string_view text) {
    return redactor(tenant, text);
  };
  VectorStoreService* service = this->StartService(this->store_.get(), &this->embedder_, options);
  ASSERT_NE(service, nullptr);
  const std::string flagged = this->Upload(
      "contacts.md",
      "# Rollout contacts\n\nMail alice@example.com or call 13812345678 about the rollout.\n");
  const std::string plain =
      this->Upload("plain.txt", "Mail bob@example.com or call 13900001111 about the rollout.");
  auto created = service->CreateStore("acme", {.name = "docs",
                                               .file_ids = {flagged},
                                               .chunking = ChunkingOptions::Static(100, 0),
                                               .redact_pii = true});
  ASSERT_TRUE(created.ok()) << created.status().ToString();
  ASSERT_TRUE(service->AddFile("acme", created->id, {.file_id = plain}).ok());
  ASSERT_TRUE(Eventually([&] { return this->Settled(*service, created->id); }));
  EXPECT_EQ(service->GetStore("acme", created->id)->file_counts.completed, 2);
  EXPECT_EQ(redactor.tenants(), std::set<std::string>{"acme"});
  EXPECT_TRUE(service->GetFile("acme", created->id, flagged)->redact_pii);
  EXPECT_FALSE(service->GetFile("acme", created->id, plain)->redact_pii);

  auto content = service->FileContent("acme", created->id, flagged);
  ASSERT_TRUE(content.ok()) << content.status().ToString();
  std::string all;
  for (const std::string& chunk : *content) all += chunk;
  EXPECT_NE(all.find("Mail [EMAIL] or call [PHONE] about the rollout."), std::string::npos) << all;
  EXPECT_EQ(all.find("alice"), std::string::npos);

  for (const Ranker ranker : {Ranker::kKeyword, Ranker::kVector, Ranker::kHybrid}) {
    auto found = this->Find(*service, created->id, "rollout mail call", ranker);
    ASSERT_TRUE(found.ok()) << found.status().ToString();
    ASSERT_EQ(found->hits.size(), 2u);
    for (const SearchHit& hit : found->hits) {
      if (hit.file_id == flagged) {
        EXPECT_EQ(hit.text.find("alice@example.com"), std::string::npos) << hit.text;
        EXPECT_EQ(hit.text.find("13812345678"), std::string::npos) << hit.text;
        EXPECT_NE(hit.text.find("[EMAIL]"), std::string::npos) << hit.text;
        EXPECT_EQ(hit.heading_path, "Rollout contacts");
        EXPECT_LE(hit.end - hit.begin, hit.text.size() + 64);
      } else {
        EXPECT_EQ(hit.file_id, plain);
        EXPECT_NE(hit.text.find("bob@example.com"), std::string::npos) << hit.text;
      }
    }
  }
  // The redacted values left no keyword terms behind; the unflagged file's are there.
  EXPECT_EQ(this->HitFiles(this->Find(*service, created->id, "alice", Ranker::kKeyword)),
            std::vector<std::string>{});
  EXPECT_EQ(this->HitFiles(this->Find(*service, created->id, "13812345678", Ranker::kKeyword)),
            std::vector<std::string>{});
  EXPECT_EQ(this->HitFiles(this->Find(*service, created->id, "13900001111", Ranker::kKeyword)),
            std::vector<std::string>{plain});
}

TYPED_TEST(VectorStoreRedactTest, WithoutAGuardAFlaggedFileFailsAndIsNeverIngested) {
  VectorStoreService* service = this->StartService(this->store_.get(), &this->embedder_);
  ASSERT_NE(service, nullptr);
  const std::string flagged = this->Upload("a.txt", "Mail alice@example.com about the rollout.");
  const std::string plain = this->Upload("b.txt", "Mail bob@example.com about the rollout.");
  auto created = service->CreateStore("acme", {.name = "docs"});
  ASSERT_TRUE(created.ok());
  auto batch = service->CreateBatch(
      "acme", created->id,
      {.files = {{.file_id = flagged, .redact_pii = true}, {.file_id = plain}}});
  ASSERT_TRUE(batch.ok()) << batch.status().ToString();
  ASSERT_TRUE(Eventually([&] { return this->Settled(*service, created->id); }));
  auto failed = service->GetFile("acme", created->id, flagged);
  ASSERT_TRUE(failed.ok());
  EXPECT_EQ(failed->status, IngestStatus::kFailed);
  ASSERT_TRUE(failed->last_error.has_value());
  EXPECT_EQ(failed->last_error->code, "server_error");
  EXPECT_EQ(failed->last_error->message, "PII redaction is required but no guard is configured");
  EXPECT_TRUE(failed->redact_pii);
  EXPECT_TRUE(service->FileContent("acme", created->id, flagged)->empty());
  EXPECT_EQ(service->GetFile("acme", created->id, plain)->status, IngestStatus::kCompleted);
  EXPECT_EQ(this->HitFiles(this->Find(*service, created->id, "alice rollout", Ranker::kKeyword)),
            std::vector<std::string>{plain});
}

TYPED_TEST(VectorStoreRedactTest, AGuardErrorFailsTheFile) {
  FakeRedactor redactor;
  VectorStoreServiceOptions options;
  options.redact = [&](const std::string& tenant, std::string_view text) {
    return redactor(tenant, text);
  };
  VectorStoreService* service = this->StartService(this->store_.get(), &this->embedder_, options);
  ASSERT_NE(service, nullptr);
  const std::string blocked =
      this->Upload("a.md", "# Keys\n\nThe rollout key is SECRET and stays here.\n");
  auto created = service->CreateStore("acme", {.name = "docs"});
  ASSERT_TRUE(created.ok());
  ASSERT_TRUE(service->AddFile("acme", created->id, {.file_id = blocked, .redact_pii = true}).ok());
  ASSERT_TRUE(Eventually([&] { return this->Settled(*service, created->id); }));
  auto failed = service->GetFile("acme", created->id, blocked);
  ASSERT_TRUE(failed.ok());
  EXPECT_EQ(failed->status, IngestStatus::kFailed);
  ASSERT_TRUE(failed->last_error.has_value());
  EXPECT_EQ(failed->last_error->code, "invalid_file");
  EXPECT_EQ(failed->last_error->message, "the text contains data the guard blocks: SECRET");
  EXPECT_TRUE(this->Find(*service, created->id, "rollout key", Ranker::kKeyword)->hits.empty());

  // Not the text's fault: the guard's.
  const std::string unlucky = this->Upload("b.txt", "The rollout waits while OFFLINE.");
  ASSERT_TRUE(service->AddFile("acme", created->id, {.file_id = unlucky, .redact_pii = true}).ok());
  ASSERT_TRUE(Eventually([&] { return this->Settled(*service, created->id); }));
  auto errored = service->GetFile("acme", created->id, unlucky);
  ASSERT_TRUE(errored.ok() && errored->last_error.has_value());
  EXPECT_EQ(errored->last_error->code, "server_error");
  EXPECT_EQ(errored->last_error->message, "the guard is away");
}

}  // namespace
}  // namespace rampart::knowledge::hub::testing
