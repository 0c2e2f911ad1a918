// Policy decision latency: p50 and p99 of PolicySet::Decide over generated realistic policies of
// 10 and 1,000 rules (50 tenants with their own roles, every action, resource name patterns,
// conditions on department, clearance against classification, source networks, time windows in
// several zones and groups), measured per decision in the same run, and their ratio. Also the
// cost of single conditions (a comparison, a CIDR match, a time window through ICU) and of
// loading 1,000 rules. Single thread; each decision is timed with steady_clock (its own cost,
// ~20-30 ns, is included).
//
// Usage: policy_bench [Google Benchmark flags]

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <random>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "policy/condition.h"
#include "policy/policy.h"
#include "policy/policy_table.h"

namespace {

using rampart::policy::AccessRequest;
using rampart::policy::Condition;
using rampart::policy::PolicySet;
using rampart::policy::RequestCase;

constexpr int kTenants = 50;
const std::vector<std::string> kRoles = {"viewer",   "analyst", "engineer",
                                         "operator", "admin",   "auditor"};
const std::vector<std::string> kDepartments = {"research", "sales", "finance", "legal", "ops"};
const std::vector<std::string> kLevels = {"PUBLIC", "INTERNAL", "CONFIDENTIAL", "SECRET"};
const std::vector<std::string> kZones = {"Asia/Shanghai", "Europe/Berlin", "America/New_York",
                                         "UTC"};

std::vector<std::string> Models() {
  std::vector<std::string> models;
  for (const char* family : {"gpt-4o", "llama-3", "qwen-2", "text-embed", "bert", "resnet"}) {
    for (int i = 0; i < 8; ++i) models.push_back(fmt::format("{}-v{}", family, i));
  }
  return models;
}

std::string Tenant(int i) { return fmt::format("tenant-{:02}", i); }

// A policy of `rules` rules: 90% scoped to one tenant, 10% for every tenant; roles declared for
// every tenant with a chain of inheritance, plus per-tenant roles.
std::string MakePolicy(int rules, std::mt19937& random) {
  const auto pick = [&](const auto& items) -> const auto& {
    return items[std::uniform_int_distribution<size_t>(0, items.size() - 1)(random)];
  };
  const auto chance = [&](double p) { return std::bernoulli_distribution(p)(random); };
  const std::vector<std::string> models = Models();
  const auto& actions = rampart::policy::KnownActions();
  const std::vector<std::string> patterns = {"model:*", "chat:*", "admin:*", "*:read",
                                             "embeddings:*"};
  std::string text = R"(roles:
  - name: viewer
  - name: analyst
    inherits: [viewer]
  - name: engineer
    inherits: [analyst]
  - name: operator
    inherits: [engineer]
  - name: admin
    inherits: [operator]
  - name: auditor
    inherits: [viewer]
)";
  for (int t = 0; t < kTenants; t += 5) {
    text += fmt::format("  - name: lead\n    tenant: {}\n    inherits: [engineer]\n", Tenant(t));
  }
  text += "resources:\n";
  for (const char* family : {"gpt-4o", "llama-3", "qwen-2", "text-embed", "bert", "resnet"}) {
    text += fmt::format(
        "  - {{type: model, name: \"{}-*\", attributes: {{classification: {}, "
        "provider: {}}}}}\n",
        family, pick(kLevels), chance(0.3) ? "external" : "local");
  }
  text += "rules:\n";
  for (int r = 0; r < rules; ++r) {
    const bool forbid = chance(0.2);
    text += fmt::format("  - id: rule-{}\n    effect: {}\n", r, forbid ? "forbid" : "permit");
    std::vector<std::string> principal;
    if (chance(0.9)) principal.push_back(fmt::format("tenant: {}", Tenant(r % kTenants)));
    if (chance(0.7)) principal.push_back(fmt::format("role: {}", pick(kRoles)));
    if (!principal.empty())
      text += fmt::format("    principal: {{{}}}\n", fmt::join(principal, ", "));
    if (chance(0.2)) {
      text += fmt::format("    action: \"{}\"\n", pick(patterns));
    } else {
      text += fmt::format("    action: [{}, {}]\n", pick(actions), pick(actions));
    }
    if (chance(0.8)) {
      text += chance(0.5) ? fmt::format("    resource: {{type: model, name: [\"{}\", \"{}*\"]}}\n",
                                        pick(models), pick(models).substr(0, 4))
                          : "    resource: {type: model}\n";
    }
    std::vector<std::string> when;
    if (chance(0.5))
      when.push_back(fmt::format("'principal.department == \"{}\"'", pick(kDepartments)));
    if (chance(0.4)) when.push_back("'resource.classification <= principal.clearance'");
    if (chance(0.3)) {
      when.push_back(fmt::format("'{}context.source_ip in [\"10.{}.0.0/16\", \"192.168.0.0/16\"]'",
                                 forbid ? "not " : "", r % 256));
    }
    if (chance(0.2)) {
      when.push_back(fmt::format("'{}context.time within \"Mon-Fri 08:00-19:00 {}\"'",
                                 forbid ? "not " : "", pick(kZones)));
    }
    if (chance(0.2)) when.push_back("'\"ml\" in principal.groups'");
    if (!when.empty()) text += fmt::format("    when: [{}]\n", fmt::join(when, ", "));
    if (!forbid && chance(0.3)) text += "    obligations: [audit:full, redact:pii]\n";
  }
  return text;
}

