// Uploaded files' metadata (schema migration 5) on both backends: created once, seen only by
// their tenant, listed in OpenAI's paging order (creation time, then id; either direction; after
// a cursor; by purpose), deleted once.

#include <string>
#include <vector>

#include "store/store_fixture.h"

namespace rampart::store::testing {
namespace {

template <typename Backend>
using StoreFilesTest = StoreTest<Backend>;
TYPED_TEST_SUITE(StoreFilesTest, Backends, BackendNames);

StoredFile File(std::string tenant, int number, int64_t created,
                std::string purpose = "assistants") {
  std::string id = "file-" + std::string(22, '0') + std::to_string(10 + number);
  return StoredFile{.tenant = std::move(tenant),
                    .id = std::move(id),
                    .filename = "notes " + std::to_string(number) + " \xe4\xb8\xad.txt",
                    .purpose = std::move(purpose),
                    .bytes = 100 + number,
                    .created_unix = created,
                    .sealing = number % 2 == 0 ? "envelope" : ""};
}

std::vector<std::string> Ids(const Result<std::vector<StoredFile>>& files) {
  std::vector<std::string> ids;
  if (!files.ok()) return {files.status().ToString()};
  for (const StoredFile& file : *files) ids.push_back(file.id.substr(27));
  return ids;
}

TYPED_TEST(StoreFilesTest, FilesAreCreatedOnceAndSeenOnlyByTheirTenant) {
  Store& store = *this->store_;
  STORE_ASSERT_OK(store.CreateFile(File("acme", 1, 1000)));
  EXPECT_EQ(store.CreateFile(File("acme", 1, 1000)).code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(store.CreateFile(File("other", 1, 1000)).code(), StatusCode::kAlreadyExists);

  auto other = this->OpenOrDie();
  ASSERT_NE(other, nullptr);
  auto found = other->GetFile("acme", File("acme", 1, 0).id);
  ASSERT_TRUE(found.ok()) << found.status().ToString();
  ASSERT_TRUE(found->has_value());
  const StoredFile expected = File("acme", 1, 1000);
  EXPECT_EQ((*found)->filename, expected.filename);
  EXPECT_EQ((*found)->purpose, "assistants");
  EXPECT_EQ((*found)->bytes, 101);
  EXPECT_EQ((*found)->created_unix, 1000);
  EXPECT_EQ((*found)->sealing, "");

  auto hidden = other->GetFile("other", expected.id);
  ASSERT_TRUE(hidden.ok());
  EXPECT_FALSE(hidden->has_value());
  EXPECT_EQ(other->DeleteFile("other", expected.id).code(), StatusCode::kNotFound);
  STORE_ASSERT_OK(other->DeleteFile("acme", expected.id));
  EXPECT_EQ(store.DeleteFile("acme", expected.id).code(), StatusCode::kNotFound);
  auto gone = store.GetFile("acme", expected.id);
  ASSERT_TRUE(gone.ok());
  EXPECT_FALSE(gone->has_value());
}

TYPED_TEST(StoreFilesTest, ATimeOfZeroIsSetByTheStore) {
  Store& store = *this->store_;
  STORE_ASSERT_OK(store.CreateFile(File("acme", 2, 0)));
  auto found = store.GetFile("acme", File("acme", 2, 0).id);
  ASSERT_TRUE(found.ok() && found->has_value());
  EXPECT_GT((*found)->created_unix, 1600000000);
  EXPECT_EQ((*found)->sealing, "envelope");
}

TYPED_TEST(StoreFilesTest, ListsPageInCreationOrderEitherWayAndByPurpose) {
  Store& store = *this->store_;
  // Created out of order; 3 and 4 at the same second (the id breaks the tie).
  STORE_ASSERT_OK(store.CreateFile(File("acme", 4, 2000)));
  STORE_ASSERT_OK(store.CreateFile(File("acme", 1, 1000)));
  STORE_ASSERT_OK(store.CreateFile(File("acme", 3, 2000, "user_data")));
  STORE_ASSERT_OK(store.CreateFile(File("acme", 5, 3000)));
  STORE_ASSERT_OK(store.CreateFile(File("beta", 6, 1500)));

  FileQuery query{.tenant = "acme", .descending = false, .limit = 10};
  EXPECT_EQ(Ids(store.ListFiles(query)), (std::vector<std::string>{"11", "13", "14", "15"}));
  query.descending = true;
  EXPECT_EQ(Ids(store.ListFiles(query)), (std::vector<std::string>{"15", "14", "13", "11"}));
  query.limit = 2;
  EXPECT_EQ(Ids(store.ListFiles(query)), (std::vector<std::string>{"15", "14"}));
  query.after = File("acme", 4, 0).id;
  EXPECT_EQ(Ids(store.ListFiles(query)), (std::vector<std::string>{"13", "11"}));
  query.descending = false;
  EXPECT_EQ(Ids(store.ListFiles(query)), (std::vector<std::string>{"15"}));
  query.after = File("beta", 6, 0).id;  // another tenant's cursor: nothing
  EXPECT_EQ(Ids(store.ListFiles(query)), (std::vector<std::string>{}));
  query.after.clear();
  query.purpose = "user_data";
  EXPECT_EQ(Ids(store.ListFiles(query)), (std::vector<std::string>{"13"}));
  EXPECT_EQ(Ids(store.ListFiles({.tenant = "beta"})), (std::vector<std::string>{"16"}));
  EXPECT_EQ(Ids(store.ListFiles({.tenant = "nobody"})), (std::vector<std::string>{}));
  EXPECT_FALSE(store.ListFiles({.tenant = "acme", .limit = 0}).ok());
}

TYPED_TEST(StoreFilesTest, FieldsOutOfTheirRulesAreRefused) {
  Store& store = *this->store_;
  StoredFile file = File("acme", 1, 1000);
  file.id = "file-ABC";
  EXPECT_EQ(store.CreateFile(file).code(), StatusCode::kInvalidArgument);
  file = File("acme", 1, 1000);
  file.purpose = "Bad Purpose";
  EXPECT_EQ(store.CreateFile(file).code(), StatusCode::kInvalidArgument);
  file = File("acme", 1, 1000);
  file.filename.clear();
  EXPECT_EQ(store.CreateFile(file).code(), StatusCode::kInvalidArgument);
  file = File("", 1, 1000);
  EXPECT_EQ(store.CreateFile(file).code(), StatusCode::kInvalidArgument);
  file = File("acme", 1, 1000);
  file.sealing = "rot13";
  EXPECT_EQ(store.CreateFile(file).code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace rampart::store::testing
