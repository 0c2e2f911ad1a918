#include "knowledge/index/filter.h"

#include <gtest/gtest.h>

#include <functional>
#include <random>
#include <string>

#include "json/reader.h"
#include "knowledge/engine_test_util.h"
#include "knowledge/index/metadata_index.h"

namespace rampart::knowledge {
namespace {

Result<FilterNode> Parse(std::string_view text) {
  static thread_local json::Parser parser;
  auto value = parser.Parse(text);
  if (!value.ok()) return value.status();
  return ParseFilter(*value);
}

// Field accessors for the hand-written predicates below.
const std::string* Text(const Metadata& metadata, std::string_view key) {
  const MetadataValue* value = FindField(metadata, key);
  return value ? std::get_if<std::string>(value) : nullptr;
}
const double* Number(const Metadata& metadata, std::string_view key) {
  const MetadataValue* value = FindField(metadata, key);
  return value ? std::get_if<double>(value) : nullptr;
}
const bool* Flag(const Metadata& metadata, std::string_view key) {
  const MetadataValue* value = FindField(metadata, key);
  return value ? std::get_if<bool>(value) : nullptr;
}
const std::vector<std::string>* List(const Metadata& metadata, std::string_view key) {
  const MetadataValue* value = FindField(metadata, key);
  return value ? std::get_if<std::vector<std::string>>(value) : nullptr;
}
bool Has(const std::vector<std::string>* list, std::string_view item) {
  return list != nullptr && std::find(list->begin(), list->end(), item) != list->end();
}

struct Case {
  std::string filter;
  std::function<bool(const Metadata&)> expected;
};

std::vector<Case> Cases() {
  return {
      {R"({})", [](const Metadata&) { return true; }},
      {R"({"genre": "noir"})",
       [](const Metadata& m) { return Text(m, "genre") && *Text(m, "genre") == "noir"; }},
      {R"({"genre": {"$eq": "noir"}})",
       [](const Metadata& m) { return Text(m, "genre") && *Text(m, "genre") == "noir"; }},
      {R"({"genre": {"$ne": "noir"}})",
       [](const Metadata& m) { return !Text(m, "genre") || *Text(m, "genre") != "noir"; }},
      {R"({"year": 1990})",
       [](const Metadata& m) { return Number(m, "year") && *Number(m, "year") == 1990; }},
      {R"({"year": {"$gt": 2000}})",
       [](const Metadata& m) { return Number(m, "year") && *Number(m, "year") > 2000; }},
      {R"({"year": {"$gte": 2000}})",
       [](const Metadata& m) { return Number(m, "year") && *Number(m, "year") >= 2000; }},
      {R"({"year": {"$lt": 1960.5}})",
       [](const Metadata& m) { return Number(m, "year") && *Number(m, "year") < 1960.5; }},
      {R"({"year": {"$lte": 1960}})",
       [](const Metadata& m) { return Number(m, "year") && *Number(m, "year") <= 1960; }},
      {R"({"year": {"$gte": 1970, "$lt": 1980}})",
       [](const Metadata& m) {
         return Number(m, "year") && *Number(m, "year") >= 1970 && *Number(m, "year") < 1980;
       }},
      {R"({"flag": true})", [](const Metadata& m) { return Flag(m, "flag") && *Flag(m, "flag"); }},
      {R"({"flag": {"$ne": true}})",
       [](const Metadata& m) { return !Flag(m, "flag") || !*Flag(m, "flag"); }},
      {R"({"genre": {"$in": ["noir", "sf", 3, true]}})",
       [](const Metadata& m) {
         return Text(m, "genre") && (*Text(m, "genre") == "noir" || *Text(m, "genre") == "sf");
       }},
      {R"({"genre": {"$nin": ["noir", "sf"]}})",
       [](const Metadata& m) {
         return !Text(m, "genre") || (*Text(m, "genre") != "noir" && *Text(m, "genre") != "sf");
       }},
      {R"({"year": {"$in": [1990, 1991]}})",
       [](const Metadata& m) {
         return Number(m, "year") && (*Number(m, "year") == 1990 || *Number(m, "year") == 1991);
       }},
      // List fields match when any element does; $ne and $nin when none does.
      {R"({"tags": "a"})", [](const Metadata& m) { return Has(List(m, "tags"), "a"); }},
      {R"({"tags": {"$ne": "a"}})", [](const Metadata& m) { return !Has(List(m, "tags"), "a"); }},
      {R"({"tags": {"$in": ["a", "b"]}})",
       [](const Metadata& m) { return Has(List(m, "tags"), "a") || Has(List(m, "tags"), "b"); }},
      {R"({"tags": {"$nin": ["a", "b"]}})",
       [](const Metadata& m) { return !Has(List(m, "tags"), "a") && !Has(List(m, "tags"), "b"); }},
      {R"({"tags": {"$exists": true}})", [](const Metadata& m) { return List(m, "tags"); }},
      {R"({"tags": {"$exists": false}})", [](const Metadata& m) { return !List(m, "tags"); }},
      {R"({"rare": {"$exists": true}})", [](const Metadata& m) { return Text(m, "rare"); }},
      // A comparison of the wrong type matches nothing ($ne: everything).
      {R"({"genre": {"$gt": 3}})", [](const Metadata&) { return false; }},
      {R"({"year": "1990"})", [](const Metadata&) { return false; }},
      {R"({"year": {"$ne": "1990"}})", [](const Metadata&) { return true; }},
      {R"({"missing": {"$nin": ["x"]}})", [](const Metadata&) { return true; }},
      {R"({"missing": "x"})", [](const Metadata&) { return false; }},
      {R"({"genre": "noir", "flag": false})",
       [](const Metadata& m) {
         return Text(m, "genre") && *Text(m, "genre") == "noir" && Flag(m, "flag") &&
                !*Flag(m, "flag");
       }},
      {R"({"$or": [{"genre": "noir"}, {"year": {"$lt": 1955}}]})",
       [](const Metadata& m) {
         return (Text(m, "genre") && *Text(m, "genre") == "noir") ||
                (Number(m, "year") && *Number(m, "year") < 1955);
       }},
      {R"({"$and": [{"tags": "c"}, {"$or": [{"flag": true}, {"genre": {"$in": ["sf"]}}]}]})",
       [](const Metadata& m) {
         return Has(List(m, "tags"), "c") && ((Flag(m, "flag") && *Flag(m, "flag")) ||
                                              (Text(m, "genre") && *Text(m, "genre") == "sf"));
       }},
  };
}

TEST(FilterTest, EveryOperatorAgreesWithItsDefinitionOverGeneratedMetadata) {
  std::mt19937 random(42);
  std::vector<Metadata> records;
  for (int i = 0; i < 3000; ++i) records.push_back(testing::RandomMetadata(random));
  records.push_back({{"tags", std::vector<std::string>{}}});  // an empty list exists
  MetadataIndex index;
  for (size_t slot = 0; slot < records.size(); ++slot) {
    index.Add(static_cast<uint32_t>(slot), records[slot]);
  }
  for (const Case& test : Cases()) {
    auto filter = Parse(test.filter);
    ASSERT_TRUE(filter.ok()) << test.filter << ": " << filter.status().ToString();
    std::vector<uint32_t> matching;
    for (size_t slot = 0; slot < records.size(); ++slot) {
      bool matches = FilterMatches(*filter, records[slot]);
      ASSERT_EQ(matches, test.expected(records[slot])) << test.filter << " record " << slot;
      if (matches) matching.push_back(static_cast<uint32_t>(slot));
    }
    // The inverted indexes' candidates, when they give some, hold every match.
    auto candidates = index.Candidates(*filter, records.size());
    if (candidates) {
      EXPECT_TRUE(
          std::includes(candidates->begin(), candidates->end(), matching.begin(), matching.end()))
          << test.filter;
    }
    // A limit below the true count is never answered with a smaller set.
    auto bounded = index.Candidates(*filter, matching.size() / 2);
    if (bounded && !matching.empty()) {
      EXPECT_TRUE(std::includes(bounded->begin(), bounded->end(), matching.begin(), matching.end()))
          << test.filter;
    }
  }
}

TEST(FilterTest, IndexesForgetRemovedRecords) {
  MetadataIndex index;
  Metadata noir = {{"genre", std::string("noir")}, {"tags", std::vector<std::string>{"a", "a"}}};
  index.Add(1, noir);
  index.Add(2, noir);
  index.Remove(1, noir);
  auto candidates = index.Candidates(*Parse(R"({"tags": "a"})"), 100);
  ASSERT_TRUE(candidates.has_value());
  EXPECT_EQ(*candidates, (std::vector<uint32_t>{2}));
  index.Remove(2, noir);
  EXPECT_TRUE(index.Candidates(*Parse(R"({"genre": "noir"})"), 100)->empty());
  EXPECT_EQ(index.MemoryBytes(), 0u);
}

TEST(FilterTest, BadFiltersAreRefusedNamingThePath) {
  struct Bad {
    std::string filter;
    std::string message;
  };
  std::vector<Bad> cases = {
      {R"([])", "filter: a filter must be an object, not array"},
      {R"({"genre": {"$regex": "n.*"}})", "filter.genre: unknown operator '$regex'"},
      {R"({"$not": {"genre": "x"}})", "filter: unknown operator '$not'"},
      {R"({"year": {"$gt": "1990"}})", "filter.year.$gt: $gt needs a number, not string"},
      {R"({"year": {"$lte": null}})", "filter.year.$lte: $lte needs a number"},
      {R"({"genre": {"$in": "noir"}})", "filter.genre.$in: $in needs an array"},
      {R"({"genre": {"$nin": [["a"]]}})", "filter.genre.$nin[0]: $nin needs a string, number"},
      {R"({"genre": {"$eq": ["a"]}})", "filter.genre.$eq: $eq needs a string, number or boolean"},
      {R"({"genre": null})", "filter.genre: $eq needs a string, number or boolean, not null"},
      {R"({"genre": ["a"]})", "filter.genre: $eq needs a string, number or boolean, not array"},
      {R"({"genre": {"$exists": 1}})", "filter.genre.$exists: $exists needs a boolean"},
      {R"({"genre": {}})", "filter.genre: an operator object needs at least one operator"},
      {R"({"$and": []})", "filter.$and: $and needs a non-empty array of filters"},
      {R"({"$or": {"a": 1}})", "filter.$or: $or needs a non-empty array of filters"},
      {R"({"$or": [{"a": 1}, 3]})", "filter.$or[1]: a filter must be an object, not number"},
      {R"({"$and": [{"a": {"$bad": 1}}]})", "filter.$and[0].a: unknown operator '$bad'"},
  };
  for (const Bad& bad : cases) {
    auto parsed = Parse(bad.filter);
    ASSERT_FALSE(parsed.ok()) << bad.filter;
    EXPECT_EQ(parsed.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(parsed.status().message().find(bad.message), std::string::npos)
        << bad.filter << " -> " << parsed.status().message();
  }
}

TEST(FilterTest, DepthAndSizeAreBounded) {
  std::string deep = R"({"a": 1})";
  for (size_t i = 0; i < kMaxFilterDepth; ++i) deep = R"({"$and": [)" + deep + "]}";
  auto too_deep = Parse(deep);
  ASSERT_FALSE(too_deep.ok());
  EXPECT_NE(too_deep.status().message().find("nest at most"), std::string::npos);
  std::string shallow = R"({"a": 1})";
  for (size_t i = 0; i + 2 < kMaxFilterDepth; ++i) shallow = R"({"$or": [)" + shallow + "]}";
  EXPECT_TRUE(Parse(shallow).ok()) << Parse(shallow).status().ToString();

  std::string wide = R"({"a": {"$in": [)";
  for (size_t i = 0; i <= kMaxFilterTerms; ++i)
    wide += (i ? ",\"" : "\"") + std::to_string(i) + "\"";
  wide += "]}}";
  auto too_wide = Parse(wide);
  ASSERT_FALSE(too_wide.ok());
  EXPECT_NE(too_wide.status().message().find("at most"), std::string::npos);
}

}  // namespace
}  // namespace rampart::knowledge
