// The store's cost per operation on each backend: an API key lookup (GetApiKey, what a snapshot
// reload does per key and the CLI per command), a LeaseBudget round trip (what a quota ledger
// does per lease) and a write (PutPrincipal, one durable transaction).
//
//   store_bench [--dir DIR] [--postgres CONNINFO] [--operations 2000]
//
// SQLite runs in DIR (default: a new temporary directory, removed afterwards); PostgreSQL only
// when --postgres names a database (its `rampart` schema is created if needed and the bench's
// rows are left there, under a tenant named after the process id). Prints one line per backend
// and operation: `<backend> <operation> <microseconds per operation>` (mean over --operations,
// one thread).

#include <stdlib.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>

#include <CLI/CLI.hpp>

#include "store/store.h"

namespace {

using rampart::store::Store;

template <typename Body>
double MicrosecondsPerOperation(int operations, Body body) {
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < operations; ++i) body(i);
  const std::chrono::duration<double, std::micro> elapsed =
      std::chrono::steady_clock::now() - start;
  return elapsed.count() / operations;
}

int Run(const std::string& backend, Store& store, int operations) {
  const std::string tenant = "bench-" + std::to_string(getpid());
  if (auto status = store.CreateTenant({.name = tenant}); !status.ok()) {
    std::fprintf(stderr, "%s\n", status.ToString().c_str());
    return 1;
  }
  rampart::store::ApiKey key;
  key.id = "rk_live_" + std::to_string(getpid());
  key.tenant = tenant;
  key.principal = "bench";
  key.salt = "00112233445566778899aabbccddeeff";
  key.hash = std::string(64, 'a');
  if (auto status = store.CreateApiKey(key); !status.ok()) {
    std::fprintf(stderr, "%s\n", status.ToString().c_str());
    return 1;
  }
  bool failed = false;
  const double lookup =
      MicrosecondsPerOperation(operations, [&](int) { failed |= !store.GetApiKey(key.id).ok(); });
  const double lease = MicrosecondsPerOperation(operations, [&](int) {
    failed |= !store.LeaseBudget(tenant + ":rpm", 0, int64_t{1} << 40, 1).ok();
  });
  const double write = MicrosecondsPerOperation(operations / 4, [&](int i) {
    failed |= !store.PutPrincipal({.tenant = tenant, .name = "p" + std::to_string(i)}).ok();
  });
  if (failed) {
    std::fprintf(stderr, "%s: an operation failed\n", backend.c_str());
    return 1;
  }
  std::printf("%s get_api_key %.1f\n%s lease_budget %.1f\n%s put_principal %.1f\n", backend.c_str(),
              lookup, backend.c_str(), lease, backend.c_str(), write);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Store operations per backend, in microseconds"};
  std::string dir;
  std::string postgres;
  int operations = 2000;
  app.add_option("--dir", dir, "SQLite's directory (default: a temporary one)");
  app.add_option("--postgres", postgres, "a PostgreSQL connection string to measure too");
  app.add_option("--operations", operations, "operations per measurement")
      ->check(CLI::PositiveNumber);
  CLI11_PARSE(app, argc, argv);

  std::string temporary;
  if (dir.empty()) {
    char pattern[] = "/tmp/rampart-store-bench-XXXXXX";
    if (mkdtemp(pattern) == nullptr) return 1;
    dir = temporary = pattern;
  }
  int failures = 0;
  {
    auto sqlite = rampart::store::OpenSqliteStore(dir);
    if (!sqlite.ok()) {
      std::fprintf(stderr, "%s\n", sqlite.status().ToString().c_str());
      return 1;
    }
    failures += Run("sqlite", **sqlite, operations);
  }
  if (!temporary.empty()) std::filesystem::remove_all(temporary);
  if (!postgres.empty()) {
    auto shared = rampart::store::OpenPostgresStore(postgres);
    if (!shared.ok()) {
      std::fprintf(stderr, "%s\n", shared.status().ToString().c_str());
      return 1;
    }
    failures += Run("postgres", **shared, operations);
  }
  return failures == 0 ? 0 : 1;
}
