#include "gateway/knowledge.h"

#include <fmt/format.h>

#include "json/reader.h"
#include "json/writer.h"
#include "store/store.h"

namespace rampart::gateway {
namespace {

constexpr std::string_view kInstruction =
    "Answer the user's question using only the numbered sources below. Cite every source you "
    "use by its number in square brackets, like [1] or [2][3], right after the statement it "
    "supports. If the sources do not answer the question, say that you do not know rather than "
    "answering from anything else.";

// One parser per thread (answers are decorated on HTTP client threads, bodies built on the
// knowledge workers).
json::Parser& ThreadParser() {
  thread_local json::Parser parser;
  return parser;
}

std::string AttributeText(const knowledge::hub::AttributeValue& value) {
  if (const auto* text = std::get_if<std::string>(&value)) return *text;
  if (const auto* flag = std::get_if<bool>(&value)) return *flag ? "true" : "false";
  return fmt::format("{}", std::get<double>(value));
}

void WriteCitations(json::Writer& writer, const KnowledgeSources& sources) {
  writer.Key("citations");
  writer.StartArray();
  for (const auto& hit : sources.hits) writer.String(KnowledgeSourceUrl(sources.vector_store, hit));
  writer.EndArray();
  writer.Key("search_results");
  writer.StartArray();
  for (const auto& hit : sources.hits) {
    writer.StartObject();
    writer.Key("title");
    writer.String(hit.heading_path.empty() ? hit.filename
                                           : hit.filename + " > " + hit.heading_path);
    writer.Key("url");
    writer.String(KnowledgeSourceUrl(sources.vector_store, hit));
    writer.Key("date");
    writer.Null();
    writer.Key("snippet");
    writer.String(hit.text);
    writer.EndObject();
  }
  writer.EndArray();
}

void WriteHeader(json::Writer& writer, std::string_view id, std::string_view object,
                 std::string_view model, int64_t created) {
  writer.Key("id");
  writer.String(id);
  writer.Key("object");
  writer.String(object);
  writer.Key("created");
  writer.Int64(created);
  writer.Key("model");
  writer.String(model);
}

void WriteZeroUsage(json::Writer& writer) {
  writer.Key("usage");
  writer.StartObject();
  for (std::string_view name : {"prompt_tokens", "completion_tokens", "total_tokens"}) {
    writer.Key(name);
    writer.Int64(0);
  }
  writer.EndObject();
}

}  // namespace

std::string KnowledgeSourceUrl(std::string_view vector_store,
                               const knowledge::hub::SearchHit& hit) {
  return fmt::format("rampart://vector_stores/{}/files/{}#chunk-{}", vector_store, hit.file_id,
                     hit.chunk_index);
}

std::string KnowledgePrompt(const KnowledgeSources& sources) {
  std::string prompt(kInstruction);
  prompt += "\n\nSources:\n";
  int number = 0;
  for (const auto& hit : sources.hits) {
    prompt += fmt::format("[{}] {}", ++number, hit.filename);
    if (!hit.heading_path.empty()) prompt.append(" > ").append(hit.heading_path);
    prompt += ": ";
    prompt += hit.text;
    prompt += '\n';
  }
  return prompt;
}

Result<std::string> KnowledgeRequestBody(std::string_view body, std::string_view system_prompt) {
  ASSIGN_OR_RETURN(json::Value root, ThreadParser().Parse(body));
  if (!root.IsObject()) return InvalidArgument("the request is not a JSON object");
  const auto messages = root.Find("messages");
  if (!messages || !messages->IsArray()) return InvalidArgument("'messages' must be an array");
  json::Writer writer;
  writer.Reserve(body.size() + system_prompt.size() + 64);
  writer.StartObject();
  for (auto [key, element] : root.Object()) {
    writer.Key(key);
    if (key != "messages") {
      writer.Raw(simdjson::minify(element));
      continue;
    }
    writer.StartArray();
    writer.StartObject();
    writer.Key("role");
    writer.String("system");
    writer.Key("content");
    writer.String(system_prompt);
    writer.EndObject();
    for (simdjson::dom::element message : messages->Array()) {
      writer.Raw(simdjson::minify(message));
    }
    writer.EndArray();
  }
  writer.EndObject();
  return writer.Take();
}

Result<std::string> WithCitations(std::string_view object, const KnowledgeSources& sources) {
  ASSIGN_OR_RETURN(json::Value root, ThreadParser().Parse(object));
  if (!root.IsObject()) return InvalidArgument("the answer is not a JSON object");
  json::Writer writer;
  writer.Reserve(object.size() + 256 * (sources.hits.size() + 1));
  writer.StartObject();
  for (auto [key, element] : root.Object()) {
    if (key == "citations" || key == "search_results") continue;
    writer.Key(key);
    writer.Raw(simdjson::minify(element));
  }
  WriteCitations(writer, sources);
  writer.EndObject();
  return writer.Take();
}

std::string CitationsChunk(std::string_view id, std::string_view model, int64_t created,
                           const KnowledgeSources& sources) {
  json::Writer writer;
  writer.StartObject();
  WriteHeader(writer, id, "chat.completion.chunk", model, created);
  writer.Key("choices");
  writer.StartArray();
  writer.EndArray();
  WriteCitations(writer, sources);
  writer.EndObject();
  return writer.Take();
}

std::string NoSourceAnswer(std::string_view id, std::string_view model, int64_t created) {
  json::Writer writer;
  writer.StartObject();
  WriteHeader(writer, id, "chat.completion", model, created);
  writer.Key("choices");
  writer.StartArray();
  writer.StartObject();
  writer.Key("index");
  writer.Int64(0);
  writer.Key("message");
  writer.StartObject();
  writer.Key("role");
  writer.String("assistant");
  writer.Key("content");
  writer.String(kNoSourceAnswer);
  writer.EndObject();
  writer.Key("finish_reason");
  writer.String("stop");
  writer.EndObject();
  writer.EndArray();
  WriteZeroUsage(writer);
  WriteCitations(writer, KnowledgeSources{});
  writer.EndObject();
  return writer.Take();
}

std::vector<std::string> NoSourceStream(std::string_view id, std::string_view model,
                                        int64_t created, bool include_usage) {
  std::vector<std::string> events;
  const auto chunk = [&](bool first) {
    json::Writer writer;
    writer.StartObject();
    WriteHeader(writer, id, "chat.completion.chunk", model, created);
    writer.Key("choices");
    writer.StartArray();
    writer.StartObject();
    writer.Key("index");
    writer.Int64(0);
    writer.Key("delta");
    writer.StartObject();
    if (first) {
      writer.Key("role");
      writer.String("assistant");
      writer.Key("content");
      writer.String(kNoSourceAnswer);
    }
    writer.EndObject();
    writer.Key("finish_reason");
    if (first) {
      writer.Null();
    } else {
      writer.String("stop");
    }
    writer.EndObject();
    writer.EndArray();
    if (!first) WriteCitations(writer, KnowledgeSources{});
    writer.EndObject();
    return writer.Take();
  };
  events.push_back(chunk(true));
  events.push_back(chunk(false));
  if (include_usage) {
    json::Writer writer;
    writer.StartObject();
    WriteHeader(writer, id, "chat.completion.chunk", model, created);
    writer.Key("choices");
    writer.StartArray();
    writer.EndArray();
    WriteZeroUsage(writer);
    writer.EndObject();
    events.push_back(writer.Take());
  }
  return events;
}

std::function<bool(const knowledge::hub::VectorStoreFileInfo&)> KnowledgeMayRead(
    const policy::AccessControl* access, const identity::Identity& caller,
    std::string_view source_address) {
  if (access == nullptr || !access->enforcing()) return nullptr;
  return [access, caller,
          source = std::string(source_address)](const knowledge::hub::VectorStoreFileInfo& file) {
    store::Attributes attributes;
    for (const auto& [key, value] : file.attributes) attributes.emplace(key, AttributeText(value));
    const policy::Decision decision = access->Authorise(
        caller, "files:read",
        policy::Resource{.type = "file", .name = file.id, .attributes = &attributes}, source);
    return decision.allowed;
  };
}

}  // namespace rampart::gateway
