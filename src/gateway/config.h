#pragma once

// The gateway's configuration: upstream servers, the logical models (targets) callers name, and
// the routing rules that pick a target with its fallbacks. Plain values: the app reads them from
// YAML (and from --upstream flags), Validate checks them as a whole, and a Gateway is built from
// a valid one. docs/gateway.md describes every field.

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"
#include "guard/operators.h"
#include "serve/canary.h"

namespace rampart::gateway {

// What serves an upstream, which decides its health check.
enum class Engine { kOpenAi, kVllm, kTgi, kLlamaCpp, kOllama, kTriton };
Result<Engine> ParseEngine(std::string_view name);
std::string_view EngineName(Engine engine);
// The path an engine answers health checks on (from the server's root), or empty when it has
// none (a generic OpenAI-compatible server is checked passively only).
std::string_view DefaultHealthPath(Engine engine);

struct UpstreamConfig {
  std::string name;
  std::string url;  // base URL of its OpenAI API, e.g. http://10.0.0.5:8000/v1
  Engine engine = Engine::kOpenAi;
  std::string api_key;                         // sent as "Authorization: Bearer <key>"
  std::map<std::string, std::string> headers;  // sent with every call
  std::string health_path;                     // empty = the engine's default (DefaultHealthPath)
  // TLS for https URLs: CA file (empty = the system's trust store), client certificate and key.
  std::string ca_file;
  std::string cert_file;
  std::string key_file;
  std::chrono::milliseconds connect_timeout{2000};
  std::chrono::milliseconds first_byte_timeout{60000};  // includes time to the first token
  std::chrono::milliseconds idle_timeout{30000};        // between chunks of an answer
  size_t max_connections = 256;
  // Ask for usage on every stream (stream_options.include_usage), so tokens are counted, not
  // estimated; off for an upstream that refuses fields it does not know.
  bool ask_stream_usage = true;

  bool operator==(const UpstreamConfig&) const = default;
};

// One upstream serving a logical model, in a priority group with a weight.
struct EndpointConfig {
  std::string upstream;  // an UpstreamConfig name
  std::string model;     // the upstream's name for the model; empty = the logical name
  int priority = 100;    // higher first; lower groups serve only when higher ones cannot
  int weight = 1;        // share within its priority group
};

// A logical model callers name: served by upstream endpoints, or by a local Rampart model.
struct TargetConfig {
  std::string name;
  std::vector<EndpointConfig> endpoints;
  std::string
      local_model;  // a model of Rampart's repository (embeddings); exclusive with endpoints
  std::string owned_by = "rampart";  // /v1/models' owned_by
};

// When a rule applies: every condition given must hold.
struct MatchConfig {
  std::vector<std::string> models;             // the request's `model` is one of these
  std::map<std::string, std::string> headers;  // lower-case name -> exact value
  std::vector<std::string> keywords;  // any appears in the routed text (case-insensitive ASCII)
  std::string pattern;                // an RE2 regular expression found in the routed text
};

struct CanaryConfig {
  std::string target;  // the candidate; the rule's target is the baseline
  std::vector<int> stages_percent = {5, 20, 100};
  uint64_t min_requests = 200;
  double max_error_rate = 0.005;
  double max_p99_ratio = 2.0;
};

// What the PII guard does to one direction of a call (docs/guard.md, "In the gateway").
enum class GuardMode {
  kOff,      // nothing
  kDetect,   // count what is found (metrics, the access log); change nothing
  kRedact,   // each type's operator: `operators`, else its default (guard::DefaultOperator)
  kReplace,  // replace, mask, hash, tokenize: that operator for every type `operators` leaves
  kMask,     //   out
  kHash,
  kTokenize,
  kBlock,  // refuse the call when anything is found
};
Result<GuardMode> ParseGuardMode(std::string_view name);
std::string_view GuardModeName(GuardMode mode);

// The guard's policy for a route (or the gateway-wide default).
struct GuardPolicy {
  GuardMode input = GuardMode::kOff;   // prompts, before any model sees them
  GuardMode output = GuardMode::kOff;  // answers, before the caller sees them
  std::vector<std::string> block;      // types that refuse the call in either direction
  std::map<std::string, guard::Operator> operators;  // per type, over the mode's choice
  std::vector<std::string> types;                    // detect only these (empty = every type)

