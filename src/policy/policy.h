#pragma once

// The policy engine: Cedar's semantics over Rampart's principals, actions and resources, with
// RBAC roles (per tenant, with inheritance) and ABAC conditions. The rules (docs/policy.md):
//
//   - default deny: a request no permit matches is denied;
//   - any matching forbid denies, whatever permits match;
//   - a forbid whose condition fails to evaluate (a missing attribute, a type error) denies too:
//     fail closed, stricter than Cedar (which skips it);
//   - a permit whose condition fails to evaluate does not apply, so an error never grants;
//   - the order of rules never matters.
//
// A decision names the rules that decided it and carries the obligations of the permits that
// matched (redact:pii, block:secret, local_only, audit:full, ...) for the later stages to honour.
//
// Threads: a PolicySet is immutable once loaded and is shared (shared_ptr<const>) by all
// threads; Decide never blocks and never allocates more than its Decision. PolicyEngine swaps
// sets atomically on reload.

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "identity/identity.h"
#include "store/store.h"

namespace rampart::policy {

// What is being acted on: a model ("model", its name), a route ("route"), a tenant ("tenant"),
// the server or its repository ("server", "repository"), admin objects ("key", "principal",
// "role": a role being granted), later documents ("document"). Attributes come from the request and
// from the policy files' `resources` section (classification: PUBLIC < INTERNAL < CONFIDENTIAL <
// SECRET, owner, ...), which win over the request's own.
struct Resource {
  std::string_view type;
  std::string_view name;
  const store::Attributes* attributes = nullptr;  // the request's own, if any
};

// What a request is, for a decision. `action` is one of the names in docs/policy.md:
// model:infer, model:read, model:load, model:unload, repository:read, server:read,
// chat:create, completions:create, embeddings:create, guard:detect, guard:redact,
// guard:restore, admin:tenants:read, admin:tenants:write, admin:principals:read,
// admin:principals:write, admin:keys:read, admin:keys:write, admin:roles:grant, admin:reload,
// admin:routes:read...
struct AccessRequest {
  const identity::Identity* principal = nullptr;  // required
  std::string_view action;
  Resource resource;
  std::string_view source_address;             // the peer's IP (context.source_ip)
  int64_t now_unix = 0;                        // context.time; 0 = the wall clock now
  const store::Attributes* context = nullptr;  // other context attributes, if any
};

struct Decision {
  bool allowed = false;
  // The rules that decided: the matching forbids when denied by one, the matching permits when
  // allowed; empty when denied by default.
  std::vector<std::string> rules;
  std::vector<std::string> obligations;  // of the matching permits, sorted, unique
  // For a denial, a sentence safe to show the caller ("no rule permits chat:create on model
  // 'gpt-4o'", "denied by rule 'no-secret-after-hours'"); empty when allowed.
  std::string reason;
};

// Why a decision came out as it did (rampart policy explain).
struct Explanation {
  Decision decision;
  struct RuleTrace {
    std::string id;
    std::string effect;  // "permit" or "forbid"
    std::string where;   // "file.yaml:12"
    std::string detail;  // for unmatched: the first part that did not match; for errors: why
  };
  std::vector<RuleTrace> matched;
  std::vector<RuleTrace> unmatched;  // rules whose scope (tenant, action, resource) applied
  std::vector<RuleTrace> erroring;
};

// Every action Rampart's APIs decide on, and every resource type (docs/policy.md has the table).
// A rule's action pattern must match at least one known action and its resource type must be
// known, so a misspelt rule is a load error rather than a rule that silently never applies.
const std::vector<std::string_view>& KnownActions();
const std::vector<std::string_view>& KnownResourceTypes();

class PolicySet {
 public:
  // Loads and validates policy files (YAML; format in docs/policy.md). Nothing loads unless
  // every file is valid: InvalidArgument "<file>:<line>: <reason>" for the first fault.
  static Result<std::shared_ptr<const PolicySet>> LoadFiles(const std::vector<std::string>& paths);
  // The same from text (tests, tools); `name` stands for the file name in errors.
  static Result<std::shared_ptr<const PolicySet>> LoadText(std::string_view text,
                                                           std::string_view name = "<text>");
  // A set without rules: denies everything.
  static std::shared_ptr<const PolicySet> Empty();

  virtual ~PolicySet() = default;
  virtual Decision Decide(const AccessRequest& request) const = 0;
  virtual Explanation Explain(const AccessRequest& request) const = 0;
  virtual size_t rule_count() const = 0;
  // Whether roles `granted` in `tenant` include `role`, itself or through inheritance in that
  // tenant (the closure decisions use). The admin API lets a caller grant only roles it holds
  // (unless a policy permits admin:roles:grant on {type: role, name: <role>}).
  virtual bool Holds(std::string_view tenant, const std::vector<std::string>& granted,
                     std::string_view role) const = 0;
};

// Holds the set in force; reloads its files atomically (the old set stays when the new one is
// invalid). Thread-safe: Current() may be called from any thread while Reload runs.
class PolicyEngine {
 public:
  // Loads the files now: an error here is a start-up error.
  static Result<std::unique_ptr<PolicyEngine>> Open(std::vector<std::string> paths);
  // The set in force (never null).
  std::shared_ptr<const PolicySet> Current() const;
  // Reads the files again; on error the current set stays and the error is returned.
  Status Reload();
  const std::vector<std::string>& paths() const { return paths_; }

 private:
  explicit PolicyEngine(std::vector<std::string> paths) : paths_(std::move(paths)) {}
  std::vector<std::string> paths_;
  mutable std::mutex mutex_;  // guards current_
  std::shared_ptr<const PolicySet> current_;
};

// Golden decision tables (rampart policy test FILE): a YAML file naming the policy files and a
// list of cases (principal, action, resource, context -> expected decision, optionally the
// deciding rules and obligations). Returns one line per mismatch (empty when all pass), or an
// error when the table itself is invalid.
Result<std::vector<std::string>> RunPolicyTests(const std::string& table_path);

}  // namespace rampart::policy
