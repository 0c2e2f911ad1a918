// The AuditLog over real stores: group commit from many threads (every callback OK, one gap-free
// verifiable sequence), batched mode and the final checkpoint, reopening, two replicas appending
// to one PostgreSQL at once, a full queue, and retention (pruned epochs, the rest still verifies
// and proves).

#include "audit/audit_log.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>
#include <atomic>

#include <set>

#include <atomic>
#include <condition_variable>
#include <filesystem>
#include <mutex>
#include <thread>
#include <vector>

#include "audit/log_reader.h"
#include "audit/merkle.h"
#include "audit/record_codec.h"
#include "audit/record_compact.h"
#include "store/store.h"
#include "testing/postgres_server.h"

namespace rampart::audit {
namespace {

::testing::Environment* const kPostgres =
    ::testing::AddGlobalTestEnvironment(new rampart::testing::PostgresEnvironment);

// Counts callbacks; Wait blocks until `count` arrived (explicit synchronisation, no sleeps).
class Callbacks {
 public:
  UniqueFunction<void(Status)> Next() {
    return [this](Status status) {
      std::lock_guard lock(mutex_);
      if (status.ok()) {
        ++ok_;
      } else {
        errors_.push_back(status.ToString());
      }
      changed_.notify_all();
    };
  }
  void Wait(int64_t count) {
    std::unique_lock lock(mutex_);
    changed_.wait(lock, [&] { return ok_ + int64_t(errors_.size()) >= count; });
  }
  int64_t ok() {
    std::lock_guard lock(mutex_);
    return ok_;
  }
  std::vector<std::string> errors() {
    std::lock_guard lock(mutex_);
    return errors_;
  }

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  int64_t ok_ = 0;
  std::vector<std::string> errors_;
};

AuditRecord Request(int thread, int i) {
  AuditRecord record;
  record.api = "kserve_http";
  record.tenant = "acme";
  record.principal = "user-" + std::to_string(thread);
  record.trace_id = "trace-" + std::to_string(thread) + "-" + std::to_string(i);
  record.request_id = std::to_string(i);
  record.action = "model:infer";
  record.resource_type = "model";
  record.resource = "simple";
  record.status = 200;
  record.outcome = "ok";
  return record;
}

class AuditLogTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/rampart-audit-XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr);
    dir_ = pattern;
    auto key = crypto::SigningKey::Generate(crypto::SignatureAlgorithm::kEd25519);
    ASSERT_TRUE(key.ok()) << key.status().ToString();
    key_ = *key;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::unique_ptr<store::Store> OpenSqlite() {
    auto store = store::OpenSqliteStore(dir_);
    EXPECT_TRUE(store.ok()) << store.status().ToString();
    return store.ok() ? std::move(*store) : nullptr;
  }
  std::unique_ptr<AuditLog> OpenLog(store::Store& store, AuditOptions options) {
    auto log = AuditLog::Open(store, options, key_, "audit-test");
    EXPECT_TRUE(log.ok()) << log.status().ToString();
    return log.ok() ? std::move(*log) : nullptr;
  }
  VerifyReport Verify(store::Store& store, DigestAlgorithm digest = DigestAlgorithm::kSha256) {
    auto report = VerifyLog(store, {.digest = digest, .keys = {key_.Public()}});
    EXPECT_TRUE(report.ok()) << report.status().ToString();
    if (!report.ok()) return {};
    EXPECT_FALSE(report->problem.has_value()) << report->problem->message;
    return *report;
  }

  std::string dir_;
  crypto::SigningKey key_;
};

