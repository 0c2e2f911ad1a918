#include "app/keyring_cli.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <fstream>
#include <iterator>

#include "app/access_config.h"
#include "app/access_setup.h"
#include "crypto/digest.h"
#include "crypto/envelope.h"

namespace rampart::app {
namespace {

std::string Time(int64_t unix_seconds) {
  const std::time_t time = unix_seconds;
  std::tm utc{};
  gmtime_r(&time, &utc);
  char text[32];
  std::strftime(text, sizeof(text), "%Y-%m-%dT%H:%M:%SZ", &utc);
  return text;
}

int Fail(const Status& status) {
  std::fprintf(stderr, "rampart: %s\n", status.message().c_str());
  return status.code() == StatusCode::kInvalidArgument ? 2 : 1;
}

Result<std::string> ReadFile(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  if (!file) return NotFound("'{}' cannot be read", path);
  std::string content((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  if (file.bad()) return Unavailable("'{}' cannot be read", path);
  return content;
}

// Writes `bytes` to a new file `path` (0600; an existing file is not replaced).
Status WriteNewFile(const std::string& path, std::string_view bytes) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) return Unavailable("'{}' cannot be created: {}", path, std::strerror(errno));
  size_t written = 0;
  while (written < bytes.size()) {
    const ssize_t wrote = ::write(fd, bytes.data() + written, bytes.size() - written);
    if (wrote < 0 && errno == EINTR) continue;
    if (wrote < 0) {
      const int error = errno;
      ::close(fd);
      ::unlink(path.c_str());
      return Unavailable("'{}' cannot be written: {}", path, std::strerror(error));
    }
    written += static_cast<size_t>(wrote);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    ::unlink(path.c_str());
    return Unavailable("'{}' cannot be written: {}", path, std::strerror(errno));
  }
  return Status::Ok();
}

std::string_view PurposeName(crypto::KeyPurpose purpose) {
  return purpose == crypto::KeyPurpose::kWrapping ? "wrapping" : "signing";
}

}  // namespace

Result<std::unique_ptr<crypto::MasterKey>> ResolveMasterKey(
    const std::string& file, const std::optional<KeyringConfig>& config) {
  if (!file.empty()) return crypto::MasterKeyFromFile(file);
  if (config.has_value()) {
    return !config->master_key_file.empty()
               ? crypto::MasterKeyFromFile(config->master_key_file)
               : crypto::MasterKeyFromEnvironment(config->master_key_env);
  }
  const std::string variable(kMasterKeyVariable);
  if (std::getenv(variable.c_str()) == nullptr) {
    return NotFound(
        "no master key: pass --master-key-file FILE, name one in the config's keyring: section, "
        "or set {}",
        variable);
  }
  return crypto::MasterKeyFromEnvironment(variable);
}

Result<KeyringRuntime> OpenKeyring(store::Store& store, std::unique_ptr<crypto::MasterKey> master) {
  KeyringRuntime runtime;
  runtime.storage = std::make_unique<store::StoreKeyringStorage>(store);
  ASSIGN_OR_RETURN(runtime.keyring, crypto::Keyring::Open(*runtime.storage, std::move(master)));
  return runtime;
}

Result<guard::GuardKeys> SealedGuardKeys(store::Store& store, crypto::Keyring& keyring) {
  const std::string key_name(kSecretsKeyName);
  RETURN_IF_ERROR(keyring.Ensure(key_name, crypto::KeyPurpose::kWrapping, "aes-256-gcm"));
  const crypto::Envelope envelope(keyring);
  ASSIGN_OR_RETURN(const std::string secret, store::LoadOrCreateSealedSecret(
                                                 store, envelope, std::string(kGuardSecretName),
                                                 key_name, [] { return crypto::RandomBytes(32); }));
  return guard::GuardKeys::FromBytes(secret);
}

void KeyringCli::AddTo(CLI::App& app) {
  CLI::App* keyring = app.add_subcommand(
      "keyring", "Encryption keys (not API keys: see `keys`): status, create, rotate, ...");
  keyring->require_subcommand(1);
  const auto leaf = [this, keyring](std::string name, std::string help) {
    CLI::App* command = keyring->add_subcommand(name, std::move(help));
    command->add_option("--data-dir", args_.data_dir,
                        "Directory of the SQLite store (default ./data, or the --config file's "
                        "access.data_dir)");
    command
        ->add_option("--config", args_.config_file,
                     "Config file whose access: section names the store")
        ->check(CLI::ExistingFile);
    command->add_option("--master-key-file", args_.master_key_file,
                        "File holding the 32-byte master key (raw, hex or base64; mode 0600); "
                        "default: the RAMPART_MASTER_KEY environment variable");
    commands_.emplace_back(command, name);
    return command;
  };
  leaf("status", "List keys, their versions and the sealed secrets (never key material)");
  CLI::App* create = leaf("create", "Create a key (version 1)");
  create->add_option("NAME", args_.name, "Key name")->required();
  create->add_option("--algorithm", args_.algorithm,
                     "aes-256-gcm (default) or sm4-ctr-hmac-sm3 (wrapping); sm2-sm3 or ed25519 "
                     "(signing)");
  leaf("rotate", "Add a version that becomes current")
      ->add_option("NAME", args_.name, "Key name")
      ->required();
  CLI::App* minimum = leaf("min-version", "Refuse decryption below version V (never lowered)");
  minimum->add_option("NAME", args_.name, "Key name")->required();
  minimum->add_option("V", args_.version, "The minimum decryption version")->required();
  leaf("rewrap", "Rewrap every sealed secret in the store to its key's current version");
  CLI::App* seal = leaf("seal-file", "Seal a file in an envelope (model.pt -> model.pt.rpe)");
  seal->add_option("IN", args_.input, "File to seal")->required()->check(CLI::ExistingFile);
  seal->add_option("OUT", args_.output, "Envelope to write (must not exist)")->required();
  seal->add_option("--key", args_.name, "Wrapping key")->required();
  seal->add_option("--tenant", args_.tenant, "Tenant bound into the envelope (default models)");
  seal->add_option("--region", args_.region, "Region bound into the envelope (default local)");
  seal->add_option("--data-class", args_.data_class,
                   "Data class bound into the envelope (default CONFIDENTIAL)");
}

std::optional<int> KeyringCli::RunIfChosen() {
  for (const auto& [command, name] : commands_) {
    if (command->parsed()) return Run(name);
  }
  return std::nullopt;
}

int KeyringCli::Run(const std::string& command) {
  std::optional<KeyringConfig> keyring_config;
  if (!args_.config_file.empty()) {
    Result<std::optional<KeyringConfig>> loaded = LoadKeyringConfig(args_.config_file);
    if (!loaded.ok()) return Fail(loaded.status());
    keyring_config = std::move(loaded).value();
  }
  Result<std::unique_ptr<crypto::MasterKey>> master =
      ResolveMasterKey(args_.master_key_file, keyring_config);
  if (!master.ok()) return Fail(master.status());
  Result<std::optional<AccessConfig>> config = LoadAccessConfig(args_.config_file);
  if (!config.ok()) return Fail(config.status());
  const AccessConfig* access = config->has_value() ? &**config : nullptr;
  Result<std::unique_ptr<store::Store>> opened =
      OpenConfiguredStore(access, ResolveDataDir(args_.data_dir, access));
  if (!opened.ok()) return Fail(opened.status());
  store::Store& store = **opened;
  Result<KeyringRuntime> runtime = OpenKeyring(store, std::move(*master));
  if (!runtime.ok()) return Fail(runtime.status());
  crypto::Keyring& keyring = *runtime->keyring;
  const crypto::Envelope envelope(keyring);

  if (command == "status") {
    std::printf("master key: %s\nstore: %s\n\n", keyring.MasterKeyDescription().c_str(),
                store.Describe().c_str());
    std::printf("%-24s %-9s %-17s %-8s %-8s %s\n", "KEY", "PURPOSE", "ALGORITHM", "CURRENT", "MIN",
                "VERSIONS (created)");
    for (const crypto::KeyStatus& key : keyring.List()) {
      std::string versions;
      for (const auto& [version, created] : key.versions) {
        versions += fmt::format("{}{}@{}", versions.empty() ? "" : " ", version, Time(created));
      }
      std::printf("%-24s %-9s %-17s %-8d %-8d %s\n", key.name.c_str(),
                  std::string(PurposeName(key.purpose)).c_str(), key.algorithm.c_str(),
                  key.current_version, key.min_decryption_version, versions.c_str());
    }
    Result<std::vector<store::SealedSecret>> secrets = store.ListSealedSecrets();
    if (!secrets.ok()) return Fail(secrets.status());
    std::printf("\n%-32s %-24s %-8s %s\n", "SEALED SECRET", "KEY", "VERSION", "UPDATED");
    for (const store::SealedSecret& secret : *secrets) {
      Result<crypto::EnvelopeHeader> header = crypto::Envelope::Inspect(secret.envelope);
      std::printf("%-32s %-24s %-8s %s\n", secret.name.c_str(),
                  header.ok() ? header->key_name.c_str() : "(malformed)",
                  header.ok() ? std::to_string(header->key_version).c_str() : "-",
                  Time(secret.updated_unix).c_str());
    }
    return 0;
  }
  if (command == "create") {
    const bool signing = args_.algorithm == "sm2-sm3" || args_.algorithm == "ed25519";
    const Status created = keyring.Ensure(
        args_.name, signing ? crypto::KeyPurpose::kSigning : crypto::KeyPurpose::kWrapping,
        args_.algorithm);
    if (!created.ok()) return Fail(created);
    std::fprintf(stderr, "rampart: key %s is at version %d\n", args_.name.c_str(),
                 keyring.StatusOf(args_.name)->current_version);
    return 0;
  }
  if (command == "rotate") {
    Result<int> version = keyring.Rotate(args_.name);
    if (!version.ok()) return Fail(version.status());
    std::fprintf(stderr,
                 "rampart: key %s rotated to version %d; run `rampart keyring rewrap` "
                 "to move sealed secrets to it\n",
                 args_.name.c_str(), *version);
    return 0;
  }
  if (command == "min-version") {
    const Status set = keyring.SetMinDecryptionVersion(args_.name, args_.version);
    return set.ok() ? 0 : Fail(set);
  }
  if (command == "rewrap") {
    Result<store::RewrapSummary> summary = store::RewrapSealedSecrets(store, envelope);
    if (!summary.ok()) return Fail(summary.status());
    std::fprintf(stderr, "rampart: %d sealed secrets, %d rewrapped, the others were current\n",
                 summary->examined, summary->rewrapped);
    return 0;
  }
  if (command == "seal-file") {
    Result<std::string> plaintext = ReadFile(args_.input);
    if (!plaintext.ok()) return Fail(plaintext.status());
    Result<std::string> sealed = envelope.Seal(
        args_.name, *plaintext,
        {.tenant = args_.tenant, .region = args_.region, .data_class = args_.data_class});
    if (!sealed.ok()) return Fail(sealed.status());
    const Status written = WriteNewFile(args_.output, *sealed);
    return written.ok() ? 0 : Fail(written);
  }
  return Fail(Internal("unknown command 'keyring {}'", command));
}

}  // namespace rampart::app
