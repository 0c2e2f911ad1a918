#pragma once

// `rampart policy test TABLE...` and `rampart policy explain --policy FILE... REQUEST`: the
// policy engine's tools (docs/policy.md).
//
//   test     runs golden decision tables; prints each mismatch; exit 0 when every case passes,
//            1 on a mismatch, 2 when a table (or a policy it names) is invalid.
//   explain  prints why a request is allowed or denied: the decision, the deciding rules, the
//            obligations, and the matched, unmatched and erroring rules with file:line and why.
//            REQUEST is inline YAML/JSON starting with '{' or a file holding one request. Exit 0,
//            or 2 when a policy file or the request is invalid.

#include <string>
#include <vector>

namespace CLI {
class App;
}

namespace rampart::app {

class PolicyCommands {
 public:
  // Adds `policy` and its subcommands to `app`, which must outlive this object.
  explicit PolicyCommands(CLI::App& app);

  // After parsing: whether the command line chose `policy test` or `policy explain`.
  bool chosen() const;
  // Runs the chosen command; returns the exit status.
  int Run() const;

 private:
  int Test() const;
  int Explain() const;

  CLI::App* test_ = nullptr;
  CLI::App* explain_ = nullptr;
  std::vector<std::string> tables_;
  std::vector<std::string> policy_files_;
  std::string request_;
};

}  // namespace rampart::app
