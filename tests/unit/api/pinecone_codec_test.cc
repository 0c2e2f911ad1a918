// Pinecone's wire shapes: every request parser's refusals (the limits, the types, the shapes)
// and the answers' JSON.

#include "api/pinecone_codec.h"

#include <gtest/gtest.h>

#include <string>

namespace rampart::api::pinecone {
namespace {

using knowledge::FilterNode;

constexpr size_t kDimension = 3;

// The message of the InvalidArgument `result` holds (fails the test when it holds a value).
template <typename T>
std::string Refusal(const Result<T>& result, StatusCode code = StatusCode::kInvalidArgument) {
  EXPECT_FALSE(result.ok());
  if (result.ok()) return "";
  EXPECT_EQ(result.status().code(), code) << result.status().ToString();
  return result.status().message();
}

std::string Vectors(const std::string& records, const std::string& extra = "") {
  return R"({"vectors":[)" + records + "]" + extra + "}";
}

TEST(PineconeCodecTest, UpsertReadsRecordsAndTheNamespace) {
  json::Parser parser;
  Result<UpsertRequest> upsert = ParseUpsert(
      parser,
      Vectors(R"({"id":"a","values":[1,2,3],"metadata":{"genre":"drama","year":2020,"new":true,)"
              R"("tags":["x","y"]},"sparseValues":{"indices":[1,5],"values":[0.5,0.25]}})",
              R"(,"namespace":"books")"),
      kDimension);
  ASSERT_TRUE(upsert.ok()) << upsert.status().ToString();
  EXPECT_EQ(upsert->name_space, "books");
  ASSERT_EQ(upsert->records.size(), 1u);
  const knowledge::VectorRecord& record = upsert->records[0];
  EXPECT_EQ(record.id, "a");
  EXPECT_EQ(record.values, (std::vector<float>{1, 2, 3}));
  EXPECT_EQ(record.sparse.indices, (std::vector<uint32_t>{1, 5}));
  ASSERT_EQ(record.metadata.size(), 4u);  // sorted by key
  EXPECT_EQ(record.metadata[0].first, "genre");
  EXPECT_EQ(std::get<double>(record.metadata[3].second), 2020);
  EXPECT_EQ(std::get<std::vector<std::string>>(record.metadata[2].second),
            (std::vector<std::string>{"x", "y"}));
}

TEST(PineconeCodecTest, TheDefaultNamespaceIsEmptyHoweverItIsSpelled) {
  json::Parser parser;
  for (const std::string extra : {"", R"(,"namespace":"")", R"(,"namespace":"__default__")"}) {
    Result<UpsertRequest> upsert =
        ParseUpsert(parser, Vectors(R"({"id":"a","values":[1,2,3]})", extra), kDimension);
    ASSERT_TRUE(upsert.ok()) << extra;
    EXPECT_EQ(upsert->name_space, "") << extra;
  }
  EXPECT_EQ(ReportedNamespace(""), "__default__");
  EXPECT_EQ(ReportedNamespace("books"), "books");
}

TEST(PineconeCodecTest, UpsertRefusesWhatAnIndexMustNotTake) {
  json::Parser parser;
  const auto refusal = [&](const std::string& body) {
    return Refusal(ParseUpsert(parser, body, kDimension));
  };
  EXPECT_NE(refusal(R"({"vectors":[)").find("malformed JSON"), std::string::npos);
  EXPECT_NE(refusal("").find("needs a JSON body"), std::string::npos);
  EXPECT_NE(refusal("[1]").find("must be a JSON object"), std::string::npos);
  EXPECT_NE(refusal(R"({"vectors":[]})").find("must not be empty"), std::string::npos);
  EXPECT_NE(refusal(Vectors(R"({"id":"a","values":[1,2]})")).find("dimension is 3"),
            std::string::npos);
  EXPECT_NE(refusal(Vectors(R"({"id":"a","values":[1,2,3,4]})")).find("4 values"),
            std::string::npos);
  // JSON has no NaN or infinity; a number a float cannot hold is the way to send one.
  EXPECT_NE(refusal(Vectors(R"({"id":"a","values":[1,1e39,3]})"))
                .find("vectors[0].values[1]: 1e+39 is not a finite 32-bit float"),
            std::string::npos);
  EXPECT_NE(refusal(Vectors(R"({"id":"a","values":[1,"2",3]})")).find("vectors[0].values[1]"),
            std::string::npos);
  EXPECT_NE(refusal(Vectors(R"({"values":[1,2,3]})")).find("vectors[0].id: is required"),
            std::string::npos);
  EXPECT_NE(refusal(Vectors(R"({"id":"","values":[1,2,3]})")).find("must not be empty"),
            std::string::npos);
  const std::string long_id(knowledge::kMaxIdBytes + 1, 'x');
  EXPECT_NE(refusal(Vectors(R"({"id":")" + long_id + R"(","values":[1,2,3]})"))
                .find("513 bytes, over the limit of 512"),
            std::string::npos);
  EXPECT_NE(refusal(Vectors(R"({"id":"a","values":[1,2,3],"metadata":{"m":{"n":1}}})"))
                .find("vectors[0].metadata.m: metadata cannot nest objects"),
            std::string::npos);
  EXPECT_NE(refusal(Vectors(R"({"id":"a","values":[1,2,3],"metadata":{"m":null}})"))
                .find("vectors[0].metadata.m: metadata values cannot be null"),
            std::string::npos);
  EXPECT_NE(refusal(Vectors(R"({"id":"a","values":[1,2,3],"metadata":{"m":[1,2]}})"))
                .find("vectors[0].metadata.m[0]"),
            std::string::npos);
  const std::string large(knowledge::kMaxMetadataBytes, 'x');
  EXPECT_NE(refusal(Vectors(R"({"id":"a","values":[1,2,3],"metadata":{"m":")" + large + "\"}}"))
                .find("over the limit of 40960 bytes per record"),
            std::string::npos);
  EXPECT_NE(refusal(Vectors(R"({"id":"a","values":[1,2,3],)"
                            R"("sparseValues":{"indices":[5,1],"values":[1,1]}})"))
                .find("strictly increasing"),
            std::string::npos);
  EXPECT_NE(refusal(Vectors(R"({"id":"a","values":[1,2,3],)"
                            R"("sparseValues":{"indices":[1],"values":[1,2]}})"))
                .find("1 indices but 2 values"),
            std::string::npos);
  EXPECT_NE(
      refusal(Vectors(R"({"id":"a","values":[1,2,3]})", R"(,"namespace":7)")).find("namespace"),
      std::string::npos);
}

TEST(PineconeCodecTest, UpsertCountsAndBytesHaveTheirLimits) {
  json::Parser parser;
  std::string records;
  for (size_t i = 0; i <= knowledge::kMaxUpsertRecords; ++i) {
    records += fmt::format(R"({}{{"id":"v{}","values":[1,2,3]}})", i ? "," : "", i);
  }
  EXPECT_NE(Refusal(ParseUpsert(parser, Vectors(records), kDimension))
                .find("1001 records, over the limit of 1000"),
            std::string::npos);
  // The size is checked before anything is parsed.
  const std::string huge(knowledge::kMaxUpsertBytes + 1, ' ');
  EXPECT_NE(Refusal(ParseUpsert(parser, huge, kDimension)).find("over the limit of 2097152"),
            std::string::npos);
}

TEST(PineconeCodecTest, QueryReadsItsFieldsAndChecksTopK) {
  json::Parser parser;
  Result<knowledge::QueryRequest> query =
      ParseQuery(parser,
                 R"({"topK":5,"vector":[1,0,0],"filter":{"genre":"drama"},"includeValues":true,)"
                 R"("includeMetadata":true,"namespace":"__default__","ef":64})",
                 kDimension);
  ASSERT_TRUE(query.ok()) << query.status().ToString();
  EXPECT_EQ(query->top_k, 5u);
  EXPECT_EQ(query->ef, 64u);
  EXPECT_TRUE(query->include_values && query->include_metadata);
  ASSERT_TRUE(query->filter.has_value());
  EXPECT_EQ(query->filter->op, FilterNode::Op::kEq);  // an $and of one comparison is that one
  EXPECT_EQ(query->filter->field, "genre");

  for (const char* body : {R"({"topK":0,"vector":[1,0,0]})", R"({"topK":10001,"vector":[1,0,0]})",
                           R"({"topK":-1,"vector":[1,0,0]})"}) {
    EXPECT_NE(Refusal(ParseQuery(parser, body, kDimension)).find("out of range [1, 10000]"),
              std::string::npos)
        << body;
  }
  EXPECT_NE(Refusal(ParseQuery(parser, R"({"vector":[1,0,0]})", kDimension)).find("topK"),
            std::string::npos);
  EXPECT_NE(Refusal(ParseQuery(parser, R"({"topK":1})", kDimension)).find("exactly one of"),
            std::string::npos);
  EXPECT_NE(Refusal(ParseQuery(parser, R"({"topK":1,"vector":[1,0,0],"id":"a"})", kDimension))
                .find("exactly one of"),
            std::string::npos);
  EXPECT_NE(Refusal(ParseQuery(parser, R"({"topK":1,"vector":[1,0]})", kDimension))
                .find("dimension is 3"),
            std::string::npos);
  EXPECT_NE(Refusal(ParseQuery(parser, R"({"topK":1,"id":"a","filter":{"g":{"$regex":"x"}}})",
                               kDimension))
                .find("unknown operator '$regex'"),
            std::string::npos);
}

// The grammar itself is knowledge/index/filter.h's (tested with the engine); here, that every
// request that carries a filter refuses a bad one with its reason.
TEST(PineconeCodecTest, EveryFilterIsCheckedWhereverItComes) {
  json::Parser parser;
  const std::string bad = R"({"genre":{"$regex":"x"}})";
  const std::string unknown = "unknown operator '$regex'";
  EXPECT_NE(
      Refusal(ParseQuery(parser, R"({"topK":1,"vector":[1,0,0],"filter":)" + bad + "}", kDimension))
          .find(unknown),
      std::string::npos);
  EXPECT_NE(Refusal(ParseDelete(parser, R"({"filter":)" + bad + "}")).find(unknown),
            std::string::npos);
  EXPECT_NE(Refusal(ParseStatsRequest(parser, R"({"filter":)" + bad + "}")).find(unknown),
            std::string::npos);
  EXPECT_NE(Refusal(ParseQuery(parser, R"({"topK":1,"vector":[1,0,0],"filter":{"y":{"$gt":"1"}}})",
                               kDimension))
                .find("$gt"),
            std::string::npos);
  Result<std::optional<FilterNode>> none = ParseStatsRequest(parser, "");
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());
  Result<std::optional<FilterNode>> some = ParseStatsRequest(parser, R"({"filter":{"a":1}})");
  ASSERT_TRUE(some.ok());
  EXPECT_TRUE(some->has_value());
}

