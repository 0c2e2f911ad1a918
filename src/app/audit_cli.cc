#include "app/audit_cli.h"

#include <chrono>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include <fmt/format.h>

#include "app/access_config.h"
#include "app/access_setup.h"
#include "app/audit_config.h"
#include "app/audit_setup.h"
#include "audit/log_reader.h"
#include "crypto/signature.h"
#include "store/store.h"

namespace rampart::app {
namespace {

int Fail(const Status& status) {
  std::fprintf(stderr, "rampart: %s\n", status.message().c_str());
  return status.code() == StatusCode::kInvalidArgument ? 2 : 1;
}

Result<std::string> ReadFile(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  if (!file) return InvalidArgument("cannot read '{}'", path);
  std::ostringstream text;
  text << file.rdbuf();
  return text.str();
}

// The verifying keys in PEM files, Ed25519 or SM2 (whichever each is); a file may hold several
// (the server writes every version of its signing key into one). Without paths, the server's
// <data-dir>/audit-signing-key.pem.
Result<std::vector<crypto::VerifyingKey>> LoadKeys(std::vector<std::string> paths,
                                                   const std::string& default_data_dir) {
  if (paths.empty()) {
    const std::string fallback = AuditPublicKeyPath(default_data_dir);
    if (!std::filesystem::exists(fallback)) {
      return InvalidArgument(
          "--public-key PEM is required: no {} (the server writes it when the audit log is on)",
          fallback);
    }
    paths.push_back(fallback);
  }
  std::vector<crypto::VerifyingKey> keys;
  constexpr std::string_view kBegin = "-----BEGIN";
  for (const std::string& path : paths) {
    ASSIGN_OR_RETURN(const std::string text, ReadFile(path));
    size_t start = text.find(kBegin);
    if (start == std::string::npos) {
      return InvalidArgument("'{}' is not an Ed25519 or SM2 public key in PEM", path);
    }
    while (start != std::string::npos) {
      // One PEM block: from its BEGIN line to the next block's.
      const size_t end_line = text.find("-----END", start);
      const size_t next =
          end_line == std::string::npos ? std::string::npos : text.find(kBegin, end_line);
      const std::string_view pem = std::string_view(text).substr(
          start, next == std::string::npos ? std::string::npos : next - start);
      auto key = crypto::VerifyingKey::FromPem(crypto::SignatureAlgorithm::kEd25519, pem);
      if (!key.ok()) key = crypto::VerifyingKey::FromPem(crypto::SignatureAlgorithm::kSm2Sm3, pem);
      if (!key.ok()) {
        return InvalidArgument("'{}' is not an Ed25519 or SM2 public key in PEM", path);
      }
      keys.push_back(*key);
      start = next;
    }
  }
  return keys;
}

// Unix seconds, or an RFC 3339 UTC time "2026-12-01T00:00:00Z", as Unix nanoseconds; 0 for "".
Result<int64_t> ParseTime(const std::string& text, std::string_view flag) {
  if (text.empty()) return 0;
  if (text.find_first_not_of("0123456789") == std::string::npos && text.size() <= 12) {
    return std::stoll(text) * 1'000'000'000;
  }
  std::tm utc{};
  const char* end = strptime(text.c_str(), "%Y-%m-%dT%H:%M:%SZ", &utc);
  if (end == nullptr || *end != '\0') {
    return InvalidArgument("{} '{}': expected Unix seconds or YYYY-MM-DDTHH:MM:SSZ", flag, text);
  }
  return int64_t{timegm(&utc)} * 1'000'000'000;
}

Result<std::unique_ptr<store::Store>> OpenStore(const std::string& data_dir,
                                                const std::string& config_file,
                                                const std::string& store_url) {
  if (!store_url.empty()) return store::OpenPostgresStore(store_url);
  ASSIGN_OR_RETURN(const std::optional<AccessConfig> config, LoadAccessConfig(config_file));
  const AccessConfig* access = config.has_value() ? &*config : nullptr;
  return OpenConfiguredStore(access, ResolveDataDir(data_dir, access));
}

int Verify(store::Store& store, crypto::DigestAlgorithm digest,
           std::vector<crypto::VerifyingKey> keys) {
  Result<audit::VerifyReport> report =
      audit::VerifyLog(store, {.digest = digest, .keys = std::move(keys)});
  if (!report.ok()) return Fail(report.status());
  if (report->problem.has_value()) {
    std::fprintf(stderr, "rampart: the audit log is not sound: %s: %s\n",
                 report->problem->kind.c_str(), report->problem->message.c_str());
    return 1;
  }
  std::printf("audit log sound: %lld records checked (through record %lld",
              (long long)report->records, (long long)report->last_sequence);
  if (report->pruned_through > 0) {
    std::printf("; records 1..%lld pruned by retention", (long long)report->pruned_through);
  }
  std::printf("), %lld checkpoints verified, signed through tree size %lld\n",
              (long long)report->checkpoints, (long long)report->signed_size);
  if (report->last_sequence > report->signed_size) {
    std::printf("records %lld..%lld are not yet covered by a checkpoint\n",
                (long long)report->signed_size + 1, (long long)report->last_sequence);
  }
  return 0;
}

}  // namespace

void AuditCli::AddTo(CLI::App& app) {
  CLI::App* audit = app.add_subcommand("audit", "The tamper-evident audit log");
  audit->require_subcommand(1);
  const auto leaf = [this, audit](std::string name, std::string help, bool store) {
    CLI::App* command = audit->add_subcommand(name, std::move(help));
    if (store) {
      command->add_option("--data-dir", args_.data_dir,
                          "Directory of the SQLite store (default ./data, or the --config file's "
                          "access.data_dir)");
      command
          ->add_option("--config", args_.config_file,
                       "Config file whose access: section names the store")
          ->check(CLI::ExistingFile);
      command->add_option("--store", args_.store_url, "A PostgreSQL store's connection string");
      command->add_option(
          "--digest", args_.digest,
          "The log's hash: sha256 or sm3 (default: the --config file's audit.digest, else sha256)");
    }
    commands_.emplace_back(command, name);
    return command;
  };
  CLI::App* verify = leaf("verify", "Recompute the log and check every checkpoint", true);
  verify
      ->add_option("--public-key", args_.public_keys,
                   "Checkpoint verifying key (PEM file; default: the data directory's "
                   "audit-signing-key.pem, written by the server)")
      ->check(CLI::ExistingFile);
  CLI::App* prove = leaf("prove", "Print an inclusion proof of one record (JSON)", true);
  prove->add_option("sequence", args_.sequence, "The record's sequence number")->required();
  prove->add_option("--checkpoint", args_.checkpoint,
                    "Tree size of the checkpoint to prove against (default: the first covering "
                    "the record)");
  CLI::App* check = leaf("check-proof", "Check an inclusion proof offline", false);
  check->add_option("file", args_.proof_file, "The proof (from `rampart audit prove`)")
      ->required()
      ->check(CLI::ExistingFile);
  check
      ->add_option("--public-key", args_.public_keys,
                   "Checkpoint verifying key (PEM file; default: --data-dir's "
                   "audit-signing-key.pem)")
      ->check(CLI::ExistingFile);
  check->add_option("--data-dir", args_.data_dir,
                    "Where the server wrote audit-signing-key.pem (default ./data)");
  CLI::App* exported = leaf("export", "Write records as JSON lines", true);
  exported->add_option("--from", args_.from, "From this time (Unix seconds or RFC 3339 UTC)");
  exported->add_option("--to", args_.to, "Until this time, excluded");
  CLI::App* prune = leaf("prune", "Prune the epochs older than the retention", true);
  prune->add_option("--retention-days", args_.retention_days, "Keep epochs this many days")
      ->required()
      ->check(CLI::PositiveNumber);
}

std::optional<int> AuditCli::RunIfChosen() {
  for (const auto& [command, name] : commands_) {
    if (command->parsed()) return Run(name);
  }
  return std::nullopt;
}

int AuditCli::Run(const std::string& command) {
  if (command == "check-proof") {
    Result<std::vector<crypto::VerifyingKey>> keys =
        LoadKeys(args_.public_keys, ResolveDataDir(args_.data_dir, nullptr));
    if (!keys.ok()) return Fail(keys.status());
    Result<std::string> proof = ReadFile(args_.proof_file);
    if (!proof.ok()) return Fail(proof.status());
    Result<audit::CheckedProof> checked = audit::CheckInclusionProof(*proof, *keys);
    if (!checked.ok()) {
      std::fprintf(stderr, "rampart: the proof does not hold: %s\n",
                   checked.status().message().c_str());
      return 1;
    }
    std::printf("proof holds: record %lld is in the signed tree of size %lld\n",
                (long long)checked->sequence, (long long)checked->tree_size);
    return 0;
  }
  Result<crypto::DigestAlgorithm> digest = crypto::DigestAlgorithm::kSha256;
  if (!args_.digest.empty()) {
    digest = crypto::ParseDigest(args_.digest);
  } else if (!args_.config_file.empty()) {
    Result<std::optional<AuditConfig>> config = LoadAuditConfig(args_.config_file);
    if (!config.ok()) return Fail(config.status());
    if (config->has_value()) digest = (*config)->log.digest;
  }
  if (!digest.ok()) return Fail(digest.status());
  std::vector<crypto::VerifyingKey> keys;
  if (command == "verify") {
    Result<std::optional<AccessConfig>> access = LoadAccessConfig(args_.config_file);
    if (!access.ok()) return Fail(access.status());
    Result<std::vector<crypto::VerifyingKey>> loaded =
        LoadKeys(args_.public_keys,
                 ResolveDataDir(args_.data_dir, access->has_value() ? &**access : nullptr));
    if (!loaded.ok()) return Fail(loaded.status());
    keys = std::move(*loaded);
  }
  Result<std::unique_ptr<store::Store>> opened =
      OpenStore(args_.data_dir, args_.config_file, args_.store_url);
  if (!opened.ok()) return Fail(opened.status());
  store::Store& store = **opened;

  if (command == "verify") return Verify(store, *digest, std::move(keys));
  if (command == "prove") {
    Result<std::string> proof = audit::ProveInclusion(
        store, *digest, args_.sequence,
        args_.checkpoint > 0 ? std::optional<int64_t>(args_.checkpoint) : std::nullopt);
    if (!proof.ok()) return Fail(proof.status());
    std::fwrite(proof->data(), 1, proof->size(), stdout);
    return 0;
  }
  if (command == "export") {
    Result<int64_t> from = ParseTime(args_.from, "--from");
    if (!from.ok()) return Fail(from.status());
    Result<int64_t> to = ParseTime(args_.to, "--to");
    if (!to.ok()) return Fail(to.status());
    Result<int64_t> written = audit::ExportRecords(store, *from, *to, std::cout);
    if (!written.ok()) return Fail(written.status());
    return 0;
  }
  if (command == "prune") {
    const int64_t now = std::chrono::duration_cast<std::chrono::nanoseconds>(
                            std::chrono::system_clock::now().time_since_epoch())
                            .count();
    Result<int> pruned =
        audit::PruneExpiredEpochs(store, now, std::chrono::hours(24 * args_.retention_days));
    if (!pruned.ok()) return Fail(pruned.status());
    std::printf("pruned %d epochs\n", *pruned);
    return 0;
  }
  return Fail(Internal("unknown command 'audit {}'", command));
}

}  // namespace rampart::app