std::vector<RequestCase> MakeRequests(size_t count, std::mt19937& random) {
  const auto pick = [&](const auto& items) -> const auto& {
    return items[std::uniform_int_distribution<size_t>(0, items.size() - 1)(random)];
  };
  const std::vector<std::string> models = Models();
  const auto& actions = rampart::policy::KnownActions();
  std::vector<RequestCase> requests(count);
  for (RequestCase& request : requests) {
    request.principal.tenant = Tenant(std::uniform_int_distribution<>(0, kTenants - 1)(random));
    request.principal.principal = fmt::format("user-{}", random() % 1000);
    request.principal.roles = {pick(kRoles)};
    request.principal.attributes = {
        {"department", pick(kDepartments)}, {"clearance", pick(kLevels)}, {"groups", "staff,ml"}};
    request.action =
        std::string(std::bernoulli_distribution(0.7)(random) ? "model:infer" : pick(actions));
    request.resource_type = "model";
    request.resource_name = pick(models);
    request.source_ip = fmt::format("10.{}.{}.{}", random() % 256, random() % 256, random() % 256);
    request.now_unix = 1796083200 + static_cast<int64_t>(random() % (7 * 86400));
  }
  return requests;
}

std::map<int64_t, double> p99_by_rules;  // for the ratio printed at the end

void BM_Decide(benchmark::State& state) {
  std::mt19937 random(42);
  const int rules = static_cast<int>(state.range(0));
  const auto set = PolicySet::LoadText(MakePolicy(rules, random), "generated.yaml");
  if (!set.ok()) {
    state.SkipWithError(set.status().message().c_str());
    return;
  }
  const std::vector<RequestCase> requests = MakeRequests(4096, random);
  std::vector<AccessRequest> views;
  for (const RequestCase& request : requests) views.push_back(request.View());
  std::vector<int64_t> nanoseconds;
  nanoseconds.reserve(1 << 20);
  size_t next = 0;
  int64_t allowed = 0;
  for (auto _ : state) {
    const AccessRequest& request = views[next++ & 4095];
    const auto start = std::chrono::steady_clock::now();
    const rampart::policy::Decision decision = (*set)->Decide(request);
    const auto end = std::chrono::steady_clock::now();
    benchmark::DoNotOptimize(decision);
    allowed += decision.allowed;
    if (nanoseconds.size() < nanoseconds.capacity()) {
      nanoseconds.push_back(
          std::chrono::duration_cast<std::chrono::nanoseconds>(end - start).count());
    }
  }
  std::sort(nanoseconds.begin(), nanoseconds.end());
  const auto percentile = [&](double p) {
    return static_cast<double>(nanoseconds[static_cast<size_t>(p * (nanoseconds.size() - 1))]);
  };
  state.counters["p50_ns"] = percentile(0.50);
  state.counters["p99_ns"] = percentile(0.99);
  state.counters["allowed_%"] =
      100.0 * static_cast<double>(allowed) / static_cast<double>(state.iterations());
  state.counters["rules"] = static_cast<double>((*set)->rule_count());
  p99_by_rules[rules] = percentile(0.99);
}
BENCHMARK(BM_Decide)->Arg(10)->Arg(1000)->MinTime(2.0);

void BM_Load(benchmark::State& state) {
  std::mt19937 random(42);
  const std::string text = MakePolicy(static_cast<int>(state.range(0)), random);
  for (auto _ : state) {
    auto set = PolicySet::LoadText(text, "generated.yaml");
    benchmark::DoNotOptimize(set);
  }
}
BENCHMARK(BM_Load)->Arg(1000)->Unit(benchmark::kMillisecond);

// One condition on its own: what a rule's `when` adds to a decision.
void BM_Condition(benchmark::State& state, const char* text) {
  std::mt19937 random(7);
  const RequestCase request = MakeRequests(1, random).front();
  const AccessRequest view = request.View();
  const Condition condition = *Condition::Parse(text);
  class Facts final : public rampart::policy::Facts {
   public:
    explicit Facts(const AccessRequest& request) : request_(request) {}
    const AccessRequest& request() const override { return request_; }
    int64_t now_unix() const override { return request_.now_unix; }
    bool HasRole(std::string_view) const override { return false; }
    const std::string* ResourceAttribute(const std::string&) const override { return &level_; }

   private:
    const AccessRequest& request_;
    std::string level_ = "CONFIDENTIAL";
  } facts(view);
  for (auto _ : state) benchmark::DoNotOptimize(condition.Evaluate(facts));
}
BENCHMARK_CAPTURE(BM_Condition, equality, R"(principal.department == "research")");
BENCHMARK_CAPTURE(BM_Condition, classification, "resource.classification <= principal.clearance");
BENCHMARK_CAPTURE(BM_Condition, cidr, R"(context.source_ip in ["10.0.0.0/8", "192.168.0.0/16"])");
BENCHMARK_CAPTURE(BM_Condition, time_window,
                  R"(context.time within "Mon-Fri 09:00-18:00 Europe/Berlin")");
BENCHMARK_CAPTURE(BM_Condition, group, R"("ml" in principal.groups)");

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  if (p99_by_rules.count(10) > 0 && p99_by_rules.count(1000) > 0) {
    std::printf(
        "decision p99: 10 rules %.0f ns, 1000 rules %.0f ns, ratio 1000/10 = %.2f "
        "(goal: p99 < 10000 ns at 1000 rules)\n",
        p99_by_rules[10], p99_by_rules[1000], p99_by_rules[1000] / p99_by_rules[10]);
  }
  return 0;
}
