#include "app/access_cli.h"

#include <cstdio>
#include <ctime>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "api/admin_http.h"
#include "app/access_config.h"
#include "app/access_setup.h"
#include "core/clock.h"
#include "identity/api_keys.h"

namespace rampart::app {
namespace {

int64_t UnixNow() { return UnixMillisNow() / 1000; }

// "2026-12-01T21:35:00Z", or "-" for 0 (never).
std::string Time(int64_t unix_seconds) {
  if (unix_seconds == 0) return "-";
  const std::time_t time = unix_seconds;
  std::tm utc{};
  gmtime_r(&time, &utc);
  char text[32];
  std::strftime(text, sizeof(text), "%Y-%m-%dT%H:%M:%SZ", &utc);
  return text;
}

Result<store::Attributes> ParseAttributes(const std::vector<std::string>& pairs) {
  store::Attributes attributes;
  for (const std::string& pair : pairs) {
    const size_t equals = pair.find('=');
    if (equals == std::string::npos || equals == 0) {
      return InvalidArgument("--attr '{}': expected NAME=VALUE", pair);
    }
    attributes[pair.substr(0, equals)] = pair.substr(equals + 1);
  }
  return attributes;
}

std::string Join(const std::vector<std::string>& items) {
  return items.empty() ? "-" : fmt::format("{}", fmt::join(items, ","));
}

std::string Join(const store::Attributes& attributes) {
  std::vector<std::string> pairs;
  for (const auto& [name, value] : attributes) pairs.push_back(name + "=" + value);
  return Join(pairs);
}

int Fail(const Status& status) {
  std::fprintf(stderr, "rampart: %s\n", status.message().c_str());
  return status.code() == StatusCode::kInvalidArgument ? 2 : 1;
}

}  // namespace

void AccessCli::AddTo(CLI::App& app) {
  const auto common = [this](CLI::App* command) {
    command->add_option("--data-dir", args_.data_dir,
                        "Directory of the SQLite store (default ./data, or the --config file's "
                        "access.data_dir)");
    command
        ->add_option("--config", args_.config_file,
                     "Config file whose access: section names the store")
        ->check(CLI::ExistingFile);
  };
  const auto leaf = [this, &common](CLI::App* parent, std::string name, std::string help) {
    CLI::App* command = parent->add_subcommand(name, std::move(help));
    common(command);
    commands_.emplace_back(command, parent->get_name() + " " + name);
    return command;
  };

  CLI::App* keys = app.add_subcommand("keys", "API keys: create, list, revoke");
  keys->require_subcommand(1);
  CLI::App* create = leaf(keys, "create", "Make an API key and print it (shown this once)");
  create->add_option("--tenant", args_.tenant, "Tenant the key belongs to")->required();
  create->add_option("--name", args_.name, "A label for people (ci-pipeline)")->required();
  create->add_option("--principal", args_.principal,
                     "Principal the key acts as (default: the key's name; created if missing)");
  create->add_option("--role", args_.roles, "Role granted by the key (repeatable)");
  create->add_option("--expires-in", args_.expires_in, "Lifetime: 30d, 12h, 15m or 3600s");
  leaf(keys, "list", "List keys (never their secrets)")
      ->add_option("--tenant", args_.tenant, "Only this tenant's");
  leaf(keys, "revoke", "Revoke a key at once")
      ->add_option("ID", args_.id, "The key's id (rk_live_...)")
      ->required();

  CLI::App* tenants = app.add_subcommand("tenants", "Tenants: create, list, delete");
  tenants->require_subcommand(1);
  CLI::App* tenant_create = leaf(tenants, "create", "Create a tenant");
  tenant_create->add_option("NAME", args_.name, "Tenant name")->required();
  tenant_create->add_option("--attr", args_.attributes, "Attribute NAME=VALUE (repeatable)");
  leaf(tenants, "list", "List tenants");
  leaf(tenants, "delete", "Delete a tenant (it must have no principals or keys)")
      ->add_option("NAME", args_.name, "Tenant name")
      ->required();

  CLI::App* principals = app.add_subcommand("principals", "Principals: put, list, delete");
  principals->require_subcommand(1);
  CLI::App* put = leaf(principals, "put", "Create or replace a principal");
  put->add_option("TENANT", args_.tenant, "Tenant")->required();
  put->add_option("NAME", args_.name, "Principal name")->required();
  put->add_option("--role", args_.roles, "Role (repeatable)");
  put->add_option("--attr", args_.attributes, "Attribute NAME=VALUE (repeatable)");
  put->add_flag("--disabled", args_.disabled, "Refuse its keys and tokens");
  leaf(principals, "list", "List principals")
      ->add_option("--tenant", args_.tenant, "Only this tenant's");
  CLI::App* principal_delete = leaf(principals, "delete", "Delete a principal (revoking its keys)");
  principal_delete->add_option("TENANT", args_.tenant, "Tenant")->required();
  principal_delete->add_option("NAME", args_.name, "Principal name")->required();
}

std::optional<int> AccessCli::RunIfChosen() {
  for (const auto& [command, name] : commands_) {
    if (command->parsed()) return Run(name);
  }
  return std::nullopt;
}

int AccessCli::Run(const std::string& command) {
  Result<std::optional<AccessConfig>> config = LoadAccessConfig(args_.config_file);
  if (!config.ok()) return Fail(config.status());
  const AccessConfig* access = config->has_value() ? &**config : nullptr;
  Result<std::unique_ptr<store::Store>> opened =
      OpenConfiguredStore(access, ResolveDataDir(args_.data_dir, access));
  if (!opened.ok()) return Fail(opened.status());
  store::Store& store = **opened;

  if (command == "keys create") {
    int64_t expires_unix = 0;
    if (!args_.expires_in.empty()) {
      Result<int64_t> seconds = api::ParseDuration(args_.expires_in);
      if (!seconds.ok()) return Fail(seconds.status().WithContext("--expires-in"));
      expires_unix = UnixNow() + *seconds;
    }
    identity::NewApiKey made = identity::GenerateApiKey(
        args_.tenant, args_.principal.empty() ? args_.name : args_.principal, args_.name,
        args_.roles, UnixNow(), expires_unix);
    if (Status created = store.CreateApiKey(made.record); !created.ok()) return Fail(created);
    // The key alone, so that scripts can capture it: KEY=$(rampart keys create ...).
    std::printf("%s\n", made.key.c_str());
    return 0;
  }
  if (command == "keys list") {
    Result<std::vector<store::ApiKey>> keys = store.ListApiKeys(args_.tenant);
    if (!keys.ok()) return Fail(keys.status());
    std::printf("%-21s %-12s %-16s %-16s %-16s %-20s %-20s %-20s %s\n", "ID", "TENANT", "PRINCIPAL",
                "NAME", "ROLES", "CREATED", "EXPIRES", "REVOKED", "LAST USED");
    for (const store::ApiKey& key : *keys) {
      std::printf("%-21s %-12s %-16s %-16s %-16s %-20s %-20s %-20s %s\n", key.id.c_str(),
                  key.tenant.c_str(), key.principal.c_str(), key.name.c_str(),
                  Join(key.roles).c_str(), Time(key.created_unix).c_str(),
                  Time(key.expires_unix).c_str(), Time(key.revoked_unix).c_str(),
                  Time(key.last_used_unix).c_str());
    }
    return 0;
  }
  if (command == "keys revoke") {
    if (Status revoked = store.RevokeApiKey(args_.id, UnixNow()); !revoked.ok()) {
      return Fail(revoked);
    }
    std::fprintf(stderr, "rampart: key %s revoked\n", args_.id.c_str());
    return 0;
  }
  if (command == "tenants create") {
    Result<store::Attributes> attributes = ParseAttributes(args_.attributes);
    if (!attributes.ok()) return Fail(attributes.status());
    const Status created =
        store.CreateTenant(store::Tenant{.name = args_.name, .attributes = *attributes});
    return created.ok() ? 0 : Fail(created);
  }
  if (command == "tenants list") {
    Result<std::vector<store::Tenant>> tenants = store.ListTenants();
    if (!tenants.ok()) return Fail(tenants.status());
    std::printf("%-20s %-20s %s\n", "NAME", "CREATED", "ATTRIBUTES");
    for (const store::Tenant& tenant : *tenants) {
      std::printf("%-20s %-20s %s\n", tenant.name.c_str(), Time(tenant.created_unix).c_str(),
                  Join(tenant.attributes).c_str());
    }
    return 0;
  }
  if (command == "tenants delete") {
    const Status deleted = store.DeleteTenant(args_.name);
    return deleted.ok() ? 0 : Fail(deleted);
  }
  if (command == "principals put") {
    Result<store::Attributes> attributes = ParseAttributes(args_.attributes);
    if (!attributes.ok()) return Fail(attributes.status());
    const Status put = store.PutPrincipal(store::Principal{.tenant = args_.tenant,
                                                           .name = args_.name,
                                                           .roles = args_.roles,
                                                           .attributes = *attributes,
                                                           .disabled = args_.disabled});
    return put.ok() ? 0 : Fail(put);
  }
  if (command == "principals list") {
    Result<std::vector<store::Principal>> principals = store.ListPrincipals(args_.tenant);
    if (!principals.ok()) return Fail(principals.status());
    std::printf("%-12s %-20s %-20s %-8s %s\n", "TENANT", "NAME", "ROLES", "DISABLED", "ATTRIBUTES");
    for (const store::Principal& each : *principals) {
      std::printf("%-12s %-20s %-20s %-8s %s\n", each.tenant.c_str(), each.name.c_str(),
                  Join(each.roles).c_str(), each.disabled ? "yes" : "no",
                  Join(each.attributes).c_str());
    }
    return 0;
  }
  if (command == "principals delete") {
    const Status deleted = store.DeletePrincipal(args_.tenant, args_.name);
    return deleted.ok() ? 0 : Fail(deleted);
  }
  return Fail(Internal("unknown command '{}'", command));
}

}  // namespace rampart::app