TEST(PineconeCodecTest, UpdateAndDeleteShapes) {
  json::Parser parser;
  Result<knowledge::UpdateRequest> update = ParseUpdate(
      parser, R"({"id":"a","values":[1,2,3],"setMetadata":{"k":"v"},"namespace":"n"})", kDimension);
  ASSERT_TRUE(update.ok()) << update.status().ToString();
  EXPECT_EQ(update->id, "a");
  EXPECT_TRUE(update->values.has_value());
  EXPECT_EQ(update->set_metadata->size(), 1u);
  EXPECT_NE(Refusal(ParseUpdate(parser, R"({"values":[1,2,3]})", kDimension)).find("id"),
            std::string::npos);
  Refusal(ParseUpdate(parser, R"({"filter":{"a":1},"setMetadata":{"k":"v"}})", kDimension),
          StatusCode::kUnimplemented);

  Result<knowledge::DeleteRequest> by_ids = ParseDelete(parser, R"({"ids":["a","b"]})");
  ASSERT_TRUE(by_ids.ok());
  EXPECT_EQ(by_ids->ids.size(), 2u);
  Result<knowledge::DeleteRequest> all =
      ParseDelete(parser, R"({"deleteAll":true,"namespace":"n"})");
  ASSERT_TRUE(all.ok());
  EXPECT_TRUE(all->delete_all);
  EXPECT_EQ(all->name_space, "n");
  Result<knowledge::DeleteRequest> by_filter = ParseDelete(parser, R"({"filter":{"a":1}})");
  ASSERT_TRUE(by_filter.ok());
  EXPECT_TRUE(by_filter->filter.has_value());
  for (const char* body : {"{}", R"({"ids":["a"],"deleteAll":true})", R"({"deleteAll":false})"}) {
    EXPECT_NE(Refusal(ParseDelete(parser, body)).find("exactly one of"), std::string::npos) << body;
  }
  EXPECT_NE(Refusal(ParseDelete(parser, "")).find("needs a JSON body"), std::string::npos);
  std::string ids;
  for (size_t i = 0; i <= knowledge::kMaxIdsPerCall; ++i)
    ids += fmt::format("{}\"{}\"", i ? "," : "", i);
  EXPECT_NE(Refusal(ParseDelete(parser, R"({"ids":[)" + ids + "]}")).find("over the limit of 1000"),
            std::string::npos);
}

