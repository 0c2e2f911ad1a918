// The vector store service end to end on both store backends: files of each type ingested in the
// background and searched by keyword, vector and both; filters and per-file access inside the
// ranking; failures that stay with their file; resuming after a stop; a second instance on the
// same store following the first; durable removal; sealed chunks; expiry.

#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "crypto/keyring.h"
#include "knowledge/hub/vector_store_service.h"
#include "store/keyring_storage.h"
#include "store/store_backends.h"
#include "testing/eventually.h"

namespace rampart::knowledge::hub {
namespace {

using rampart::testing::Eventually;
using store::testing::PostgresBackend;
using store::testing::SqliteBackend;

// Hashed word counts, normalised: texts sharing words are close. Deterministic. Blocks while
// `blocked` is set (until Release), counting the calls that entered.
class FakeEmbedder final : public Embedder {
 public:
  Result<std::vector<std::vector<float>>> Embed(const std::vector<std::string>& texts) override {
    {
      std::unique_lock lock(mutex_);
      ++entered_;
      changed_.notify_all();
      changed_.wait(lock, [&] { return !blocked_; });
    }
    std::vector<std::vector<float>> vectors;
    for (const std::string& text : texts) {
      std::vector<float> vector(kDimension, 0);
      std::string word;
      const auto flush = [&] {
        if (!word.empty()) vector[std::hash<std::string>()(word) % kDimension] += 1;
        word.clear();
      };
      for (const char c : text) {
        if (std::isalnum(static_cast<unsigned char>(c))) {
          word += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        } else {
          flush();
        }
      }
      flush();
      vector[0] += 0.01f;  // never all zeros
      vectors.push_back(std::move(vector));
    }
    return vectors;
  }
  size_t dimension() const override { return kDimension; }
  std::string name() const override { return "fake-hash-64"; }

  void Block() {
    std::lock_guard lock(mutex_);
    blocked_ = true;
  }
  void Release() {
    std::lock_guard lock(mutex_);
    blocked_ = false;
    changed_.notify_all();
  }
  int entered() {
    std::lock_guard lock(mutex_);
    return entered_;
  }

 private:
  static constexpr size_t kDimension = 64;
  std::mutex mutex_;
  std::condition_variable changed_;
  bool blocked_ = false;
  int entered_ = 0;
};

// A minimal valid PDF, one page per entry (as pdf_test.cc writes them).
std::string MakePdf(const std::vector<std::string>& pages) {
  std::vector<std::string> objects;
  objects.push_back("<< /Type /Catalog /Pages 2 0 R >>");
  std::string kids;
  for (size_t i = 0; i < pages.size(); ++i) kids += std::to_string(4 + 2 * i) + " 0 R ";
  objects.push_back("<< /Type /Pages /Kids [" + kids + "] /Count " + std::to_string(pages.size()) +
                    " >>");
  objects.push_back("<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>");
  for (size_t i = 0; i < pages.size(); ++i) {
    objects.push_back(
        "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font "
        "<< /F1 3 0 R >> >> /Contents " +
        std::to_string(5 + 2 * i) + " 0 R >>");
    std::string content = "BT /F1 12 Tf 72 720 Td 14 TL\n";
    size_t start = 0;  // one text line per line of the page
    while (start <= pages[i].size()) {
      const size_t end = std::min(pages[i].find('\n', start), pages[i].size());
      content += '(';
      content.append(pages[i], start, end - start);
      content += ") Tj T*\n";
      start = end + 1;
    }
    content += "ET";
    objects.push_back("<< /Length " + std::to_string(content.size()) + " >>\nstream\n" + content +
                      "\nendstream");
  }
  std::string pdf = "%PDF-1.4\n";
  std::vector<size_t> offsets;
  for (size_t i = 0; i < objects.size(); ++i) {
    offsets.push_back(pdf.size());
    pdf += std::to_string(i + 1) + " 0 obj\n" + objects[i] + "\nendobj\n";
  }
  const size_t xref = pdf.size();
  pdf += "xref\n0 " + std::to_string(objects.size() + 1) + "\n0000000000 65535 f \n";
  for (const size_t offset : offsets) {
    char entry[32];
    std::snprintf(entry, sizeof(entry), "%010zu 00000 n \n", offset);
    pdf += entry;
  }
  pdf += "trailer\n<< /Size " + std::to_string(objects.size() + 1) +
         " /Root 1 0 R >>\nstartxref\n" + std::to_string(xref) + "\n%%EOF\n";
  return pdf;
}

template <typename Backend>
class VectorStoreServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(backend_.SetUp().ok());
    char pattern[] = "/tmp/rampart-vs-XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr);
    dir_ = pattern;
    store_ = Open();
    ASSERT_NE(store_, nullptr);
    files_ = std::make_unique<FileStorage>(dir_ + "/files", nullptr, "");
    ASSERT_TRUE(files_->Prepare().ok());
  }
  void TearDown() override {
    services_.clear();
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }

  std::unique_ptr<store::Store> Open() {
    auto opened = backend_.Open();
    EXPECT_TRUE(opened.ok()) << opened.status().ToString();
    return opened.ok() ? std::move(*opened) : nullptr;
  }

  VectorStoreService* StartService(store::Store* store, Embedder* embedder,
                                   VectorStoreServiceOptions options = {}) {
    options.sync_interval = std::chrono::milliseconds(20);
    auto service = NewVectorStoreService(store, files_.get(), embedder, options);
    EXPECT_TRUE(service.ok()) << service.status().ToString();
    if (!service.ok()) return nullptr;
    const Status started = (*service)->Start();
    EXPECT_TRUE(started.ok()) << started.ToString();
    services_.push_back(std::move(*service));
    return services_.back().get();
  }

  // Uploads `content` as the Files API would; answers the file id.
  std::string Upload(const std::string& filename, const std::string& content,
                     const std::string& tenant = "acme") {
    const std::string id = "file-" + std::string(20, '0') + std::to_string(1000 + uploads_++);
    EXPECT_TRUE(store_
                    ->CreateFile(store::StoredFile{.tenant = tenant,
                                                   .id = id,
                                                   .filename = filename,
                                                   .purpose = "assistants",
                                                   .bytes = static_cast<int64_t>(content.size())})
                    .ok());
    auto writer = files_->Create(tenant, id);
    EXPECT_TRUE(writer.ok());
    EXPECT_TRUE((*writer)->Write(content).ok());
    EXPECT_TRUE((*writer)->Commit().ok());
    return id;
  }

  static bool Settled(VectorStores& service, const std::string& store_id) {
    auto info = service.GetStore("acme", store_id);
    return info.ok() && info->file_counts.in_progress == 0;
  }

  static std::vector<std::string> HitFiles(const Result<SearchResults>& results) {
    std::vector<std::string> files;
    if (!results.ok()) return {results.status().ToString()};
    for (const SearchHit& hit : results->hits) files.push_back(hit.file_id);
    return files;
  }

  static Result<SearchResults> Find(VectorStores& service, const std::string& store_id,
                                    const std::string& query, Ranker ranker = Ranker::kHybrid) {
    SearchRequest request;
    request.queries = {query};
    request.ranker = ranker;
    return service.Search("acme", store_id, request);
  }

  Backend backend_;
  std::string dir_;
  std::unique_ptr<store::Store> store_;
  std::unique_ptr<FileStorage> files_;
  FakeEmbedder embedder_;
  std::vector<std::unique_ptr<VectorStoreService>> services_;
  int uploads_ = 0;
};

struct BackendNames {
  template <typename Backend>
  static std::string GetName(int) {
    return Backend::kShared ? "Postgres" : "Sqlite";
  }
};
using Backends = ::testing::Types<SqliteBackend, PostgresBackend>;
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
  const auto keyring_at = [&](const std::string& name, char fill, store::Store& store,
                              std::unique_ptr<store::StoreKeyringStorage>& storage)
      -> std::unique_ptr<crypto::Keyring> {
    const std::string path = this->dir_ + "/" + name;
    std::ofstream(path) << std::string(64, fill);
    std::filesystem::permissions(path, std::filesystem::perms::owner_read);
    auto master = crypto::MasterKeyFromFile(path);
    EXPECT_TRUE(master.ok()) << master.status().ToString();
    storage = std::make_unique<store::StoreKeyringStorage>(store);
    auto keyring = crypto::Keyring::Open(*storage, std::move(*master));
    EXPECT_TRUE(keyring.ok()) << keyring.status().ToString();
    EXPECT_TRUE((*keyring)->Ensure("chunks", crypto::KeyPurpose::kWrapping, "aes-256-gcm").ok());
    return std::move(*keyring);
  };
  std::unique_ptr<store::StoreKeyringStorage> storage;
  auto keyring = keyring_at("master.key", '7', *this->store_, storage);
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
  auto elsewhere = store::OpenSqliteStore(this->dir_ + "/elsewhere");
  ASSERT_TRUE(elsewhere.ok());
  std::unique_ptr<store::StoreKeyringStorage> other_storage;
  auto other = keyring_at("other.key", '9', **elsewhere, other_storage);
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
}  // namespace rampart::knowledge::hub
