// The audit log's speed on this machine's disk, with the disk's own limits measured in the same
// run as the baseline:
//
//   fsync           4 KiB write + fdatasync in a loop: how many durable writes the disk does
//   sqlite-batch    raw SQLite inserts (WAL, synchronous=FULL) of the same record text, in
//                   transactions of --batch rows: the best a store write of that size can do
//   audit-sync      AuditLog appends in sync mode from --threads producers, each answered after
//                   its batch's fsync: durable appends per second with group commit
//   audit-batched   the same in batched mode (answered when queued; written within max_delay)
//   verify          VerifyLog over everything written: records checked per second, and its
//                   CPU time per record
//
//   audit_bench [--dir DIR] [--records 200000] [--threads 8] [--batch 1024] [--digest sha256]
//               [--canonical-leaves]
//
// --canonical-leaves writes the log as before compact leaves (AuditOptions::canonical_leaves:
// leaves over each record's canonical JSON, version-2 batches), for comparison.
//
// DIR defaults to a new temporary directory (removed afterwards). Prints one line per
// measurement: `<name> <per second> <detail>`.

#include <fcntl.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>

#include "audit/audit_log.h"
#include "audit/log_reader.h"
#include "audit/record_codec.h"
#include "store/store.h"

namespace {

using namespace rampart;
using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

audit::AuditRecord Sample(int64_t i) {
  audit::AuditRecord record;
  record.trace_id = fmt::format("{:032x}", i);
  record.request_id = std::to_string(i);
  record.api = "kserve_http";
  record.tenant = "acme";
  record.principal = fmt::format("user-{}", i % 97);
  record.auth_method = "api_key";
  record.key_id = "rk_live_3fX9abcd";
  record.source_address = "10.0.0.7";
  record.action = "model:infer";
  record.resource_type = "model";
  record.resource = "simple";
  record.rules = {"analyst-infer"};
  record.route = "/v2/models/simple/infer";
  record.target = "simple";
  record.model_version = "1";
  record.instance_ns = 350000;
  record.stages_ns = {{"queue", 12000}, {"compute", 350000}};
  record.latency_ns = 420000;
  record.status = 200;
  record.outcome = "ok";
  record.request_digest = "sha256:" + std::string(64, 'a');
  record.response_digest = "sha256:" + std::string(64, 'b');
  return record;
}

// The calling thread's CPU time (verification runs on it alone).
double ThreadCpuSeconds() {
  timespec now{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
  return double(now.tv_sec) + 1e-9 * double(now.tv_nsec);
}

void FsyncRate(const std::string& dir) {
  const std::string path = dir + "/fsync.bin";
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  if (fd < 0) return;
  const std::string block(4096, 'x');
  int64_t count = 0;
  const auto start = Clock::now();
  while (Seconds(start) < 2.0) {
    if (::pwrite(fd, block.data(), block.size(), 0) < 0 || ::fdatasync(fd) != 0) break;
    ++count;
  }
  const double seconds = Seconds(start);
  ::close(fd);
  std::printf("fsync %.0f 4KiB-write+fdatasync\n", double(count) / seconds);
}

void SqliteBatches(const std::string& dir, int64_t records, int batch) {
  sqlite3* db = nullptr;
  if (sqlite3_open((dir + "/raw.db").c_str(), &db) != SQLITE_OK) return;
  sqlite3_exec(db,
               "PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL; CREATE TABLE t (sequence "
               "BIGINT PRIMARY KEY, record TEXT NOT NULL)",
               nullptr, nullptr, nullptr);
  sqlite3_stmt* insert = nullptr;
  sqlite3_prepare_v2(db, "INSERT INTO t VALUES (?1, ?2)", -1, &insert, nullptr);
  const std::string text = audit::EncodeRecord(Sample(1));
  const auto start = Clock::now();
  for (int64_t i = 0; i < records;) {
    sqlite3_exec(db, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr);
    for (int k = 0; k < batch && i < records; ++k, ++i) {
      sqlite3_bind_int64(insert, 1, i + 1);
      sqlite3_bind_text(insert, 2, text.data(), int(text.size()), SQLITE_STATIC);
      sqlite3_step(insert);
      sqlite3_reset(insert);
    }
    sqlite3_exec(db, "COMMIT", nullptr, nullptr, nullptr);
  }
  const double seconds = Seconds(start);
  sqlite3_finalize(insert);
  sqlite3_close(db);
  std::printf("sqlite-batch %.0f rows/s in transactions of %d rows (%zu-byte records)\n",
              double(records) / seconds, batch, text.size());
}

int AuditAppends(const std::string& dir, bool sync, int64_t records, int threads, int batch,
                 crypto::DigestAlgorithm digest, bool canonical_leaves,
                 const crypto::SigningKey& key) {
  auto store = store::OpenSqliteStore(dir + (sync ? "/sync" : "/batched"));
  if (!store.ok()) {
    std::fprintf(stderr, "%s\n", store.status().ToString().c_str());
    return 1;
  }
  audit::AuditOptions options;
  options.sync = sync;
  options.digest = digest;
  options.max_batch = size_t(batch);
  options.max_queue = size_t(records) + 1;
  options.canonical_leaves = canonical_leaves;
  auto log = audit::AuditLog::Open(**store, options, key, "bench");
  if (!log.ok()) {
    std::fprintf(stderr, "%s\n", log.status().ToString().c_str());
    return 1;
  }
  std::mutex mutex;
  std::condition_variable done;
  int64_t answered = 0;
  int64_t failed = 0;
  const int64_t each = records / threads;
  const auto start = Clock::now();
  std::vector<std::thread> producers;
  for (int t = 0; t < threads; ++t) {
    producers.emplace_back([&, t] {
      for (int64_t i = 0; i < each; ++i) {
        (*log)->Append(Sample(t * each + i), [&](Status status) {
          std::lock_guard lock(mutex);
          ++answered;
          if (!status.ok()) ++failed;
          done.notify_all();
        });
      }
    });
  }
  for (std::thread& producer : producers) producer.join();
  {
    std::unique_lock lock(mutex);
    done.wait(lock, [&] { return answered == each * threads; });
  }
  if (Status flushed = (*log)->Flush(false); !flushed.ok()) return 1;
  const double seconds = Seconds(start);
  std::printf(
      "%s %.0f appends/s durable (%lld records, %d producer threads, max batch %d, %lld "
      "failed)\n",
      sync ? "audit-sync" : "audit-batched", double(each * threads) / seconds,
      (long long)(each * threads), threads, batch, (long long)failed);
  log->reset();

  if (sync) {
    const auto verify_start = Clock::now();
    const double cpu_start = ThreadCpuSeconds();
    auto report = audit::VerifyLog(**store, {.digest = digest, .keys = {key.Public()}});
    const double verify_seconds = Seconds(verify_start);
    const double verify_cpu = ThreadCpuSeconds() - cpu_start;
    if (!report.ok() || report->problem.has_value()) {
      std::fprintf(stderr, "verify failed\n");
      return 1;
    }
    // Its own CPU time too: on a shared machine the wall-clock rate is the noisier figure.
    std::printf("verify %.0f records/s (%lld records, %lld checkpoints, %.2f µs CPU per record)\n",
                double(report->records) / verify_seconds, (long long)report->records,
                (long long)report->checkpoints, 1e6 * verify_cpu / double(report->records));
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app("The audit log's durable append and verification rates");
  std::string dir;
  int64_t records = 200000;
  int threads = 8;
  int batch = 1024;
  std::string digest_name = "sha256";
  bool canonical_leaves = false;
  app.add_option("--dir", dir, "Directory on the disk to measure (default: a temporary one)");
  app.add_option("--records", records, "Records per measurement");
  app.add_option("--threads", threads, "Producer threads");
  app.add_option("--batch", batch, "Largest batch (AuditOptions::max_batch and the raw baseline)");
  app.add_option("--digest", digest_name, "sha256 or sm3");
  app.add_flag("--canonical-leaves", canonical_leaves,
               "Leaves over the canonical JSON (version-2 batches), as before compact leaves");
  CLI11_PARSE(app, argc, argv);
  auto digest = crypto::ParseDigest(digest_name);
  if (!digest.ok() || threads < 1 || batch < 1 || records < threads) return 2;

  bool temporary = false;
  if (dir.empty()) {
    char pattern[] = "/tmp/rampart-audit-bench-XXXXXX";
    if (mkdtemp(pattern) == nullptr) return 1;
    dir = pattern;
    temporary = true;
  }
  auto key = crypto::SigningKey::Generate(crypto::SignatureAlgorithm::kEd25519);
  if (!key.ok()) return 1;
  FsyncRate(dir);
  SqliteBatches(dir, records, batch);
  int status =
      AuditAppends(dir, /*sync=*/true, records, threads, batch, *digest, canonical_leaves, *key);
  if (status == 0) {
    status =
        AuditAppends(dir, /*sync=*/false, records, threads, batch, *digest, canonical_leaves, *key);
  }
  if (temporary) std::filesystem::remove_all(dir);
  return status;
}
