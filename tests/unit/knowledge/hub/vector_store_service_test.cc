// The vector store service end to end on both store backends: files of each type ingested in the
// background and searched by keyword, vector and both; filters and per-file access inside the
// ranking; failures that stay with their file; resuming after a stop; a second instance on the
// same store following the first; durable removal; sealed chunks; expiry.

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "knowledge/hub/vector_store_service_fixture.h"

namespace rampart::knowledge::hub::testing {
namespace {

TYPED_TEST_SUITE(VectorStoreServiceTest, Backends, BackendNames);

TYPED_TEST(VectorStoreServiceTest, FilesOfEachTypeAreIngestedAndFoundByKeywordVectorAndBoth) {
  VectorStoreService* service = this->StartService(this->store_.get(), &this->embedder_);
  ASSERT_NE(service, nullptr);
  const std::string text = this->Upload("notes.txt", "Rampart batches requests dynamically.");
  // Fillers of over one chunk of 100 tokens, so that later sections start chunks of their own.
  const auto filler = [](const std::string& word, char separator = ' ') {
    std::string words;
    for (int i = 0; i < 120; ++i)
      words += word + std::to_string(i) + (i % 8 == 7 ? separator : ' ');
    return words;
  };
  std::string guide = "# Install\n\n";
  guide += filler("alpha");
  guide += "\n\n## Debian\n\nRun apt-get install rampart today. ";
  guide += filler("delta");
  guide += "Zebras graze last.\n";
  const std::string markdown = this->Upload("guide.md", guide);
  const std::string html = this->Upload(
      "page.html", "<html><body><h1>Metrics</h1><p>Prometheus scrapes the gauges.</p></body>");
  std::string first_page = "Intro\n";
  first_page += filler("beta", '\n');
  std::string second_page = filler("gamma", '\n');
  second_page += "\nTensors travel as JSON";
  const std::string pdf = this->Upload("manual.pdf", MakePdf({first_page, second_page}));
  auto created = service->CreateStore("acme", {.name = "docs",
                                               .file_ids = {text, markdown, html},
                                               .chunking = ChunkingOptions::Static(100, 0)});
  ASSERT_TRUE(created.ok()) << created.status().ToString();
  EXPECT_EQ(created->id.size(), 27u);
  auto added = service->AddFile("acme", created->id,
                                {.file_id = pdf, .chunking = ChunkingOptions::Static(100, 0)});
  ASSERT_TRUE(added.ok()) << added.status().ToString();
  ASSERT_TRUE(Eventually([&] { return this->Settled(*service, created->id); }));
  auto info = service->GetStore("acme", created->id);
  EXPECT_EQ(info->file_counts.completed, 4);
  EXPECT_EQ(info->status, "completed");
  EXPECT_GT(info->usage_bytes, 0);

  for (const Ranker ranker : {Ranker::kKeyword, Ranker::kVector, Ranker::kHybrid}) {
    auto found = this->Find(*service, created->id, "debian apt-get install", ranker);
    ASSERT_TRUE(found.ok()) << found.status().ToString();
    ASSERT_FALSE(found->hits.empty());
    const SearchHit& best = found->hits.front();
    EXPECT_EQ(best.file_id, markdown);
    EXPECT_EQ(best.filename, "guide.md");
    EXPECT_TRUE(best.heading_path.starts_with("Install")) << best.heading_path;
    EXPECT_GT(best.score, 0);
    EXPECT_LE(best.score, 1);
    EXPECT_NE(best.text.find("apt-get"), std::string::npos);
  }
  auto zebras = this->Find(*service, created->id, "zebras graze", Ranker::kKeyword);
  ASSERT_TRUE(zebras.ok() && !zebras->hits.empty());
  EXPECT_EQ(zebras->hits.front().heading_path, "Install > Debian");
  EXPECT_GT(zebras->hits.front().chunk_index, 0);
  EXPECT_GT(zebras->hits.front().end, zebras->hits.front().begin);
  auto tensors = this->Find(*service, created->id, "tensors json", Ranker::kKeyword);
  ASSERT_TRUE(tensors.ok() && !tensors->hits.empty());
  EXPECT_EQ(tensors->hits.front().file_id, pdf);
  EXPECT_EQ(tensors->hits.front().page, 2);
  auto gauges = this->Find(*service, created->id, "prometheus gauges");
  ASSERT_TRUE(gauges.ok() && !gauges->hits.empty());
  EXPECT_EQ(gauges->hits.front().file_id, html);
  EXPECT_EQ(service->GetStore("other", created->id).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(this->Find(*service, created->id, "x").ok(), true);
  EXPECT_EQ(service->AddFile("acme", created->id, {.file_id = "file-missing"}).status().code(),
            StatusCode::kFailedPrecondition);
}

// vector_weight scales the vector ranking in hybrid fusion: at 0 (linear blend) hybrid ranks as
// keyword alone, with keyword's scores; out of [0, 100] the service does not start.
TYPED_TEST(VectorStoreServiceTest, AVectorWeightOfZeroRanksHybridAsKeyword) {
  VectorStoreServiceOptions options;
  options.fusion = Fusion::kLinear;
  options.vector_weight = 0;
  VectorStoreService* service = this->StartService(this->store_.get(), &this->embedder_, options);
  ASSERT_NE(service, nullptr);
  std::vector<std::string> ids;
  for (const char* text : {"pricing of the premium plan", "pricing tiers for small offices",
                           "the premium lounge", "offices and plans"}) {
    ids.push_back(this->Upload(std::string(text).substr(0, 7) + ".txt", text));
  }
  auto created = service->CreateStore("acme", {.name = "weights", .file_ids = ids});
  ASSERT_TRUE(created.ok()) << created.status().ToString();
  ASSERT_TRUE(Eventually([&] { return this->Settled(*service, created->id); }));
  auto keyword = this->Find(*service, created->id, "premium pricing", Ranker::kKeyword);
  auto hybrid = this->Find(*service, created->id, "premium pricing", Ranker::kHybrid);
  ASSERT_TRUE(keyword.ok() && hybrid.ok());
  ASSERT_FALSE(keyword->hits.empty());
  ASSERT_GE(hybrid->hits.size(), keyword->hits.size());
  for (size_t i = 0; i < keyword->hits.size(); ++i) {
    EXPECT_EQ(hybrid->hits[i].file_id, keyword->hits[i].file_id) << i;
    EXPECT_DOUBLE_EQ(hybrid->hits[i].score, keyword->hits[i].score) << i;
  }
  options.vector_weight = 101;
  EXPECT_FALSE(
      NewVectorStoreService(this->store_.get(), this->files_.get(), &this->embedder_, options)
          .ok());
}

TYPED_TEST(VectorStoreServiceTest, FiltersAndAccessDecideInsideTheRanking) {
  VectorStoreService* service = this->StartService(this->store_.get(), &this->embedder_);
  ASSERT_NE(service, nullptr);
  auto created = service->CreateStore("acme", {.name = "docs"});
  ASSERT_TRUE(created.ok());
  std::vector<std::string> secret;
  for (int i = 0; i < 5; ++i) {  // many strong matches a reader may not see
    secret.push_back(this->Upload("s.txt", "quarterly budget budget budget forecast"));
    ASSERT_TRUE(service
                    ->AddFile("acme", created->id,
                              {.file_id = secret.back(), .attributes = {{"dept", "finance"}}})
                    .ok());
  }
  const std::string open = this->Upload("o.txt", "the budget for the team offsite");
  ASSERT_TRUE(service
                  ->AddFile("acme", created->id,
                            {.file_id = open, .attributes = {{"dept", "eng"}, {"level", 2.0}}})
                  .ok());
  ASSERT_TRUE(Eventually([&] { return this->Settled(*service, created->id); }));

  SearchRequest request;
  request.queries = {"budget"};
  request.max_num_results = 1;
  request.may_read = [&](const VectorStoreFileInfo& file) {
    return std::find(secret.begin(), secret.end(), file.id) == secret.end();
  };
  for (const Ranker ranker : {Ranker::kKeyword, Ranker::kVector, Ranker::kHybrid}) {
    request.ranker = ranker;
    EXPECT_EQ(this->HitFiles(service->Search("acme", created->id, request)),
              std::vector<std::string>{open});
  }
  request.may_read = nullptr;
  request.max_num_results = 10;
  request.filter = AttributeFilter{.op = AttributeFilter::Op::kGte, .key = "level", .value = 2.0};
  EXPECT_EQ(this->HitFiles(service->Search("acme", created->id, request)),
            std::vector<std::string>{open});
  request.filter = AttributeFilter{
      .op = AttributeFilter::Op::kEq, .key = "dept", .value = std::string("finance")};
  EXPECT_EQ(this->HitFiles(service->Search("acme", created->id, request)).size(), 5u);

  // New attributes take effect at once.
  ASSERT_TRUE(service->UpdateFileAttributes("acme", created->id, open, {{"dept", "finance"}}).ok());
  EXPECT_EQ(this->HitFiles(service->Search("acme", created->id, request)).size(), 6u);
  request.score_threshold = 1.0;
  request.ranker = Ranker::kKeyword;
  EXPECT_TRUE(this->HitFiles(service->Search("acme", created->id, request)).empty());
}

TYPED_TEST(VectorStoreServiceTest, ABrokenOrEmptyFileFailsAloneWithItsError) {
  VectorStoreService* service = this->StartService(this->store_.get(), &this->embedder_);
  ASSERT_NE(service, nullptr);
  const std::string broken = this->Upload("broken.pdf", "%PDF-1.4\nthis is no pdf");
  const std::string empty = this->Upload("empty.txt", "");
  const std::string binary = this->Upload("blob.bin", std::string("\x00\x01\xff\xfe\x00", 5));
  const std::string good = this->Upload("good.txt", "a perfectly good file");
  auto created =
      service->CreateStore("acme", {.name = "docs", .file_ids = {broken, empty, binary, good}});
  ASSERT_TRUE(created.ok());
  ASSERT_TRUE(Eventually([&] { return this->Settled(*service, created->id); }));
  const auto error_of = [&](const std::string& id) -> std::string {
    auto file = service->GetFile("acme", created->id, id);
    if (!file.ok()) return file.status().ToString();
    return file->last_error.has_value() ? file->last_error->code : "";
  };
  EXPECT_EQ(error_of(broken), "invalid_file");
  EXPECT_EQ(error_of(empty), "invalid_file");
  EXPECT_EQ(error_of(binary), "unsupported_file");
  EXPECT_EQ(error_of(good), "");
  auto info = service->GetStore("acme", created->id);
  EXPECT_EQ(info->file_counts.failed, 3);
  EXPECT_EQ(info->file_counts.completed, 1);
  EXPECT_EQ(this->HitFiles(this->Find(*service, created->id, "perfectly good")),
            std::vector<std::string>{good});
}

TYPED_TEST(VectorStoreServiceTest, AFileUnfinishedAtStopIsResumedWholeAtTheNextStart) {
  VectorStoreService* first = this->StartService(this->store_.get(), &this->embedder_);
  ASSERT_NE(first, nullptr);
  std::string content;
  for (int i = 0; i < 200; ++i)
    content += "Paragraph " + std::to_string(i) + " about lanterns.\n\n";
  const std::string file = this->Upload("long.txt", content);
  auto created = first->CreateStore("acme", {.name = "docs"});
  ASSERT_TRUE(created.ok());
  this->embedder_.Block();
  ASSERT_TRUE(first
                  ->AddFile("acme", created->id,
                            {.file_id = file, .chunking = ChunkingOptions::Static(100, 0)})
                  .ok());
  ASSERT_TRUE(Eventually([&] { return this->embedder_.entered() > 0; }));
  std::thread stopper([&] { first->Stop(); });
  ASSERT_TRUE(Eventually([&] { return first->stopping(); }));
  this->embedder_.Release();
  stopper.join();
  auto file_info = first->GetFile("acme", created->id, file);
  EXPECT_EQ(file_info->status, IngestStatus::kInProgress);

  VectorStoreService* second = this->StartService(this->store_.get(), &this->embedder_);
  ASSERT_NE(second, nullptr);
  ASSERT_TRUE(Eventually([&] { return this->Settled(*second, created->id); }));
  auto chunks = second->FileContent("acme", created->id, file);
  ASSERT_TRUE(chunks.ok());
  EXPECT_GT(chunks->size(), 1u);
  std::vector<std::string> unique = *chunks;
  std::sort(unique.begin(), unique.end());
  EXPECT_EQ(std::unique(unique.begin(), unique.end()), unique.end());  // none doubled
  EXPECT_FALSE(this->HitFiles(this->Find(*second, created->id, "lanterns")).empty());
}

TYPED_TEST(VectorStoreServiceTest, ASecondInstanceOnTheSameStoreFollowsTheFirst) {
  auto other_store = this->Open();
  ASSERT_NE(other_store, nullptr);
  VectorStoreService* first = this->StartService(this->store_.get(), &this->embedder_);
  VectorStoreService* second = this->StartService(other_store.get(), &this->embedder_);
  ASSERT_NE(first, nullptr);
  ASSERT_NE(second, nullptr);
  const std::string file = this->Upload("a.txt", "replicas share one catalogue of harbours");
  auto created = first->CreateStore("acme", {.name = "docs", .file_ids = {file}});
  ASSERT_TRUE(created.ok());
  ASSERT_TRUE(Eventually([&] { return this->Settled(*first, created->id); }));
  ASSERT_TRUE(Eventually(
      [&] { return this->HitFiles(this->Find(*second, created->id, "harbours")).size() == 1; }));
  ASSERT_TRUE(first->RemoveFile("acme", created->id, file).ok());
  EXPECT_TRUE(this->HitFiles(this->Find(*first, created->id, "harbours")).empty());
  ASSERT_TRUE(Eventually(
      [&] { return this->HitFiles(this->Find(*second, created->id, "harbours")).empty(); }));
  this->services_.clear();  // before other_store goes
}

TYPED_TEST(VectorStoreServiceTest, RemovalsAndDeletionsAreDurable) {
  VectorStoreService* service = this->StartService(this->store_.get(), &this->embedder_);
  ASSERT_NE(service, nullptr);
  const std::string kept = this->Upload("k.txt", "the lighthouse keeper");
  const std::string removed = this->Upload("r.txt", "the lighthouse lamp");
  const std::string forgotten = this->Upload("f.txt", "the lighthouse stairs");
  auto created =
      service->CreateStore("acme", {.name = "docs", .file_ids = {kept, removed, forgotten}});
  auto doomed = service->CreateStore("acme", {.name = "doomed"});
  ASSERT_TRUE(created.ok() && doomed.ok());
  ASSERT_TRUE(Eventually([&] { return this->Settled(*service, created->id); }));
  EXPECT_EQ(this->HitFiles(this->Find(*service, created->id, "lighthouse")).size(), 3u);
  ASSERT_TRUE(service->RemoveFile("acme", created->id, removed).ok());
  ASSERT_TRUE(service->ForgetFile("acme", forgotten).ok());
  ASSERT_TRUE(service->DeleteStore("acme", doomed->id).ok());
  EXPECT_EQ(this->HitFiles(this->Find(*service, created->id, "lighthouse")),
            std::vector<std::string>{kept});
  this->services_.clear();

  this->store_ = this->Open();
  ASSERT_NE(this->store_, nullptr);
  VectorStoreService* reopened = this->StartService(this->store_.get(), &this->embedder_);
  ASSERT_NE(reopened, nullptr);
  EXPECT_EQ(this->HitFiles(this->Find(*reopened, created->id, "lighthouse")),
            std::vector<std::string>{kept});
  EXPECT_EQ(reopened->GetStore("acme", doomed->id).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(reopened->GetFile("acme", created->id, removed).status().code(), StatusCode::kNotFound);
}

TYPED_TEST(VectorStoreServiceTest, SealedChunksOpenOnlyWithTheirKey) {
  std::unique_ptr<store::StoreKeyringStorage> storage;
  auto keyring = this->KeyringAt("master.key", '7', *this->store_, storage);
  ASSERT_NE(keyring, nullptr);
  crypto::Envelope envelope(*keyring);
  VectorStoreService* service = this->StartService(this->store_.get(), &this->embedder_,
                                                   {.envelope = &envelope, .seal_key = "chunks"});
  ASSERT_NE(service, nullptr);
  const std::string file = this->Upload("s.txt", "the confidential orchard map");
  auto created = service->CreateStore("acme", {.name = "docs", .file_ids = {file}});
  ASSERT_TRUE(created.ok());
  ASSERT_TRUE(Eventually([&] { return this->Settled(*service, created->id); }));
  EXPECT_EQ(this->HitFiles(this->Find(*service, created->id, "orchard")),
            std::vector<std::string>{file});
  auto rows = this->store_->ReadVectorStoreChunks(created->id, file);
  ASSERT_TRUE(rows.ok() && !rows->empty());
  EXPECT_EQ((*rows)[0].sealing, "envelope");
  EXPECT_EQ((*rows)[0].text.find("orchard"), std::string::npos);
  this->services_.clear();

  // Another keyring (another master key, its own "chunks" key) opens none of them.
  auto other = this->OtherKeyring();
  ASSERT_NE(other, nullptr);
  crypto::Envelope wrong(*other);
  VectorStoreService* stranger = this->StartService(this->store_.get(), &this->embedder_,
                                                    {.envelope = &wrong, .seal_key = "chunks"});
  ASSERT_NE(stranger, nullptr);
  EXPECT_FALSE(stranger->FileContent("acme", created->id, file).ok());
  EXPECT_TRUE(this->HitFiles(this->Find(*stranger, created->id, "orchard")).empty());
}

TYPED_TEST(VectorStoreServiceTest, AnExpiredStoreIsNotSearchable) {
  std::atomic<int64_t> now{1'000'000};
  VectorStoreService* service = this->StartService(this->store_.get(), &this->embedder_,
                                                   {.now_unix = [&] { return now.load(); }});
  ASSERT_NE(service, nullptr);
  auto created = service->CreateStore("acme", {.name = "docs", .expires_after = ExpiryPolicy{1}});
  ASSERT_TRUE(created.ok());
  EXPECT_EQ(created->expires_at, 1'000'000 + 86400);
  EXPECT_TRUE(this->Find(*service, created->id, "anything").ok());
  now += 2 * 86400;
  EXPECT_EQ(service->GetStore("acme", created->id)->status, "expired");
  EXPECT_EQ(this->Find(*service, created->id, "anything").status().code(),
            StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace rampart::knowledge::hub::testing
