#include "gateway/router.h"

#include <algorithm>
#include <set>

namespace rampart::gateway {
namespace {

std::string AsciiLower(std::string_view text) {
  std::string out(text);
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return out;
}

}  // namespace

Router::Router(const GatewayConfig& config) : config_(config) {
  rules_.reserve(config_.routes.size());
  for (const RouteConfig& route : config_.routes) {
    Rule rule{.config = &route};
    for (const std::string& keyword : route.match.keywords) {
      rule.lower_keywords.push_back(AsciiLower(keyword));
    }
    any_keywords_ = any_keywords_ || !rule.lower_keywords.empty();
    if (!route.match.pattern.empty()) {
      rule.pattern = std::make_unique<RE2>(route.match.pattern, RE2::Quiet);
    }
    if (route.canary) {
      rule.canary =
          std::make_unique<serve::CanaryController>("route " + route.name, CanaryPolicyFor(route));
    }
    rules_.push_back(std::move(rule));
  }
}

bool Router::Matches(const Rule& rule, const OpenAiRequest& request, const net::HttpRequest& http,
                     std::string_view lower_text) const {
  const MatchConfig& match = rule.config->match;
  if (!match.models.empty() &&
      std::find(match.models.begin(), match.models.end(), request.model) == match.models.end()) {
    return false;
  }
  for (const auto& [name, value] : match.headers) {
    const auto header = http.Header(name);
    if (!header || *header != value) return false;
  }
  if (!rule.lower_keywords.empty() &&
      std::none_of(rule.lower_keywords.begin(), rule.lower_keywords.end(),
                   [lower_text](const std::string& keyword) {
                     return lower_text.find(keyword) != std::string_view::npos;
                   })) {
    return false;
  }
  if (rule.pattern && !RE2::PartialMatch(request.routed_text, *rule.pattern)) return false;
  return true;
}

Result<RoutePlan> Router::Resolve(const OpenAiRequest& request,
                                  const net::HttpRequest& http) const {
  const std::string lower_text = any_keywords_ ? AsciiLower(request.routed_text) : std::string();
  for (const Rule& rule : rules_) {
    if (!Matches(rule, request, http, lower_text)) continue;
    RoutePlan plan;
    plan.route = rule.config->name;
    std::string first = rule.config->target;
    if (const auto& knowledge = rule.config->knowledge) {
      if (!knowledge->target.empty()) first = knowledge->target;
      plan.knowledge = KnowledgePlan{
          .vector_store = knowledge->vector_store,
          .max_passages = knowledge->max_passages > 0 ? knowledge->max_passages
                                                      : config_.knowledge.max_passages,
          .score_threshold = knowledge->score_threshold >= 0 ? knowledge->score_threshold
                                                             : config_.knowledge.score_threshold};
    }
    if (rule.canary) {
      plan.canary = rule.canary.get();
      plan.canary_arm = rule.canary->Route();
      if (plan.canary_arm == 1) first = rule.config->canary->target;
    }
    plan.chain.push_back(std::move(first));
    for (const std::string& fallback : rule.config->fallbacks) {
      if (std::find(plan.chain.begin(), plan.chain.end(), fallback) == plan.chain.end()) {
        plan.chain.push_back(fallback);
      }
    }
    return plan;
  }
  if (request.model.starts_with(kKnowledgeModelPrefix)) {
    if (config_.knowledge.target.empty()) {
      return NotFound(
          "the model '{}' names a knowledge base, but no model answers from knowledge bases here "
          "(gateway.knowledge.target is not set)",
          request.model);
    }
    return RoutePlan{.route = "knowledge",
                     .chain = {config_.knowledge.target},
                     .knowledge = KnowledgePlan{
                         .vector_store = request.model.substr(kKnowledgeModelPrefix.size()),
                         .max_passages = config_.knowledge.max_passages,
                         .score_threshold = config_.knowledge.score_threshold}};
  }
  for (const TargetConfig& target : config_.targets) {
    if (target.name == request.model) return RoutePlan{.route = "direct", .chain = {target.name}};
  }
  return NotFound("the model '{}' does not exist", request.model);
}

std::vector<std::string> Router::ModelNames() const {
  std::vector<std::string> names;
  std::set<std::string> seen;
  for (const TargetConfig& target : config_.targets) {
    if (seen.insert(target.name).second) names.push_back(target.name);
  }
  for (const RouteConfig& route : config_.routes) {
    for (const std::string& model : route.match.models) {
      if (seen.insert(model).second) names.push_back(model);
    }
  }
  return names;
}

bool Router::IsLocal(std::string_view target) const {
  for (const TargetConfig& each : config_.targets) {
    if (each.name == target) return !each.local_model.empty();
  }
  return false;
}

std::vector<std::pair<std::string, serve::CanaryStatus>> Router::CanaryStates() const {
  std::vector<std::pair<std::string, serve::CanaryStatus>> states;
  for (const Rule& rule : rules_) {
    if (rule.canary) states.emplace_back(rule.config->name, rule.canary->Status());
  }
  return states;
}

}  // namespace rampart::gateway