TEST_F(AuditLogTest, GroupCommitFromManyThreadsKeepsOneGapFreeVerifiableSequence) {
  auto store = OpenSqlite();
  ASSERT_NE(store, nullptr);
  AuditOptions options;
  options.sync = true;
  options.checkpoint_every_records = 500;
  auto log = OpenLog(*store, options);
  ASSERT_NE(log, nullptr);
  constexpr int kThreads = 8;
  constexpr int kEach = 400;
  Callbacks callbacks;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kEach; ++i) log->Append(Request(t, i), callbacks.Next());
    });
  }
  for (std::thread& thread : threads) thread.join();
  callbacks.Wait(kThreads * kEach);
  EXPECT_EQ(callbacks.ok(), kThreads * kEach);
  EXPECT_TRUE(callbacks.errors().empty()) << callbacks.errors().front();
  // Sync mode: each callback ran after its record was committed.
  auto last = store->LastAuditSequence();
  ASSERT_TRUE(last.ok());
  EXPECT_EQ(*last, kThreads * kEach);
  ASSERT_TRUE(log->Flush(/*checkpoint=*/true).ok());

  const VerifyReport report = Verify(*store);
  EXPECT_EQ(report.records, kThreads * kEach);
  EXPECT_EQ(report.signed_size, kThreads * kEach);
  EXPECT_GE(report.checkpoints, 2);
  // Every thread's records are there, in its own order.
  auto rows = store->QueryAuditRows({.principal = "user-3", .limit = 10000});
  ASSERT_TRUE(rows.ok());
  ASSERT_EQ(rows->size(), size_t(kEach));
  for (int i = 0; i < kEach; ++i) {
    auto record = DecodeCompactRow((*rows)[size_t(i)]);
    ASSERT_TRUE(record.ok());
    EXPECT_EQ(record->request_id, std::to_string(i));
  }
}

TEST_F(AuditLogTest, BatchedModeWritesWithinTheDelayAndSignsAtShutdownAndReopensOnTheChain) {
  auto store = OpenSqlite();
  ASSERT_NE(store, nullptr);
  for (int round = 0; round < 2; ++round) {
    AuditOptions options;
    options.digest = DigestAlgorithm::kSm3;
    options.checkpoint_every_records = 1000000;
    auto log = OpenLog(*store, options);
    ASSERT_NE(log, nullptr);
    Callbacks callbacks;
    for (int i = 0; i < 300; ++i) log->Append(Request(round, i), callbacks.Next());
    EXPECT_EQ(callbacks.ok(), 300);  // batched: answered when queued
    log.reset();                     // drains, then the final checkpoint
    const VerifyReport report = Verify(*store, DigestAlgorithm::kSm3);
    EXPECT_EQ(report.records, 300 * (round + 1));
    EXPECT_EQ(report.signed_size, 300 * (round + 1));
  }
  // With the other digest every leaf is wrong, and the first record says so.
  auto wrong = VerifyLog(*store, {.digest = DigestAlgorithm::kSha256, .keys = {key_.Public()}});
  ASSERT_TRUE(wrong.ok());
  ASSERT_TRUE(wrong->problem.has_value());
  // A key that did not sign the checkpoints.
  auto other = crypto::SigningKey::Generate(crypto::SignatureAlgorithm::kEd25519);
  ASSERT_TRUE(other.ok());
  auto unsigned_by =
      VerifyLog(*store, {.digest = DigestAlgorithm::kSm3, .keys = {other->Public()}});
  ASSERT_TRUE(unsigned_by.ok());
  ASSERT_TRUE(unsigned_by->problem.has_value());
  EXPECT_EQ(unsigned_by->problem->kind, "checkpoint");
}

// Holds a sync log's writer thread in the callback of a first record until released, so that
// the queue fills behind it.
class HeldWriter {
 public:
  explicit HeldWriter(AuditLog& log) {
    log.Append(Request(0, 0), [this](Status) {
      std::unique_lock lock(mutex_);
      holding_ = true;
      changed_.notify_all();
      changed_.wait(lock, [&] { return release_; });
    });
    std::unique_lock lock(mutex_);
    changed_.wait(lock, [&] { return holding_; });
  }
  void Release() {
    {
      std::lock_guard lock(mutex_);
      release_ = true;
    }
    changed_.notify_all();
  }

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  bool holding_ = false;
  bool release_ = false;
};

