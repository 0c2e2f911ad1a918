#include "policy/condition.h"

#include <gtest/gtest.h>

#include "policy/glob.h"
#include "policy/policy_table.h"
#include "policy/time_window.h"

namespace rampart::policy {
namespace {

// Facts over a request the test fills in; roles without inheritance.
class TestFacts final : public Facts {
 public:
  TestFacts() {
    principal.tenant = "acme";
    principal.principal = "alice";
    principal.method = identity::Method::kJwt;
    principal.roles = {"analyst"};
    principal.attributes = {{"department", "research"},
                            {"clearance", "SECRET"},
                            {"groups", "ml,llm-users"},
                            {"level", "7"}};
    access.principal = &principal;
    access.action = "model:infer";
    access.resource = {"model", "simple", &resource_attributes};
    access.source_address = "10.1.2.3";
    access.context = &context;
  }
  const AccessRequest& request() const override { return access; }
  int64_t now_unix() const override { return now; }
  bool HasRole(std::string_view role) const override {
    for (const std::string& granted : principal.roles) {
      if (granted == role) return true;
    }
    return false;
  }
  const std::string* ResourceAttribute(const std::string& name) const override {
    const auto found = resource_attributes.find(name);
    return found == resource_attributes.end() ? nullptr : &found->second;
  }

