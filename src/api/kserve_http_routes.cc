// KServeHttp's routes: every path and method it answers, in one table, and the matching that
// picks a route for a request.

#include <algorithm>
#include <charconv>

#include "api/access_http.h"
#include "api/http_status.h"
#include "api/kserve_http.h"
#include "core/strings.h"
#include "core/trace.h"
#include "gateway/gateway.h"

namespace rampart::api {
namespace {

// Percent-decodes one path segment. nullopt on a malformed escape.
std::optional<std::string> DecodeSegment(std::string_view segment) {
  std::string out;
  out.reserve(segment.size());
  for (size_t i = 0; i < segment.size(); ++i) {
    if (segment[i] != '%') {
      out.push_back(segment[i]);
      continue;
    }
    if (i + 2 >= segment.size()) return std::nullopt;
    const int high = HexDigitValue(segment[i + 1]);
    const int low = HexDigitValue(segment[i + 2]);
    if (high < 0 || low < 0) return std::nullopt;
    out.push_back(static_cast<char>(high * 16 + low));
    i += 2;
  }
  return out;
}

// The non-empty segments of a path ("/v2//models/" has two).
std::vector<std::string_view> SplitPath(std::string_view path) {
  std::vector<std::string_view> segments;
  segments.reserve(8);  // the longest route has 6: one allocation, not one per doubling
  size_t start = 0;
  while (start <= path.size()) {
    const size_t end = path.find('/', start);
    const std::string_view segment =
        path.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start);
    if (!segment.empty()) segments.push_back(segment);
    if (end == std::string_view::npos) break;
    start = end + 1;
  }
  return segments;
}

Result<int64_t> ParseVersion(std::string_view text) {
  int64_t version = 0;
  auto [ptr, error] = std::from_chars(text.data(), text.data() + text.size(), version);
  if (error != std::errc() || ptr != text.data() + text.size() || version < 0) {
    // Triton's routes only match digits here, so anything else is an unknown path: 404.
    return NotFound("'{}' is not a valid model version", text);
  }
  return version;
}

constexpr std::string_view kModel = "{model}";
constexpr std::string_view kOpen = "";  // a route without access control (health probes)
constexpr std::string_view kVersion = "{version}";

}  // namespace