TEST_F(AuditLogTest, AFullQueueRefusesAtOnce) {
  auto store = OpenSqlite();
  ASSERT_NE(store, nullptr);
  AuditOptions options;
  options.sync = true;
  options.max_queue = 4;
  auto log = OpenLog(*store, options);
  ASSERT_NE(log, nullptr);
  HeldWriter held(*log);
  Callbacks callbacks;
  for (int i = 1; i <= 4; ++i) log->Append(Request(0, i), callbacks.Next());
  Status refused;
  log->Append(Request(0, 5), [&](Status status) { refused = status; });
  EXPECT_EQ(refused.code(), StatusCode::kUnavailable) << refused.ToString();  // answered at once
  EXPECT_NE(refused.message().find("4 records"), std::string::npos) << refused.ToString();
  held.Release();
  callbacks.Wait(4);
  EXPECT_EQ(callbacks.ok(), 4);
  ASSERT_TRUE(log->Flush(true).ok());
  EXPECT_EQ(Verify(*store).records, 5);
}

TEST_F(AuditLogTest, AQueueFullOfBytesRefusesAtOnceButTakesSmallRecords) {
  auto store = OpenSqlite();
  ASSERT_NE(store, nullptr);
  AuditOptions options;
  options.sync = true;
  options.max_queue_bytes = 25 << 10;
  auto log = OpenLog(*store, options);
  ASSERT_NE(log, nullptr);
  HeldWriter held(*log);
  AuditRecord sealed = Request(0, 1);
  sealed.request_sealed = std::string(10 << 10, 'A');  // as audit:full keeps a 7.5 KiB request
  Callbacks callbacks;
  log->Append(sealed, callbacks.Next());
  log->Append(sealed, callbacks.Next());
  Status refused;
  log->Append(sealed, [&](Status status) { refused = status; });
  EXPECT_EQ(refused.code(), StatusCode::kUnavailable) << refused.ToString();
  EXPECT_NE(refused.message().find("bytes"), std::string::npos) << refused.ToString();
  log->Append(Request(0, 2), callbacks.Next());  // a served record still fits
  held.Release();
  callbacks.Wait(3);
  EXPECT_EQ(callbacks.ok(), 3);
  ASSERT_TRUE(log->Flush(true).ok());
  EXPECT_EQ(Verify(*store).records, 4);
}

// Content digests handed over raw are stored raw and read back as the records' digest text.
TEST_F(AuditLogTest, RawContentDigestsReadBackAsText) {
  auto store = OpenSqlite();
  ASSERT_NE(store, nullptr);
  auto log = OpenLog(*store, {});
  ASSERT_NE(log, nullptr);
  Callbacks callbacks;
  for (const crypto::DigestAlgorithm algorithm :
       {crypto::DigestAlgorithm::kSha256, crypto::DigestAlgorithm::kSm3}) {
    const ContentDigests digests{.algorithm = algorithm,
                                 .request = crypto::Hash(algorithm, "question"),
                                 .response = crypto::Hash(algorithm, "answer")};
    log->Append(Request(0, 0), callbacks.Next(), &digests);
  }
  callbacks.Wait(2);
  ASSERT_TRUE(log->Flush(true).ok());
  EXPECT_EQ(Verify(*store).records, 2);
  auto rows = store->ReadAuditRows(0, 10);
  ASSERT_TRUE(rows.ok()) << rows.status().ToString();
  ASSERT_EQ(rows->size(), 2u);
  const std::string_view names[] = {"sha256:", "sm3:"};
  for (size_t i = 0; i < 2; ++i) {
    auto record = DecodeCompactRow((*rows)[i]);
    ASSERT_TRUE(record.ok()) << record.status().ToString();
    const crypto::DigestAlgorithm algorithm =
        i == 0 ? crypto::DigestAlgorithm::kSha256 : crypto::DigestAlgorithm::kSm3;
    EXPECT_EQ(record->request_digest,
              std::string(names[i]) + HashHex(crypto::Hash(algorithm, "question")));
    EXPECT_EQ(record->response_digest,
              std::string(names[i]) + HashHex(crypto::Hash(algorithm, "answer")));
  }
}

