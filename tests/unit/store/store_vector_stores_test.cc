// Vector stores' tables (schema migration 6) on both backends: stores and files seen only by
// their tenant, claims that two workers never share, finishing a file replacing its chunks
// whole, cancellation, removal, and the change sequence a replica follows.

#include <string>
#include <vector>

#include "store/store_fixture.h"

namespace rampart::store::testing {
namespace {

template <typename Backend>
using StoreVectorStoresTest = StoreTest<Backend>;
TYPED_TEST_SUITE(StoreVectorStoresTest, Backends, BackendNames);

VectorStoreRow StoreRow(std::string tenant, std::string id) {
  return VectorStoreRow{.tenant = std::move(tenant),
                        .id = std::move(id),
                        .name = "docs",
                        .metadata = "{}",
                        .created_unix = 100,
                        .last_active_unix = 100,
                        .expires_days = 0,
                        .embedder = "fake"};
}

VectorStoreFileRow FileRow(std::string store, std::string file, int64_t created,
                           std::string batch = "") {
  return VectorStoreFileRow{.tenant = "acme",
                            .store_id = std::move(store),
                            .file_id = std::move(file),
                            .filename = "a.txt",
                            .created_unix = created,
                            .status = "in_progress",
                            .attributes = "{}",
                            .chunking = "{}",
                            .batch_id = std::move(batch)};
}

VectorStoreChunkRow ChunkRow(const std::string& store, const std::string& file, int index) {
  return VectorStoreChunkRow{.store_id = store,
                             .file_id = file,
                             .chunk_index = index,
                             .text = std::string("chunk \0 ", 8) + std::to_string(index),
                             .heading_path = "A > B",
                             .page = 2,
                             .begin = index * 10,
                             .end = index * 10 + 9,
                             .embedding = std::string("\x01\x00\x80\x3f", 4)};
}

TYPED_TEST(StoreVectorStoresTest, StoresAndFilesBelongToTheirTenant) {
  Store& store = *this->store_;
  STORE_ASSERT_OK(store.CreateVectorStore(StoreRow("acme", "vs_1"), {FileRow("vs_1", "f1", 1)}));
  EXPECT_EQ(store.CreateVectorStore(StoreRow("acme", "vs_1"), {}).code(),
            StatusCode::kAlreadyExists);
  STORE_ASSERT_OK(store.CreateVectorStore(StoreRow("other", "vs_2"), {}));
  auto found = store.GetVectorStore("acme", "vs_1");
  ASSERT_TRUE(found.ok() && found->has_value());
  EXPECT_EQ((*found)->name, "docs");
  EXPECT_FALSE(store.GetVectorStore("other", "vs_1")->has_value());
  EXPECT_EQ(store.ListVectorStores("acme")->size(), 1u);
  EXPECT_EQ(store.ListVectorStores("")->size(), 2u);

  VectorStoreRow renamed = StoreRow("acme", "vs_1");
  renamed.name = "renamed";
  renamed.expires_days = 7;
  STORE_ASSERT_OK(store.UpdateVectorStore(renamed));
  EXPECT_EQ((*store.GetVectorStore("acme", "vs_1"))->expires_days, 7);
  EXPECT_EQ(store.UpdateVectorStore(StoreRow("other", "vs_1")).code(), StatusCode::kNotFound);

  STORE_ASSERT_OK(store.AddVectorStoreFiles(
      VectorStoreBatchRow{.tenant = "acme", .store_id = "vs_1", .id = "vsfb_1"},
      {FileRow("vs_1", "f1", 9), FileRow("vs_1", "f2", 2, "vsfb_1")}));
  auto files = store.ListVectorStoreFiles("acme", "vs_1");
  ASSERT_TRUE(files.ok());
  ASSERT_EQ(files->size(), 2u);
  EXPECT_EQ((*files)[0].created_unix, 1);  // kept as it was
  EXPECT_EQ((*files)[1].batch_id, "vsfb_1");
  EXPECT_TRUE(store.ListVectorStoreFiles("other", "vs_1")->empty());
  EXPECT_EQ(store.AddVectorStoreFiles(std::nullopt, {FileRow("vs_9", "f1", 1)}).code(),
            StatusCode::kNotFound);
  STORE_ASSERT_OK(store.UpdateVectorStoreFileAttributes("acme", "vs_1", "f1", R"({"a":1})"));
  EXPECT_EQ((*store.GetVectorStoreFile("acme", "vs_1", "f1"))->attributes, R"({"a":1})");
  EXPECT_TRUE(store.GetVectorStoreBatch("acme", "vs_1", "vsfb_1")->has_value());
  EXPECT_FALSE(store.GetVectorStoreBatch("other", "vs_1", "vsfb_1")->has_value());
}

TYPED_TEST(StoreVectorStoresTest, AFileKeepsWhetherItsTextIsRedacted) {
  Store& store = *this->store_;
  VectorStoreFileRow flagged = FileRow("vs_1", "f1", 1);
  flagged.redact_pii = true;
  STORE_ASSERT_OK(store.CreateVectorStore(StoreRow("acme", "vs_1"), {flagged}));
  VectorStoreFileRow batched = FileRow("vs_1", "f2", 2, "vsfb_1");
  batched.redact_pii = true;
  STORE_ASSERT_OK(store.AddVectorStoreFiles(
      VectorStoreBatchRow{.tenant = "acme", .store_id = "vs_1", .id = "vsfb_1"},
      {batched, FileRow("vs_1", "f3", 3)}));
  auto reopened = this->OpenOrDie();
  ASSERT_NE(reopened, nullptr);
  EXPECT_TRUE((*reopened->GetVectorStoreFile("acme", "vs_1", "f1"))->redact_pii);
  auto files = reopened->ListVectorStoreFiles("acme", "vs_1");
  ASSERT_TRUE(files.ok());
  ASSERT_EQ(files->size(), 3u);
  EXPECT_TRUE((*files)[1].redact_pii);
  EXPECT_FALSE((*files)[2].redact_pii);
  // The worker that claims a file reads the flag with it.
  auto claimed = reopened->ClaimVectorStoreFile("w1", 1000, 1300);
  ASSERT_TRUE(claimed.ok() && claimed->has_value());
  EXPECT_EQ((*claimed)->file_id, "f1");
  EXPECT_TRUE((*claimed)->redact_pii);
}

TYPED_TEST(StoreVectorStoresTest, AClaimIsHeldByOneWorkerAndFinishingReplacesTheChunksWhole) {
  Store& store = *this->store_;
  STORE_ASSERT_OK(store.CreateVectorStore(StoreRow("acme", "vs_1"),
                                          {FileRow("vs_1", "f1", 1), FileRow("vs_1", "f2", 2)}));
  auto replica = this->OpenOrDie();
  ASSERT_NE(replica, nullptr);
  auto first = store.ClaimVectorStoreFile("w1", 1000, 1300);
  auto second = replica->ClaimVectorStoreFile("w2", 1000, 1300);
  auto none = store.ClaimVectorStoreFile("w3", 1000, 1300);
  ASSERT_TRUE(first.ok() && first->has_value());
  ASSERT_TRUE(second.ok() && second->has_value());
  EXPECT_EQ((*first)->file_id, "f1");
  EXPECT_EQ((*second)->file_id, "f2");
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());
  // The lease ran out: another worker takes the file over, and the first may no longer finish.
  auto taken = replica->ClaimVectorStoreFile("w3", 1400, 1700);
  ASSERT_TRUE(taken.ok() && taken->has_value());
  EXPECT_EQ((*taken)->file_id, "f1");

