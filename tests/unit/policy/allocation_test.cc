// What a decision allocates: nothing but its Decision (policy.h's contract), however its
// conditions come out (errors included, whose reasons are formatted only for explanations).
// The global operator new below counts the allocations of the thread that asks it to.

#include <cstdlib>
#include <new>

#include <gtest/gtest.h>

#include "policy/condition.h"
#include "policy/policy.h"
#include "policy/policy_table.h"

namespace {
thread_local bool counting = false;
thread_local size_t allocations = 0;
}  // namespace

void* operator new(std::size_t size) {
  if (counting) ++allocations;
  if (void* memory = std::malloc(size == 0 ? 1 : size)) return memory;
  throw std::bad_alloc();
}
void operator delete(void* memory) noexcept { std::free(memory); }
void operator delete(void* memory, std::size_t) noexcept { std::free(memory); }

namespace rampart::policy {
namespace {

// Counts the allocations `run` makes on this thread.
template <typename Function>
size_t AllocationsOf(Function&& run) {
  allocations = 0;
  counting = true;
  run();
  counting = false;
  return allocations;
}

TEST(PolicyAllocationTest, ADecisionAllocatesOnlyItsDecision) {
  const auto set = PolicySet::LoadText(R"(resources:
  - {type: model, name: "gpt-*", attributes: {classification: CONFIDENTIAL}}
roles:
  - name: viewer
  - name: analyst
    inherits: [viewer]
rules:
  - id: a
    effect: permit
    principal: {role: viewer}
    action: "model:*"
    resource: {type: model, name: "gpt-*"}
    when:
      - resource.classification <= principal.clearance
      - context.source_ip in ["10.0.0.0/8"]
      - context.time within "Mon-Fri 00:00-24:00 Europe/Berlin"
      - '"ml" in principal.groups'
      - '"viewer" in principal.roles'
  - id: erring-permit
    effect: permit
    action: model:infer
    when: ['principal.missing_attribute < 3', 'principal.department < "zzz"']
  - id: false-forbid
    effect: forbid
    action: model:infer
    when: ['principal.department == "sales"', 'principal.missing_attribute == "x"']
)",
                                       "p.yaml");
  ASSERT_TRUE(set.ok()) << set.status().ToString();
  const auto request = ParseRequest(
      "{principal: {tenant: acme, name: alice, roles: [analyst], attributes: {department: "
      "research, clearance: SECRET, groups: [ops, ml]}}, action: model:infer, resource: {type: "
      "model, name: gpt-4o}, context: {source_ip: 10.1.2.3, time: \"2026-12-01T10:00:00Z\"}}");
  ASSERT_TRUE(request.ok()) << request.status().ToString();
  const AccessRequest view = request->View();

  Decision decision;
  const size_t count = AllocationsOf([&] { decision = (*set)->Decide(view); });
  ASSERT_TRUE(decision.allowed) << decision.reason;
  EXPECT_EQ(decision.rules, std::vector<std::string>{"a"});
  // One: the rules vector's buffer ("a" fits in the string itself; no obligations, no reason).
  EXPECT_EQ(count, 1u);
}

}  // namespace
}  // namespace rampart::policy
