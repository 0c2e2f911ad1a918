// The vector store service's index snapshots on both store backends: a restart loads them and
// answers as before; changes after a snapshot (by this instance or another) are replayed; a
// corrupt or mismatched snapshot falls back to a rebuild with the same answers; a sealed one
// holds no plaintext and opens under its own keyring only; a deleted store's snapshot goes.

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <tuple>
#include <vector>

#include "knowledge/hub/vector_store_service_fixture.h"

namespace rampart::knowledge::hub::testing {
namespace {

template <typename Backend>
class VectorStoreSnapshotTest : public VectorStoreServiceTest<Backend> {
 protected:
  VectorStoreServiceOptions Options(const std::string& folder = "snapshots") {
    VectorStoreServiceOptions options;
    options.snapshot_directory = this->dir_ + "/" + folder;
    options.snapshot_interval = std::chrono::hours(1);  // tests call SnapshotNow
    return options;
  }

  // Every ranker's answers to a few queries: file, score, text and position of each hit.
  using Answer = std::tuple<std::string, double, std::string, int, std::string, int>;
  std::vector<std::vector<Answer>> Answers(VectorStores& service, const std::string& store_id) {
    std::vector<std::vector<Answer>> answers;
    for (const char* query : {"harbour pilots", "lanterns", "tide tables harbour", "anchor"}) {
      for (const Ranker ranker : {Ranker::kKeyword, Ranker::kVector, Ranker::kHybrid}) {
        auto found = this->Find(service, store_id, query, ranker);
        EXPECT_TRUE(found.ok()) << found.status().ToString();
        std::vector<Answer>& list = answers.emplace_back();
        if (!found.ok()) continue;
        for (const SearchHit& hit : found->hits) {
          list.emplace_back(hit.file_id, hit.score, hit.text, hit.chunk_index, hit.heading_path,
                            hit.page);
        }
      }
    }
    return answers;
  }

  // A store of three files (one over several chunks, one with attributes); its id.
  std::string Fill(VectorStoreService& service) {
    std::string long_text = "# Harbour\n\n";
    for (int i = 0; i < 150; ++i) {
      long_text += "The harbour pilots read tide tables " + std::to_string(i) + ". ";
    }
    ids_ = {this->Upload("harbour.md", long_text),
            this->Upload("lamps.txt", "lanterns and lamps light the harbour wall"),
            this->Upload("anchor.txt", "an anchor chain of forty fathoms")};
    auto created = service.CreateStore(
        "acme", {.name = "docs", .file_ids = ids_, .chunking = ChunkingOptions::Static(100, 0)});
    EXPECT_TRUE(created.ok()) << created.status().ToString();
    if (!created.ok()) return "";
    EXPECT_TRUE(Eventually([&] { return this->Settled(service, created->id); }));
    EXPECT_TRUE(
        service.UpdateFileAttributes("acme", created->id, ids_[2], {{"kind", "gear"}}).ok());
    return created->id;
  }

  std::vector<std::filesystem::path> SnapshotFiles(const std::string& folder = "snapshots") {
    std::vector<std::filesystem::path> files;
    std::error_code error;
    for (const auto& entry :
         std::filesystem::recursive_directory_iterator(this->dir_ + "/" + folder, error)) {
      if (entry.path().extension() == ".snap") files.push_back(entry.path());
    }
    return files;
  }