  // A worker that stops gives its claim up at once.
  STORE_ASSERT_OK(replica->ReleaseVectorStoreFile("vs_1", "f2", "w2"));
  auto resumed = store.ClaimVectorStoreFile("w4", 1000, 1300);
  ASSERT_TRUE(resumed.ok() && resumed->has_value());
  EXPECT_EQ((*resumed)->file_id, "f2");

  VectorStoreFileRow done = **first;
  done.status = "completed";
  done.usage_bytes = 30;
  EXPECT_EQ(store.FinishVectorStoreFile(done, "w1", {ChunkRow("vs_1", "f1", 0)}).code(),
            StatusCode::kFailedPrecondition);
  STORE_ASSERT_OK(store.FinishVectorStoreFile(
      done, "w3", {ChunkRow("vs_1", "f1", 0), ChunkRow("vs_1", "f1", 1)}));
  auto chunks = replica->ReadVectorStoreChunks("vs_1", "f1");
  ASSERT_TRUE(chunks.ok());
  ASSERT_EQ(chunks->size(), 2u);
  EXPECT_EQ((*chunks)[1].text, ChunkRow("vs_1", "f1", 1).text);
  EXPECT_EQ((*chunks)[1].embedding, ChunkRow("vs_1", "f1", 1).embedding);
  EXPECT_EQ((*chunks)[1].heading_path, "A > B");
  EXPECT_EQ((*chunks)[1].end, 19);
  auto file = store.GetVectorStoreFile("acme", "vs_1", "f1");
  EXPECT_EQ((*file)->status, "completed");
  EXPECT_EQ((*file)->claimed_by, "");
  EXPECT_EQ((*file)->usage_bytes, 30);

