#pragma once

// The audit log's commands (docs/audit.md), on the store the server uses: SQLite under
// --data-dir (default ./data, or the --config file's access.data_dir), the --config file's
// PostgreSQL store, or --store URL (a PostgreSQL connection string).
//
//   rampart audit verify [--public-key PEM] [--digest sha256|sm3]
//       recomputes every record's leaf hash, the chain and the tree, checks every checkpoint's
//       signature and root; prints a summary and exits 0 when sound, or names the first bad
//       record or checkpoint and what is wrong (edited, deleted, inserted, reordered, truncated,
//       checkpoint, inconsistent) on standard error and exits 1
//   rampart audit prove SEQ [--checkpoint SIZE] [--digest D]
//       prints an inclusion proof of record SEQ (JSON, audit/log_reader.h) against the checkpoint
//       of SIZE, or the first one covering the record
//   rampart audit check-proof FILE [--public-key PEM] [--data-dir DIR]
//       checks a proof offline (no store): exits 0 when it holds, 1 otherwise
//   rampart audit export [--from T] [--to T]
//       writes the records with time in [from, to) as JSON lines (T: Unix seconds, or
//       2026-12-01T00:00:00Z)
//   rampart audit prune --retention-days N
//       prunes the epochs that ended more than N days ago (the server does this itself)
//
// --digest defaults to the --config file's audit.digest, else sha256.
// --public-key is the checkpoints' verifying key (PEM, Ed25519 or SM2), repeatable for keys that
// signed before a rotation, or a file holding several; without it, the data directory's
// audit-signing-key.pem (every version of the server's signing key, written at its start).
// Exit status: 0 sound/done, 1 a problem found or the store failed (the reason on standard
// error), 2 bad arguments.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace rampart::app {

class AuditCli {
 public:
  // Adds `audit` and its subcommands to `app`. `this` must outlive the parse.
  void AddTo(CLI::App& app);
  // After `app` parsed: runs the command chosen, returning its exit status; nullopt when none
  // of these was chosen.
  std::optional<int> RunIfChosen();

 private:
  struct Args {
    std::string data_dir;
    std::string config_file;
    std::string store_url;
    std::vector<std::string> public_keys;  // PEM files
    std::string digest;                    // empty: the --config file's audit.digest, else sha256
    int64_t sequence = 0;
    int64_t checkpoint = 0;  // 0: the first covering the record
    std::string proof_file;
    std::string from;
    std::string to;
    int64_t retention_days = 0;
  };
  int Run(const std::string& command);

  Args args_;
  std::vector<std::pair<CLI::App*, std::string>> commands_;  // leaf command -> "verify"
};

}  // namespace rampart::app