TEST(PineconeCodecTest, QueryStringsOfFetchAndList) {
  Result<FetchRequest> fetch = ParseFetchQuery("ids=a&ids=b%20c&ids=d+e&namespace=__default__");
  ASSERT_TRUE(fetch.ok()) << fetch.status().ToString();
  EXPECT_EQ(fetch->ids, (std::vector<std::string>{"a", "b c", "d e"}));
  EXPECT_EQ(fetch->name_space, "");
  EXPECT_NE(Refusal(ParseFetchQuery("namespace=x")).find("at least one id"), std::string::npos);
  EXPECT_NE(Refusal(ParseFetchQuery("ids=%zz")).find("malformed query string"), std::string::npos);
  EXPECT_NE(Refusal(ParseFetchQuery("ids=%4")).find("malformed query string"), std::string::npos);

  Result<ListRequest> list = ParseListQuery("prefix=doc%23&limit=7&paginationToken=t&namespace=n");
  ASSERT_TRUE(list.ok()) << list.status().ToString();
  EXPECT_EQ(list->prefix, "doc#");
  EXPECT_EQ(list->limit, 7u);
  EXPECT_EQ(list->pagination_token, "t");
  EXPECT_EQ(list->name_space, "n");
  for (const char* query : {"limit=0", "limit=101", "limit=x", "limit=5x"}) {
    EXPECT_NE(Refusal(ParseListQuery(query)).find("limit"), std::string::npos) << query;
  }
}