const std::vector<KServeHttp::Route>& KServeHttp::Routes() {
  static const std::vector<Route> routes = [] {
    std::vector<Route> table;
    const auto add = [&table](std::string_view method, std::string_view pattern,
                              std::string_view action, std::string_view resource_type,
                              RouteHandler handler) {
      const std::vector<std::string_view> segments = SplitPath(pattern);
      table.push_back({method, {segments.begin(), segments.end()}, handler, action, resource_type});
    };
    using Request = net::HttpRequest;
    using Responder = RecordedResponder;

    add("GET", "/v2", "server:read", "server",
        [](KServeHttp& self, RouteArgs&, Request&&, Responder&& responder) {
          responder.Send(self.ServerMetadata());
        });
    add("GET", "/v2/health/live", kOpen, kOpen,
        [](KServeHttp& self, RouteArgs&, Request&&, Responder&& r) {
          r.Send(EmptyResponse(self.server_.IsLive() ? 200 : 400));
        });
    add("GET", "/v2/health/ready", kOpen, kOpen,
        [](KServeHttp& self, RouteArgs&, Request&&, Responder&& r) {
          r.Send(EmptyResponse(self.server_.IsReady() ? 200 : 400));
        });
    // Reads the repository's directory: on the repository thread.
    add("POST", "/v2/repository/index", "repository:read", "repository",
        [](KServeHttp& self, RouteArgs& args, Request&& request, Responder&& responder) {
          self.OffIoThread(
              self.repository_reads_, std::move(responder),
              [&self, body = std::move(request.body)] { return self.RepositoryIndex(body); },
              std::move(args.reservation));
        });
    // Loading reads files and builds models: on the control thread, one at a time.
    add("POST", "/v2/repository/models/{model}/load", "model:load", "model",
        [](KServeHttp& self, RouteArgs& args, Request&& request, Responder&& responder) {
          self.QueueRepositoryControl(true, std::move(args.model), std::move(request.body),
                                      std::move(responder), std::move(args.reservation));
        });
    add("POST", "/v2/repository/models/{model}/unload", "model:unload", "model",
        [](KServeHttp& self, RouteArgs& args, Request&& request, Responder&& responder) {
          self.QueueRepositoryControl(false, std::move(args.model), std::move(request.body),
                                      std::move(responder), std::move(args.reservation));
        });
    // Triton's logging extension.
    for (std::string_view method : {"GET", "POST"}) {
      add(method, "/v2/logging", method == "GET" ? "server:read" : "server:write", "server",
          [](KServeHttp& self, RouteArgs&, Request&& request, Responder&& responder) {
            responder.Send(self.Logging(request));
          });
    }
    add("GET", "/v2/models/stats", "model:read", "model",
        [](KServeHttp& self, RouteArgs&, Request&&, Responder&& r) {
          r.Send(self.Statistics("", serve::kLatestVersion));
        });
    // A model's routes, for its latest version and for a version of its own.
    for (std::string_view model : {"/v2/models/{model}", "/v2/models/{model}/versions/{version}"}) {
      const std::string base(model);
      add("GET", model, "model:read", "model",
          [](KServeHttp& self, RouteArgs& args, Request&&, Responder&& r) {
            r.Send(self.ModelMetadata(args.model, args.version));
          });
      add("GET", base + "/ready", "model:read", "model",
          [](KServeHttp& self, RouteArgs& args, Request&&, Responder&& r) {
            r.Send(self.ModelReady(args.model, args.version));
          });
      add("GET", base + "/config", "model:read", "model",
          [](KServeHttp& self, RouteArgs& args, Request&&, Responder&& r) {
            r.Send(self.ModelConfig(args.model, args.version));
          });
      add("GET", base + "/stats", "model:read", "model",
          [](KServeHttp& self, RouteArgs& args, Request&&, Responder&& r) {
            r.Send(self.Statistics(args.model, args.version));
          });
      add("POST", base + "/infer", "model:infer", "model",
          [](KServeHttp& self, RouteArgs& args, Request&& request, Responder&& responder) {
            self.Infer(std::move(request), args, std::move(responder));
          });
      // Canary releases concern a model's unversioned traffic; a version in the path is ignored.
      add("GET", base + "/canary", "model:read", "model",
          [](KServeHttp& self, RouteArgs& args, Request&&, Responder&& r) {
            r.Send(self.Canary(args.model));
          });
      add("POST", base + "/canary", "model:canary", "model",
          [](KServeHttp& self, RouteArgs& args, Request&& request, Responder&& responder) {
            responder.Send(self.StartCanary(args.model, request.body));
          });
      add("DELETE", base + "/canary", "model:canary", "model",
          [](KServeHttp& self, RouteArgs& args, Request&&, Responder&& responder) {
            const Status stopped = self.server_.StopCanary(args.model);
            responder.Send(stopped.ok() ? EmptyResponse(200) : KServeError(stopped));
          });
    }
    return table;
  }();
  return routes;
}

std::vector<std::string_view> KServeHttp::Actions() {
  std::vector<std::string_view> actions;
  for (const Route& route : Routes()) {
    if (!route.action.empty() &&
        std::find(actions.begin(), actions.end(), route.action) == actions.end()) {
      actions.push_back(route.action);
    }
  }
  return actions;
}

