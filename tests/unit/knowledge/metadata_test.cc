#include "knowledge/index/metadata.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

#include "json/reader.h"

namespace rampart::knowledge {
namespace {

Result<Metadata> Parse(std::string_view text) {
  static thread_local json::Parser parser;
  auto value = parser.Parse(text);
  if (!value.ok()) return value.status();
  return ParseMetadata(*value, "vectors[0].metadata");
}

void ExpectInvalid(const Status& status, std::string_view fragment) {
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument) << status.ToString();
  EXPECT_NE(status.message().find(fragment), std::string::npos) << status.message();
}

TEST(MetadataTest, ParsesFlatValuesSortedAndWritesThemBack) {
  auto metadata = Parse(R"({"year": 2020, "genre": "noir", "score": 0.5, "ok": true,
                            "tags": ["a", "b"], "none": []})");
  ASSERT_TRUE(metadata.ok()) << metadata.status().ToString();
  ASSERT_EQ(metadata->size(), 6u);
  EXPECT_EQ((*metadata)[0].first, "genre");
  EXPECT_EQ(std::get<double>((*metadata)[5].second), 2020);
  json::Writer writer;
  WriteMetadata(*metadata, writer);
  EXPECT_EQ(writer.Take(),
            R"({"genre":"noir","none":[],"ok":true,"score":0.5,"tags":["a","b"],"year":2020})");
}

TEST(MetadataTest, RefusesWhatPineconeRefuses) {
  ExpectInvalid(Parse(R"({"genre": null})").status(),
                "vectors[0].metadata.genre: metadata values cannot be null");
  ExpectInvalid(Parse(R"({"nested": {"a": 1}})").status(),
                "vectors[0].metadata.nested: metadata cannot nest objects");
  ExpectInvalid(Parse(R"({"tags": ["a", 1]})").status(),
                "vectors[0].metadata.tags[1]: metadata lists hold only strings, not number");
  ExpectInvalid(Parse(R"([1])").status(), "metadata must be an object, not array");
  ExpectInvalid(Parse(R"({"a": 1, "a": 2})").status(), "metadata key 'a' appears more than once");
  std::string big = fmt::format(R"({{"text": "{}"}})", std::string(kMaxMetadataBytes, 'x'));
  ExpectInvalid(Parse(big).status(), "over the limit of 40960 bytes");
  std::string fits = fmt::format(R"({{"t":"{}"}})", std::string(kMaxMetadataBytes - 8, 'x'));
  EXPECT_TRUE(Parse(fits).ok());
}

VectorRecord Valid() {
  VectorRecord record;
  record.id.assign(1, 'a');
  record.values = {1, 2, 3};
  record.sparse.indices = {1, 5};
  record.sparse.values = {0.5f, 0.25f};
  record.metadata = {{"genre", std::string("noir")}};
  return record;
}

TEST(MetadataTest, ValidateRecordNamesEachProblem) {
  EXPECT_TRUE(ValidateRecord(Valid(), 3, Metric::kCosine).ok());
  VectorRecord record = Valid();
  record.values = {1, 2};
  ExpectInvalid(ValidateRecord(record, 3, Metric::kCosine),
                "values: vector dimension 2 does not match the dimension of the index 3");
  record = Valid();
  record.values[1] = std::numeric_limits<float>::quiet_NaN();
  ExpectInvalid(ValidateRecord(record, 3, Metric::kCosine), "values[1]: values must be finite");
  record.values[1] = std::numeric_limits<float>::infinity();
  ExpectInvalid(ValidateRecord(record, 3, Metric::kCosine), "values[1]: values must be finite");
  record = Valid();
  record.values = {0, 0, 0};
  ExpectInvalid(ValidateRecord(record, 3, Metric::kCosine), "at least one non-zero value");
  EXPECT_TRUE(ValidateRecord(record, 3, Metric::kEuclidean).ok());
  record = Valid();
  record.id = "";
  ExpectInvalid(ValidateRecord(record, 3, Metric::kCosine), "id: must not be empty");
  record.id = std::string(kMaxIdBytes + 1, 'i');
  ExpectInvalid(ValidateRecord(record, 3, Metric::kCosine), "id: 513 bytes, over the limit");
  record.id = std::string(kMaxIdBytes, 'i');
  EXPECT_TRUE(ValidateRecord(record, 3, Metric::kCosine).ok());
  record = Valid();
  record.sparse.indices = {5, 5};
  ExpectInvalid(ValidateRecord(record, 3, Metric::kDotProduct),
                "sparseValues.indices[1]: indices must be strictly increasing");
  record.sparse.indices = {1};
  ExpectInvalid(ValidateRecord(record, 3, Metric::kDotProduct),
                "indices (1) and values (2) must have the same length");
  record = Valid();
  record.sparse.values[0] = std::numeric_limits<float>::infinity();
  ExpectInvalid(ValidateRecord(record, 3, Metric::kDotProduct), "sparseValues.values[0]");
  record = Valid();
  record.sparse.indices.resize(kMaxSparseValues + 1);
  record.sparse.values.resize(kMaxSparseValues + 1);
  for (uint32_t i = 0; i <= kMaxSparseValues; ++i) record.sparse.indices[i] = i;
  ExpectInvalid(ValidateRecord(record, 3, Metric::kDotProduct), "over the limit of 2048");
  record = Valid();
  record.metadata = {{"b", 1.0}, {"a", 2.0}};
  ExpectInvalid(ValidateRecord(record, 3, Metric::kCosine), "keys must be unique");
  record.metadata = {{"a", std::numeric_limits<double>::infinity()}};
  ExpectInvalid(ValidateRecord(record, 3, Metric::kCosine), "metadata.a: numbers must be finite");
  record.metadata = {{"a", std::string(kMaxMetadataBytes, 'x')}};
  ExpectInvalid(ValidateRecord(record, 3, Metric::kCosine), "metadata: 40968 bytes");
}

}  // namespace
}  // namespace rampart::knowledge
