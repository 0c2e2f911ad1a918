// The Vector Stores API's codec: request bodies with OpenAI's limits (400s naming the field),
// filters of every kind and their wrong types, chunking strategies, paging query strings, and
// the answers in OpenAI's object shapes.

#include "api/vector_stores_codec.h"

#include <gtest/gtest.h>

namespace rampart::api::vector_stores {
namespace {

using Op = hub::AttributeFilter::Op;

class VectorStoresCodecTest : public ::testing::Test {
 protected:
  // The field a rejected search body is blamed on.
  std::string SearchParam(std::string_view body) {
    Result<ParsedSearch> parsed = ParseSearch(parser_, body);
    EXPECT_FALSE(parsed.ok()) << body;
    EXPECT_EQ(parsed.status().code(), StatusCode::kInvalidArgument);
    return parsed.ok() ? "" : ParamOf(parsed.status());
  }

  json::Parser parser_;
};

TEST_F(VectorStoresCodecTest, SearchTakesAStringOrAnArrayOfQueries) {
  Result<ParsedSearch> one = ParseSearch(parser_, R"({"query":"return policy"})");
  ASSERT_TRUE(one.ok()) << one.status().ToString();
  EXPECT_EQ(one->request.queries, std::vector<std::string>{"return policy"});
  EXPECT_FALSE(one->query_was_array);
  EXPECT_EQ(one->request.max_num_results, 10);
  EXPECT_EQ(one->request.ranker, hub::Ranker::kHybrid);
  EXPECT_FALSE(one->request.filter.has_value());

  Result<ParsedSearch> many =
      ParseSearch(parser_, R"({"query":["a","b"],"max_num_results":3,"rewrite_query":true,)"
                           R"("ranking_options":{"ranker":"keyword","score_threshold":0.25}})");
  ASSERT_TRUE(many.ok()) << many.status().ToString();
  EXPECT_EQ(many->request.queries.size(), 2u);
  EXPECT_TRUE(many->query_was_array);
  EXPECT_EQ(many->request.max_num_results, 3);
  EXPECT_EQ(many->request.ranker, hub::Ranker::kKeyword);
  EXPECT_DOUBLE_EQ(many->request.score_threshold, 0.25);
  for (std::string_view ranker : {"auto", "default-2024-11-15", "none", "hybrid"}) {
    Result<ParsedSearch> parsed = ParseSearch(
        parser_, fmt::format(R"({{"query":"q","ranking_options":{{"ranker":"{}"}}}})", ranker));
    ASSERT_TRUE(parsed.ok()) << ranker;
    EXPECT_EQ(parsed->request.ranker, hub::Ranker::kHybrid);
  }
}

TEST_F(VectorStoresCodecTest, SearchFiltersComparisonAndCompound) {
  Result<ParsedSearch> parsed =
      ParseSearch(parser_, R"({"query":"q","filters":{"type":"and","filters":[)"
                           R"({"type":"eq","key":"department","value":"sales"},)"
                           R"({"type":"or","filters":[{"type":"gte","key":"year","value":2023},)"
                           R"({"type":"in","key":"region","value":["eu","us",3]}]},)"
                           R"({"type":"ne","key":"draft","value":true}]}})");
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  const hub::AttributeFilter& filter = *parsed->request.filter;
  EXPECT_EQ(filter.op, Op::kAnd);
  ASSERT_EQ(filter.filters.size(), 3u);
  EXPECT_EQ(filter.filters[0].op, Op::kEq);
  EXPECT_EQ(filter.filters[0].key, "department");
  EXPECT_EQ(std::get<std::string>(filter.filters[0].value), "sales");
  EXPECT_EQ(filter.filters[1].op, Op::kOr);
  EXPECT_EQ(std::get<double>(filter.filters[1].filters[0].value), 2023);
  EXPECT_EQ(filter.filters[1].filters[1].op, Op::kIn);
  ASSERT_EQ(filter.filters[1].filters[1].values.size(), 3u);
  EXPECT_EQ(std::get<double>(filter.filters[1].filters[1].values[2]), 3);
  EXPECT_EQ(std::get<bool>(filter.filters[2].value), true);
}

TEST_F(VectorStoresCodecTest, BadSearchBodiesNameTheField) {
  EXPECT_EQ(SearchParam(R"({})"), "query");
  EXPECT_EQ(SearchParam(R"({"query":7})"), "query");
  EXPECT_EQ(SearchParam(R"({"query":[]})"), "query");
  EXPECT_EQ(SearchParam(R"({"query":["ok",1]})"), "query[1]");
  EXPECT_EQ(SearchParam(R"({"query":"  "})"), "query");
  EXPECT_EQ(SearchParam(R"({"query":"q","max_num_results":0})"), "max_num_results");
  EXPECT_EQ(SearchParam(R"({"query":"q","max_num_results":51})"), "max_num_results");
  EXPECT_EQ(SearchParam(R"({"query":"q","max_num_results":"5"})"), "max_num_results");
  EXPECT_EQ(SearchParam(R"({"query":"q","ranking_options":{"score_threshold":1.5}})"),
            "ranking_options.score_threshold");
  EXPECT_EQ(SearchParam(R"({"query":"q","ranking_options":{"ranker":"bm42"}})"),
            "ranking_options.ranker");
  EXPECT_EQ(SearchParam(R"({"query":"q","rewrite_query":"yes"})"), "rewrite_query");
  // Filters with wrong types.
  EXPECT_EQ(SearchParam(R"({"query":"q","filters":"department=sales"})"), "filters");
  EXPECT_EQ(SearchParam(R"({"query":"q","filters":{"type":"like","key":"a","value":"b"}})"),
            "filters.type");
  EXPECT_EQ(SearchParam(R"({"query":"q","filters":{"type":"eq","key":"a","value":{"x":1}}})"),
            "filters.value");
  EXPECT_EQ(SearchParam(R"({"query":"q","filters":{"type":"eq","key":"a","value":[1]}})"),
            "filters.value");
  EXPECT_EQ(SearchParam(R"({"query":"q","filters":{"type":"eq","key":"","value":1}})"),
            "filters.key");
  EXPECT_EQ(SearchParam(R"({"query":"q","filters":{"type":"eq","key":5,"value":1}})"),
            "filters.key");
  EXPECT_EQ(SearchParam(R"({"query":"q","filters":{"type":"eq","key":"a"}})"), "filters.value");
  EXPECT_EQ(SearchParam(R"({"query":"q","filters":{"type":"in","key":"a","value":"b"}})"),
            "filters.value");
  EXPECT_EQ(SearchParam(R"({"query":"q","filters":{"type":"in","key":"a","value":[true]}})"),
            "filters.value[0]");
  EXPECT_EQ(SearchParam(R"({"query":"q","filters":{"type":"gt","key":"a","value":false}})"),
            "filters.value");
  EXPECT_EQ(SearchParam(R"({"query":"q","filters":{"type":"and","filters":[]}})"),
            "filters.filters");
  EXPECT_EQ(SearchParam(R"({"query":"q","filters":{"type":"or","filters":[)"
                        R"({"type":"eq","key":"a","value":1},{"type":"eq","value":1}]}})"),
            "filters.filters[1].key");
  // Nesting deeper than 8 levels.
  std::string deep = R"({"type":"eq","key":"a","value":1})";
  for (int i = 0; i < 8; ++i) deep = R"({"type":"and","filters":[)" + deep + "]}";
  EXPECT_FALSE(ParseSearch(parser_, R"({"query":"q","filters":)" + deep + "}").ok());
  EXPECT_EQ(SearchParam("{"), "");
  EXPECT_EQ(SearchParam("[]"), "");
}

TEST_F(VectorStoresCodecTest, AttributesFollowOpenAisLimits) {
  Result<hub::AddFileRequest> added =
      ParseAddFile(parser_, R"({"file_id":"file-a","attributes":{"department":"sales","year":2024,)"
                            R"("public":false},"chunking_strategy":{"type":"static","static":)"
                            R"({"max_chunk_size_tokens":200,"chunk_overlap_tokens":50}}})");
  ASSERT_TRUE(added.ok()) << added.status().ToString();
  EXPECT_EQ(added->file_id, "file-a");
  EXPECT_EQ(std::get<std::string>(added->attributes.at("department")), "sales");
  EXPECT_EQ(std::get<double>(added->attributes.at("year")), 2024);
  EXPECT_EQ(std::get<bool>(added->attributes.at("public")), false);
  EXPECT_EQ(added->chunking.strategy, hub::ChunkingStrategy::kStatic);
  EXPECT_EQ(added->chunking.max_chunk_size_tokens, 200);
  EXPECT_EQ(added->chunking.chunk_overlap_tokens, 50);

  const auto param = [&](std::string_view body) {
    Result<hub::AddFileRequest> parsed = ParseAddFile(parser_, body);
    EXPECT_FALSE(parsed.ok()) << body;
    return parsed.ok() ? "" : ParamOf(parsed.status());
  };
  EXPECT_EQ(param(R"({})"), "file_id");
  EXPECT_EQ(param(R"({"file_id":""})"), "file_id");
  EXPECT_EQ(param(R"({"file_id":"f","attributes":{"a":[1]}})"), "attributes.a");
  EXPECT_EQ(param(R"({"file_id":"f","attributes":{"a":null}})"), "attributes.a");
  EXPECT_EQ(
      param(fmt::format(R"({{"file_id":"f","attributes":{{"a":"{}"}}}})", std::string(513, 'x'))),
      "attributes.a");
  EXPECT_EQ(
      param(fmt::format(R"({{"file_id":"f","attributes":{{"{}":1}}}})", std::string(65, 'k'))),
      "attributes");
  std::string seventeen;
  for (int i = 0; i < 17; ++i) seventeen += fmt::format(R"({}"k{}":{})", i ? "," : "", i, i);
  EXPECT_EQ(param(R"({"file_id":"f","attributes":{)" + seventeen + "}}"), "attributes");
  EXPECT_EQ(param(R"({"file_id":"f","chunking_strategy":{"type":"static","static":)"
                  R"({"max_chunk_size_tokens":50,"chunk_overlap_tokens":0}}})"),
            "chunking_strategy.static.max_chunk_size_tokens");
  EXPECT_EQ(param(R"({"file_id":"f","chunking_strategy":{"type":"static","static":)"
                  R"({"max_chunk_size_tokens":800,"chunk_overlap_tokens":401}}})"),
            "chunking_strategy.static.chunk_overlap_tokens");
  EXPECT_EQ(param(R"({"file_id":"f","chunking_strategy":{"type":"smart"}})"),
            "chunking_strategy.type");
}

TEST_F(VectorStoresCodecTest, StoresAndBatches) {
  Result<hub::CreateStoreRequest> store = ParseCreateStore(
      parser_, R"({"name":"Support","file_ids":["file-a","file-b"],"metadata":{"team":"x"},)"
               R"("expires_after":{"anchor":"last_active_at","days":7}})");
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  EXPECT_EQ(store->name, "Support");
  EXPECT_EQ(store->file_ids.size(), 2u);
  EXPECT_EQ(store->metadata.at("team"), "x");
  EXPECT_EQ(store->expires_after->days, 7);
  EXPECT_EQ(store->chunking.strategy, hub::ChunkingStrategy::kAuto);
  EXPECT_TRUE(ParseCreateStore(parser_, "{}").ok());
  EXPECT_EQ(
      ParamOf(ParseCreateStore(parser_, R"({"expires_after":{"anchor":"x","days":1}})").status()),
      "expires_after.anchor");
  EXPECT_EQ(ParamOf(ParseCreateStore(parser_, R"({"metadata":{"a":1}})").status()), "metadata.a");

  Result<hub::ModifyStoreRequest> cleared = ParseModifyStore(parser_, R"({"expires_after":null})");
  ASSERT_TRUE(cleared.ok());
  ASSERT_TRUE(cleared->expires_after.has_value());
  EXPECT_FALSE(cleared->expires_after->has_value());
  EXPECT_FALSE(cleared->name.has_value());

  Result<hub::CreateBatchRequest> ids =
      ParseCreateBatch(parser_, R"({"file_ids":["file-a","file-b"],"attributes":{"d":"x"}})");
  ASSERT_TRUE(ids.ok());
  ASSERT_EQ(ids->files.size(), 2u);
  EXPECT_EQ(std::get<std::string>(ids->files[1].attributes.at("d")), "x");
  Result<hub::CreateBatchRequest> files = ParseCreateBatch(
      parser_, R"({"files":[{"file_id":"file-a","attributes":{"d":"y"}},{"file_id":"file-b"}]})");
  ASSERT_TRUE(files.ok());
  EXPECT_TRUE(files->files[1].attributes.empty());
  EXPECT_EQ(ParamOf(ParseCreateBatch(parser_, "{}").status()), "file_ids");
  EXPECT_EQ(ParamOf(ParseCreateBatch(parser_, R"({"file_ids":[]})").status()), "file_ids");
  EXPECT_EQ(ParamOf(ParseCreateBatch(parser_, R"({"files":[{"attributes":{}}]})").status()),
            "files[0].file_id");
}

TEST_F(VectorStoresCodecTest, PageQueries) {
  Result<hub::PageRequest> page = ParsePageQuery("limit=5&order=asc&after=vs_1&before=vs%5F9");
  ASSERT_TRUE(page.ok());
  EXPECT_EQ(page->limit, 5);
  EXPECT_FALSE(page->descending);
  EXPECT_EQ(page->after, "vs_1");
  EXPECT_EQ(page->before, "vs_9");
  EXPECT_EQ(ParsePageQuery("").value().limit, 20);
  EXPECT_TRUE(ParsePageQuery("").value().descending);
  EXPECT_EQ(ParamOf(ParsePageQuery("limit=101").status()), "limit");
  EXPECT_EQ(ParamOf(ParsePageQuery("order=up").status()), "order");
  EXPECT_EQ(ParseStatusFilter("filter=failed&limit=2").value(), hub::IngestStatus::kFailed);
  EXPECT_FALSE(ParseStatusFilter("limit=2").value().has_value());
  EXPECT_EQ(ParamOf(ParseStatusFilter("filter=done").status()), "filter");
}

TEST_F(VectorStoresCodecTest, AnswersInOpenAisShapes) {
  hub::VectorStoreInfo store{.id = "vs_1", .name = "", .created_at = 5, .last_active_at = 6};
  store.file_counts = {.in_progress = 1, .total = 1};
  store.status = "in_progress";
  EXPECT_EQ(StoreJson(store),
            R"({"id":"vs_1","object":"vector_store","created_at":5,"name":null,"usage_bytes":0,)"
            R"("file_counts":{"in_progress":1,"completed":0,"failed":0,"cancelled":0,"total":1},)"
            R"("status":"in_progress","last_active_at":6,"metadata":{},"expires_at":null})");

  hub::VectorStoreFileInfo file{.id = "file-a", .vector_store_id = "vs_1", .created_at = 7};
  file.status = hub::IngestStatus::kFailed;
  file.last_error = hub::IngestError{"invalid_file", "broken PDF"};
  file.attributes = {{"year", 2024.0}, {"score", 0.5}, {"draft", true}, {"d", std::string("x")}};
  EXPECT_EQ(FileJson(file),
            R"({"id":"file-a","object":"vector_store.file","usage_bytes":0,"created_at":7,)"
            R"("vector_store_id":"vs_1","status":"failed","last_error":{"code":"invalid_file",)"
            R"("message":"broken PDF"},"chunking_strategy":{"type":"static","static":)"
            R"({"max_chunk_size_tokens":800,"chunk_overlap_tokens":400}},)"
            R"("attributes":{"d":"x","draft":true,"score":0.5,"year":2024}})");
  EXPECT_EQ(StringifyAttributes(file.attributes),
            (std::map<std::string, std::string>{
                {"d", "x"}, {"draft", "true"}, {"score", "0.5"}, {"year", "2024"}}));

  hub::Page<hub::VectorStoreFileInfo> page{.items = {file, file}, .has_more = true};
  const std::string list = FileListJson(page);
  EXPECT_EQ(list.find(R"({"object":"list","data":[{"id":"file-a")"), 0u) << list;
  EXPECT_NE(list.find(R"("first_id":"file-a","last_id":"file-a","has_more":true})"),
            std::string::npos);
  EXPECT_EQ(StoreListJson({}),
            R"({"object":"list","data":[],"first_id":null,"last_id":null,"has_more":false})");

  hub::FileBatchInfo batch{.id = "vsfb_1", .vector_store_id = "vs_1", .created_at = 9};
  EXPECT_EQ(BatchJson(batch),
            R"({"id":"vsfb_1","object":"vector_store.files_batch","created_at":9,)"
            R"("vector_store_id":"vs_1","status":"in_progress","file_counts":{"in_progress":0,)"
            R"("completed":0,"failed":0,"cancelled":0,"total":0}})");
  EXPECT_EQ(DeletedJson("vs_1", "vector_store.deleted"),
            R"({"id":"vs_1","object":"vector_store.deleted","deleted":true})");

  hub::SearchResults results;
  results.hits.push_back({.file_id = "file-a", .filename = "a.txt", .score = 0.5, .text = "t"});
  EXPECT_EQ(SearchPageJson({"q"}, false, results),
            R"({"object":"vector_store.search_results.page","search_query":"q","data":[)"
            R"({"file_id":"file-a","filename":"a.txt","score":0.5,"attributes":{},)"
            R"("content":[{"type":"text","text":"t"}]}],"has_more":false,"next_page":null})");
  EXPECT_NE(SearchPageJson({"q"}, true, {}).find(R"("search_query":["q"])"), std::string::npos);
}

TEST_F(VectorStoresCodecTest, ErrorsUseOpenAisShape) {
  net::HttpResponse response =
      ErrorResponse(InvalidArgument("filters.key: must be a string"), "req_1");
  EXPECT_EQ(response.status, 400);
  EXPECT_EQ(response.body, R"({"error":{"message":"filters.key: must be a string","type":)"
                           R"("invalid_request_error","param":"filters.key","code":null}})");
  EXPECT_EQ(ErrorResponse(NotFound("No vector store found with id 'vs_x'."), "r").status, 404);
  EXPECT_EQ(ParamOf(NotFound("x: y")), "");
  EXPECT_EQ(ParamOf(InvalidArgument("the request body is not JSON: x")), "");
}

}  // namespace
}  // namespace rampart::api::vector_stores
