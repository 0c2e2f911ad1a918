#include "gateway/config.h"

#include <algorithm>
#include <set>

#include <fmt/ranges.h>
#include <re2/re2.h>

#include "net/http_client.h"

namespace rampart::gateway {
namespace {

constexpr std::pair<Engine, std::string_view> kEngines[] = {
    {Engine::kOpenAi, "openai"},     {Engine::kVllm, "vllm"},     {Engine::kTgi, "tgi"},
    {Engine::kLlamaCpp, "llamacpp"}, {Engine::kOllama, "ollama"}, {Engine::kTriton, "triton"},
};

Status ValidateUpstream(const UpstreamConfig& upstream) {
  const std::string where = fmt::format("upstream '{}'", upstream.name);
  if (upstream.name.empty()) return InvalidArgument("an upstream needs a name");
  RETURN_IF_ERROR(net::ParseEndpoint(upstream.url).status().WithContext(where + ": url"));
  if (upstream.cert_file.empty() != upstream.key_file.empty()) {
    return InvalidArgument("{}: a client certificate needs both cert_file and key_file", where);
  }
  for (auto [name, value] : {std::pair{"connect_timeout_ms", upstream.connect_timeout},
                             std::pair{"first_byte_timeout_ms", upstream.first_byte_timeout},
                             std::pair{"idle_timeout_ms", upstream.idle_timeout}}) {
    if (value.count() <= 0) return InvalidArgument("{}: {} must be positive", where, name);
  }
  if (upstream.max_connections == 0) {
    return InvalidArgument("{}: max_connections must be positive", where);
  }
  if (!upstream.health_path.empty() && upstream.health_path[0] != '/') {
    return InvalidArgument("{}: health_path must start with '/'", where);
  }
  return Status::Ok();
}

Status ValidateTarget(const TargetConfig& target, const std::set<std::string>& upstreams) {
  const std::string where = fmt::format("model '{}'", target.name);
  if (target.name.empty()) return InvalidArgument("a model needs a name");
  if (target.endpoints.empty() == target.local_model.empty()) {
    return InvalidArgument("{}: give either endpoints (upstreams) or local_model", where);
  }
  for (const EndpointConfig& endpoint : target.endpoints) {
    if (!upstreams.contains(endpoint.upstream)) {
      return InvalidArgument("{}: no upstream named '{}'", where, endpoint.upstream);
    }
    if (endpoint.weight < 1 || endpoint.weight > 1000) {
      return InvalidArgument("{}: weight must be in [1, 1000], got {}", where, endpoint.weight);
    }
  }
  return Status::Ok();
}

constexpr std::pair<GuardMode, std::string_view> kGuardModes[] = {
    {GuardMode::kOff, "off"},           {GuardMode::kDetect, "detect"},
    {GuardMode::kRedact, "redact"},     {GuardMode::kReplace, "replace"},
    {GuardMode::kMask, "mask"},         {GuardMode::kHash, "hash"},
    {GuardMode::kTokenize, "tokenize"}, {GuardMode::kBlock, "block"},
};

Status ValidateGuardPolicy(const GuardPolicy& policy, std::string_view where) {
  const auto known = [where](const std::string& type, std::string_view field) -> Status {
    if (guard::KnownEntityType(type)) return Status::Ok();
    return InvalidArgument("{}: {}: unknown entity type '{}' (known: {})", where, field, type,
                           fmt::join(guard::KnownEntityTypes(), ", "));
  };
  for (const std::string& type : policy.block) RETURN_IF_ERROR(known(type, "block"));
  for (const std::string& type : policy.types) RETURN_IF_ERROR(known(type, "types"));
  for (const auto& [type, op] : policy.operators) RETURN_IF_ERROR(known(type, "operators"));
  return Status::Ok();
}

std::string DescribeGuard(const GuardPolicy& policy) {
  std::string out =
      fmt::format("input {}, output {}", GuardModeName(policy.input), GuardModeName(policy.output));
  if (!policy.block.empty()) out += fmt::format(", block [{}]", fmt::join(policy.block, ", "));
  if (!policy.operators.empty()) {
    std::vector<std::string> operators;
    for (const auto& [type, op] : policy.operators) {
      operators.push_back(fmt::format("{}: {}", type, guard::OperatorText(op)));
    }
    out += fmt::format(", operators {{{}}}", fmt::join(operators, ", "));
  }
  if (!policy.types.empty()) out += fmt::format(", types [{}]", fmt::join(policy.types, ", "));
  return out;
}

Status ValidateRoute(const RouteConfig& route, const std::set<std::string>& targets) {
  const std::string where = fmt::format("route '{}'", route.name);
  if (route.name.empty()) return InvalidArgument("a route needs a name");
  if (!targets.contains(route.target)) {
    return InvalidArgument("{}: no model named '{}'", where, route.target);
  }
  for (const std::string& fallback : route.fallbacks) {
    if (!targets.contains(fallback)) {
      return InvalidArgument("{}: fallback: no model named '{}'", where, fallback);
    }
  }
  const MatchConfig& match = route.match;
  if (match.models.empty() && match.headers.empty() && match.keywords.empty() &&
      match.pattern.empty()) {
    return InvalidArgument("{}: match needs at least one of models, headers, keywords, pattern",
                           where);
  }
  if (!match.pattern.empty()) {
    RE2 pattern(match.pattern, RE2::Quiet);
    if (!pattern.ok()) {
      return InvalidArgument("{}: pattern '{}': {}", where, match.pattern, pattern.error());
    }
  }
  if (route.canary) {
    if (!targets.contains(route.canary->target)) {
      return InvalidArgument("{}: canary: no model named '{}'", where, route.canary->target);
    }
    if (route.canary->target == route.target) {
      return InvalidArgument("{}: canary: the candidate must differ from the target", where);
    }
    RETURN_IF_ERROR(CanaryPolicyFor(route).Validate().WithContext(where));
  }
  if (route.guard) RETURN_IF_ERROR(ValidateGuardPolicy(*route.guard, where + ": guard"));
  if (route.knowledge) {
    const KnowledgeRouteConfig& knowledge = *route.knowledge;
    if (!knowledge.vector_store.starts_with("vs_")) {
      return InvalidArgument("{}: knowledge: vector_store must be a vector store id (vs_...)",
                             where);
    }
    if (!knowledge.target.empty() && !targets.contains(knowledge.target)) {
      return InvalidArgument("{}: knowledge: no model named '{}'", where, knowledge.target);
    }
    if (knowledge.max_passages < 0 || knowledge.max_passages > kMaxKnowledgePassages) {
      return InvalidArgument("{}: knowledge: max_passages must be in [1, {}]", where,
                             kMaxKnowledgePassages);
    }
    if (knowledge.score_threshold > 1) {
      return InvalidArgument("{}: knowledge: score_threshold must be in [0, 1]", where);
    }
  }
  return Status::Ok();
}

}  // namespace

Result<GuardMode> ParseGuardMode(std::string_view name) {
  for (auto [mode, mode_name] : kGuardModes) {
    if (mode_name == name) return mode;
  }
  return InvalidArgument(
      "unknown guard mode '{}' (known: off, detect, redact, replace, mask, hash, tokenize, block)",
      name);
}

std::string_view GuardModeName(GuardMode mode) {
  for (auto [known, name] : kGuardModes) {
    if (known == mode) return name;
  }
  return "off";
}

const GuardPolicy& GuardPolicyFor(const GatewayConfig& config, std::string_view route) {
  for (const RouteConfig& candidate : config.routes) {
    if (candidate.name == route && candidate.guard) return *candidate.guard;
  }
  return config.guard.defaults;
}

Result<Engine> ParseEngine(std::string_view name) {
  for (auto [engine, engine_name] : kEngines) {
    if (engine_name == name) return engine;
  }
  return InvalidArgument("unknown engine '{}' (known: openai, vllm, tgi, llamacpp, ollama, triton)",
                         name);
}

std::string_view EngineName(Engine engine) {
  for (auto [known, name] : kEngines) {
    if (known == engine) return name;
  }
  return "openai";
}

std::string_view DefaultHealthPath(Engine engine) {
  switch (engine) {
    case Engine::kVllm:
    case Engine::kTgi:
    case Engine::kLlamaCpp: return "/health";
    case Engine::kOllama: return "/api/version";
    case Engine::kTriton: return "/v2/health/ready";
    case Engine::kOpenAi: return "";
  }
  return "";
}

Status Validate(const GatewayConfig& config) {
  std::set<std::string> upstreams;
  for (const UpstreamConfig& upstream : config.upstreams) {
    RETURN_IF_ERROR(ValidateUpstream(upstream));
    if (!upstreams.insert(upstream.name).second) {
      return InvalidArgument("two upstreams are named '{}'", upstream.name);
    }
  }
  std::set<std::string> targets;
  for (const TargetConfig& target : config.targets) {
    RETURN_IF_ERROR(ValidateTarget(target, upstreams));
    if (target.name.starts_with("kb:")) {
      return InvalidArgument("model '{}': names beginning 'kb:' are knowledge bases", target.name);
    }
    if (!targets.insert(target.name).second) {
      return InvalidArgument("two models are named '{}'", target.name);
    }
  }
  std::set<std::string> routes;
  for (const RouteConfig& route : config.routes) {
    RETURN_IF_ERROR(ValidateRoute(route, targets));
    if (!routes.insert(route.name).second) {
      return InvalidArgument("two routes are named '{}'", route.name);
    }
  }
  const HealthCheckConfig& health = config.health_check;
  if (health.interval.count() < 100 || health.timeout.count() <= 0 ||
      health.unhealthy_threshold < 1 || health.healthy_threshold < 1) {
    return InvalidArgument(
        "health_check: interval_ms must be >= 100, timeout_ms positive, thresholds >= 1");
  }
  const EjectionConfig& ejection = config.ejection;
  if (ejection.consecutive_failures < 1 || ejection.base_ejection.count() <= 0 ||
      ejection.max_ejection < ejection.base_ejection) {
    return InvalidArgument(
        "ejection: consecutive_failures must be >= 1, base_ejection_ms positive and "
        "max_ejection_ms >= base_ejection_ms");
  }
  const RetryConfig& retry = config.retry;
  if (retry.max_attempts < 1 || retry.max_attempts > 10 || retry.base_backoff.count() < 0 ||
      retry.max_backoff < retry.base_backoff || retry.max_retry_after.count() < 0) {
    return InvalidArgument(
        "retry: max_attempts must be in [1, 10], base_backoff_ms >= 0, max_backoff_ms >= "
        "base_backoff_ms");
  }
  if (config.keep_alive.count() < 100) return InvalidArgument("keep_alive_ms must be >= 100");
  if (config.max_n < 1) return InvalidArgument("max_n must be >= 1");
  if (config.max_response_bytes < 1024 || config.max_stream_queue_bytes < 1024) {
    return InvalidArgument("max_response_bytes and max_stream_queue_bytes must be >= 1024");
  }
  RETURN_IF_ERROR(ValidateGuardPolicy(config.guard.defaults, "guard.defaults"));
  if (config.guard.max_text_bytes < 1024) {
    return InvalidArgument("guard.max_text_bytes must be >= 1024");
  }
  const KnowledgeConfig& knowledge = config.knowledge;
  if (!knowledge.target.empty() && !targets.contains(knowledge.target)) {
    return InvalidArgument("knowledge.target: no model named '{}'", knowledge.target);
  }
  if (knowledge.max_passages < 1 || knowledge.max_passages > kMaxKnowledgePassages) {
    return InvalidArgument("knowledge.max_passages must be in [1, {}]", kMaxKnowledgePassages);
  }
  if (!(knowledge.score_threshold >= 0 && knowledge.score_threshold <= 1)) {
    return InvalidArgument("knowledge.score_threshold must be in [0, 1]");
  }
  return Status::Ok();
}

serve::CanaryPolicy CanaryPolicyFor(const RouteConfig& route) {
  const CanaryConfig& canary = *route.canary;
  serve::CanaryPolicy policy;
  policy.baseline_label = fmt::format("model '{}'", route.target);
  policy.candidate_label = fmt::format("model '{}'", canary.target);
  policy.baseline = 0;
  policy.candidate = 1;
  policy.stages_percent = canary.stages_percent;
  policy.min_requests = canary.min_requests;
  policy.max_error_rate = canary.max_error_rate;
  policy.max_p99_ratio = canary.max_p99_ratio;
  return policy;
}

std::string DescribeRoutes(const GatewayConfig& config) {
  std::string out;
  for (const RouteConfig& route : config.routes) {
    std::vector<std::string> conditions;
    if (!route.match.models.empty()) {
      conditions.push_back(fmt::format("model in [{}]", fmt::join(route.match.models, ", ")));
    }
    for (const auto& [name, value] : route.match.headers) {
      conditions.push_back(fmt::format("header {} = '{}'", name, value));
    }
    if (!route.match.keywords.empty()) {
      conditions.push_back(
          fmt::format("keywords any of [{}]", fmt::join(route.match.keywords, ", ")));
    }
    if (!route.match.pattern.empty()) {
      conditions.push_back(fmt::format("pattern /{}/", route.match.pattern));
    }
    out += fmt::format("route {}: when {} -> {}", route.name, fmt::join(conditions, " and "),
                       route.target);
    if (!route.fallbacks.empty())
      out += fmt::format(", fallback {}", fmt::join(route.fallbacks, " -> "));
    if (route.canary) {
      out += fmt::format(", canary {} at {}%", route.canary->target,
                         fmt::join(route.canary->stages_percent, "/"));
    }
    out += '\n';
    if (route.guard)
      out += fmt::format("route {}: guard {}\n", route.name, DescribeGuard(*route.guard));
    if (route.knowledge) {
      out += fmt::format("route {}: answers from vector store {}\n", route.name,
                         route.knowledge->vector_store);
    }
  }
  const GuardConfig& guard_config = config.guard;
  const bool any_guard =
      guard_config.defaults != GuardPolicy{} || !guard_config.key_file.empty() ||
      std::any_of(config.routes.begin(), config.routes.end(),
                  [](const RouteConfig& route) { return route.guard.has_value(); });
  if (any_guard) {
    out += fmt::format(
        "guard defaults: {}; key {}\n", DescribeGuard(guard_config.defaults),
        guard_config.key_file.empty() ? "generated at start" : "from " + guard_config.key_file);
  }
  if (!guard_config.internal_domains.empty() || !guard_config.internal_path_roots.empty()) {
    out += fmt::format("guard internal: domains [{}], path roots [{}]\n",
                       fmt::join(guard_config.internal_domains, ", "),
                       fmt::join(guard_config.internal_path_roots, ", "));
  }
  for (const TargetConfig& target : config.targets) {
    if (!target.local_model.empty()) {
      out += fmt::format("model {}: local Rampart model '{}'\n", target.name, target.local_model);
      continue;
    }
    std::vector<std::string> endpoints;
    for (const EndpointConfig& endpoint : target.endpoints) {
      endpoints.push_back(fmt::format("{} (priority {}, weight {}{})", endpoint.upstream,
                                      endpoint.priority, endpoint.weight,
                                      endpoint.model.empty() ? "" : ", as " + endpoint.model));
    }
    out += fmt::format("model {}: {}\n", target.name, fmt::join(endpoints, ", "));
  }
  for (const UpstreamConfig& upstream : config.upstreams) {
    const std::string_view health =
        upstream.health_path.empty() ? DefaultHealthPath(upstream.engine) : upstream.health_path;
    out += fmt::format("upstream {}: {} ({}, health {})\n", upstream.name, upstream.url,
                       EngineName(upstream.engine), health.empty() ? "passive only" : health);
  }
  return out;
}

}  // namespace rampart::gateway
