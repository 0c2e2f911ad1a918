#pragma once

// Router: picks a request's targets from the routing rules. Rules are tried in order; the first
// whose every condition holds names a target and its fallbacks (and may split traffic with a
// canary). A request no rule takes goes to the logical model its `model` names, without
// fallbacks. Immutable after construction apart from the canary controllers, so Resolve may be
// called from any thread.

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <re2/re2.h>

#include "gateway/config.h"
#include "gateway/openai_request.h"
#include "net/http.h"
#include "serve/canary.h"

namespace rampart::gateway {

// A call answered from a knowledge base (gateway/knowledge.h): which store, and how many
// passages of what score go into the prompt.
struct KnowledgePlan {
  std::string vector_store;
  int max_passages = 5;
  double score_threshold = 0;
};

// The model name prefix that asks for an answer from a knowledge base: "kb:<vector_store_id>".
inline constexpr std::string_view kKnowledgeModelPrefix = "kb:";

struct RoutePlan {
  std::string route;  // the rule's name, or "direct" when none matched
  // Logical model names, in the order to try them: the target (or the canary's pick), then the
  // fallbacks.
  std::vector<std::string> chain;
  // When a canary split decided chain[0]: its controller (which wants the outcome) and the arm
  // picked (0 baseline, 1 candidate).
  serve::CanaryController* canary = nullptr;
  int64_t canary_arm = 0;
  // Set when the call is answered from a knowledge base: a `kb:` model or a route with
  // `knowledge`.
  std::optional<KnowledgePlan> knowledge;
};

class Router {
 public:
  // REQUIRES: Validate(config).ok().
  explicit Router(const GatewayConfig& config);

  // A rule that matches comes first; else a model "kb:<vector_store_id>" goes to
  // knowledge.target with a KnowledgePlan (route "knowledge"); else the logical model named.
  // Errors: NotFound "the model '<m>' does not exist" when no rule matches and no logical model
  // has the requested name; NotFound for a `kb:` model when knowledge.target is not set.
  Result<RoutePlan> Resolve(const OpenAiRequest& request, const net::HttpRequest& http) const;

  // The names a caller may use as `model`: every logical model, then every model alias a rule
  // matches on, without repeats.
  std::vector<std::string> ModelNames() const;

  // Whether the logical model `target` is served by a local model (not an upstream).
  bool IsLocal(std::string_view target) const;

  // Canary states, by route name.
  std::vector<std::pair<std::string, serve::CanaryStatus>> CanaryStates() const;

 private:
  struct Rule {
    const RouteConfig* config;
    std::vector<std::string> lower_keywords;
    std::unique_ptr<RE2> pattern;
    std::unique_ptr<serve::CanaryController> canary;
  };

  bool Matches(const Rule& rule, const OpenAiRequest& request, const net::HttpRequest& http,
               std::string_view lower_text) const;

  GatewayConfig config_;
  std::vector<Rule> rules_;
  bool any_keywords_ = false;
};

}  // namespace rampart::gateway
