#include "gateway/embedder.h"

#include <algorithm>
#include <future>

#include "gateway/local_target.h"
#include "gateway/openai_response.h"
#include "json/reader.h"
#include "json/writer.h"

namespace rampart::gateway {
namespace {

using Vectors = std::vector<std::vector<float>>;
using Clock = std::chrono::steady_clock;

// The first target with a local model, or "".
std::string FirstLocalTarget(const Runtime& runtime) {
  for (const TargetConfig& target : runtime.config.targets) {
    if (!target.local_model.empty()) return target.name;
  }
  return {};
}

// The request body an upstream gets: {"model","input":[...],"encoding_format":"float"}.
std::string UpstreamEmbeddingsBody(std::string_view model, const std::vector<std::string>& texts) {
  json::Writer writer;
  writer.StartObject();
  writer.Key("model");
  writer.String(model);
  writer.Key("input");
  writer.StartArray();
  for (const std::string& text : texts) writer.String(text);
  writer.EndArray();
  writer.Key("encoding_format");
  writer.String("float");
  writer.EndObject();
  return writer.Take();
}

// One answer that may come after its caller stopped waiting.
struct Pending {
  std::promise<Result<std::string>> promise;
};

}  // namespace

Result<std::vector<std::vector<float>>> ParseEmbeddingsAnswer(std::string_view body, size_t count) {
  json::Parser parser;
  Result<json::Value> root = parser.Parse(body);
  if (!root.ok()) return InvalidArgument("the embeddings answer is not JSON");
  std::optional<json::Value> data = root->Find("data");
  if (!data || !data->IsArray()) return InvalidArgument("the embeddings answer has no data");
  Vectors vectors(count);
  size_t seen = 0;
  for (simdjson::dom::element element : data->Array()) {
    const json::Value item(element);
    std::optional<json::Value> index = item.Find("index");
    std::optional<json::Value> embedding = item.Find("embedding");
    size_t at = seen;
    if (index) {
      Result<uint64_t> given = index->GetUint64("index");
      at = given.ok() ? static_cast<size_t>(*given) : count;
    }
    if (at >= count || !embedding || !embedding->IsArray() || !vectors[at].empty()) {
      return InvalidArgument("the embeddings answer's data[{}] is not a new embedding", seen);
    }
    for (simdjson::dom::element number : embedding->Array()) {
      Result<double> value = json::Value(number).GetDouble("embedding");
      if (!value.ok()) return InvalidArgument("the embeddings answer holds a non-number");
      vectors[at].push_back(static_cast<float>(*value));
    }
    ++seen;
  }
  if (seen != count) {
    return InvalidArgument("the embeddings answer holds {} vectors for {} texts", seen, count);
  }
  return vectors;
}

Result<std::unique_ptr<GatewayEmbedder>> GatewayEmbedder::Create(const Gateway& gateway,
                                                                 EmbedderOptions options) {
  if (options.batch_size == 0) options.batch_size = 1;
  if (options.target.empty()) {
    options.target = FirstLocalTarget(*gateway.CurrentRuntime());
    if (options.target.empty()) {
      return NotFound(
          "no embedding target: the gateway has no target with a local_model; name one for "
          "knowledge.vector_stores.embedding_target");
    }
  }
  if (gateway.CurrentRuntime()->FindTarget(options.target) == nullptr) {
    return NotFound("the gateway has no target '{}'", options.target);
  }
  std::unique_ptr<GatewayEmbedder> embedder(new GatewayEmbedder(gateway, std::move(options)));
  Result<Vectors> probe = embedder->Embed({"dimension probe"});
  if (!probe.ok()) {
    return probe.status().WithContext(
        fmt::format("embedding with target '{}'", embedder->options_.target));
  }
  embedder->dimension_ = probe->front().size();
  if (embedder->dimension_ == 0) {
    return InvalidArgument("target '{}' answers empty embeddings", embedder->options_.target);
  }
  return embedder;
}

std::string GatewayEmbedder::name() const {
  return fmt::format("{}/{}", options_.target, dimension_);
}

Result<std::vector<std::vector<float>>> GatewayEmbedder::Embed(
    const std::vector<std::string>& texts) {
  const Clock::time_point until = Clock::now() + options_.deadline;
  Vectors vectors;
  vectors.reserve(texts.size());
  for (size_t begin = 0; begin < texts.size(); begin += options_.batch_size) {
    const size_t end = std::min(texts.size(), begin + options_.batch_size);
    ASSIGN_OR_RETURN(Vectors batch,
                     EmbedBatch(std::vector<std::string>(texts.begin() + static_cast<long>(begin),
                                                         texts.begin() + static_cast<long>(end)),
                                until));
    for (std::vector<float>& vector : batch) {
      if (dimension_ != 0 && vector.size() != dimension_) {
        return Internal("target '{}' answered {} values where the store's vectors have {}",
                        options_.target, vector.size(), dimension_);
      }
      vectors.push_back(std::move(vector));
    }
  }
  return vectors;
}

Result<std::vector<std::vector<float>>> GatewayEmbedder::EmbedBatch(
    std::vector<std::string> texts, std::chrono::steady_clock::time_point until) {
  const size_t count = texts.size();
  const std::shared_ptr<const Runtime> runtime = gateway_.CurrentRuntime();
  const TargetRuntime* target = runtime->FindTarget(options_.target);
  if (target == nullptr) return NotFound("the gateway has no target '{}'", options_.target);
  // Waits for one answer body, or the deadline.
  const auto wait = [&](std::future<Result<std::string>>& future) -> Result<std::string> {
    if (future.wait_until(until) != std::future_status::ready) {
      return Unavailable("target '{}' did not answer in time", options_.target);
    }
    return future.get();
  };

  if (!target->config->local_model.empty()) {
    serve::InferenceServer* server = gateway_.local_server();
    if (server == nullptr) return Unavailable("the gateway runs without local models");
    OpenAiRequest request;
    request.operation = Operation::kEmbeddings;
    request.model = options_.target;
    request.inputs = std::move(texts);
    request.encoding_format = EncodingFormat::kFloat;
    auto pending = std::make_shared<Pending>();
    std::future<Result<std::string>> future = pending->promise.get_future();
    LocalEmbeddings(*server, target->config->local_model, request, options_.target, "",
                    [pending](Result<LocalAnswer> answer) {
                      pending->promise.set_value(answer.ok() ? Result<std::string>(answer->body)
                                                             : answer.status());
                    });
    ASSIGN_OR_RETURN(std::string body, wait(future));
    return ParseEmbeddingsAnswer(body, count);
  }

  // Upstream endpoints, higher priority first; the first good answer wins.
  std::vector<size_t> order(target->members.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return target->config->endpoints[a].priority > target->config->endpoints[b].priority;
  });
  Status last = Unavailable("target '{}' has no endpoints", options_.target);
  for (size_t index : order) {
    const UpstreamRuntime* upstream = target->members[index];
    const EndpointConfig& endpoint = target->config->endpoints[index];
    if (upstream == nullptr || upstream->client == nullptr) continue;
    net::HttpClientRequest call;
    call.method = "POST";
    call.target = std::string(OperationPath(Operation::kEmbeddings));
    call.headers = upstream->headers;
    call.headers.Add("content-type", "application/json");
    call.body = UpstreamEmbeddingsBody(
        endpoint.model.empty() ? std::string_view(options_.target) : endpoint.model, texts);
    const UpstreamConfig& config = upstream->state->config();
    call.timeouts.connect = config.connect_timeout;
    call.timeouts.first_byte = config.first_byte_timeout;
    call.timeouts.idle = config.idle_timeout;
    auto pending = std::make_shared<Pending>();
    std::future<Result<std::string>> future = pending->promise.get_future();
    upstream->client->Fetch(
        upstream->endpoint, std::move(call), [pending](net::HttpFetchResult result) {
          if (!result.status.ok()) {
            pending->promise.set_value(result.status);
          } else if (result.response.status / 100 != 2) {
            pending->promise.set_value(
                Unavailable("HTTP {}: {}", result.response.status,
                            UpstreamErrorMessage(result.response.body).value_or("")));
          } else {
            pending->promise.set_value(std::move(result.response.body));
          }
        });
    Result<std::string> body = wait(future);
    if (body.ok()) return ParseEmbeddingsAnswer(*body, count);
    last = body.status().WithContext(fmt::format("upstream '{}'", endpoint.upstream));
    if (Clock::now() >= until) break;
  }
  return last;
}

}  // namespace rampart::gateway
