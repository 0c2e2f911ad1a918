#include "knowledge/index/durable_index.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <future>
#include <set>
#include <thread>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "map_engine.h"
#include "temp_folder.h"
#include "test_keyring.h"
#include "testing/eventually.h"

namespace rampart::knowledge {
namespace {

using testing::MapEngine;

DurableIndexOptions Options(const std::string& folder, bool read_only = false) {
  DurableIndexOptions options;
  options.directory = folder;
  options.spec.name = "movies";
  options.spec.engine.dimension = 2;
  options.spec.engine.metric = Metric::kDotProduct;
  options.read_only = read_only;
  options.engine_factory = MapEngine::Make;
  options.durability.replica_poll_milliseconds = 2;
  return options;
}

VectorRecord Record(const std::string& id, float value) {
  return VectorRecord{id, {value, 1.0f}, {}, {{"v", double(value)}}};
}

Status UpsertAndWait(IndexBackend& index, const std::string& name_space,
                     std::vector<VectorRecord> records) {
  std::promise<Status> done;
  index.Upsert(name_space, std::move(records), [&](Status status) { done.set_value(status); });
  return done.get_future().get();
}

// Every record of every namespace the index reports, as "<namespace>/<id>=<first value>".
std::set<std::string> Contents(const IndexBackend& index) {
  std::set<std::string> contents;
  const Result<IndexStats> stats = index.Stats(nullptr);
  EXPECT_TRUE(stats.ok());
  for (const NamespaceStats& space : stats->namespaces) {
    const Result<ListPage> page = index.List(space.name_space, "", 1 << 30, "");
    EXPECT_TRUE(page.ok());
    for (const VectorRecord& record : index.Fetch(space.name_space, page->ids)) {
      contents.insert(fmt::format("{}/{}={}", space.name_space, record.id, record.values[0]));
    }
  }
  return contents;
}

// A copy of the folder as it is on disk now: what a crash would leave.
std::string CrashCopy(const std::string& folder) {
  const std::string copy = folder + "-crash";
  std::filesystem::remove_all(copy);
  std::filesystem::copy(folder, copy);
  return copy;
}

TEST(DurableIndexTest, AcknowledgedWritesSurviveACrashThroughTheLog) {
  testing::TempFolder folder;
  auto index = DurableIndex::Open(Options(folder.path()));
  ASSERT_TRUE(index.ok()) << index.status().ToString();
  for (int i = 0; i < 20; ++i) {
    ASSERT_TRUE(UpsertAndWait(**index, i % 2 ? "b" : "", {Record(fmt::format("r{}", i), i)}).ok());
  }
  std::promise<Status> updated, deleted;
  UpdateRequest update{"", "r4", std::vector<float>{40.0f, 1.0f}, std::nullopt, std::nullopt};
  (*index)->Update(update, [&](Status status) { updated.set_value(status); });
  DeleteRequest deletion{"b", {"r1", "r3"}, false, std::nullopt};
  (*index)->Delete(deletion, [&](Status status) { deleted.set_value(status); });
  ASSERT_TRUE(updated.get_future().get().ok());
  ASSERT_TRUE(deleted.get_future().get().ok());
  const std::set<std::string> expected = Contents(**index);
  EXPECT_EQ(expected.size(), 18u);
  EXPECT_TRUE(expected.contains("/r4=40"));

  const std::string copy = CrashCopy(folder.path());
  auto recovered = DurableIndex::Open(Options(copy));
  ASSERT_TRUE(recovered.ok()) << recovered.status().ToString();
  EXPECT_EQ(Contents(**recovered), expected);
  EXPECT_EQ((*recovered)->applied_sequence(), (*index)->applied_sequence());
  recovered->reset();
  std::filesystem::remove_all(copy);
}

TEST(DurableIndexTest, SnapshotsPlusTheLogRebuildTheSameIndex) {
  testing::TempFolder folder;
  DurableIndexOptions options = Options(folder.path());
  options.durability.snapshot_every_records = 25;
  options.durability.segment_bytes = 2048;
  auto index = DurableIndex::Open(options);
  ASSERT_TRUE(index.ok());
  for (int i = 0; i < 300; ++i) {
    ASSERT_TRUE(UpsertAndWait(**index, "", {Record(fmt::format("r{}", i % 120), i)}).ok());
  }
  ASSERT_TRUE((*index)->SnapshotNow().ok());
  ASSERT_TRUE(UpsertAndWait(**index, "x", {Record("after", 1)}).ok());
  EXPECT_GT((*index)->snapshot_sequence(), 250u);
  // The log was cut: far fewer segments than 300 writes of ~60 bytes in 2 KiB segments.
  size_t segments = 0;
  for (const auto& entry : std::filesystem::directory_iterator(folder.path())) {
    segments += entry.path().extension() == ".log";
  }
  EXPECT_LT(segments, 5u);
  const std::set<std::string> expected = Contents(**index);
  const std::string copy = CrashCopy(folder.path());
  auto recovered = DurableIndex::Open(Options(copy));
  ASSERT_TRUE(recovered.ok()) << recovered.status().ToString();
  EXPECT_EQ(Contents(**recovered), expected);
  recovered->reset();

  // A damaged newest snapshot: the older one and the log after it give the same index.
  auto snapshots = ListSnapshots(copy);
  ASSERT_EQ(snapshots.size(), 2u);
  std::filesystem::resize_file(snapshots[0].path, 100);
  auto fallen_back = DurableIndex::Open(Options(copy));
  ASSERT_TRUE(fallen_back.ok()) << fallen_back.status().ToString();
  EXPECT_EQ(Contents(**fallen_back), expected);
  fallen_back->reset();
  std::filesystem::remove_all(copy);
}

TEST(DurableIndexTest, RefusedWritesAreNotLoggedAndLaterWritesSeeEarlierOnes) {
  testing::TempFolder folder;
  auto index = DurableIndex::Open(Options(folder.path()));
  ASSERT_TRUE(index.ok());
  std::vector<std::future<Status>> results;
  std::vector<std::promise<Status>> promises(3);
  for (auto& promise : promises) results.push_back(promise.get_future());
  // Queued together: the update must see the upsert before it.
  (*index)->Upsert("", {Record("a", 1)}, [&](Status s) { promises[0].set_value(s); });
  (*index)->Upsert("", {VectorRecord{"bad", {1.0f}, {}, {}}},
                   [&](Status s) { promises[1].set_value(s); });
  (*index)->Update({"", "a", std::vector<float>{7.0f, 1.0f}, std::nullopt, std::nullopt},
                   [&](Status s) { promises[2].set_value(s); });
  EXPECT_TRUE(results[0].get().ok());
  EXPECT_EQ(results[1].get().code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(results[2].get().ok());
  EXPECT_EQ(Contents(**index), (std::set<std::string>{"/a=7"}));
  EXPECT_EQ((*index)->applied_sequence(), 2u);  // the refused write took no sequence
}

// A MapEngine whose ResolveUpsert of id "gate" waits until opened: holds the writer thread.
class GatedEngine final : public MapEngine {
 public:
  using MapEngine::MapEngine;
  Result<WriteOp> ResolveUpsert(std::string_view name_space,
                                std::vector<VectorRecord> records) const override {
    if (!records.empty() && records[0].id == "gate") {
      entered.set_value();
      opened.get_future().wait();
    }
    return MapEngine::ResolveUpsert(name_space, std::move(records));
  }
  mutable std::promise<void> entered, opened;
};

TEST(DurableIndexTest, WritesBeyondThePendingBoundAreRefused) {
  testing::TempFolder folder;
  DurableIndexOptions options = Options(folder.path());
  options.durability.max_pending_writes = 1;
  GatedEngine* gate = nullptr;
  options.engine_factory =
      [&](const EngineOptions& engine) -> Result<std::unique_ptr<IndexEngine>> {
    auto made = std::make_unique<GatedEngine>(engine);
    gate = made.get();
    return std::unique_ptr<IndexEngine>(std::move(made));
  };
  auto index = DurableIndex::Open(options);
  ASSERT_TRUE(index.ok());
  std::promise<Status> first, second;
  (*index)->Upsert("", {Record("gate", 1)}, [&](Status s) { first.set_value(s); });
  gate->entered.get_future().wait();  // the writer holds "gate"; the queue is empty
  (*index)->Upsert("", {Record("queued", 2)}, [&](Status s) { second.set_value(s); });
  const Status refused = UpsertAndWait(**index, "", {Record("refused", 3)});
  EXPECT_EQ(refused.code(), StatusCode::kResourceExhausted) << refused.ToString();
  gate->opened.set_value();
  EXPECT_TRUE(first.get_future().get().ok());
  EXPECT_TRUE(second.get_future().get().ok());
  EXPECT_EQ(Contents(**index), (std::set<std::string>{"/gate=1", "/queued=2"}));
}

TEST(DurableIndexTest, WritesAfterCloseAreUnavailable) {
  testing::TempFolder folder;
  auto index = DurableIndex::Open(Options(folder.path()));
  ASSERT_TRUE(index.ok());
  ASSERT_TRUE((*index)->Close().ok());
  EXPECT_EQ(UpsertAndWait(**index, "", {Record("a", 1)}).code(), StatusCode::kUnavailable);
}

// The whole stack: the embedded engine, the log and snapshots (every 1000 records, so some
// land in snapshots and some only in the log when the kill comes).
TEST(DurableIndexTest, EveryWriteAcknowledgedBeforeSigkillIsPresentAfterReopen) {
  testing::TempFolder folder;
  DurableIndexOptions options = Options(folder.path());
  options.engine_factory = NewHnswEngine;
  options.durability.snapshot_every_records = 1000;
  int pipe_fds[2];
  ASSERT_EQ(::pipe(pipe_fds), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // The writer: bursts of upserts from four threads, each acknowledgement reported as
    // "<thread> <batch>\n" (a pipe write this short is atomic).
    ::close(pipe_fds[0]);
    auto index = DurableIndex::Open(options);
    if (!index.ok()) ::_exit(2);
    std::vector<std::thread> writers;
    for (int thread = 0; thread < 4; ++thread) {
      writers.emplace_back([&, thread] {
        for (int batch = 0;; ++batch) {
          std::vector<VectorRecord> records;
          for (int i = 0; i < 10; ++i) {
            records.push_back(Record(fmt::format("t{}-{}-{}", thread, batch, i), batch));
          }
          std::promise<void> acknowledged;
          (*index)->Upsert("", std::move(records), [&, thread, batch](Status status) {
            if (status.ok()) {
              const std::string line = fmt::format("{} {}\n", thread, batch);
              if (::write(pipe_fds[1], line.data(), line.size()) < 0) ::_exit(3);
            }
            acknowledged.set_value();
          });
          acknowledged.get_future().wait();
        }
      });
    }
    for (auto& writer : writers) writer.join();
    ::_exit(0);
  }
  ::close(pipe_fds[1]);
  std::string reported;
  char buffer[4096];
  size_t lines = 0;
  while (lines < 400) {  // 4000 acknowledged records, then the kill lands mid-burst
    const ssize_t count = ::read(pipe_fds[0], buffer, sizeof(buffer));
    ASSERT_GT(count, 0) << "the writer stopped early";
    reported.append(buffer, static_cast<size_t>(count));
    lines = std::count(reported.begin(), reported.end(), '\n');
  }
  ASSERT_EQ(::kill(child, SIGKILL), 0);
  int child_status = 0;
  ASSERT_EQ(::waitpid(child, &child_status, 0), child);
  EXPECT_TRUE(WIFSIGNALED(child_status));
  while (true) {  // what it reported before it died
    const ssize_t count = ::read(pipe_fds[0], buffer, sizeof(buffer));
    if (count <= 0) break;
    reported.append(buffer, static_cast<size_t>(count));
  }
  ::close(pipe_fds[0]);

  auto index = DurableIndex::Open(options);
  ASSERT_TRUE(index.ok()) << index.status().ToString();
  std::istringstream acknowledgements(reported);
  int thread = 0, batch = 0;
  size_t checked = 0;
  while (acknowledgements >> thread >> batch) {
    std::vector<std::string> ids;
    for (int i = 0; i < 10; ++i) ids.push_back(fmt::format("t{}-{}-{}", thread, batch, i));
    ASSERT_EQ((*index)->Fetch("", ids).size(), 10u) << "batch " << thread << " " << batch;
    checked += 10;
  }
  EXPECT_GE(checked, 4000u);
}

TEST(DurableIndexTest, AReadOnlyReplicaServesTheNewestSnapshotAndRefusesWrites) {
  testing::TempFolder folder;
  auto writer = DurableIndex::Open(Options(folder.path()));
  ASSERT_TRUE(writer.ok());
  auto replica = DurableIndex::Open(Options(folder.path(), /*read_only=*/true));
  ASSERT_TRUE(replica.ok()) << replica.status().ToString();
  EXPECT_TRUE((*replica)->read_only());
  const Status refused = UpsertAndWait(**replica, "", {Record("a", 1)});
  EXPECT_EQ(refused.code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(refused.message(), "this replica serves index 'movies' read-only");

  ASSERT_TRUE(UpsertAndWait(**writer, "", {Record("a", 1), Record("b", 2)}).ok());
  EXPECT_TRUE(Contents(**replica).empty());  // not in a snapshot yet
  ASSERT_TRUE((*writer)->SnapshotNow().ok());
  // Its poll thread loads the new snapshot.
  EXPECT_TRUE(rampart::testing::Eventually([&] {
    return Contents(**replica) == std::set<std::string>{"/a=1", "/b=2"};
  }));
  EXPECT_EQ((*replica)->snapshot_sequence(), (*writer)->applied_sequence());
}

TEST(DurableIndexTest, SealedSnapshotsNeedTheKeyToOpen) {
  testing::TempFolder folder;
  testing::TestKeyring keys(folder.path(), 'a');
  testing::TestKeyring other_keys(folder.path(), 'b');
  const std::string data = folder.path() + "/index";
  std::filesystem::create_directories(data);
  DurableIndexOptions options = Options(data);
  options.sealing.keyring = keys.keyring.get();
  {
    auto index = DurableIndex::Open(options);
    ASSERT_TRUE(index.ok()) << index.status().ToString();
    ASSERT_TRUE(UpsertAndWait(**index, "", {Record("secret-id", 1)}).ok());
  }  // closed: a last snapshot, sealed
  auto reopened = DurableIndex::Open(options);
  ASSERT_TRUE(reopened.ok()) << reopened.status().ToString();
  EXPECT_EQ(Contents(**reopened), (std::set<std::string>{"/secret-id=1"}));
  reopened->reset();
  DurableIndexOptions wrong = options;
  wrong.sealing.keyring = other_keys.keyring.get();
  auto refused = DurableIndex::Open(wrong);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("does not open"), std::string::npos)
      << refused.status().message();
}

}  // namespace
}  // namespace rampart::knowledge
