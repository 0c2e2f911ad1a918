#pragma once

// The vector store service tests' fixture (vector_store_service_test.cc,
// vector_store_redact_test.cc): a deterministic fake embedder, a minimal PDF writer, and a
// fixture per store backend with the Files API's storage in a temporary folder.

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
#include "testing/minimal_pdf.h"

namespace rampart::knowledge::hub::testing {

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

// A minimal valid PDF, one page per entry, its lines split at '\n'.
inline std::string MakePdf(const std::vector<std::string>& pages) {
  std::vector<std::vector<std::string>> lines;
  for (const std::string& page : pages) {
    std::vector<std::string>& page_lines = lines.emplace_back();
    size_t start = 0;
    while (start <= page.size()) {
      const size_t end = std::min(page.find('\n', start), page.size());
      page_lines.push_back(page.substr(start, end - start));
      start = end + 1;
    }
  }
  return ::rampart::testing::MakePdf(lines);
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
    other_storage_.reset();
    other_store_.reset();
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

  // A keyring over `store` (its storage kept in `storage`) whose master key is a file of `fill`
  // bytes named `name` in the test's folder, holding the wrapping key "chunks".
  std::unique_ptr<crypto::Keyring> KeyringAt(const std::string& name, char fill,
                                             store::Store& store,
                                             std::unique_ptr<store::StoreKeyringStorage>& storage) {
    const std::string path = dir_ + "/" + name;
    std::ofstream(path) << std::string(64, fill);
    std::filesystem::permissions(path, std::filesystem::perms::owner_read);
    auto master = crypto::MasterKeyFromFile(path);
    EXPECT_TRUE(master.ok()) << master.status().ToString();
    storage = std::make_unique<store::StoreKeyringStorage>(store);
    auto keyring = crypto::Keyring::Open(*storage, std::move(*master));
    EXPECT_TRUE(keyring.ok()) << keyring.status().ToString();
    EXPECT_TRUE((*keyring)->Ensure("chunks", crypto::KeyPurpose::kWrapping, "aes-256-gcm").ok());
    return std::move(*keyring);
  }

  // The keyring of another deployment: its own store and master key, with its own "chunks" key
  // (the store and the keyring's storage are the fixture's).
  std::unique_ptr<crypto::Keyring> OtherKeyring() {
    auto elsewhere = store::OpenSqliteStore(dir_ + "/elsewhere");
    EXPECT_TRUE(elsewhere.ok()) << elsewhere.status().ToString();
    if (!elsewhere.ok()) return nullptr;
    other_store_ = std::move(*elsewhere);
    return KeyringAt("other.key", '9', *other_store_, other_storage_);
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
  // OtherKeyring's.
  std::unique_ptr<store::Store> other_store_;
  std::unique_ptr<store::StoreKeyringStorage> other_storage_;
};

struct BackendNames {
  template <typename Backend>
  static std::string GetName(int) {
    return Backend::kShared ? "Postgres" : "Sqlite";
  }
};
using Backends = ::testing::Types<SqliteBackend, PostgresBackend>;

}  // namespace rampart::knowledge::hub::testing
