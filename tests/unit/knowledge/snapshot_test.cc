#include "knowledge/index/snapshot.h"

#include <filesystem>
#include <fstream>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "knowledge/index/durable_files.h"
#include "map_engine.h"
#include "temp_folder.h"
#include "test_keyring.h"

namespace rampart::knowledge {
namespace {

using testing::MapEngine;

EngineOptions Options() {
  EngineOptions options;
  options.dimension = 3;
  options.metric = Metric::kDotProduct;
  return options;
}

// `count` records over two namespaces, with metadata and sparse values on some.
std::unique_ptr<MapEngine> Filled(size_t count) {
  auto engine = std::make_unique<MapEngine>(Options());
  for (size_t i = 0; i < count; ++i) {
    VectorRecord record{fmt::format("id-{}", i), {float(i), 0.5f, -float(i)}, {}, {}};
    if (i % 3 == 0) record.metadata = {{"n", double(i)}, {"s", fmt::format("v{}", i % 7)}};
    if (i % 5 == 0) record.sparse = {{1, 9}, {0.5f, 0.25f}};
    engine->Apply(WriteOp{i % 2 ? "odd" : "", UpsertOp{{std::move(record)}}});
  }
  return engine;
}

void ExpectSame(const MapEngine& a, const MapEngine& b) {
  const MapEngine::Namespaces left = a.Contents(), right = b.Contents();
  ASSERT_EQ(left.size(), right.size());
  for (const auto& [name, records] : left) {
    ASSERT_TRUE(right.contains(name)) << name;
    ASSERT_EQ(records.size(), right.at(name).size()) << name;
    for (const auto& [id, record] : records) {
      EXPECT_TRUE(testing::SameRecord(record, right.at(name).at(id))) << name << "/" << id;
    }
  }
}

TEST(SnapshotTest, WritesAndLoadsEveryRecordOfEveryNamespace) {
  testing::TempFolder folder;
  // Enough to span several 4 MiB chunks: 3 floats are small, so use many records.
  const auto source = Filled(150000);
  auto written = WriteSnapshot(folder.path(), *source->View(), 42, Options(), {});
  ASSERT_TRUE(written.ok()) << written.status().ToString();
  EXPECT_EQ(written->record_count, 150000u);
  const auto listed = ListSnapshots(folder.path());
  ASSERT_EQ(listed.size(), 1u);
  EXPECT_EQ(listed[0].sequence, 42u);
  MapEngine loaded(Options());
  auto info = LoadSnapshot(written->path, Options(), {}, loaded);
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_EQ(info->sequence, 42u);
  ExpectSame(*source, loaded);
}

TEST(SnapshotTest, AnyFlippedByteOrTruncationIsCorrupt) {
  testing::TempFolder folder;
  const auto source = Filled(50);
  auto written = WriteSnapshot(folder.path(), *source->View(), 7, Options(), {});
  ASSERT_TRUE(written.ok());
  const std::string intact = *ReadWholeFile(written->path);
  for (size_t offset = 0; offset < intact.size(); offset += 97) {
    std::string damaged = intact;
    damaged[offset] = static_cast<char>(damaged[offset] ^ 1);
    std::ofstream(written->path, std::ios::binary | std::ios::trunc) << damaged;
    MapEngine loaded(Options());
    auto info = LoadSnapshot(written->path, Options(), {}, loaded);
    ASSERT_FALSE(info.ok()) << offset;
    EXPECT_EQ(info.status().code(), StatusCode::kInternal) << offset;
    EXPECT_NE(info.status().message().find(written->path), std::string::npos);
  }
  std::ofstream(written->path, std::ios::binary | std::ios::trunc)
      << intact.substr(0, intact.size() - 40);
  MapEngine loaded(Options());
  EXPECT_EQ(LoadSnapshot(written->path, Options(), {}, loaded).status().code(),
            StatusCode::kInternal);
}

TEST(SnapshotTest, ADifferentDimensionOrMetricIsRefused) {
  testing::TempFolder folder;
  const auto source = Filled(5);
  auto written = WriteSnapshot(folder.path(), *source->View(), 1, Options(), {});
  ASSERT_TRUE(written.ok());
  EngineOptions other = Options();
  other.metric = Metric::kCosine;
  MapEngine loaded(other);
  auto info = LoadSnapshot(written->path, other, {}, loaded);
  ASSERT_FALSE(info.ok());
  EXPECT_EQ(info.status().code(), StatusCode::kInvalidArgument);
}

TEST(SnapshotTest, SealedSnapshotsOpenOnlyWithTheKeyAndTheIndexName) {
  testing::TempFolder folder;
  testing::TestKeyring keys(folder.path(), 'a');
  testing::TestKeyring other_keys(folder.path(), 'b');
  const auto source = Filled(120000);  // two chunks
  const SnapshotSealing sealing{keys.keyring.get(), "movies"};
  auto written = WriteSnapshot(folder.path(), *source->View(), 9, Options(), sealing);
  ASSERT_TRUE(written.ok()) << written.status().ToString();
  // Sealed: an id of the plaintext does not appear in the file.
  EXPECT_EQ(ReadWholeFile(written->path)->find("id-1234"), std::string::npos);

  MapEngine loaded(Options());
  auto info = LoadSnapshot(written->path, Options(), sealing, loaded);
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  ExpectSame(*source, loaded);

  MapEngine wrong_name(Options());
  auto renamed = LoadSnapshot(written->path, Options(), {keys.keyring.get(), "books"}, wrong_name);
  ASSERT_FALSE(renamed.ok());
  EXPECT_NE(renamed.status().message().find("decryption failed"), std::string::npos)
      << renamed.status().message();

  MapEngine wrong_key(Options());
  EXPECT_FALSE(
      LoadSnapshot(written->path, Options(), {other_keys.keyring.get(), "movies"}, wrong_key).ok());

  MapEngine no_key(Options());
  EXPECT_EQ(LoadSnapshot(written->path, Options(), {}, no_key).status().code(),
            StatusCode::kFailedPrecondition);
}

// Format 3: the user's tag is checked before anything loads, and its section comes back whole,
// entry by entry, sealed like the records.
TEST(SnapshotTest, TheUsersSectionRoundTripsSealedAndItsTagIsChecked) {
  testing::TempFolder folder;
  testing::TestKeyring keys(folder.path(), 'a');
  const auto source = Filled(200);
  std::vector<std::string> entries;
  for (int i = 0; i < 3000; ++i)
    entries.push_back(fmt::format("entry-{}-{}", i, std::string(i, 'x')));
  SnapshotExtra extra;
  extra.tag = "built with a";
  extra.write = [&](const std::function<Status(std::string_view)>& add) -> Status {
    for (const std::string& entry : entries) RETURN_IF_ERROR(add(entry));
    return Status::Ok();
  };
  const SnapshotSealing sealing{keys.keyring.get(), "store"};
  auto written = WriteSnapshot(folder.path(), *source->View(), 11, Options(), sealing, &extra);
  ASSERT_TRUE(written.ok()) << written.status().ToString();
  EXPECT_EQ(ReadWholeFile(written->path)->find("entry-12-"), std::string::npos);

  std::vector<std::string> read;
  SnapshotExtra reader;
  reader.tag = "built with a";
  reader.read = [&](std::string_view entry) {
    read.emplace_back(entry);
    return Status::Ok();
  };
  MapEngine loaded(Options());
  auto info = LoadSnapshot(written->path, Options(), sealing, loaded, &reader);
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_EQ(read, entries);
  ExpectSame(*source, loaded);

  MapEngine skipped(Options());  // no reader: the section is skipped
  ASSERT_TRUE(LoadSnapshot(written->path, Options(), sealing, skipped).ok());
  ExpectSame(*source, skipped);

  reader.tag = "built with b";
  MapEngine other_tag(Options());
  auto refused = LoadSnapshot(written->path, Options(), sealing, other_tag, &reader);
  EXPECT_EQ(refused.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(other_tag.Contents().size(), 0u);

  // A snapshot without the section is refused by a user who expects one.
  auto plain = WriteSnapshot(folder.path(), *source->View(), 12, Options(), {});
  ASSERT_TRUE(plain.ok());
  MapEngine untagged(Options());
  EXPECT_EQ(LoadSnapshot(plain->path, Options(), {}, untagged, &reader).status().code(),
            StatusCode::kFailedPrecondition);
}

TEST(SnapshotTest, PruneKeepsTheNewestAndRemovesTemporaries) {
  testing::TempFolder folder;
  const auto source = Filled(3);
  for (uint64_t sequence : {5, 12, 30}) {
    ASSERT_TRUE(WriteSnapshot(folder.path(), *source->View(), sequence, Options(), {}).ok());
  }
  std::ofstream(folder.path() + "/snapshot-00000000000000000031.snap.tmp") << "partial";
  ASSERT_TRUE(PruneSnapshots(folder.path(), 2).ok());
  const auto listed = ListSnapshots(folder.path());
  ASSERT_EQ(listed.size(), 2u);
  EXPECT_EQ(listed[0].sequence, 30u);
  EXPECT_EQ(listed[1].sequence, 12u);
  EXPECT_FALSE(std::filesystem::exists(folder.path() + "/snapshot-00000000000000000031.snap.tmp"));
}

}  // namespace
}  // namespace rampart::knowledge
