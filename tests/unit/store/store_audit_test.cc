// The audit log's tables on both backends: appends all-or-nothing with a gap-free sequence, the
// taken-sequence conflict replicas resolve, queries by each filter, checkpoints kept first-wins,
// and pruning by epochs oldest first.

#include <gtest/gtest.h>

#include <atomic>
#include <limits>
#include <thread>
#include <vector>

#include "store/audit_batch.h"
#include "store/store_fixture.h"

namespace rampart::store::testing {
namespace {

template <typename Backend>
class StoreAuditTest : public StoreTest<Backend> {
 protected:
  static AuditRow Row(int64_t sequence, std::string tenant = "acme",
                      std::string principal = "alice", std::string trace = "") {
    AuditRow row;
    row.sequence = sequence;
    row.time_unix_ns = 1'000'000'000 * sequence;
    row.tenant = std::move(tenant);
    row.principal = std::move(principal);
    row.trace_id = trace.empty() ? fmt::format("trace-{}", sequence) : std::move(trace);
    row.request_id = fmt::format("request-{}", sequence);
    row.action = "model:infer";
    row.record = fmt::format(R"({{"sequence":{},"note":"é \"q\" \\u0000"}})", sequence);
    row.leaf_hash = std::string(64, 'a');
    row.chain_hash = fmt::format("{:064x}", sequence);
    return row;
  }
  static std::vector<AuditRow> Rows(int64_t first, int64_t count) {
    std::vector<AuditRow> rows;
    for (int64_t i = 0; i < count; ++i) rows.push_back(Row(first + i));
    return rows;
  }
  static std::vector<int64_t> Sequences(const Result<std::vector<AuditRow>>& rows) {
    EXPECT_TRUE(rows.ok()) << rows.status().ToString();
    std::vector<int64_t> sequences;
    if (rows.ok()) {
      for (const AuditRow& row : *rows) sequences.push_back(row.sequence);
    }
    return sequences;
  }
};
TYPED_TEST_SUITE(StoreAuditTest, Backends, BackendNames);

