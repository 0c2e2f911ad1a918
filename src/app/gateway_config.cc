#include "app/gateway_config.h"

#include <cstdlib>
#include <future>
#include <set>

#include <fmt/ranges.h>
#include <yaml-cpp/yaml.h>

#include "app/yaml_fields.h"
#include "core/logging.h"
#include "json/reader.h"
#include "net/http_client.h"

namespace rampart::app {
namespace {

using gateway::GatewayConfig;

using yaml::CheckKeys;
using yaml::Read;
using yaml::ReadList;

Status ReadMillis(const YAML::Node& node, std::string_view key, std::string_view where,
                  std::chrono::milliseconds& into) {
  int64_t millis = into.count();
  RETURN_IF_ERROR(Read(node, key, where, millis));
  into = std::chrono::milliseconds(millis);
  return Status::Ok();
}

Status ReadUpstream(const YAML::Node& node, std::string_view where,
                    gateway::UpstreamConfig& upstream) {
  RETURN_IF_ERROR(
      CheckKeys(node, where,
                {"name", "url", "engine", "api_key", "api_key_env", "headers", "health_path",
                 "ca_file", "cert_file", "key_file", "connect_timeout_ms", "first_byte_timeout_ms",
                 "idle_timeout_ms", "max_connections", "ask_stream_usage"}));
  RETURN_IF_ERROR(Read(node, "name", where, upstream.name));
  RETURN_IF_ERROR(Read(node, "url", where, upstream.url));
  std::string engine = "openai";
  RETURN_IF_ERROR(Read(node, "engine", where, engine));
  Result<gateway::Engine> parsed = gateway::ParseEngine(engine);
  if (!parsed.ok()) return parsed.status().WithContext(where);
  upstream.engine = *parsed;
  RETURN_IF_ERROR(Read(node, "api_key", where, upstream.api_key));
  std::string key_variable;
  RETURN_IF_ERROR(Read(node, "api_key_env", where, key_variable));
  if (!key_variable.empty()) {
    const char* value = std::getenv(key_variable.c_str());
    if (value == nullptr) {
      return InvalidArgument("{}: api_key_env names '{}', which is not set", where, key_variable);
    }
    upstream.api_key = value;
  }
  RETURN_IF_ERROR(Read(node, "headers", where, upstream.headers));
  RETURN_IF_ERROR(Read(node, "health_path", where, upstream.health_path));
  RETURN_IF_ERROR(Read(node, "ca_file", where, upstream.ca_file));
  RETURN_IF_ERROR(Read(node, "cert_file", where, upstream.cert_file));
  RETURN_IF_ERROR(Read(node, "key_file", where, upstream.key_file));
  RETURN_IF_ERROR(ReadMillis(node, "connect_timeout_ms", where, upstream.connect_timeout));
  RETURN_IF_ERROR(ReadMillis(node, "first_byte_timeout_ms", where, upstream.first_byte_timeout));
  RETURN_IF_ERROR(ReadMillis(node, "idle_timeout_ms", where, upstream.idle_timeout));
  RETURN_IF_ERROR(Read(node, "ask_stream_usage", where, upstream.ask_stream_usage));
  return Read(node, "max_connections", where, upstream.max_connections);
}

Status ReadEndpoint(const YAML::Node& node, std::string_view where,
                    gateway::EndpointConfig& endpoint) {
  RETURN_IF_ERROR(CheckKeys(node, where, {"upstream", "model", "priority", "weight"}));
  RETURN_IF_ERROR(Read(node, "upstream", where, endpoint.upstream));
  RETURN_IF_ERROR(Read(node, "model", where, endpoint.model));
  RETURN_IF_ERROR(Read(node, "priority", where, endpoint.priority));
  return Read(node, "weight", where, endpoint.weight);
}

Status ReadTarget(const YAML::Node& node, std::string_view where, gateway::TargetConfig& target) {
  RETURN_IF_ERROR(CheckKeys(node, where, {"name", "endpoints", "local_model", "owned_by"}));
  RETURN_IF_ERROR(Read(node, "name", where, target.name));
  RETURN_IF_ERROR(Read(node, "local_model", where, target.local_model));
  RETURN_IF_ERROR(Read(node, "owned_by", where, target.owned_by));
  return ReadList<gateway::EndpointConfig>(node, "endpoints", where, target.endpoints,
                                           ReadEndpoint);
}

// A guard policy's keys over `policy` (which holds the defaults a route's guard starts from).
Status ReadGuardPolicy(const YAML::Node& node, std::string_view where,
                       gateway::GuardPolicy& policy) {
  RETURN_IF_ERROR(CheckKeys(node, where, {"input", "output", "block", "operators", "types"}));
  for (auto [key, mode] :
       {std::pair{"input", &policy.input}, std::pair{"output", &policy.output}}) {
    std::string name(gateway::GuardModeName(*mode));
    RETURN_IF_ERROR(Read(node, key, where, name));
    Result<gateway::GuardMode> parsed = gateway::ParseGuardMode(name);
    if (!parsed.ok()) return parsed.status().WithContext(fmt::format("{}.{}", where, key));
    *mode = *parsed;
  }
  RETURN_IF_ERROR(Read(node, "block", where, policy.block));
  RETURN_IF_ERROR(Read(node, "types", where, policy.types));
  std::map<std::string, std::string> operators;
  RETURN_IF_ERROR(Read(node, "operators", where, operators));
  for (const auto& [type, text] : operators) {
    Result<guard::Operator> op = guard::ParseOperator(text);
    if (!op.ok()) return op.status().WithContext(fmt::format("{}.operators.{}", where, type));
    policy.operators[type] = *op;
  }
  return Status::Ok();
}

Status ReadGuard(const YAML::Node& node, gateway::GuardConfig& guard) {
  constexpr std::string_view where = "gateway.guard";
  RETURN_IF_ERROR(CheckKeys(
      node, where,
      {"key_file", "internal_domains", "internal_path_roots", "defaults", "max_text_bytes"}));
  RETURN_IF_ERROR(Read(node, "key_file", where, guard.key_file));
  RETURN_IF_ERROR(Read(node, "internal_domains", where, guard.internal_domains));
  RETURN_IF_ERROR(Read(node, "internal_path_roots", where, guard.internal_path_roots));
  RETURN_IF_ERROR(Read(node, "max_text_bytes", where, guard.max_text_bytes));
  if (const YAML::Node defaults = node["defaults"]) {
    RETURN_IF_ERROR(ReadGuardPolicy(defaults, "gateway.guard.defaults", guard.defaults));
  }
  return Status::Ok();
}

Status ReadRoute(const YAML::Node& node, std::string_view where, gateway::RouteConfig& route,
                 const gateway::GuardPolicy& guard_defaults) {
  RETURN_IF_ERROR(CheckKeys(
      node, where, {"name", "match", "target", "fallbacks", "canary", "guard", "knowledge"}));
  if (const YAML::Node knowledge = node["knowledge"]) {
    const std::string at = fmt::format("{}.knowledge", where);
    RETURN_IF_ERROR(
        CheckKeys(knowledge, at, {"vector_store", "target", "max_passages", "score_threshold"}));
    gateway::KnowledgeRouteConfig config;
    RETURN_IF_ERROR(Read(knowledge, "vector_store", at, config.vector_store));
    RETURN_IF_ERROR(Read(knowledge, "target", at, config.target));
    RETURN_IF_ERROR(Read(knowledge, "max_passages", at, config.max_passages));
    RETURN_IF_ERROR(Read(knowledge, "score_threshold", at, config.score_threshold));
    route.knowledge = std::move(config);
  }
  if (const YAML::Node guard = node["guard"]) {
    gateway::GuardPolicy policy = guard_defaults;  // keys not given keep the defaults
    RETURN_IF_ERROR(ReadGuardPolicy(guard, fmt::format("{}.guard", where), policy));
    route.guard = std::move(policy);
  }
  RETURN_IF_ERROR(Read(node, "name", where, route.name));
  RETURN_IF_ERROR(Read(node, "target", where, route.target));
  RETURN_IF_ERROR(Read(node, "fallbacks", where, route.fallbacks));
  if (const YAML::Node match = node["match"]) {
    const std::string at = fmt::format("{}.match", where);
    RETURN_IF_ERROR(CheckKeys(match, at, {"models", "headers", "keywords", "pattern"}));
    RETURN_IF_ERROR(Read(match, "models", at, route.match.models));
    std::map<std::string, std::string> headers;
    RETURN_IF_ERROR(Read(match, "headers", at, headers));
    for (auto& [name, value] : headers) {
      std::string lower = name;
      for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      route.match.headers.emplace(std::move(lower), std::move(value));
    }
    RETURN_IF_ERROR(Read(match, "keywords", at, route.match.keywords));
    RETURN_IF_ERROR(Read(match, "pattern", at, route.match.pattern));
  }
  if (const YAML::Node canary = node["canary"]) {
    const std::string at = fmt::format("{}.canary", where);
    RETURN_IF_ERROR(CheckKeys(
        canary, at, {"target", "stages", "min_requests", "max_error_rate", "max_p99_ratio"}));
    gateway::CanaryConfig config;
    RETURN_IF_ERROR(Read(canary, "target", at, config.target));
    RETURN_IF_ERROR(Read(canary, "stages", at, config.stages_percent));
    RETURN_IF_ERROR(Read(canary, "min_requests", at, config.min_requests));
    RETURN_IF_ERROR(Read(canary, "max_error_rate", at, config.max_error_rate));
    RETURN_IF_ERROR(Read(canary, "max_p99_ratio", at, config.max_p99_ratio));
    route.canary = std::move(config);
  }
  return Status::Ok();
}

Status ReadGateway(const YAML::Node& node, GatewayConfig& config) {
  constexpr std::string_view where = "gateway";
  RETURN_IF_ERROR(CheckKeys(
      node, where,
      {"upstreams", "models", "routes", "health_check", "ejection", "retry", "keep_alive_ms",
       "max_n", "max_response_bytes", "max_stream_queue_bytes", "guard", "knowledge"}));
  if (const YAML::Node guard = node["guard"]) RETURN_IF_ERROR(ReadGuard(guard, config.guard));
  if (const YAML::Node knowledge = node["knowledge"]) {
    constexpr std::string_view at = "gateway.knowledge";
    RETURN_IF_ERROR(CheckKeys(knowledge, at, {"target", "max_passages", "score_threshold"}));
    RETURN_IF_ERROR(Read(knowledge, "target", at, config.knowledge.target));
    RETURN_IF_ERROR(Read(knowledge, "max_passages", at, config.knowledge.max_passages));
    RETURN_IF_ERROR(Read(knowledge, "score_threshold", at, config.knowledge.score_threshold));
  }
  RETURN_IF_ERROR(
      ReadList<gateway::UpstreamConfig>(node, "upstreams", where, config.upstreams, ReadUpstream));
  RETURN_IF_ERROR(
      ReadList<gateway::TargetConfig>(node, "models", where, config.targets, ReadTarget));
  RETURN_IF_ERROR(ReadList<gateway::RouteConfig>(
      node, "routes", where, config.routes,
      [&config](const YAML::Node& route_node, std::string_view at, gateway::RouteConfig& route) {
        return ReadRoute(route_node, at, route, config.guard.defaults);
      }));
  if (const YAML::Node health = node["health_check"]) {
    RETURN_IF_ERROR(
        CheckKeys(health, "gateway.health_check",
                  {"interval_ms", "timeout_ms", "unhealthy_threshold", "healthy_threshold"}));
    auto& out = config.health_check;
    RETURN_IF_ERROR(ReadMillis(health, "interval_ms", "gateway.health_check", out.interval));
    RETURN_IF_ERROR(ReadMillis(health, "timeout_ms", "gateway.health_check", out.timeout));
    RETURN_IF_ERROR(
        Read(health, "unhealthy_threshold", "gateway.health_check", out.unhealthy_threshold));
    RETURN_IF_ERROR(
        Read(health, "healthy_threshold", "gateway.health_check", out.healthy_threshold));
  }
  if (const YAML::Node ejection = node["ejection"]) {
    RETURN_IF_ERROR(CheckKeys(ejection, "gateway.ejection",
                              {"consecutive_failures", "base_ejection_ms", "max_ejection_ms"}));
    auto& out = config.ejection;
    RETURN_IF_ERROR(
        Read(ejection, "consecutive_failures", "gateway.ejection", out.consecutive_failures));
    RETURN_IF_ERROR(
        ReadMillis(ejection, "base_ejection_ms", "gateway.ejection", out.base_ejection));
    RETURN_IF_ERROR(ReadMillis(ejection, "max_ejection_ms", "gateway.ejection", out.max_ejection));
  }
  if (const YAML::Node retry = node["retry"]) {
    RETURN_IF_ERROR(
        CheckKeys(retry, "gateway.retry",
                  {"max_attempts", "base_backoff_ms", "max_backoff_ms", "max_retry_after_ms"}));
    auto& out = config.retry;
    RETURN_IF_ERROR(Read(retry, "max_attempts", "gateway.retry", out.max_attempts));
    RETURN_IF_ERROR(ReadMillis(retry, "base_backoff_ms", "gateway.retry", out.base_backoff));
    RETURN_IF_ERROR(ReadMillis(retry, "max_backoff_ms", "gateway.retry", out.max_backoff));
    RETURN_IF_ERROR(ReadMillis(retry, "max_retry_after_ms", "gateway.retry", out.max_retry_after));
  }
  RETURN_IF_ERROR(ReadMillis(node, "keep_alive_ms", where, config.keep_alive));
  RETURN_IF_ERROR(Read(node, "max_n", where, config.max_n));
  RETURN_IF_ERROR(Read(node, "max_response_bytes", where, config.max_response_bytes));
  return Read(node, "max_stream_queue_bytes", where, config.max_stream_queue_bytes);
}

// The model ids of an OpenAI /models answer.
Result<std::vector<std::string>> ModelIds(std::string_view body) {
  json::Parser parser;
  ASSIGN_OR_RETURN(json::Value root, parser.Parse(body));
  const auto data = root.Find("data");
  if (!data || !data->IsArray()) return InvalidArgument("the answer has no 'data' list");
  std::vector<std::string> ids;
  for (simdjson::dom::element item : data->Array()) {
    const auto id = json::Value(item).Find("id");
    if (!id) continue;
    Result<std::string_view> text = id->GetString("id");
    if (text.ok()) ids.emplace_back(*text);
  }
  return ids;
}

}  // namespace

Result<GatewayConfig> LoadGatewayConfig(const std::string& path) {
  GatewayConfig config;
  if (path.empty()) return config;
  try {
    const YAML::Node root = YAML::LoadFile(path);
    if (!root.IsMap() || !root["gateway"]) return config;
    RETURN_IF_ERROR(
        ReadGateway(root["gateway"], config).WithContext(fmt::format("config file '{}'", path)));
  } catch (const YAML::BadFile&) {
    return NotFound("config file '{}' cannot be read", path);
  } catch (const YAML::Exception& error) {
    return InvalidArgument("config file '{}' (line {}): {}", path, error.mark.line + 1, error.msg);
  }
  return config;
}

Status AddFlagUpstreams(const std::vector<std::string>& urls, const std::string& api_key,
                        GatewayConfig& config, std::chrono::milliseconds timeout) {
  if (urls.empty()) return Status::Ok();
  ASSIGN_OR_RETURN(std::unique_ptr<net::HttpClient> client,
                   net::HttpClient::Create(net::HttpClientOptions{.name = "discovery"}));
  std::set<std::string> configured;
  for (const auto& target : config.targets) configured.insert(target.name);
  std::set<std::string> discovered;
  for (size_t i = 0; i < urls.size(); ++i) {
    gateway::UpstreamConfig upstream;
    upstream.name = fmt::format("upstream-{}", i + 1);
    upstream.url = urls[i];
    upstream.api_key = api_key;
    Result<net::Endpoint> endpoint = net::ParseEndpoint(urls[i]);
    if (!endpoint.ok()) return endpoint.status().WithContext("--upstream");
    config.upstreams.push_back(upstream);

    net::HttpClientRequest request;
    request.target = "/models";
    if (!api_key.empty()) request.headers.Add("authorization", "Bearer " + api_key);
    request.timeouts.connect = timeout;
    request.timeouts.first_byte = timeout;
    request.timeouts.total = timeout;
    request.max_response_bytes = 16 << 20;
    std::promise<net::HttpFetchResult> fetched;
    client->Fetch(*endpoint, std::move(request), [&fetched](net::HttpFetchResult result) {
      fetched.set_value(std::move(result));
    });
    const net::HttpFetchResult result = fetched.get_future().get();
    Result<std::vector<std::string>> ids =
        !result.status.ok()             ? Result<std::vector<std::string>>(result.status)
        : result.response.status != 200 ? Result<std::vector<std::string>>(Unavailable(
                                              "GET /models answered {}", result.response.status))
                                        : ModelIds(result.response.body);
    if (!ids.ok()) {
      LOG_WARN("gateway: --upstream {}: cannot list its models ({}); a reload tries again", urls[i],
               ids.status().message());
      continue;
    }
    for (const std::string& id : *ids) {
      if (configured.contains(id)) continue;
      if (discovered.insert(id).second) config.targets.push_back(gateway::TargetConfig{.name = id});
      for (auto& target : config.targets) {
        if (target.name == id) target.endpoints.push_back({.upstream = upstream.name});
      }
    }
    LOG_INFO("gateway: --upstream {} serves {} model(s): {}", urls[i], ids->size(),
             fmt::join(*ids, ", "));
  }
  return Status::Ok();
}

}  // namespace rampart::app