TEST_F(AuditLogTest, EveryAcknowledgedRecordSurvivesSigkillAndTheLogVerifies) {
  int acks[2];
  ASSERT_EQ(pipe(acks), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // The child: no gtest here. Four threads append in sync mode; each callback acknowledges its
    // record (by request id) only after the record is durable.
    close(acks[0]);
    auto store = store::OpenSqliteStore(dir_);
    if (!store.ok()) _exit(2);
    AuditOptions options;
    options.sync = true;
    options.checkpoint_every_records = 100;
    auto log = AuditLog::Open(**store, options, key_, "audit-test");
    if (!log.ok()) _exit(3);
    // Each thread keeps at most 4096 records unacknowledged, so that the four never fill the
    // log's queue (65536): a refusal would be right, but is not what this test is about.
    std::atomic<int> outstanding[4] = {};
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) {
      threads.emplace_back([&, t] {
        for (int i = 0;; ++i) {
          while (outstanding[t].load() >= 4096) std::this_thread::yield();
          ++outstanding[t];
          const int id = t * 1'000'000 + i;
          (*log)->Append(Request(t, id), [&, id, t](Status status) {
            if (!status.ok()) _exit(4);
            if (write(acks[1], &id, sizeof(id)) != sizeof(id)) _exit(5);
            --outstanding[t];
          });
        }
      });
    }
    for (std::thread& thread : threads) thread.join();
    _exit(6);
  }
  close(acks[1]);
  std::set<int> acknowledged;
  int id = 0;
  while (acknowledged.size() < 500 && read(acks[0], &id, sizeof(id)) == sizeof(id)) {
    acknowledged.insert(id);
  }
  kill(child, SIGKILL);
  while (read(acks[0], &id, sizeof(id)) == sizeof(id)) acknowledged.insert(id);
  close(acks[0]);
  int status = 0;
  waitpid(child, &status, 0);
  ASSERT_TRUE(WIFSIGNALED(status)) << "the child failed first with " << WEXITSTATUS(status);
  ASSERT_GE(acknowledged.size(), 500u);

  auto store = OpenSqlite();
  ASSERT_NE(store, nullptr);
  const VerifyReport report = Verify(*store);  // sound, perhaps with an unsigned tail
  std::set<int> stored;
  auto rows = store->ReadAuditRows(0, 1'000'000);
  ASSERT_TRUE(rows.ok());
  for (const store::AuditRow& row : *rows) stored.insert(std::stoi(row.request_id));
  for (const int acked : acknowledged) {
    EXPECT_TRUE(stored.contains(acked)) << "lost acknowledged record " << acked;
  }
  // A new writer resumes from the crashed one's head and signs it all.
  auto log = OpenLog(*store, AuditOptions());
  ASSERT_NE(log, nullptr);
  ASSERT_TRUE(log->Flush(/*checkpoint=*/true).ok());
  log.reset();
  EXPECT_EQ(Verify(*store).signed_size, report.last_sequence);
}

// A checkpoint due after a batch commits in the batch's transaction: by the time a sync record
// that completes checkpoint_every_records is answered, its checkpoint is in the store too.
TEST_F(AuditLogTest, ACheckpointDueAfterABatchIsDurableWithIt) {
  auto store = OpenSqlite();
  ASSERT_NE(store, nullptr);
  AuditOptions options;
  options.sync = true;
  options.checkpoint_every_records = 3;
  auto log = OpenLog(*store, options);
  ASSERT_NE(log, nullptr);
  Callbacks callbacks;
  for (int i = 0; i < 6; ++i) {
    log->Append(Request(0, i), callbacks.Next());
    callbacks.Wait(i + 1);
    auto last = store->LastAuditCheckpoint();
    ASSERT_TRUE(last.ok()) << last.status().ToString();
    if (i < 2) {
      EXPECT_FALSE(last->has_value()) << i;
    } else {
      ASSERT_TRUE(last->has_value()) << i;
      EXPECT_EQ((*last)->tree_size, i < 5 ? 3 : 6) << i;
    }
  }
  EXPECT_TRUE(callbacks.errors().empty()) << callbacks.errors().front();
  log.reset();
  const VerifyReport report = Verify(*store);
  EXPECT_EQ(report.records, 6);
  EXPECT_EQ(report.signed_size, 6);
}