void KServeHttp::Handle(net::HttpRequest&& request, net::Responder plain) {
  const std::vector<std::string_view> path = SplitPath(request.path());
  bool path_known = false;
  for (const Route& route : Routes()) {
    if (route.pattern.size() != path.size()) continue;
    bool matches = true;
    for (size_t i = 0; i < path.size() && matches; ++i) {
      const std::string_view part = route.pattern[i];
      matches = part == kModel || part == kVersion || part == path[i];
    }
    if (!matches) continue;
    path_known = true;
    if (route.method != request.method) continue;
    RouteArgs args;
    Status path_error;  // a malformed model name or version
    for (size_t i = 0; i < path.size() && path_error.ok(); ++i) {
      if (route.pattern[i] == kModel) {
        std::optional<std::string> model = DecodeSegment(path[i]);
        if (model) {
          args.model = std::move(*model);
        } else {
          path_error = InvalidArgument("malformed model name in {}", request.path());
        }
      } else if (route.pattern[i] == kVersion) {
        Result<int64_t> version = ParseVersion(path[i]);
        if (version.ok()) {
          args.version = *version;
        } else {
          path_error = version.status();
        }
      }
    }
    std::optional<TraceContext> parent;
    if (auto header = request.Header("traceparent")) parent = TraceContext::Parse(*header);
    args.trace = parent ? parent->Child() : TraceContext::Start();
    // Every model's (GET /v2/models/stats) is the resource "*" of its type.
    // (Views on both arms: a conditional between "*" and a std::string would make a temporary
    // std::string, and the view would dangle.)
    const std::string_view name = route.resource_type != "model" ? std::string_view()
                                  : args.model.empty()           ? std::string_view("*")
                                                                 : std::string_view(args.model);
    // Health probes (no action) are not a principal's requests: never recorded.
    RecordedResponder responder =
        options_.audit == nullptr || route.action.empty()
            ? RecordedResponder(std::move(plain))
            : RecordedResponder(std::move(plain), options_.audit,
                                StartRecord(request, "kserve_http", args.trace.TraceId(),
                                            gateway::RequestId(request, args.trace), route.action,
                                            route.resource_type, name),
                                request.received);
    // An infer request's body is handed over once decoded (KServeHttp::Infer); other routes'
    // are small.
    if (route.action != "model:infer" || !path_error.ok()) {
      responder.SetRequestContent(request.body);
    }
    if (!path_error.ok()) {
      responder.Send(KServeError(path_error));
      return;
    }
    if (!route.action.empty() && Enforcing(options_.access)) {
      const policy::Resource resource{.type = route.resource_type, .name = name};
      audit::AuditRecord* record = responder.record();
      policy::AccessOutcome outcome =
          record != nullptr
              ? CheckRecorded(*options_.access, request, route.action, resource, 0, *record)
              : CheckRequest(*options_.access, request, route.action, resource);
      if (auto* refusal = std::get_if<policy::AccessRefusal>(&outcome)) {
        if (route.action == "model:infer") responder.SetRequestContent(request.body);
        responder.Send(RefusalResponse(*refusal, request, ErrorShape::kKServe));
        return;
      }
      auto& grant = std::get<policy::AccessGrant>(outcome);
      responder.SetFull(grant.HasObligation(policy::kObligationAuditFull));
      args.tenant = std::move(grant.identity.tenant);
      args.reservation = std::move(grant.reservation);
    }
    route.handler(*this, args, std::move(request), std::move(responder));
    return;
  }
  if (!path_known) {
    plain.Send(KServeError(NotFound("no route for {}", request.path())));
    return;
  }
  // Triton answers a known route with the wrong method 405 (not a Status code of ours).
  net::HttpResponse response = KServeError(
      InvalidArgument("method {} is not allowed on {}", request.method, request.path()));
  response.status = 405;
  plain.Send(std::move(response));
}

void KServeHttp::QueueRepositoryControl(bool load, std::string model, std::string body,
                                        RecordedResponder responder,
                                        policy::Reservation reservation) {
  OffIoThread(
      control_, std::move(responder),
      [this, load, model = std::move(model), body = std::move(body)] {
        return RepositoryControl(load, model, body);
      },
      std::move(reservation));
}

void KServeHttp::OffIoThread(SerialWorker& worker, RecordedResponder responder,
                             UniqueFunction<net::HttpResponse()> work,
                             policy::Reservation reservation) {
  // Shared with the task, so that a refused task leaves the responder here to answer with.
  auto held = std::make_shared<RecordedResponder>(std::move(responder));
  // The task holds the reservation (its concurrency slot) until the work is done and answered;
  // a refused task drops it with the closure.
  const Status queued =
      worker.Post([held, work = std::move(work), reservation = std::move(reservation)]() mutable {
        net::HttpResponse response = work();
        {
          // Its slot is given back when it goes: before the answer, so a client that sends
          // its next request on the answer finds it free.
          policy::Reservation done = std::move(reservation);
          if (!done.empty()) done.Settle(0);
        }
        held->Send(std::move(response));
      });
  if (queued.ok()) return;  // the task answers; `held` is not touched here again
  net::HttpResponse refusal = KServeError(queued);
  if (queued.code() == StatusCode::kResourceExhausted) {
    // Too many repository requests wait already: the client should slow down.
    refusal = KServeError(Unavailable("too many repository requests are waiting ({}); retry later",
                                      queued.message()));
    refusal.status = 429;
    refusal.headers.emplace_back("Retry-After", "1");
    if (options_.on_worker_queue_full) options_.on_worker_queue_full();
  }
  held->Send(std::move(refusal));
}

}  // namespace rampart::api