  bool operator==(const GuardPolicy&) const = default;
};

// The gateway-wide guard settings.
struct GuardConfig {
  // The master key (64 hex digits or 32 raw bytes); empty = a key generated at start (hashes
  // and tokens then do not survive a restart).
  std::string key_file;
  // INTERNAL_ENDPOINT: host names under these domains, file paths under these roots.
  std::vector<std::string> internal_domains;
  std::vector<std::string> internal_path_roots;
  GuardPolicy defaults;  // routes without a guard of their own, and calls no route matched
  size_t max_text_bytes = 1u << 20;  // the HTTP API's largest text (413 past it)
};

// A route answered from a knowledge base (docs/knowledge-hub.md, "Answers with citations"): the
// last user message searches `vector_store` (as the caller's tenant, with the caller's access to
// each file) and the chat target answers from the passages found, citing them.
struct KnowledgeRouteConfig {
  std::string vector_store;     // "vs_..."
  std::string target;           // the chat target that answers; empty = the route's own target
  int max_passages = 0;         // 1..50; 0 = KnowledgeConfig::max_passages
  double score_threshold = -1;  // 0..1; negative = KnowledgeConfig::score_threshold

  bool operator==(const KnowledgeRouteConfig&) const = default;
};

// Passages one knowledge answer puts in its prompt at most.
inline constexpr int kMaxKnowledgePassages = 50;

// Gateway-wide settings of answers with citations, and of `kb:<vector_store_id>` models.
struct KnowledgeConfig {
  // The chat target that answers `kb:` models; empty = `kb:` models are not served (404).
  std::string target;
  int max_passages = 5;          // passages put in the prompt at most (1..50)
  double score_threshold = 0.3;  // passages scoring less are left out (0..1)
};

struct RouteConfig {
  std::string name;
  MatchConfig match;
  std::string target;
  std::vector<std::string> fallbacks;  // tried in order when the target fails
  std::optional<CanaryConfig> canary;
  std::optional<GuardPolicy> guard;               // unset = GuardConfig::defaults
  std::optional<KnowledgeRouteConfig> knowledge;  // answered from a knowledge base
};

struct HealthCheckConfig {
  std::chrono::milliseconds interval{5000};
  std::chrono::milliseconds timeout{2000};
  int unhealthy_threshold = 2;  // consecutive failed checks
  int healthy_threshold = 1;    // consecutive passed checks to come back

  bool operator==(const HealthCheckConfig&) const = default;
};

// Passive outlier ejection: an endpoint failing `consecutive_failures` calls in a row (5xx,
// connect errors, timeouts, garbage) is left out for base_ejection x the times it was ejected
// before (capped at max_ejection), then re-admitted.
struct EjectionConfig {
  int consecutive_failures = 5;
  std::chrono::milliseconds base_ejection{30000};
  std::chrono::milliseconds max_ejection{300000};

  bool operator==(const EjectionConfig&) const = default;
};

struct RetryConfig {
  int max_attempts = 3;  // calls per target for one request, the first included
  std::chrono::milliseconds base_backoff{25};
  std::chrono::milliseconds max_backoff{1000};
  // A Retry-After longer than this is not waited for: another endpoint, or a fallback, is tried.
  std::chrono::milliseconds max_retry_after{5000};
};

struct GatewayConfig {
  std::vector<UpstreamConfig> upstreams;
  std::vector<TargetConfig> targets;
  std::vector<RouteConfig> routes;
  HealthCheckConfig health_check;
  EjectionConfig ejection;
  RetryConfig retry;
  // A streamed answer with no token yet gets a `: keep-alive` comment this often.
  std::chrono::milliseconds keep_alive{5000};
  int64_t max_n = 8;
  size_t max_response_bytes = 64u << 20;     // a whole answer from an upstream
  size_t max_stream_queue_bytes = 1u << 20;  // written to a slow client and not yet sent
  GuardConfig guard;
  KnowledgeConfig knowledge;
};

// Checks names are unique and every reference resolves (targets, upstreams, fallbacks, canary
// candidates), URLs parse, numbers are in range and patterns compile. Errors name the field.
Status Validate(const GatewayConfig& config);

// The canary policy of a route with a canary (baseline, the route's target = arm 0; candidate =
// arm 1). REQUIRES: route.canary.
serve::CanaryPolicy CanaryPolicyFor(const RouteConfig& route);

// The guard's policy for calls of `route` ("direct" and unknown names: the defaults).
const GuardPolicy& GuardPolicyFor(const GatewayConfig& config, std::string_view route);

// The resolved routing table as text, one rule and one target per line, for `rampart gateway
// check` and the startup log.
std::string DescribeRoutes(const GatewayConfig& config);

}  // namespace rampart::gateway