TEST(PineconeCodecTest, CreateIndexInBothShapes) {
  json::Parser parser;
  knowledge::EngineOptions defaults;
  defaults.hnsw_m = 24;
  Result<knowledge::IndexSpec> current = ParseCreateIndex(
      parser,
      R"({"name":"docs","deployment":{"deployment_type":"managed","cloud":"aws","region":"x"},)"
      R"("schema":{"fields":{"_values":{"type":"dense_vector","dimension":8,"metric":"dotproduct"}}},)"
      R"("deletion_protection":"enabled"})",
      defaults);
  ASSERT_TRUE(current.ok()) << current.status().ToString();
  EXPECT_EQ(current->name, "docs");
  EXPECT_EQ(current->engine.dimension, 8u);
  EXPECT_EQ(current->engine.metric, knowledge::Metric::kDotProduct);
  EXPECT_EQ(current->engine.hnsw_m, 24u);
  EXPECT_TRUE(current->deletion_protection);

  Result<knowledge::IndexSpec> legacy = ParseCreateIndex(
      parser, R"({"name":"old-1","dimension":4,"spec":{"serverless":{}}})", defaults);
  ASSERT_TRUE(legacy.ok()) << legacy.status().ToString();
  EXPECT_EQ(legacy->engine.dimension, 4u);
  EXPECT_EQ(legacy->engine.metric, knowledge::Metric::kCosine);

  const auto refusal = [&](const std::string& body,
                           StatusCode code = StatusCode::kInvalidArgument) {
    return Refusal(ParseCreateIndex(parser, body, defaults), code);
  };
  EXPECT_NE(refusal(R"({"name":"Docs","dimension":4})").find("lower-case"), std::string::npos);
  EXPECT_NE(refusal(R"({"name":"-docs","dimension":4})").find("start or end"), std::string::npos);
  EXPECT_NE(refusal(R"({"name":")" + std::string(46, 'a') + R"(","dimension":4})").find("1 to 45"),
            std::string::npos);
  EXPECT_NE(refusal(R"({"name":"d","dimension":0})").find("out of range"), std::string::npos);
  EXPECT_NE(refusal(R"({"name":"d","dimension":20001})").find("out of range"), std::string::npos);
  EXPECT_NE(refusal(R"({"name":"d","dimension":4,"metric":"hamming"})").find("hamming"),
            std::string::npos);
  EXPECT_NE(refusal(R"({"name":"d"})").find("dimension"), std::string::npos);
  refusal(R"({"name":"d","schema":{"fields":{"s":{"type":"sparse_vector"}}}})",
          StatusCode::kUnimplemented);
}

