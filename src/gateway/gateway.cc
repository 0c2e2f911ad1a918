#include "gateway/gateway.h"

#include <chrono>

#include "core/check.h"
#include "core/logging.h"
#include "core/trace.h"
#include "gateway/call.h"
#include "gateway/stages.h"

namespace rampart::gateway {
namespace {

int64_t UnixSecondsNow() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

std::string RequestId(const net::HttpRequest& request, const TraceContext& trace) {
  if (auto given = request.Header("x-request-id")) {
    const bool sane =
        !given->empty() && given->size() <= 128 &&
        std::all_of(given->begin(), given->end(), [](char c) { return c > 0x20 && c < 0x7f; });
    if (sane) return std::string(*given);
  }
  return "req_" + trace.TraceId();
}

Gateway::Gateway(GatewayOptions options, metrics::Registry& registry)
    : options_(options),
      created_(UnixSecondsNow()),
      metrics_(registry),
      pipeline_(StandardPipeline(metrics_, options.access_log, options.access, options.audit)) {
  if (options_.vector_stores != nullptr) StartKnowledgeWorkers();
  environment_ = CallEnvironment{.pipeline = &pipeline_,
                                 .metrics = &metrics_,
                                 .timers = &timers_,
                                 .local = options_.local,
                                 .clock = &Clock::Real(),
                                 .stopping = &stopping_,
                                 .vector_stores = options_.vector_stores,
                                 .knowledge_workers = knowledge_workers_.get(),
                                 .access = options_.access};
}

void Gateway::StartKnowledgeWorkers() {
  knowledge_workers_ = std::make_unique<WorkerPool>(
      "gateway-kb", static_cast<size_t>(std::max(1, options_.knowledge_threads)),
      options_.knowledge_max_queued);
}

void Gateway::AttachVectorStores(knowledge::hub::VectorStores* vector_stores) {
  CHECK(environment_.vector_stores == nullptr);  // attached once, and not given at creation
  if (vector_stores == nullptr) return;
  StartKnowledgeWorkers();
  environment_.vector_stores = vector_stores;
  environment_.knowledge_workers = knowledge_workers_.get();
}

Result<std::unique_ptr<Gateway>> Gateway::Create(GatewayConfig config, GatewayOptions options,
                                                 metrics::Registry& registry) {
  std::unique_ptr<Gateway> gateway(new Gateway(options, registry));
  ASSIGN_OR_RETURN(std::shared_ptr<const Runtime> runtime, gateway->Build(std::move(config)));
  {
    std::lock_guard lock(gateway->mutex_);
    gateway->runtime_ = std::move(runtime);
  }
  Gateway* self = gateway.get();
  gateway->metrics_.CollectHealth(registry, [self] { return self->UpstreamHealth(); });
  gateway->ScheduleHealthChecks();
  return gateway;
}

Gateway::~Gateway() {
  stopping_ = true;
  // Searches first: those queued still run and their calls end (503, the gateway is stopping),
  // which needs the timers. Then the timers (no retry, keep-alive or health round runs from here
  // on), then the clients (calls in flight end, kShutdown).
  if (knowledge_workers_) knowledge_workers_->Stop();
  timers_.Stop();
  std::map<std::string, std::unique_ptr<net::HttpClient>> clients;
  {
    std::lock_guard lock(mutex_);
    clients.swap(clients_);
  }
  clients.clear();
}

Result<net::HttpClient*> Gateway::ClientFor(const UpstreamConfig& upstream) {
  // Clients differ by what is set per client: TLS files and the connection limit.
  const std::string key = fmt::format("{}\n{}\n{}\n{}", upstream.ca_file, upstream.cert_file,
                                      upstream.key_file, upstream.max_connections);
  std::lock_guard lock(mutex_);
  auto found = clients_.find(key);
  if (found != clients_.end()) return found->second.get();
  net::HttpClientOptions options;
  options.threads = std::max(1, options_.client_threads);
  options.tls = net::HttpClientTlsOptions{
      .ca_file = upstream.ca_file, .cert_file = upstream.cert_file, .key_file = upstream.key_file};
  options.max_connections_per_endpoint = upstream.max_connections;
  // Every connection opened stays for reuse (until the idle timeout): the calls in flight to an
  // upstream are as many as the callers', and with fewer kept idle each call past that many
  // opened and closed a connection of its own.
  options.max_idle_per_endpoint = options.max_connections_per_endpoint;
  options.name = "gateway-client";
  ASSIGN_OR_RETURN(std::unique_ptr<net::HttpClient> client, net::HttpClient::Create(options));
  net::HttpClient* raw = client.get();
  clients_.emplace(key, std::move(client));
  return raw;
}

Result<std::shared_ptr<const Runtime>> Gateway::Build(GatewayConfig config) {
  RETURN_IF_ERROR(Validate(config));
  auto runtime = std::make_shared<Runtime>();
  runtime->config = std::move(config);
  const GatewayConfig& cfg = runtime->config;
  const std::shared_ptr<const Runtime> previous = this->runtime();

  for (const UpstreamConfig& upstream : cfg.upstreams) {
    UpstreamRuntime built;
    ASSIGN_OR_RETURN(built.endpoint, net::ParseEndpoint(upstream.url));
    ASSIGN_OR_RETURN(built.client, ClientFor(upstream));
    if (!upstream.api_key.empty()) built.headers.Add("authorization", "Bearer " + upstream.api_key);
    for (const auto& [name, value] : upstream.headers) built.headers.Add(name, value);
    // Health carries over a reload when the upstream and the health and ejection settings are
    // unchanged. The state holds its config (timeouts, engine, health path) and those settings:
    // any change gets a new one, so that the new values apply.
    if (previous && previous->config.ejection == cfg.ejection &&
        previous->config.health_check == cfg.health_check) {
      auto old = previous->upstreams.find(upstream.name);
      if (old != previous->upstreams.end() && old->second.state->config() == upstream) {
        built.state = old->second.state;
      }
    }
    if (!built.state) {
      built.state = std::make_shared<UpstreamState>(upstream, cfg.ejection, cfg.health_check);
    }
    runtime->upstreams.emplace(upstream.name, std::move(built));
  }
  for (const TargetConfig& target : cfg.targets) {
    TargetRuntime built{.config = &target};
    if (target.local_model.empty()) {
      if (target.endpoints.size() > Pool::kMaxMembers) {
        return InvalidArgument("model '{}': at most {} endpoints", target.name, Pool::kMaxMembers);
      }
      std::vector<Pool::Member> members;
      for (const EndpointConfig& endpoint : target.endpoints) {
        members.push_back(Pool::Member{.upstream = runtime->upstreams.at(endpoint.upstream).state,
                                       .model = endpoint.model,
                                       .priority = endpoint.priority,
                                       .weight = endpoint.weight});
      }
      built.pool = std::make_unique<Pool>(std::move(members));
      // The pool orders its members by priority: map each back to its upstream.
      for (const Pool::Member& member : built.pool->members()) {
        built.members.push_back(&runtime->upstreams.at(member.upstream->config().name));
      }
    }
    runtime->targets.emplace(target.name, std::move(built));
  }
  runtime->router = std::make_unique<Router>(cfg);
  RETURN_IF_ERROR(BuildGuard(*runtime, previous.get()));
  return std::shared_ptr<const Runtime>(std::move(runtime));
}

Status Gateway::BuildGuard(Runtime& runtime, const Runtime* previous) {
  const GatewayConfig& config = runtime.config;
  const GuardConfig& settings = config.guard;
  GuardRuntime& guard = runtime.guard;
  guard.config = &config;
  const GuardConfig* before = previous ? &previous->config.guard : nullptr;
  if (!options_.detector_factory) {
    const bool wanted = [&config] {
      if (config.guard.defaults.input != GuardMode::kOff ||
          config.guard.defaults.output != GuardMode::kOff) {
        return true;
      }
      for (const RouteConfig& route : config.routes) {
        if (route.guard &&
            (route.guard->input != GuardMode::kOff || route.guard->output != GuardMode::kOff)) {
          return true;
        }
      }
      return false;
    }();
    if (wanted) return InvalidArgument("guard: this gateway was built without a PII detector");
  } else if (before && previous->guard.detector &&
             before->internal_domains == settings.internal_domains &&
             before->internal_path_roots == settings.internal_path_roots) {
    guard.detector = previous->guard.detector;
  } else {
    guard::DetectorOptions options;
    options.internal_domains = settings.internal_domains;
    options.internal_path_roots = settings.internal_path_roots;
    Result<std::unique_ptr<guard::Detector>> detector = options_.detector_factory(options);
    if (!detector.ok()) return detector.status().WithContext("guard");
    guard.detector = std::move(detector).value();
  }
  if (before && previous->guard.keys && before->key_file == settings.key_file) {
    guard.keys = previous->guard.keys;
  } else if (!settings.key_file.empty()) {
    Result<guard::GuardKeys> keys = guard::GuardKeys::FromFile(settings.key_file);
    if (!keys.ok()) return keys.status().WithContext("guard.key_file");
    guard.keys = std::make_shared<const guard::GuardKeys>(*keys);
  } else if (options_.guard_keys) {
    guard.keys = options_.guard_keys;
  } else {
    std::lock_guard lock(mutex_);
    if (!generated_keys_) {
      generated_keys_ = std::make_shared<const guard::GuardKeys>(guard::GuardKeys::Generate());
      LOG_WARN(
          "gateway: guard.key_file is not set: the guard's key was generated at start, so hashes "
          "and tokens made now do not survive a restart");
    }
    guard.keys = generated_keys_;
  }
  guard.tenant_keys = guard.keys->ForTenant(guard::kDefaultTenant);
  return Status::Ok();
}

std::shared_ptr<const GuardRuntime> Gateway::guard() const {
  std::shared_ptr<const Runtime> current = runtime();
  return std::shared_ptr<const GuardRuntime>(current, &current->guard);
}

std::shared_ptr<const Runtime> Gateway::runtime() const {
  std::lock_guard lock(mutex_);
  return runtime_;
}

void Gateway::Handle(Operation operation, net::HttpRequest&& request, net::Responder responder) {
  std::optional<TraceContext> parent;
  if (auto header = request.Header("traceparent")) parent = TraceContext::Parse(*header);
  const TraceContext trace = parent ? parent->Child() : TraceContext::Start();
  CallContext context;
  context.operation = operation;
  context.request_id = RequestId(request, trace);
  context.trace_id = trace.TraceId();
  context.received = request.received == SteadyTime{} ? Clock::Real().Now() : request.received;
  context.http = std::move(request);
  auto call = std::make_shared<GatewayCall>(environment_, runtime(), std::move(context),
                                            std::move(responder));
  call->Start();
}

std::vector<ModelEntry> Gateway::Models() const {
  const std::shared_ptr<const Runtime> current = runtime();
  std::vector<ModelEntry> models;
  for (const std::string& name : current->router->ModelNames()) {
    const TargetRuntime* target = current->FindTarget(name);
    models.push_back(ModelEntry{.id = name,
                                .owned_by = target ? target->config->owned_by : "rampart",
                                .created = created_});
  }
  return models;
}

Status Gateway::Reload(GatewayConfig config) {
  ASSIGN_OR_RETURN(std::shared_ptr<const Runtime> runtime, Build(std::move(config)));
  LOG_INFO("gateway: routing table reloaded:\n{}", DescribeRoutes(runtime->config));
  std::lock_guard lock(mutex_);
  runtime_ = std::move(runtime);
  return Status::Ok();
}

std::string Gateway::Describe() const {
  const std::shared_ptr<const Runtime> current = runtime();
  std::string text = DescribeRoutes(current->config);
  for (const auto& [route, canary] : current->router->CanaryStates()) {
    text += fmt::format("canary of route {}: {}, {}% to the candidate; {}\n", route,
                        serve::CanaryStateName(canary.state), canary.weight_percent,
                        canary.last_decision);
  }
  const SteadyTime now = Clock::Real().Now();
  for (const auto& [name, upstream] : current->upstreams) {
    if (!upstream.state->Available(now)) {
      text += fmt::format(
          "upstream {} takes no calls now ({})\n", name,
          upstream.state->Healthy() ? "ejected or cooling down" : "failing its health checks");
    }
  }
  return text;
}

std::vector<std::pair<std::string, serve::CanaryStatus>> Gateway::Canaries() const {
  return runtime()->router->CanaryStates();
}

std::vector<std::pair<std::string, bool>> Gateway::UpstreamHealth() const {
  const std::shared_ptr<const Runtime> current = runtime();
  std::vector<std::pair<std::string, bool>> health;
  const SteadyTime now = Clock::Real().Now();
  for (const auto& [name, upstream] : current->upstreams) {
    health.emplace_back(name, upstream.state->Available(now));
  }
  return health;
}

void Gateway::ScheduleHealthChecks() {
  if (stopping_) return;
  const auto interval = runtime()->config.health_check.interval;
  timers_.Schedule(interval, [this] {
    CheckHealth();
    ScheduleHealthChecks();
  });
}

void Gateway::CheckHealth() {
  if (stopping_) return;
  const std::shared_ptr<const Runtime> current = runtime();
  const HealthCheckConfig& health = current->config.health_check;
  for (const auto& [name, upstream] : current->upstreams) {
    const UpstreamConfig& config = upstream.state->config();
    const std::string path = config.health_path.empty()
                                 ? std::string(DefaultHealthPath(config.engine))
                                 : config.health_path;
    if (path.empty()) continue;
    net::Endpoint root = upstream.endpoint;
    root.path_prefix.clear();  // health paths are from the server's root
    net::HttpClientRequest request;
    request.method = "GET";
    request.target = path;
    request.headers = upstream.headers;
    request.timeouts.connect = health.timeout;
    request.timeouts.first_byte = health.timeout;
    request.timeouts.idle = health.timeout;
    request.timeouts.total = health.timeout;
    request.max_response_bytes = 64 * 1024;
    std::shared_ptr<UpstreamState> state = upstream.state;
    upstream.client->Fetch(root, std::move(request), [state, name](net::HttpFetchResult result) {
      const bool passed = result.status.ok() && result.response.status == 200;
      if (state->ReportCheck(passed)) {
        if (passed) {
          LOG_INFO("gateway: upstream '{}' passes its health checks again", name);
        } else {
          LOG_WARN("gateway: upstream '{}' fails its health checks ({}); calls go elsewhere", name,
                   result.status.ok() ? fmt::format("HTTP {}", result.response.status)
                                      : result.status.message());
        }
      }
    });
  }
}

}  // namespace rampart::gateway
