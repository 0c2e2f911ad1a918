#pragma once

// The access commands of `rampart` (docs/access.md), working on the store the server uses:
// SQLite under --data-dir (default ./data, or the --config file's access.data_dir), or the
// --config file's PostgreSQL store.
//
//   rampart keys create --tenant T --name N [--principal P] [--role R]... [--expires-in 30d]
//                                   prints the new key alone on standard output (shown once)
//   rampart keys list [--tenant T]  id, tenant, principal, name, roles, created, expires,
//                                   revoked, last used
//   rampart keys revoke ID
//   rampart tenants create NAME [--attr k=v]... | list | delete NAME
//   rampart principals put TENANT NAME [--role R]... [--attr k=v]... [--disabled]
//   rampart principals list [--tenant T] | delete TENANT NAME
//
// Each takes --data-dir DIR or --config FILE. Exit status: 0 done, 1 the store refused or failed
// (the reason on standard error), 2 bad arguments. A server running on the same store sees
// changes within its key table's poll period.

#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace rampart::app {

class AccessCli {
 public:
  // Adds `keys`, `tenants` and `principals` to `app`. `this` must outlive the parse.
  void AddTo(CLI::App& app);
  // After `app` parsed: runs the command chosen, returning its exit status; nullopt when none
  // of these was chosen.
  std::optional<int> RunIfChosen();

 private:
  struct Args {
    std::string data_dir;
    std::string config_file;
    std::string tenant;
    std::string name;
    std::string principal;
    std::vector<std::string> roles;
    std::vector<std::string> attributes;  // k=v
    std::string expires_in;
    std::string id;
    bool disabled = false;
  };
  int Run(const std::string& command);

  Args args_;
  std::vector<std::pair<CLI::App*, std::string>> commands_;  // leaf command -> "keys create"
};

}  // namespace rampart::app