  auto changes = replica->ReadVectorStoreChanges(0, 100);
  ASSERT_TRUE(changes.ok());
  ASSERT_EQ(changes->size(), 1u);
  EXPECT_EQ((*changes)[0].kind, "chunks");
  EXPECT_EQ((*changes)[0].file_id, "f1");
  EXPECT_EQ(*replica->LastVectorStoreChange(), (*changes)[0].sequence);
}

TYPED_TEST(StoreVectorStoresTest, CancelRemoveAndDeleteAreDurableAndAppearInTheSequence) {
  Store& store = *this->store_;
  STORE_ASSERT_OK(store.CreateVectorStore(StoreRow("acme", "vs_1"), {}));
  STORE_ASSERT_OK(store.CreateVectorStore(StoreRow("acme", "vs_2"), {}));
  STORE_ASSERT_OK(store.AddVectorStoreFiles(
      VectorStoreBatchRow{.tenant = "acme", .store_id = "vs_1", .id = "vsfb_1"},
      {FileRow("vs_1", "f1", 1, "vsfb_1"), FileRow("vs_2", "f1", 1)}));
  EXPECT_EQ(store.CancelVectorStoreBatch("other", "vs_1", "vsfb_1").code(), StatusCode::kNotFound);
  STORE_ASSERT_OK(store.CancelVectorStoreBatch("acme", "vs_1", "vsfb_1"));
  EXPECT_EQ((*store.GetVectorStoreFile("acme", "vs_1", "f1"))->status, "cancelled");

  auto claimed = store.ClaimVectorStoreFile("w1", 10, 20);
  ASSERT_TRUE(claimed.ok() && claimed->has_value());
  EXPECT_EQ((*claimed)->store_id, "vs_2");
  VectorStoreFileRow done = **claimed;
  done.status = "completed";
  STORE_ASSERT_OK(store.FinishVectorStoreFile(done, "w1", {ChunkRow("vs_2", "f1", 0)}));

  EXPECT_EQ(store.RemoveVectorStoreFile("other", "", "f1").code(), StatusCode::kNotFound);
  STORE_ASSERT_OK(store.RemoveVectorStoreFile("acme", "", "f1"));  // from both stores
  auto reopened = this->OpenOrDie();
  ASSERT_NE(reopened, nullptr);
  EXPECT_TRUE(reopened->ListVectorStoreFiles("acme", "vs_1")->empty());
  EXPECT_TRUE(reopened->ReadVectorStoreChunks("vs_2", "")->empty());
  EXPECT_EQ(reopened->DeleteVectorStore("other", "vs_1").code(), StatusCode::kNotFound);
  STORE_ASSERT_OK(reopened->DeleteVectorStore("acme", "vs_1"));
  EXPECT_FALSE(store.GetVectorStore("acme", "vs_1")->has_value());

  auto changes = store.ReadVectorStoreChanges(0, 100);
  ASSERT_TRUE(changes.ok());
  std::vector<std::string> kinds;
  for (const VectorStoreChange& change : *changes) kinds.push_back(change.kind);
  EXPECT_EQ(kinds, (std::vector<std::string>{"chunks", "removed", "removed", "store_removed"}));
  auto after = store.ReadVectorStoreChanges((*changes)[1].sequence, 100);
  EXPECT_EQ(after->size(), 2u);
}

}  // namespace
}  // namespace rampart::store::testing