  identity::Identity principal;
  store::Attributes resource_attributes = {{"classification", "CONFIDENTIAL"}};
  store::Attributes context = {{"risk", "12.5"}};
  AccessRequest access;
  int64_t now = 0;
};

Truth Eval(const std::string& text, const TestFacts& facts, std::string* why = nullptr) {
  Result<Condition> condition = Condition::Parse(text);
  EXPECT_TRUE(condition.ok()) << text << ": " << condition.status().ToString();
  if (!condition.ok()) return Truth::kError;
  return condition->Evaluate(facts, why);
}

TEST(ConditionTest, ComparesStringsNumbersAndLevels) {
  TestFacts facts;
  EXPECT_EQ(Eval(R"(principal.department == "research")", facts), Truth::kTrue);
  EXPECT_EQ(Eval(R"(principal.department != "research")", facts), Truth::kFalse);
  EXPECT_EQ(Eval("principal.level >= 7", facts), Truth::kTrue);
  EXPECT_EQ(Eval("principal.level < 6.5", facts), Truth::kFalse);
  EXPECT_EQ(Eval("context.risk > -1", facts), Truth::kTrue);
  EXPECT_EQ(Eval("resource.classification <= principal.clearance", facts), Truth::kTrue);
  EXPECT_EQ(Eval(R"(resource.classification > "internal")", facts), Truth::kTrue);
  EXPECT_EQ(Eval(R"(principal.clearance == "secret")", facts), Truth::kTrue);  // levels: any case
  EXPECT_EQ(Eval("principal.tenant == \"acme\"", facts), Truth::kTrue);
  EXPECT_EQ(Eval("principal.name == \"alice\"", facts), Truth::kTrue);
  EXPECT_EQ(Eval("principal.method == \"jwt\"", facts), Truth::kTrue);
  EXPECT_EQ(Eval("resource.type == \"model\"", facts), Truth::kTrue);
  EXPECT_EQ(Eval("resource.name != \"simple\"", facts), Truth::kFalse);
  EXPECT_EQ(Eval("action == \"model:infer\"", facts), Truth::kTrue);
}

TEST(ConditionTest, TypeErrorsAndMissingAttributesAreErrors) {
  TestFacts facts;
  std::string why;
  EXPECT_EQ(Eval(R"(principal.department < "zzz")", facts, &why), Truth::kError);
  EXPECT_NE(why.find("neither numbers nor classification levels"), std::string::npos) << why;
  EXPECT_EQ(Eval("principal.department > 3", facts, &why), Truth::kError);
  EXPECT_NE(why.find("'research' is not a number"), std::string::npos) << why;
  EXPECT_EQ(Eval(R"(principal.region == "eu")", facts, &why), Truth::kError);
  EXPECT_EQ(why, "principal.region is missing");
  EXPECT_EQ(Eval(R"(resource.owner == "x")", facts), Truth::kError);
  EXPECT_EQ(Eval(R"(context.ticket == "x")", facts), Truth::kError);
  // `not` keeps an error an error: it never turns into a grant.
  EXPECT_EQ(Eval(R"(not principal.region == "eu")", facts), Truth::kError);
  facts.access.source_address = "";
  EXPECT_EQ(Eval(R"(context.source_ip in ["10.0.0.0/8"])", facts, &why), Truth::kError);
  EXPECT_EQ(why, "context.source_ip is missing");
}

TEST(ConditionTest, HasAndNot) {
  TestFacts facts;
  EXPECT_EQ(Eval("has principal.department", facts), Truth::kTrue);
  EXPECT_EQ(Eval("has principal.region", facts), Truth::kFalse);
  EXPECT_EQ(Eval("not has principal.region", facts), Truth::kTrue);
  EXPECT_EQ(Eval("has resource.classification", facts), Truth::kTrue);
  EXPECT_EQ(Eval("has context.source_ip", facts), Truth::kTrue);
  EXPECT_EQ(Eval(R"(not not principal.department == "research")", facts), Truth::kTrue);
  EXPECT_EQ(Eval(R"(not not not not not not not not principal.department == "research")", facts),
            Truth::kTrue);  // eight, the most allowed
}

TEST(ConditionTest, MembershipInListsAttributesAndRoles) {
  TestFacts facts;
  EXPECT_EQ(Eval(R"(principal.department in ["sales", "research"])", facts), Truth::kTrue);
  EXPECT_EQ(Eval(R"(principal.department in ["sales"])", facts), Truth::kFalse);
  EXPECT_EQ(Eval(R"(principal.department in [])", facts), Truth::kFalse);
  EXPECT_EQ(Eval("principal.level in [1, 7]", facts), Truth::kTrue);
  EXPECT_EQ(Eval(R"("llm-users" in principal.groups)", facts), Truth::kTrue);
  EXPECT_EQ(Eval(R"("llm" in principal.groups)", facts), Truth::kFalse);  // items, not text
  EXPECT_EQ(Eval(R"("analyst" in principal.roles)", facts), Truth::kTrue);
  EXPECT_EQ(Eval(R"("admin" in principal.roles)", facts), Truth::kFalse);
}

TEST(ConditionTest, SourceAddressesMatchNetworks) {
  TestFacts facts;
  const std::string condition = R"(context.source_ip in ["10.0.0.0/8", "2001:db8::/32", "::1"])";
  EXPECT_EQ(Eval(condition, facts), Truth::kTrue);
  facts.access.source_address = "11.0.0.1";
  EXPECT_EQ(Eval(condition, facts), Truth::kFalse);
  facts.access.source_address = "2001:db8:1::5";
  EXPECT_EQ(Eval(condition, facts), Truth::kTrue);
  facts.access.source_address = "::ffff:10.9.8.7";
  EXPECT_EQ(Eval(condition, facts), Truth::kTrue);
  facts.access.source_address = "::1";
  EXPECT_EQ(Eval(condition, facts), Truth::kTrue);
  std::string why;
  facts.access.source_address = "not-an-address";
  EXPECT_EQ(Eval(condition, facts, &why), Truth::kError);
  EXPECT_EQ(why, "'not-an-address' is not an IP address");
}

TEST(ConditionTest, TimeWindowsUseTheZonesOffsetAtTheInstant) {
  TestFacts facts;
  const std::string shanghai = R"(context.time within "Mon-Fri 09:00-18:00 Asia/Shanghai")";
  facts.now = *ParseRfc3339("2026-12-01T09:00:00+08:00");  // a Tuesday
  EXPECT_EQ(Eval(shanghai, facts), Truth::kTrue);
  facts.now = *ParseRfc3339("2026-12-01T18:00:00+08:00");  // the end is excluded
  EXPECT_EQ(Eval(shanghai, facts), Truth::kFalse);
  facts.now = *ParseRfc3339("2026-12-01T08:59:59+08:00");
  EXPECT_EQ(Eval(shanghai, facts), Truth::kFalse);
  facts.now = *ParseRfc3339("2026-12-05T10:00:00+08:00");  // Saturday
  EXPECT_EQ(Eval(shanghai, facts), Truth::kFalse);

  // Berlin switches to summer time on 2026-03-29: the same UTC hour is 07:30 before, 08:30 after.
  const std::string berlin = R"(context.time within "Mon-Fri 08:00-20:00 Europe/Berlin")";
  facts.now = *ParseRfc3339("2026-03-27T06:30:00Z");
  EXPECT_EQ(Eval(berlin, facts), Truth::kFalse);
  facts.now = *ParseRfc3339("2026-03-30T06:30:00Z");
  EXPECT_EQ(Eval(berlin, facts), Truth::kTrue);
  // And back to winter time on 2026-10-25: 06:30 UTC is 08:30 on Friday, 07:30 on Monday.
  facts.now = *ParseRfc3339("2026-10-23T06:30:00Z");
  EXPECT_EQ(Eval(berlin, facts), Truth::kTrue);
  facts.now = *ParseRfc3339("2026-10-26T06:30:00Z");
  EXPECT_EQ(Eval(berlin, facts), Truth::kFalse);
}

TEST(ConditionTest, WindowsAcrossMidnightBelongToTheDayTheyStart) {
  const Result<TimeWindow> night = TimeWindow::Parse("Fri 22:00-06:00 UTC");
  ASSERT_TRUE(night.ok()) << night.status().ToString();
  EXPECT_EQ(night->Contains(*ParseRfc3339("2026-12-04T23:00:00Z")), true);   // Friday night
  EXPECT_EQ(night->Contains(*ParseRfc3339("2026-12-05T03:00:00Z")), true);   // Saturday early
  EXPECT_EQ(night->Contains(*ParseRfc3339("2026-12-05T06:00:00Z")), false);  // the end
  EXPECT_EQ(night->Contains(*ParseRfc3339("2026-12-04T03:00:00Z")), false);  // Thursday's night
  EXPECT_EQ(night->Contains(*ParseRfc3339("2026-12-05T23:00:00Z")), false);  // Saturday night

  const Result<TimeWindow> weekend = TimeWindow::Parse("Sat-Sun,Wed 00:00-24:00 UTC");
  ASSERT_TRUE(weekend.ok()) << weekend.status().ToString();
  EXPECT_EQ(weekend->Contains(*ParseRfc3339("2026-12-06T23:59:59Z")), true);   // Sunday
  EXPECT_EQ(weekend->Contains(*ParseRfc3339("2026-12-02T00:00:00Z")), true);   // Wednesday
  EXPECT_EQ(weekend->Contains(*ParseRfc3339("2026-12-07T00:00:00Z")), false);  // Monday
  const Result<TimeWindow> wrapping_days = TimeWindow::Parse("Fri-Mon 10:00-11:00 UTC");
  ASSERT_TRUE(wrapping_days.ok());
  EXPECT_EQ(wrapping_days->Contains(*ParseRfc3339("2026-12-07T10:30:00Z")), true);   // Monday
  EXPECT_EQ(wrapping_days->Contains(*ParseRfc3339("2026-12-08T10:30:00Z")), false);  // Tuesday
}

TEST(ConditionTest, BadTimeWindowsAreRefused) {
  for (const char* text : {"09:00-18:00", "Mon-Fri 9-18 UTC", "Mon-Fri 09:00-18:00 Mars/Base",
                           "Mon-Funday 09:00-18:00 UTC", "09:00-09:00 UTC", "25:00-26:00 UTC",
                           "Mon 09:00-18:00 UTC extra"}) {
    EXPECT_FALSE(TimeWindow::Parse(text).ok()) << text;
  }
  const Result<TimeWindow> zone = TimeWindow::Parse("09:00-18:00 Mars/Base");
  EXPECT_EQ(zone.status().message(),
            "unknown time zone 'Mars/Base' in time window '09:00-18:00 Mars/Base'");
}

TEST(ConditionTest, BadConditionsAreRefusedAtParse) {
  for (const char* text : {
           "",
           "principal.department",
           "principal.department = \"x\"",
           "principal.department == ",
           "principal.a.b == \"x\"",
           "user.name == \"x\"",
           "principal.department == \"x",
           "principal.department == \"x\" extra",
           "context.time == 5",
           "context.time within \"09:00-18:00\"",
           "principal.name within \"09:00-18:00 UTC\"",
           "principal.roles == \"admin\"",
           "principal.department == [\"a\"]",
           "principal.department in \"a,b\"",
           "context.source_ip in [\"10.0.0.0/33\"]",
           "context.source_ip in [\"not-a-network\"]",
           "has \"x\"",
           "principal.department in [principal.name]",
           "principal.department $ 3",
           "not not not not not not not not not principal.department == \"x\"",
       }) {
    const Result<Condition> condition = Condition::Parse(text);
    EXPECT_FALSE(condition.ok()) << "accepted: " << text;
    if (!condition.ok()) {
      EXPECT_EQ(condition.status().message().rfind("bad condition '", 0), 0u)
          << condition.status().message();
    }
  }
}

TEST(GlobTest, MatchesStarsAndQuestionMarks) {
  const auto matches = [](const char* pattern, const char* name) {
    return Glob::Parse(pattern)->Matches(name);
  };
  EXPECT_TRUE(matches("gpt-*", "gpt-4o"));
  EXPECT_TRUE(matches("gpt-*", "gpt-"));
  EXPECT_FALSE(matches("gpt-*", "gpt"));
  EXPECT_TRUE(matches("*", ""));
  EXPECT_TRUE(matches("a*b*c", "aXXbYYc"));
  EXPECT_FALSE(matches("a*b*c", "aXXbYY"));
  EXPECT_TRUE(matches("a*bc", "abcbc"));
  EXPECT_TRUE(matches("text-??", "text-ab"));
  EXPECT_FALSE(matches("text-??", "text-abc"));
  EXPECT_TRUE(matches("chat:create", "chat:create"));
  EXPECT_FALSE(matches("chat:create", "chat:created"));
  EXPECT_TRUE(matches("admin:*:read", "admin:keys:read"));
  // A '*' in the name (GET /v2/models/stats is the resource "*") is an ordinary character.
  EXPECT_TRUE(matches("a*", "a*b"));
  EXPECT_TRUE(matches("*", "*"));
  EXPECT_FALSE(Glob::Parse("").ok());
  EXPECT_FALSE(Glob::Parse("model[0-9]").ok());
  EXPECT_FALSE(Glob::Parse("a b").ok());
  EXPECT_EQ(Glob::Parse("gpt-*")->literal_characters(), 4u);
}

TEST(Rfc3339Test, ReadsOffsetsAndRefusesTheRest) {
  EXPECT_EQ(*ParseRfc3339("1970-01-01T00:00:00Z"), 0);
  EXPECT_EQ(*ParseRfc3339("2026-12-01T10:00:00+08:00"), *ParseRfc3339("2026-12-01T02:00:00Z"));
  EXPECT_EQ(*ParseRfc3339("2026-12-01T10:00:00.250-01:30"), 1796124600);  // 11:30 UTC
  EXPECT_EQ(*ParseRfc3339("2000-02-29T00:00:00Z"), 951782400);  // a leap year (div. by 400)
  for (const char* text :
       {"2026-12-01", "2026-12-01T10:00:00", "2026-13-01T00:00:00Z", "2026-02-29T00:00:00Z",
        "2026-04-31T00:00:00Z", "1900-02-29T00:00:00Z", "2026-12-01T10:00:00+0800", "yesterday"}) {
    EXPECT_FALSE(ParseRfc3339(text).ok()) << text;
  }
}

}  // namespace
}  // namespace rampart::policy
