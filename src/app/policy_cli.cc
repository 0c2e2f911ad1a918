#include "app/policy_cli.h"

#include <cstdio>

#include <CLI/CLI.hpp>

#include "policy/policy.h"
#include "policy/policy_table.h"

namespace rampart::app {

PolicyCommands::PolicyCommands(CLI::App& app) {
  CLI::App* policy = app.add_subcommand("policy", "Policy engine tools");
  policy->require_subcommand(1);
  test_ = policy->add_subcommand(
      "test", "Run golden decision tables; exit 1 on a mismatch, 2 on an invalid table");
  test_->add_option("TABLE", tables_, "Decision table files (YAML)")
      ->required()
      ->check(CLI::ExistingFile);
  explain_ = policy->add_subcommand(
      "explain", "Print why a request is allowed or denied under the given policy files");
  explain_->add_option("--policy", policy_files_, "Policy files (YAML)")
      ->required()
      ->check(CLI::ExistingFile);
  explain_
      ->add_option("REQUEST", request_,
                   "A request: inline YAML/JSON starting with '{', or a file holding one")
      ->required();
}

bool PolicyCommands::chosen() const { return test_->parsed() || explain_->parsed(); }

int PolicyCommands::Run() const { return test_->parsed() ? Test() : Explain(); }

int PolicyCommands::Test() const {
  int status = 0;
  for (const std::string& table : tables_) {
    const Result<std::vector<std::string>> mismatches = policy::RunPolicyTests(table);
    if (!mismatches.ok()) {
      std::fprintf(stderr, "rampart: %s\n", mismatches.status().message().c_str());
      status = 2;
      continue;
    }
    for (const std::string& mismatch : *mismatches) std::printf("%s\n", mismatch.c_str());
    if (mismatches->empty()) {
      std::printf("%s: pass\n", table.c_str());
    } else {
      std::printf("%s: %zu mismatch%s\n", table.c_str(), mismatches->size(),
                  mismatches->size() == 1 ? "" : "es");
      if (status == 0) status = 1;
    }
  }
  return status;
}

int PolicyCommands::Explain() const {
  const auto set = policy::PolicySet::LoadFiles(policy_files_);
  if (!set.ok()) {
    std::fprintf(stderr, "rampart: %s\n", set.status().message().c_str());
    return 2;
  }
  const Result<policy::RequestCase> request = policy::ReadRequest(request_);
  if (!request.ok()) {
    std::fprintf(stderr, "rampart: %s\n", request.status().message().c_str());
    return 2;
  }
  const std::string text = policy::FormatExplanation((*set)->Explain(request->View()));
  std::fputs(text.c_str(), stdout);
  return 0;
}

}  // namespace rampart::app