TYPED_TEST(StoreAuditTest, AppendsReadBackExactlyAndKeepOneSequence) {
  Store& store = *this->store_;
  auto empty = store.LastAuditSequence();
  ASSERT_TRUE(empty.ok()) << empty.status().ToString();
  EXPECT_EQ(*empty, 0);

  STORE_ASSERT_OK(store.AppendAuditRows(this->Rows(1, 3)));
  STORE_ASSERT_OK(store.AppendAuditRows(this->Rows(4, 2)));
  auto rows = store.ReadAuditRows(0, 100);
  ASSERT_TRUE(rows.ok()) << rows.status().ToString();
  ASSERT_EQ(rows->size(), 5u);
  const AuditRow expected = this->Row(2);
  const AuditRow& got = (*rows)[1];
  EXPECT_EQ(got.sequence, 2);
  EXPECT_EQ(got.time_unix_ns, expected.time_unix_ns);
  EXPECT_EQ(got.tenant, expected.tenant);
  EXPECT_EQ(got.principal, expected.principal);
  EXPECT_EQ(got.trace_id, expected.trace_id);
  EXPECT_EQ(got.request_id, expected.request_id);
  EXPECT_EQ(got.action, expected.action);
  EXPECT_EQ(got.record, expected.record);
  EXPECT_EQ(got.leaf_hash, expected.leaf_hash);
  EXPECT_EQ(got.chain_hash, expected.chain_hash);
  EXPECT_EQ(this->Sequences(store.ReadAuditRows(3, 1)), (std::vector<int64_t>{4}));

  // A taken sequence (another replica appended first) and a gap are refused, and nothing of the
  // batch is written.
  const Status taken = store.AppendAuditRows(this->Rows(5, 3));
  EXPECT_EQ(taken.code(), StatusCode::kAlreadyExists) << taken.ToString();
  const Status gap = store.AppendAuditRows(this->Rows(7, 1));
  EXPECT_EQ(gap.code(), StatusCode::kAlreadyExists) << gap.ToString();
  std::vector<AuditRow> holey = this->Rows(6, 2);
  holey[1].sequence = 8;
  EXPECT_EQ(store.AppendAuditRows(holey).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(store.AppendAuditRows({}).code(), StatusCode::kInvalidArgument);
  auto last = store.LastAuditSequence();
  ASSERT_TRUE(last.ok());
  EXPECT_EQ(*last, 5);

  // Another process's view.
  std::unique_ptr<Store> other = this->OpenOrDie();
  ASSERT_NE(other, nullptr);
  EXPECT_EQ(this->Sequences(other->ReadAuditRows(0, 100)), (std::vector<int64_t>{1, 2, 3, 4, 5}));
}

TYPED_TEST(StoreAuditTest, ConcurrentWritersNeverShareOrSkipASequence) {
  // Two stores on one database (two replicas, or the server and a CLI): each appends from its
  // own view of the head and, when refused, re-reads the head and retries.
  std::unique_ptr<Store> second = this->OpenOrDie();
  ASSERT_NE(second, nullptr);
  std::atomic<int> conflicts{0};
  const auto writer = [&](Store& store, const std::string& principal) {
    for (int batch = 0; batch < 20; ++batch) {
      while (true) {
        auto last = store.LastAuditSequence();
        ASSERT_TRUE(last.ok()) << last.status().ToString();
        std::vector<AuditRow> rows;
        for (int i = 1; i <= 3; ++i) rows.push_back(this->Row(*last + i, "acme", principal));
        const Status appended = store.AppendAuditRows(rows);
        if (appended.ok()) break;
        ASSERT_EQ(appended.code(), StatusCode::kAlreadyExists) << appended.ToString();
        ++conflicts;
      }
    }
  };
  std::thread a([&] { writer(*this->store_, "a"); });
  std::thread b([&] { writer(*second, "b"); });
  a.join();
  b.join();
  const std::vector<int64_t> sequences = this->Sequences(this->store_->ReadAuditRows(0, 1000));
  ASSERT_EQ(sequences.size(), 120u);
  for (size_t i = 0; i < sequences.size(); ++i) EXPECT_EQ(sequences[i], int64_t(i + 1));
  // Each batch of three is one writer's: all or nothing.
  auto rows = this->store_->ReadAuditRows(0, 1000);
  ASSERT_TRUE(rows.ok());
  for (size_t i = 0; i < rows->size(); i += 3) {
    EXPECT_EQ((*rows)[i].principal, (*rows)[i + 2].principal) << "batch at " << i + 1;
  }
}

TYPED_TEST(StoreAuditTest, QueriesFilterByTimeTenantPrincipalAndTrace) {
  Store& store = *this->store_;
  std::vector<AuditRow> rows = {
      this->Row(1, "acme", "alice", "t1"), this->Row(2, "acme", "bob", "t2"),
      this->Row(3, "globex", "alice", "t1"), this->Row(4, "acme", "alice", "t3"),
      this->Row(5, "acme", "alice", "t1")};
  STORE_ASSERT_OK(store.AppendAuditRows(rows));
  const auto query = [&](AuditQuery q) { return this->Sequences(store.QueryAuditRows(q)); };
  EXPECT_EQ(query({}), (std::vector<int64_t>{1, 2, 3, 4, 5}));
  EXPECT_EQ(query({.tenant = "acme", .principal = "alice"}), (std::vector<int64_t>{1, 4, 5}));
  EXPECT_EQ(query({.trace_id = "t1"}), (std::vector<int64_t>{1, 3, 5}));
  EXPECT_EQ(query({.from_unix_ns = 2'000'000'000, .to_unix_ns = 4'000'000'000}),
            (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(query({.principal = "alice", .after_sequence = 1, .limit = 2}),
            (std::vector<int64_t>{3, 4}));
  EXPECT_EQ(query({.tenant = "nobody"}), (std::vector<int64_t>{}));
  EXPECT_EQ(store.QueryAuditRows({.limit = 0}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(store.QueryAuditRows({.limit = 10001}).status().code(), StatusCode::kInvalidArgument);
}

TYPED_TEST(StoreAuditTest, PackedBatchesAppendWholeOrNotAtAll) {
  Store& store = *this->store_;
  STORE_ASSERT_OK(store.AppendAuditRows(this->Rows(1, 2)));
  const std::string leaf(32, '\xaa');
  AuditBatchBuilder builder;
  builder.Start(3);
  for (int64_t sequence = 3; sequence <= 5; ++sequence) {
    const AuditRow row = this->Row(sequence);
    const std::string chain(32, static_cast<char>(sequence));
    builder.Add(row.time_unix_ns, row.tenant, row.principal, row.trace_id, row.request_id,
                row.action, row.record, leaf, chain);
  }
  AuditBatch bad = builder.batch();
  bad.last_sequence = 6;  // claims a record it does not hold
  EXPECT_EQ(store.AppendAuditBatch(bad).code(), StatusCode::kInvalidArgument);
  bad = builder.batch();
  bad.records.pop_back();  // the last record cut short
  EXPECT_EQ(store.AppendAuditBatch(bad).code(), StatusCode::kInvalidArgument);
  STORE_ASSERT_OK(store.AppendAuditBatch(builder.batch()));
  EXPECT_EQ(store.AppendAuditBatch(builder.batch()).code(), StatusCode::kAlreadyExists);
  auto rows = store.ReadAuditRows(2, 100);
  ASSERT_TRUE(rows.ok()) << rows.status().ToString();
  ASSERT_EQ(rows->size(), 3u);
  for (int64_t i = 0; i < 3; ++i) {
    const AuditRow expected = this->Row(3 + i);
    const AuditRow& row = (*rows)[static_cast<size_t>(i)];
    EXPECT_EQ(row.sequence, 3 + i);
    EXPECT_EQ(row.record, expected.record);
    EXPECT_EQ(row.trace_id, expected.trace_id);
    EXPECT_EQ(row.leaf_hash, std::string(64, 'a'));
    std::string chain_hex;
    for (int byte = 0; byte < 32; ++byte) chain_hex += fmt::format("{:02x}", 3 + i);
    EXPECT_EQ(row.chain_hash, chain_hex);
  }
}

// Version-2 batches (store/audit_batch.h): the store keeps the record's compact form opaque,
// gives its rows back marked compact with their times (stored as differences, in any order) and
// query fields, filters them, and packs what pruning keeps of one as version 2 again. Compact and
// canonical rows never share a batch.
TYPED_TEST(StoreAuditTest, Version2BatchesReadBackCompactRowsAndPruneAsVersion2) {
  Store& store = *this->store_;
  const int64_t times[] = {
      5'000'000'000, 4'000'000'000, 9'000'000'000, std::numeric_limits<int64_t>::max(), -7,
      6'000'000'000};
  const std::string leaf(32, '\xaa');
  AuditBatchBuilder builder;
  builder.Start(1, kAuditBatchVersion2);
  for (int64_t sequence = 1; sequence <= 6; ++sequence) {
    const AuditRow row = this->Row(sequence, "acme", sequence % 2 == 0 ? "alice" : "bob");
    const std::string chain(32, static_cast<char>(sequence));
    builder.Add(times[sequence - 1], row.tenant, row.principal, row.trace_id, row.request_id,
                row.action, fmt::format("compact-{}", sequence), leaf, chain);
  }
  EXPECT_EQ(builder.batch().records.front(), kAuditBatchVersion2);
  EXPECT_EQ(builder.batch().min_time_unix_ns, -7);
  EXPECT_EQ(builder.batch().max_time_unix_ns, std::numeric_limits<int64_t>::max());
  STORE_ASSERT_OK(store.AppendAuditBatch(builder.batch()));
  auto rows = store.ReadAuditRows(0, 100);
  ASSERT_TRUE(rows.ok()) << rows.status().ToString();
  ASSERT_EQ(rows->size(), 6u);
  for (size_t i = 0; i < rows->size(); ++i) {
    const AuditRow& row = (*rows)[i];
    EXPECT_TRUE(row.compact);
    EXPECT_FALSE(row.compact_leaf);
    EXPECT_EQ(row.sequence, int64_t(i) + 1);
    EXPECT_EQ(row.time_unix_ns, times[i]);
    EXPECT_EQ(row.record, fmt::format("compact-{}", i + 1));
    EXPECT_EQ(row.request_id, fmt::format("request-{}", i + 1));
    EXPECT_EQ(row.leaf_hash, std::string(64, 'a'));
  }
  EXPECT_EQ(this->Sequences(store.QueryAuditRows({.principal = "alice"})),
            (std::vector<int64_t>{2, 4, 6}));
  EXPECT_EQ(this->Sequences(store.QueryAuditRows({.trace_id = "trace-3"})),
            (std::vector<int64_t>{3}));

  // Compact and canonical rows in one batch are refused; compact rows alone pack as version 2.
  std::vector<AuditRow> mixed = this->Rows(7, 2);
  mixed[0].compact = true;
  EXPECT_EQ(store.AppendAuditRows(mixed).code(), StatusCode::kInvalidArgument);

  // Pruning records 1..2 packs what it keeps of the batch (3..6) again, as version 2.
  STORE_ASSERT_OK(
      store.PutAuditCheckpoint({.tree_size = 2, .root_hash = "r2"},
                               AuditEpochRow{.epoch = 1, .first_sequence = 1, .last_sequence = 2}));
  STORE_ASSERT_OK(store.PruneAuditEpoch(1));
  auto kept = store.ReadAuditRows(0, 100);
  ASSERT_TRUE(kept.ok()) << kept.status().ToString();
  ASSERT_EQ(kept->size(), 4u);
  for (size_t i = 0; i < kept->size(); ++i) {
    const AuditRow& row = (*kept)[i];
    EXPECT_TRUE(row.compact);
    EXPECT_EQ(row.sequence, int64_t(i) + 3);
    EXPECT_EQ(row.time_unix_ns, times[i + 2]);
    EXPECT_EQ(row.record, fmt::format("compact-{}", i + 3));
    EXPECT_FALSE(row.compact_leaf);
  }
}

// Version-3 batches (what the log's writer writes): version 2's layout, their rows marked compact
// leaves too; pruning packs what it keeps as version 3 again, and rows of compact leaves never
// share a batch with other compact rows.
TYPED_TEST(StoreAuditTest, Version3BatchesReadBackCompactLeafRowsAndPruneAsVersion3) {
  Store& store = *this->store_;
  const std::string leaf(32, '\xaa');
  AuditBatchBuilder builder;
  builder.Start(1);
  for (int64_t sequence = 1; sequence <= 4; ++sequence) {
    const AuditRow row = this->Row(sequence, "acme", sequence % 2 == 0 ? "alice" : "bob");
    builder.Add(1000 + sequence, row.tenant, row.principal, row.trace_id, row.request_id,
                row.action, fmt::format("leaf-{}", sequence), leaf,
                std::string(32, static_cast<char>(sequence)));
  }
  EXPECT_EQ(builder.batch().records.front(), kAuditBatchVersion3);
  STORE_ASSERT_OK(store.AppendAuditBatch(builder.batch()));
  auto rows = store.ReadAuditRows(0, 100);
  ASSERT_TRUE(rows.ok()) << rows.status().ToString();
  ASSERT_EQ(rows->size(), 4u);
  for (const AuditRow& row : *rows) {
    EXPECT_TRUE(row.compact && row.compact_leaf);
    EXPECT_EQ(row.record, fmt::format("leaf-{}", row.sequence));
  }
  std::vector<AuditRow> mixed = this->Rows(5, 2);
  for (AuditRow& row : mixed) row.compact = true;
  mixed[0].compact_leaf = true;
  EXPECT_EQ(store.AppendAuditRows(mixed).code(), StatusCode::kInvalidArgument);

  STORE_ASSERT_OK(
      store.PutAuditCheckpoint({.tree_size = 1, .root_hash = "r1"},
                               AuditEpochRow{.epoch = 1, .first_sequence = 1, .last_sequence = 1}));
  STORE_ASSERT_OK(store.PruneAuditEpoch(1));
  auto kept = store.ReadAuditRows(0, 100);
  ASSERT_TRUE(kept.ok()) << kept.status().ToString();
  ASSERT_EQ(kept->size(), 3u);
  for (const AuditRow& row : *kept) {
    EXPECT_TRUE(row.compact && row.compact_leaf);
    EXPECT_EQ(row.record, fmt::format("leaf-{}", row.sequence));
  }
}

// A batch carrying a checkpoint (the log's writer signs the tree its batch completes) writes
// both, and the epoch the checkpoint closes, in one transaction: a batch refused writes none of
// them, and a checkpoint at another size than the batch's last record is refused.
TYPED_TEST(StoreAuditTest, ABatchsCheckpointCommitsWithItOrNotAtAll) {
  Store& store = *this->store_;
  const auto batch_of = [&](int64_t first, int64_t count) {
    AuditBatchBuilder builder;
    builder.Start(first);
    for (int64_t sequence = first; sequence < first + count; ++sequence) {
      const AuditRow row = this->Row(sequence);
      builder.Add(1000 + sequence, row.tenant, row.principal, row.trace_id, row.request_id,
                  row.action, fmt::format("leaf-{}", sequence), std::string(32, '\xaa'),
                  std::string(32, static_cast<char>(sequence)));
    }
    return builder;
  };
  AuditBatchBuilder builder = batch_of(1, 3);
  builder.SetCheckpoint({.tree_size = 2, .root_hash = "r2"}, std::nullopt);
  EXPECT_EQ(store.AppendAuditBatch(builder.batch()).code(), StatusCode::kInvalidArgument);
  AuditBatch no_checkpoint = builder.batch();
  no_checkpoint.checkpoint.reset();
  no_checkpoint.closes = AuditEpochRow{.epoch = 1, .first_sequence = 1, .last_sequence = 3};
  EXPECT_EQ(store.AppendAuditBatch(no_checkpoint).code(), StatusCode::kInvalidArgument);

  builder.SetCheckpoint({.tree_size = 3, .root_hash = "r3", .chain_hash = "c3"},
                        AuditEpochRow{.epoch = 1, .first_sequence = 1, .last_sequence = 3});
  STORE_ASSERT_OK(store.AppendAuditBatch(builder.batch()));
  auto last = store.LastAuditCheckpoint();
  ASSERT_TRUE(last.ok()) << last.status().ToString();
  ASSERT_TRUE(last->has_value());
  EXPECT_EQ((*last)->tree_size, 3);
  EXPECT_EQ((*last)->root_hash, "r3");
  auto epochs = store.ListAuditEpochs();
  ASSERT_TRUE(epochs.ok()) << epochs.status().ToString();
  ASSERT_EQ(epochs->size(), 1u);
  EXPECT_EQ(epochs->front().last_sequence, 3);

  // Sequences 3..4 are taken in part: neither the records nor the checkpoint at 4 go in.
  AuditBatchBuilder taken = batch_of(3, 2);
  taken.SetCheckpoint({.tree_size = 4, .root_hash = "r4"}, std::nullopt);
  EXPECT_EQ(store.AppendAuditBatch(taken.batch()).code(), StatusCode::kAlreadyExists);
  last = store.LastAuditCheckpoint();
  ASSERT_TRUE(last.ok() && last->has_value());
  EXPECT_EQ((*last)->tree_size, 3);
  auto sequence = store.LastAuditSequence();
  ASSERT_TRUE(sequence.ok());
  EXPECT_EQ(*sequence, 3);
}

TYPED_TEST(StoreAuditTest, CheckpointsKeepTheFirstPerSizeAndEpochsPruneOldestFirst) {
  Store& store = *this->store_;
  STORE_ASSERT_OK(store.AppendAuditRows(this->Rows(1, 10)));
  auto none = store.LastAuditCheckpoint();
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());

  AuditCheckpointRow first{.tree_size = 4,
                           .root_hash = "r4",
                           .time_unix_ns = 4,
                           .key_id = "k",
                           .algorithm = "ed25519",
                           .signature = "sig4",
                           .frontier = "f4",
                           .chain_hash = "c4"};
  STORE_ASSERT_OK(store.PutAuditCheckpoint(first, AuditEpochRow{.epoch = 1,
                                                                .first_sequence = 1,
                                                                .last_sequence = 4,
                                                                .start_unix_ns = 1,
                                                                .end_unix_ns = 4}));
  AuditCheckpointRow again = first;
  again.signature = "another replica's";
  STORE_ASSERT_OK(store.PutAuditCheckpoint(again, std::nullopt));
  AuditCheckpointRow second = first;
  second.tree_size = 8;
  second.root_hash = "r8";
  STORE_ASSERT_OK(store.PutAuditCheckpoint(second, AuditEpochRow{.epoch = 2,
                                                                 .first_sequence = 5,
                                                                 .last_sequence = 8,
                                                                 .start_unix_ns = 4,
                                                                 .end_unix_ns = 8}));

  auto checkpoints = store.ListAuditCheckpoints(0);
  ASSERT_TRUE(checkpoints.ok()) << checkpoints.status().ToString();
  ASSERT_EQ(checkpoints->size(), 2u);
  EXPECT_EQ((*checkpoints)[0].signature, "sig4");
  EXPECT_EQ((*checkpoints)[0].frontier, "f4");
  EXPECT_EQ((*checkpoints)[0].chain_hash, "c4");
  EXPECT_EQ((*checkpoints)[1].root_hash, "r8");
  auto from = store.ListAuditCheckpoints(5);
  ASSERT_TRUE(from.ok());
  ASSERT_EQ(from->size(), 1u);
  auto last = store.LastAuditCheckpoint();
  ASSERT_TRUE(last.ok());
  ASSERT_TRUE(last->has_value());
  EXPECT_EQ((*last)->tree_size, 8);

  EXPECT_EQ(store.PruneAuditEpoch(2).code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(store.PruneAuditEpoch(3).code(), StatusCode::kNotFound);
  STORE_ASSERT_OK(store.PruneAuditEpoch(1));
  STORE_ASSERT_OK(store.PruneAuditEpoch(1));
  EXPECT_EQ(this->Sequences(store.ReadAuditRows(0, 100)),
            (std::vector<int64_t>{5, 6, 7, 8, 9, 10}));
  // Records 1..10 were one batch: what pruning 1..4 kept of it reads back exactly.
  auto rest = store.ReadAuditRows(4, 1);
  ASSERT_TRUE(rest.ok() && rest->size() == 1u);
  EXPECT_EQ(rest->front().record, this->Row(5).record);
  EXPECT_EQ(rest->front().chain_hash, this->Row(5).chain_hash);
  EXPECT_EQ(rest->front().time_unix_ns, this->Row(5).time_unix_ns);
  STORE_ASSERT_OK(store.PruneAuditEpoch(2));
  auto epochs = store.ListAuditEpochs();
  ASSERT_TRUE(epochs.ok());
  ASSERT_EQ(epochs->size(), 2u);
  EXPECT_TRUE((*epochs)[0].pruned);
  EXPECT_TRUE((*epochs)[1].pruned);
  EXPECT_EQ((*epochs)[1].first_sequence, 5);
  EXPECT_EQ((*epochs)[1].last_sequence, 8);
  auto kept = store.ListAuditCheckpoints(0);
  ASSERT_TRUE(kept.ok());
  EXPECT_EQ(kept->size(), 2u);  // every checkpoint stays

  // With every record of an epoch gone, the sequence still continues from the epoch's end.
  STORE_ASSERT_OK(store.PutAuditCheckpoint(
      {.tree_size = 10, .root_hash = "r10"},
      AuditEpochRow{.epoch = 3, .first_sequence = 9, .last_sequence = 10}));
  STORE_ASSERT_OK(store.PruneAuditEpoch(3));
  auto after = store.LastAuditSequence();
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(*after, 10);
  EXPECT_EQ(store.AppendAuditRows(this->Rows(1, 1)).code(), StatusCode::kAlreadyExists);
  STORE_EXPECT_OK(store.AppendAuditRows(this->Rows(11, 1)));
}

}  // namespace
}  // namespace rampart::store::testing