TEST(PineconeCodecTest, AnswersInPineconesShapes) {
  knowledge::QueryResult result;
  result.matches.push_back({.id = "a",
                            .score = 0.5f,
                            .values = std::vector<float>{0.1f, 2},
                            .metadata = knowledge::Metadata{{"n", 3.0}, {"s", std::string("x")}}});
  EXPECT_EQ(QueryAnswer(result, "__default__"),
            R"({"matches":[{"id":"a","score":0.5,"values":[0.1,2.0],"metadata":{"n":3,"s":"x"}}],)"
            R"("namespace":"__default__","usage":{"readUnits":1}})");
  knowledge::IndexStats stats{.namespaces = {{.name_space = "", .vector_count = 2}},
                              .total_vector_count = 2,
                              .dimension = 3,
                              .metric = knowledge::Metric::kEuclidean};
  EXPECT_EQ(
      StatsAnswer(stats),
      R"({"namespaces":{"__default__":{"vectorCount":2}},"dimension":3,)"
      R"("indexFullness":0.0,"totalVectorCount":2,"metric":"euclidean","vectorType":"dense"})");
  EXPECT_EQ(ListAnswer({.ids = {"a", "b"}, .next_token = "b"}, "n"),
            R"({"vectors":[{"id":"a"},{"id":"b"}],"pagination":{"next":"b"},"namespace":"n",)"
            R"("usage":{"readUnits":1}})");
  EXPECT_EQ(UpsertAnswer(7), R"({"upsertedCount":7})");
  EXPECT_EQ(ErrorJson(404, "gone"), R"({"code":5,"message":"gone","details":[]})");
  EXPECT_EQ(HttpStatusOf(AlreadyExists("x")), 409);
  EXPECT_EQ(HttpStatusOf(ResourceExhausted("x")), 429);
  EXPECT_EQ(HttpStatusOf(Unimplemented("x")), 501);
  EXPECT_EQ(HttpStatusOf(Unavailable("x")), 503);
  EXPECT_EQ(HttpStatusOf(Internal("x")), 500);
}

}  // namespace
}  // namespace rampart::api::pinecone