TEST_F(AuditLogTest, TwoReplicasOnOnePostgresKeepOneVerifiableSequence) {
  auto server = rampart::testing::PostgresServer::Shared();
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  auto conninfo = (*server)->CreateDatabase();
  ASSERT_TRUE(conninfo.ok()) << conninfo.status().ToString();
  auto first_store = store::OpenPostgresStore(*conninfo);
  auto second_store = store::OpenPostgresStore(*conninfo);
  ASSERT_TRUE(first_store.ok() && second_store.ok());
  AuditOptions options;
  options.sync = true;
  options.checkpoint_every_records = 100;
  auto first = OpenLog(**first_store, options);
  auto second = OpenLog(**second_store, options);
  ASSERT_NE(first, nullptr);
  ASSERT_NE(second, nullptr);
  constexpr int kEach = 300;
  Callbacks callbacks;
  std::thread a([&] {
    for (int i = 0; i < kEach; ++i) first->Append(Request(1, i), callbacks.Next());
  });
  std::thread b([&] {
    for (int i = 0; i < kEach; ++i) second->Append(Request(2, i), callbacks.Next());
  });
  a.join();
  b.join();
  callbacks.Wait(2 * kEach);
  EXPECT_TRUE(callbacks.errors().empty()) << callbacks.errors().front();
  first.reset();
  second.reset();
  const VerifyReport report = Verify(**first_store);
  EXPECT_EQ(report.records, 2 * kEach);
  EXPECT_EQ(report.signed_size, 2 * kEach);
  for (const char* principal : {"user-1", "user-2"}) {
    auto rows = (*first_store)->QueryAuditRows({.principal = principal, .limit = 10000});
    ASSERT_TRUE(rows.ok());
    EXPECT_EQ(rows->size(), size_t(kEach)) << principal;
  }
}

TEST_F(AuditLogTest, PruningOldEpochsKeepsTheRestVerifiableAndProvable) {
  auto store = OpenSqlite();
  ASSERT_NE(store, nullptr);
  AuditOptions options;
  options.sync = true;
  options.epoch_length = std::chrono::seconds(0);  // every checkpoint ends an epoch
  options.checkpoint_every_records = 1000000;
  options.checkpoint_every = std::chrono::hours(1);
  auto log = OpenLog(*store, options);
  ASSERT_NE(log, nullptr);
  Callbacks callbacks;
  for (int epoch = 0; epoch < 5; ++epoch) {
    for (int i = 0; i < 10; ++i) log->Append(Request(epoch, i), callbacks.Next());
    ASSERT_TRUE(log->Flush(/*checkpoint=*/true).ok());
  }
  auto epochs = store->ListAuditEpochs();
  ASSERT_TRUE(epochs.ok());
  ASSERT_EQ(epochs->size(), 5u);
  EXPECT_EQ((*epochs)[1].first_sequence, 11);
  EXPECT_EQ((*epochs)[1].last_sequence, 20);

  // Epochs 1 and 2 are past the retention at this "now"; 3..5 are not.
  const auto retention = std::chrono::hours(24);
  const int64_t now = (*epochs)[1].end_unix_ns + 24LL * 3600 * 1'000'000'000;
  auto pruned = PruneExpiredEpochs(*store, now, retention);
  ASSERT_TRUE(pruned.ok()) << pruned.status().ToString();
  EXPECT_EQ(*pruned, 2);
  VerifyReport report = Verify(*store);
  EXPECT_EQ(report.pruned_through, 20);
  EXPECT_EQ(report.records, 30);
  EXPECT_EQ(report.checkpoints, 5);

  auto proof = ProveInclusion(*store, DigestAlgorithm::kSha256, 25, std::nullopt);
  ASSERT_TRUE(proof.ok()) << proof.status().ToString();
  auto checked = CheckInclusionProof(*proof, {key_.Public()});
  ASSERT_TRUE(checked.ok()) << checked.status().ToString();
  EXPECT_EQ(checked->sequence, 25);
  EXPECT_EQ(checked->tree_size, 30);
  EXPECT_EQ(ProveInclusion(*store, DigestAlgorithm::kSha256, 5, std::nullopt).status().code(),
            StatusCode::kInvalidArgument);

  // The log goes on from the pruned state, across a reopen.
  log.reset();
  log = OpenLog(*store, options);
  ASSERT_NE(log, nullptr);
  for (int i = 0; i < 10; ++i) log->Append(Request(9, i), callbacks.Next());
  ASSERT_TRUE(log->Flush(true).ok());
  report = Verify(*store);
  EXPECT_EQ(report.records, 40);
  EXPECT_EQ(report.last_sequence, 60);
}

