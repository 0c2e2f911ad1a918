// OpenIndexCatalog over the embedded engine (NewHnswEngine): the catalog's rules, and the whole
// durable stack (engine, log, snapshots) across a close and reopen.

#include <filesystem>
#include <fstream>
#include <future>
#include <random>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "knowledge/index/backend.h"
#include "knowledge/index/durable_index.h"
#include "temp_folder.h"
#include "test_keyring.h"

namespace rampart::knowledge {
namespace {

namespace fs = std::filesystem;

IndexSpec Spec(const std::string& name, size_t dimension = 4, bool protect = false) {
  IndexSpec spec;
  spec.name = name;
  spec.engine.dimension = dimension;
  spec.engine.metric = Metric::kCosine;
  spec.deletion_protection = protect;
  return spec;
}

Status Wait(const std::function<void(WriteDone)>& write) {
  std::promise<Status> done;
  write([&](Status status) { done.set_value(status); });
  return done.get_future().get();
}

std::vector<VectorRecord> RandomRecords(std::mt19937& random, int first, int count) {
  std::normal_distribution<float> value(0, 1);
  std::vector<VectorRecord> records;
  for (int i = first; i < first + count; ++i) {
    VectorRecord record{fmt::format("v{}", i),
                        {value(random), value(random), value(random), value(random)},
                        {},
                        {{"n", double(i)}, {"s", fmt::format("g{}", i % 3)}}};
    records.push_back(std::move(record));
  }
  return records;
}

TEST(CatalogTest, CreateValidatesTheNameAndDimensionAndRefusesDuplicates) {
  testing::TempFolder folder;
  auto catalog = OpenIndexCatalog({.directory = folder.path() + "/indexes"});
  ASSERT_TRUE(catalog.ok()) << catalog.status().ToString();
  for (const std::string& bad :
       {std::string(""), std::string("Upper"), std::string("a_b"), std::string("-a"),
        std::string("a-"), std::string(46, 'a'), std::string("../x")}) {
    auto created = (*catalog)->Create(Spec(bad));
    ASSERT_FALSE(created.ok()) << bad;
    EXPECT_EQ(created.status().code(), StatusCode::kInvalidArgument) << bad;
  }
  EXPECT_EQ((*catalog)->Create(Spec("a", 0)).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ((*catalog)->Create(Spec("a", kMaxDimension + 1)).status().code(),
            StatusCode::kInvalidArgument);
  ASSERT_TRUE((*catalog)->Create(Spec(std::string(45, 'z'))).ok());
  ASSERT_TRUE((*catalog)->Create(Spec("b-2")).ok());
  const auto again = (*catalog)->Create(Spec("b-2", 8));
  EXPECT_EQ(again.status().code(), StatusCode::kAlreadyExists);
  const std::vector<IndexSpec> listed = (*catalog)->List();
  ASSERT_EQ(listed.size(), 2u);
  EXPECT_EQ(listed[0].name, "b-2");
  EXPECT_EQ((*catalog)->Get("nope").status().code(), StatusCode::kNotFound);
}

TEST(CatalogTest, IndexesAndTheirRecordsSurviveAReopen) {
  testing::TempFolder folder;
  CatalogOptions options{.directory = folder.path()};
  options.durability.snapshot_every_records = 150;  // some in snapshots, some in the log
  std::mt19937 random(7);
  std::vector<VectorRecord> written;
  {
    auto catalog = OpenIndexCatalog(options);
    ASSERT_TRUE(catalog.ok());
    auto index = (*catalog)->Create(Spec("movies", 4, /*protect=*/true));
    ASSERT_TRUE(index.ok()) << index.status().ToString();
    for (int batch = 0; batch < 5; ++batch) {
      std::vector<VectorRecord> records = RandomRecords(random, batch * 100, 100);
      written.insert(written.end(), records.begin(), records.end());
      ASSERT_TRUE(Wait([&](WriteDone done) {
                    (*index)->Upsert(batch % 2 ? "b" : "", records, std::move(done));
                  }).ok());
    }
    ASSERT_TRUE(Wait([&](WriteDone done) {
                  (*index)->Delete({"", {"v0", "v1"}, false, std::nullopt}, std::move(done));
                }).ok());
  }  // closed: a last snapshot
  auto catalog = OpenIndexCatalog(options);
  ASSERT_TRUE(catalog.ok()) << catalog.status().ToString();
  auto index = (*catalog)->Get("movies");
  ASSERT_TRUE(index.ok());
  EXPECT_TRUE((*index)->spec().deletion_protection);
  EXPECT_EQ((*index)->spec().engine.dimension, 4u);
  auto stats = (*index)->Stats(nullptr);
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->total_vector_count, 498u);
  for (size_t i = 2; i < written.size(); ++i) {
    const std::string name_space = (i / 100) % 2 ? "b" : "";
    const auto fetched = (*index)->Fetch(name_space, std::span(&written[i].id, 1));
    ASSERT_EQ(fetched.size(), 1u) << written[i].id;
    EXPECT_EQ(fetched[0].values, written[i].values);
    EXPECT_EQ(fetched[0].metadata, written[i].metadata);
  }
  QueryRequest query;
  query.vector = written[250].values;
  query.name_space = "";
  query.top_k = 1;
  auto found = (*index)->Query(query);
  ASSERT_TRUE(found.ok()) << found.status().ToString();
  ASSERT_EQ(found->matches.size(), 1u);
  EXPECT_EQ(found->matches[0].id, "v250");
}

TEST(CatalogTest, DeleteHonoursProtectionAndLeavesNothingThatOpens) {
  testing::TempFolder folder;
  CatalogOptions options{.directory = folder.path()};
  {
    auto catalog = OpenIndexCatalog(options);
    ASSERT_TRUE(catalog.ok());
    ASSERT_TRUE((*catalog)->Create(Spec("kept", 4, /*protect=*/true)).ok());
    ASSERT_TRUE((*catalog)->Create(Spec("gone")).ok());
    EXPECT_EQ((*catalog)->Delete("kept").code(), StatusCode::kFailedPrecondition);
    EXPECT_EQ((*catalog)->Delete("missing").code(), StatusCode::kNotFound);
    ASSERT_TRUE((*catalog)->Delete("gone").ok());
    EXPECT_FALSE(fs::exists(folder.path() + "/gone"));
    EXPECT_EQ((*catalog)->Get("gone").status().code(), StatusCode::kNotFound);
  }
  // What a crash mid-create or mid-delete leaves is removed at the next start.
  fs::create_directories(folder.path() + "/.deleted-old-1234");
  fs::create_directories(folder.path() + "/.creating-new-5678");
  std::ofstream(folder.path() + "/.creating-new-5678/index.json") << "{}";
  auto catalog = OpenIndexCatalog(options);
  ASSERT_TRUE(catalog.ok()) << catalog.status().ToString();
  ASSERT_EQ((*catalog)->List().size(), 1u);
  EXPECT_FALSE(fs::exists(folder.path() + "/.deleted-old-1234"));
  EXPECT_FALSE(fs::exists(folder.path() + "/.creating-new-5678"));
}

TEST(CatalogTest, ADamagedSpecIsAStartupErrorNamingTheIndex) {
  testing::TempFolder folder;
  {
    auto catalog = OpenIndexCatalog({.directory = folder.path()});
    ASSERT_TRUE(catalog.ok());
    ASSERT_TRUE((*catalog)->Create(Spec("broken")).ok());
  }
  std::ofstream(folder.path() + "/broken/index.json", std::ios::trunc) << R"({"format": 1})";
  auto catalog = OpenIndexCatalog({.directory = folder.path()});
  ASSERT_FALSE(catalog.ok());
  EXPECT_NE(catalog.status().message().find("index 'broken'"), std::string::npos)
      << catalog.status().message();
  EXPECT_NE(catalog.status().message().find("index.json"), std::string::npos);
}

TEST(CatalogTest, AReadOnlyCatalogServesWhatTheWriterMadeAndRefusesChanges) {
  testing::TempFolder folder;
  auto writer = OpenIndexCatalog({.directory = folder.path()});
  ASSERT_TRUE(writer.ok());
  CatalogOptions replica_options{.directory = folder.path(), .read_only = true};
  auto replica = OpenIndexCatalog(replica_options);
  ASSERT_TRUE(replica.ok()) << replica.status().ToString();
  EXPECT_EQ((*replica)->Create(Spec("x")).status().code(), StatusCode::kFailedPrecondition);
  // Created after the replica started: found on first use.
  auto created = (*writer)->Create(Spec("late"));
  ASSERT_TRUE(created.ok());
  auto served = (*replica)->Get("late");
  ASSERT_TRUE(served.ok()) << served.status().ToString();
  EXPECT_TRUE((*served)->read_only());
  EXPECT_EQ((*replica)->Delete("late").code(), StatusCode::kFailedPrecondition);
  // Deleted by the writer: gone from the replica too.
  ASSERT_TRUE((*writer)->Delete("late").ok());
  EXPECT_EQ((*replica)->Get("late").status().code(), StatusCode::kNotFound);
  EXPECT_TRUE((*replica)->List().empty());
}

TEST(CatalogTest, SealedIndexesNeedTheKeyringToOpen) {
  testing::TempFolder folder;
  testing::TestKeyring keys(folder.path(), 'a');
  const std::string data = folder.path() + "/indexes";
  CatalogOptions options{.directory = data, .keyring = keys.keyring.get()};
  {
    auto catalog = OpenIndexCatalog(options);
    ASSERT_TRUE(catalog.ok()) << catalog.status().ToString();
    auto index = (*catalog)->Create(Spec("private"));
    ASSERT_TRUE(index.ok());
    std::mt19937 random(1);
    ASSERT_TRUE(Wait([&](WriteDone done) {
                  (*index)->Upsert("", RandomRecords(random, 0, 10), std::move(done));
                }).ok());
  }
  auto reopened = OpenIndexCatalog(options);
  ASSERT_TRUE(reopened.ok()) << reopened.status().ToString();
  EXPECT_EQ((*(*reopened)->Get("private"))->Stats(nullptr)->total_vector_count, 10u);
  reopened->reset();
  auto without_key = OpenIndexCatalog({.directory = data});
  ASSERT_FALSE(without_key.ok());
  EXPECT_EQ(without_key.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(without_key.status().message().find("private"), std::string::npos);
}

}  // namespace
}  // namespace rampart::knowledge
