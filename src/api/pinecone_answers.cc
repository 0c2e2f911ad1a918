// The data plane's answers in Pinecone's shapes (pinecone_codec.h).

#include <span>

#include "api/pinecone_codec.h"
#include "knowledge/index/metadata.h"

namespace rampart::api::pinecone {
namespace {

void WriteValues(json::Writer& writer, std::span<const float> values) {
  writer.StartArray();
  for (float value : values) writer.Float(value);
  writer.EndArray();
}

void WriteSparse(json::Writer& writer, const knowledge::SparseValues& sparse) {
  writer.StartObject();
  writer.Key("indices");
  writer.StartArray();
  for (uint32_t index : sparse.indices) writer.Uint64(index);
  writer.EndArray();
  writer.Key("values");
  WriteValues(writer, sparse.values);
  writer.EndObject();
}

void WriteUsage(json::Writer& writer, uint64_t read_units) {
  writer.Key("usage");
  writer.StartObject();
  writer.Key("readUnits");
  writer.Uint64(read_units);
  writer.EndObject();
}

}  // namespace

// ---- data plane answers -------------------------------------------------------------------

std::string UpsertAnswer(size_t upserted) {
  json::Writer writer;
  writer.StartObject();
  writer.Key("upsertedCount");
  writer.Uint64(upserted);
  writer.EndObject();
  return writer.Take();
}

std::string QueryAnswer(const knowledge::QueryResult& result, std::string_view name_space) {
  json::Writer writer;
  writer.StartObject();
  writer.Key("matches");
  writer.StartArray();
  for (const knowledge::Match& match : result.matches) {
    writer.StartObject();
    writer.Key("id");
    writer.String(match.id);
    writer.Key("score");
    writer.Float(match.score);
    if (match.values) {
      writer.Key("values");
      WriteValues(writer, *match.values);
    }
    if (match.sparse && !match.sparse->empty()) {
      writer.Key("sparseValues");
      WriteSparse(writer, *match.sparse);
    }
    if (match.metadata) {
      writer.Key("metadata");
      knowledge::WriteMetadata(*match.metadata, writer);
    }
    writer.EndObject();
  }
  writer.EndArray();
  writer.Key("namespace");
  writer.String(name_space);
  WriteUsage(writer, 1 + result.candidates_scored / 10000);
  writer.EndObject();
  return writer.Take();
}

std::string FetchAnswer(std::span<const knowledge::VectorRecord> records,
                        std::string_view name_space) {
  json::Writer writer;
  writer.StartObject();
  writer.Key("vectors");
  writer.StartObject();
  for (const knowledge::VectorRecord& record : records) {
    writer.Key(record.id);
    writer.StartObject();
    writer.Key("id");
    writer.String(record.id);
    writer.Key("values");
    WriteValues(writer, record.values);
    if (!record.sparse.empty()) {
      writer.Key("sparseValues");
      WriteSparse(writer, record.sparse);
    }
    if (!record.metadata.empty()) {
      writer.Key("metadata");
      knowledge::WriteMetadata(record.metadata, writer);
    }
    writer.EndObject();
  }
  writer.EndObject();
  writer.Key("namespace");
  writer.String(name_space);
  WriteUsage(writer, 1 + records.size() / 10);
  writer.EndObject();
  return writer.Take();
}

std::string StatsAnswer(const knowledge::IndexStats& stats) {
  json::Writer writer;
  writer.StartObject();
  writer.Key("namespaces");
  writer.StartObject();
  for (const knowledge::NamespaceStats& name_space : stats.namespaces) {
    writer.Key(ReportedNamespace(name_space.name_space));
    writer.StartObject();
    writer.Key("vectorCount");
    writer.Uint64(name_space.vector_count);
    writer.EndObject();
  }
  writer.EndObject();
  writer.Key("dimension");
  writer.Uint64(stats.dimension);
  writer.Key("indexFullness");
  writer.Double(stats.fullness);
  writer.Key("totalVectorCount");
  writer.Uint64(stats.total_vector_count);
  writer.Key("metric");
  writer.String(knowledge::MetricName(stats.metric));
  writer.Key("vectorType");
  writer.String("dense");
  writer.EndObject();
  return writer.Take();
}

std::string ListAnswer(const knowledge::ListPage& page, std::string_view name_space) {
  json::Writer writer;
  writer.StartObject();
  writer.Key("vectors");
  writer.StartArray();
  for (const std::string& id : page.ids) {
    writer.StartObject();
    writer.Key("id");
    writer.String(id);
    writer.EndObject();
  }
  writer.EndArray();
  if (!page.next_token.empty()) {
    writer.Key("pagination");
    writer.StartObject();
    writer.Key("next");
    writer.String(page.next_token);
    writer.EndObject();
  }
  writer.Key("namespace");
  writer.String(name_space);
  WriteUsage(writer, 1);
  writer.EndObject();
  return writer.Take();
}

}  // namespace rampart::api::pinecone
