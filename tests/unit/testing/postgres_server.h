#pragma once

// A real PostgreSQL 15 server for tests, from Debian's packages: initdb in a temporary
// directory, started with pg_ctl on a free loopback port (its socket in that directory too),
// readiness polled with a deadline, stopped (pg_ctl stop -m immediate) and removed at the end.
//
// One server per test binary: Shared() starts it on first use and PostgresEnvironment stops it
// when the binary ends. Each test takes a fresh database from CreateDatabase(), so tests stay
// independent. PostgreSQL refuses to run as root: as root, initdb and pg_ctl run as the
// `postgres` user Debian's package creates, and the directory is made theirs.
//
// When PostgreSQL is not installed, Shared() answers an error that says so: the tests that need
// it fail with that message (they are never skipped; CI installs it).
//
// Threads: Shared() and CreateDatabase() are thread-safe.

#include <atomic>
#include <string>

#include <gtest/gtest.h>

#include "core/status.h"

namespace rampart::testing {

class PostgresServer {
 public:
  // The binary's server, started on first use; the same error on every call if it cannot start.
  static Result<PostgresServer*> Shared();

  // Creates an empty database and returns a libpq connection string for it.
  Result<std::string> CreateDatabase();

  // Runs `sql` (one or more statements) in the database `conninfo` names, through libpq.
  static Status Execute(const std::string& conninfo, const std::string& sql);
  // The first column of the first row of `sql`'s answer, as text.
  static Result<std::string> QueryText(const std::string& conninfo, const std::string& sql);

  int port() const { return port_; }

  ~PostgresServer();  // stops the server and removes its directory

 private:
  friend class PostgresEnvironment;
  PostgresServer() = default;
  Status Start();
  static void StopShared();

  std::string dir_;  // the temporary directory: data/, the socket, server.log
  int port_ = 0;
  bool running_ = false;
  std::atomic<int> databases_{0};
};

// Stops the shared server when the test binary ends: register once per binary with
// ::testing::AddGlobalTestEnvironment(new PostgresEnvironment).
class PostgresEnvironment : public ::testing::Environment {
 public:
  void TearDown() override { PostgresServer::StopShared(); }
};

}  // namespace rampart::testing