  std::vector<std::string> ids_;
};

TYPED_TEST_SUITE(VectorStoreSnapshotTest, Backends, BackendNames);

TYPED_TEST(VectorStoreSnapshotTest, ARestartLoadsTheSnapshotAndAnswersTheSame) {
  VectorStoreService* first =
      this->StartService(this->store_.get(), &this->embedder_, this->Options());
  ASSERT_NE(first, nullptr);
  EXPECT_EQ(first->start_summary().stores_rebuilt, 0u);
  const std::string store_id = this->Fill(*first);
  const auto before = this->Answers(*first, store_id);
  ASSERT_FALSE(before.front().empty());
  this->services_.clear();  // a clean stop writes the snapshot
  ASSERT_EQ(this->SnapshotFiles().size(), 1u);

  VectorStoreService* second =
      this->StartService(this->store_.get(), &this->embedder_, this->Options());
  ASSERT_NE(second, nullptr);
  EXPECT_EQ(second->start_summary().stores_loaded, 1u);
  EXPECT_EQ(second->start_summary().stores_rebuilt, 0u);
  EXPECT_EQ(second->start_summary().changes_replayed, 0u);
  EXPECT_EQ(this->Answers(*second, store_id), before);
  SearchRequest request;
  request.queries = {"anchor"};
  request.filter =
      AttributeFilter{.op = AttributeFilter::Op::kEq, .key = "kind", .value = std::string("gear")};
  EXPECT_EQ(this->HitFiles(second->Search("acme", store_id, request)),
            std::vector<std::string>{this->ids_[2]});
  // Nothing changed: stopping again writes nothing new.
  const auto files = this->SnapshotFiles();
  this->services_.clear();
  EXPECT_EQ(this->SnapshotFiles(), files);
}

TYPED_TEST(VectorStoreSnapshotTest, ChangesAfterTheSnapshotAreReplayed) {
  auto other_store = this->Open();
  ASSERT_NE(other_store, nullptr);
  VectorStoreService* first =
      this->StartService(this->store_.get(), &this->embedder_, this->Options());
  ASSERT_NE(first, nullptr);
  const std::string store_id = this->Fill(*first);
  ASSERT_TRUE(first->SnapshotNow().ok());
  // As if this instance crashed after the snapshot: its folder as it was then comes back.
  const std::string saved = this->dir_ + "/saved";
  std::filesystem::copy(this->dir_ + "/snapshots", saved, std::filesystem::copy_options::recursive);
  // Changes by this instance after the snapshot ...
  ASSERT_TRUE(first->RemoveFile("acme", store_id, this->ids_[1]).ok());
  // ... and by another instance on the same store.
  VectorStoreService* other =
      this->StartService(other_store.get(), &this->embedder_, this->Options("other"));
  ASSERT_NE(other, nullptr);
  const std::string added = this->Upload("pilots.txt", "harbour pilots board at dawn");
  ASSERT_TRUE(other->AddFile("acme", store_id, {.file_id = added}).ok());
  ASSERT_TRUE(Eventually([&] { return this->Settled(*other, store_id); }));
  ASSERT_TRUE(other->UpdateFileAttributes("acme", store_id, this->ids_[2], {{"kind", "x"}}).ok());
  ASSERT_TRUE(first->SyncNow().ok());
  const auto expected = this->Answers(*first, store_id);
  EXPECT_EQ(this->Answers(*other, store_id), expected);
  this->services_.clear();
  std::filesystem::remove_all(this->dir_ + "/snapshots");
  std::filesystem::rename(saved, this->dir_ + "/snapshots");

  VectorStoreService* restarted =
      this->StartService(this->store_.get(), &this->embedder_, this->Options());
  ASSERT_NE(restarted, nullptr);
  EXPECT_EQ(restarted->start_summary().stores_loaded, 1u);
  EXPECT_GE(restarted->start_summary().changes_replayed, 3u);
  EXPECT_EQ(this->Answers(*restarted, store_id), expected);
  auto removed = this->Find(*restarted, store_id, "lanterns", Ranker::kKeyword);
  ASSERT_TRUE(removed.ok());
  for (const SearchHit& hit : removed->hits) EXPECT_NE(hit.file_id, this->ids_[1]);
  auto found = restarted->GetFile("acme", store_id, this->ids_[2]);
  ASSERT_TRUE(found.ok());
  EXPECT_EQ(std::get<std::string>(found->attributes.at("kind")), "x");
  this->services_.clear();  // before other_store goes
}

TYPED_TEST(VectorStoreSnapshotTest, ACorruptOrMismatchedSnapshotFallsBackToARebuild) {
  VectorStoreService* first =
      this->StartService(this->store_.get(), &this->embedder_, this->Options());
  ASSERT_NE(first, nullptr);
  const std::string store_id = this->Fill(*first);
  const auto before = this->Answers(*first, store_id);
  this->services_.clear();
  auto files = this->SnapshotFiles();
  ASSERT_EQ(files.size(), 1u);
  {  // one byte flipped in the middle
    std::fstream file(files[0], std::ios::in | std::ios::out | std::ios::binary);
    file.seekg(0, std::ios::end);
    const auto middle = static_cast<std::streamoff>(file.tellg()) / 2;
    file.seekg(middle);
    char byte = 0;
    file.read(&byte, 1);
    byte = static_cast<char>(byte ^ 0x5a);
    file.seekp(middle);
    file.write(&byte, 1);
  }
  VectorStoreService* second =
      this->StartService(this->store_.get(), &this->embedder_, this->Options());
  ASSERT_NE(second, nullptr);
  EXPECT_EQ(second->start_summary().stores_loaded, 0u);
  EXPECT_EQ(second->start_summary().stores_rebuilt, 1u);
  EXPECT_EQ(this->Answers(*second, store_id), before);
  this->services_.clear();  // the rebuilt index's snapshot replaces the damaged one's place
  ASSERT_FALSE(this->SnapshotFiles().empty());

  // Built with other settings (here the graphs' ef_construction): refused, rebuilt.
  VectorStoreServiceOptions other = this->Options();
  other.hnsw_ef_construction = 64;
  VectorStoreService* third = this->StartService(this->store_.get(), &this->embedder_, other);
  ASSERT_NE(third, nullptr);
  EXPECT_EQ(third->start_summary().stores_loaded, 0u);
  EXPECT_EQ(third->start_summary().stores_rebuilt, 1u);
  EXPECT_EQ(this->Answers(*third, store_id), before);
  this->services_.clear();
  VectorStoreService* fourth = this->StartService(this->store_.get(), &this->embedder_, other);
  ASSERT_NE(fourth, nullptr);
  EXPECT_EQ(fourth->start_summary().stores_loaded, 1u);
  EXPECT_EQ(this->Answers(*fourth, store_id), before);
}

TYPED_TEST(VectorStoreSnapshotTest, SealedSnapshotsOpenOnlyUnderTheirKeyring) {
  std::unique_ptr<store::StoreKeyringStorage> storage;
  auto keyring = this->KeyringAt("master.key", '7', *this->store_, storage);
  ASSERT_NE(keyring, nullptr);
  crypto::Envelope envelope(*keyring);
  VectorStoreServiceOptions sealed = this->Options();
  sealed.envelope = &envelope;
  sealed.seal_key = "chunks";
  VectorStoreService* service = this->StartService(this->store_.get(), &this->embedder_, sealed);
  ASSERT_NE(service, nullptr);
  const std::string file = this->Upload("s.txt", "the confidential orchard map");
  auto created = service->CreateStore("acme", {.name = "docs", .file_ids = {file}});
  ASSERT_TRUE(created.ok());
  ASSERT_TRUE(Eventually([&] { return this->Settled(*service, created->id); }));
  this->services_.clear();
  const auto files = this->SnapshotFiles();
  ASSERT_EQ(files.size(), 1u);
  std::ifstream in(files[0], std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(bytes.find("orchard"), std::string::npos);
  EXPECT_EQ(bytes.find(file), std::string::npos);

  VectorStoreService* again = this->StartService(this->store_.get(), &this->embedder_, sealed);
  ASSERT_NE(again, nullptr);
  EXPECT_EQ(again->start_summary().stores_loaded, 1u);
  EXPECT_EQ(this->HitFiles(this->Find(*again, created->id, "orchard")),
            std::vector<std::string>{file});
  this->services_.clear();

  // Another keyring opens neither the snapshot nor the chunks.
  auto other = this->OtherKeyring();
  ASSERT_NE(other, nullptr);
  crypto::Envelope wrong(*other);
  sealed.envelope = &wrong;
  VectorStoreService* stranger = this->StartService(this->store_.get(), &this->embedder_, sealed);
  ASSERT_NE(stranger, nullptr);
  EXPECT_EQ(stranger->start_summary().stores_loaded, 0u);
  EXPECT_EQ(stranger->start_summary().stores_rebuilt, 1u);
  EXPECT_TRUE(this->HitFiles(this->Find(*stranger, created->id, "orchard")).empty());
  this->services_.clear();  // before the keyrings go
}

TYPED_TEST(VectorStoreSnapshotTest, ADeletedStoresSnapshotIsRemoved) {
  VectorStoreService* service =
      this->StartService(this->store_.get(), &this->embedder_, this->Options());
  ASSERT_NE(service, nullptr);
  const std::string kept = this->Fill(*service);
  auto doomed = service->CreateStore("acme", {.name = "doomed"});
  ASSERT_TRUE(doomed.ok());
  const std::string file = this->Upload("d.txt", "soon gone");
  ASSERT_TRUE(service->AddFile("acme", doomed->id, {.file_id = file}).ok());
  ASSERT_TRUE(Eventually([&] { return this->Settled(*service, doomed->id); }));
  ASSERT_TRUE(service->SnapshotNow().ok());
  EXPECT_TRUE(std::filesystem::exists(this->dir_ + "/snapshots/" + doomed->id));
  ASSERT_TRUE(service->DeleteStore("acme", doomed->id).ok());
  ASSERT_TRUE(service->SnapshotNow().ok());
  EXPECT_FALSE(std::filesystem::exists(this->dir_ + "/snapshots/" + doomed->id));
  EXPECT_TRUE(std::filesystem::exists(this->dir_ + "/snapshots/" + kept));
}

}  // namespace
}  // namespace rampart::knowledge::hub::testing
