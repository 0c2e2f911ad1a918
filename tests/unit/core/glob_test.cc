// GlobMatches: the one matcher of policy names and identity selectors.

#include "core/glob.h"

#include <gtest/gtest.h>

namespace rampart {
namespace {

TEST(GlobTest, StarAndQuestionMarkStayWithinOneSegment) {
  EXPECT_TRUE(GlobMatches("*.svc.acme", "a.svc.acme", '.'));
  EXPECT_FALSE(GlobMatches("*.svc.acme", "a.b.svc.acme", '.'));
  EXPECT_FALSE(GlobMatches("*.svc.acme", ".svc.acme.x", '.'));
  EXPECT_TRUE(GlobMatches("spiffe://td/ns/*/sa/*", "spiffe://td/ns/prod/sa/web", '/'));
  EXPECT_FALSE(GlobMatches("spiffe://td/ns/*/sa/*", "spiffe://td/ns/a/b/sa/web", '/'));
  EXPECT_FALSE(GlobMatches("spiffe://td/ns/*/sa/*", "spiffe://td/ns/prod/sa/web/x", '/'));
  EXPECT_TRUE(GlobMatches("a?c", "abc", '/'));
  EXPECT_FALSE(GlobMatches("a?c", "a/c", '/'));
  EXPECT_TRUE(GlobMatches("*", "", '/'));
  EXPECT_TRUE(GlobMatches("a*b*c", "axxbyybzc", '/'));
  EXPECT_FALSE(GlobMatches("a*b*c", "axxbyybz", '/'));
  EXPECT_TRUE(GlobMatches("exact", "exact", '/'));
  EXPECT_FALSE(GlobMatches("exact", "exactly", '/'));
}

// Without a separator (the policy files' names) the wildcards cross every character.
TEST(GlobTest, WithoutASeparatorWildcardsCrossEverything) {
  EXPECT_TRUE(GlobMatches("chat:*", "chat:create"));
  EXPECT_TRUE(GlobMatches("admin:*", "admin:keys:write"));
  EXPECT_TRUE(GlobMatches("gpt-?o", "gpt-4o"));
  EXPECT_TRUE(GlobMatches("a?c", "a/c"));
  EXPECT_FALSE(GlobMatches("text-*", "gpt-4o"));
  EXPECT_TRUE(GlobMatches("*", ""));
}

// A '*' in the text is an ordinary character: the pattern's '*' still matches any run over it
// (the policy's own matcher once took it as a literal and missed "a*b" for "a*").
TEST(GlobTest, AStarInTheTextIsAnOrdinaryCharacter) {
  EXPECT_TRUE(GlobMatches("a*", "a*b"));
  EXPECT_TRUE(GlobMatches("a*c", "a*xc"));
  EXPECT_TRUE(GlobMatches("*", "*"));
  EXPECT_FALSE(GlobMatches("a?", "a*b"));
}

}  // namespace
}  // namespace rampart