TEST_F(AuditLogTest, TheFirstEpochStartsAtTheLogsFirstRecord) {
  // Epoch 1 lasts from record 1's time: a later record's older time does not end it sooner, at
  // the checkpoint that first reads record 1 back or at the ones after it.
  auto store = OpenSqlite();
  ASSERT_NE(store, nullptr);
  AuditOptions options;
  options.sync = true;
  options.epoch_length = std::chrono::hours(1);
  options.checkpoint_every_records = 1000000;
  options.checkpoint_every = std::chrono::hours(1);
  auto log = OpenLog(*store, options);
  ASSERT_NE(log, nullptr);
  const int64_t now = std::chrono::duration_cast<std::chrono::nanoseconds>(
                          std::chrono::system_clock::now().time_since_epoch())
                          .count();
  const int64_t minute = 60LL * 1'000'000'000;
  Callbacks callbacks;
  for (int i = 0; i < 3; ++i) {
    AuditRecord record = Request(0, i);
    record.time_unix_ns = i == 0 ? now - 30 * minute : now - 180 * minute;
    log->Append(record, callbacks.Next());
    ASSERT_TRUE(log->Flush(/*checkpoint=*/true).ok());
    auto epochs = store->ListAuditEpochs();
    ASSERT_TRUE(epochs.ok());
    EXPECT_TRUE(epochs->empty()) << "after record " << i + 1 << ", epoch 1 ended at record "
                                 << epochs->front().last_sequence;
  }
  auto checkpoints = store->ListAuditCheckpoints(0);
  ASSERT_TRUE(checkpoints.ok());
  EXPECT_EQ(checkpoints->size(), 3u);
}

TEST_F(AuditLogTest, InclusionProofsOfEveryRecordCheckOfflineAndTamperedProofsFail) {
  auto store = OpenSqlite();
  ASSERT_NE(store, nullptr);
  AuditOptions options;
  options.sync = true;
  auto log = OpenLog(*store, options);
  ASSERT_NE(log, nullptr);
  Callbacks callbacks;
  for (int i = 0; i < 13; ++i) log->Append(Request(0, i), callbacks.Next());
  ASSERT_TRUE(log->Flush(true).ok());
  for (int64_t sequence = 1; sequence <= 13; ++sequence) {
    auto proof = ProveInclusion(*store, DigestAlgorithm::kSha256, sequence, std::nullopt);
    ASSERT_TRUE(proof.ok()) << proof.status().ToString();
    auto checked = CheckInclusionProof(*proof, {key_.Public()});
    EXPECT_TRUE(checked.ok()) << sequence << ": " << checked.status().ToString();
  }
  auto proof = ProveInclusion(*store, DigestAlgorithm::kSha256, 6, 13);
  ASSERT_TRUE(proof.ok());
  std::string edited = *proof;
  edited.replace(edited.find("user-0"), 6, "user-1");
  EXPECT_FALSE(CheckInclusionProof(edited, {key_.Public()}).ok());
  std::string moved = *proof;
  moved.replace(moved.find("\"leaf_index\":5"), 14, "\"leaf_index\":4");
  EXPECT_FALSE(CheckInclusionProof(moved, {key_.Public()}).ok());
  EXPECT_FALSE(CheckInclusionProof(proof->substr(0, proof->size() / 2), {key_.Public()}).ok());
  EXPECT_FALSE(CheckInclusionProof("{}", {key_.Public()}).ok());
  EXPECT_EQ(ProveInclusion(*store, DigestAlgorithm::kSha256, 6, 7).status().code(),
            StatusCode::kNotFound);
  EXPECT_EQ(ProveInclusion(*store, DigestAlgorithm::kSha256, 14, std::nullopt).status().code(),
            StatusCode::kNotFound);
}

}  // namespace
}  // namespace rampart::audit
