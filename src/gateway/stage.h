#pragma once

// The gateway's request pipeline: named stages in one fixed order (Envoy's filter chain is the
// model).
//
//   parse -> authenticate -> authorise -> quota -> route -> guard_input -> call
//         -> guard_output -> account -> audit
//
// A stage sees the call on its way in (OnRequest, in this order) and may change it or end it
// with an error answer; `call` is the gateway's own step (an upstream or a local model answers);
// the stages after it see each piece of the answer on its way out (OnAnswer: the whole body
// once, or every event of a stream as it passes, so a stream is never collected; OnAnswerEnd
// once a stream has all arrived, to send what they held back), and every stage is told once
// when the call has ended, however it ended (OnComplete, in reverse order). `route` runs before
// `guard_input` because the guard's policy is the route's.
// Stage order is owned here (kStageOrder) and nowhere else; a Pipeline takes one Stage per name.
//
// Stages are shared by all calls and run on I/O threads: they must be thread-safe and never
// block.

#include <array>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/clock.h"
#include "core/status.h"
#include "gateway/openai_request.h"
#include "gateway/openai_response.h"
#include "gateway/router.h"
#include "net/http.h"
#include "policy/access.h"

namespace rampart::gateway {

struct GuardRuntime;      // guard_stages.h
struct GuardStreamState;  // guard_stages.cc: one streamed answer's redactors

// What the guard found in one call, by entity type (static names), for the access log.
struct GuardFindings {
  std::map<std::string_view, int> input;
  std::map<std::string_view, int> output;
  bool blocked = false;
};

inline constexpr std::array<std::string_view, 10> kStageOrder = {
    "parse",       "authenticate", "authorise",    "quota",   "route",
    "guard_input", "call",         "guard_output", "account", "audit"};
// Stages before this index run on the way in; after it, on the way out.
inline constexpr size_t kCallStage = 6;

// Everything one request's stages share. Written by one stage at a time (the pipeline runs them
// in turn), read by the later ones.
struct CallContext {
  Operation operation = Operation::kChatCompletions;
  net::HttpRequest http;  // the request as received (its body moves into `request` at parse)
  std::string request_id;
  std::string trace_id;
  SteadyTime received{};
  const Router* router = nullptr;  // the routing table in force when the call began
  ParseLimits limits;              // the config's limits (max_n) in force when the call began
  OpenAiRequest request;           // parse
  std::string error_param;         // parse: the field at fault, when it failed
  // authenticate, authorise, quota (docs/access.md).
  identity::Identity identity;  // authenticate: who called
  policy::Decision decision;    // authorise: the obligations the later stages honour
  // quota: what the call holds, settled with its usage by the quota stage's OnComplete (which
  // sees the context const, hence mutable).
  mutable policy::Reservation reservation;
  int64_t reserved_tokens = 0;
  // Headers the error answer carries when a stage refuses the call (WWW-Authenticate,
  // Retry-After, x-should-retry).
  std::vector<std::pair<std::string, std::string>> refusal_headers;
  RoutePlan plan;  // route
  // route: the route's guard policy as the decision's obligations change it (redact:pii,
  // block:secret); null = the route's own.
  std::shared_ptr<const GuardPolicy> guard_policy;
  const GuardRuntime* guard = nullptr;             // the guard in force when the call began
  GuardFindings guard_findings;                    // guard_input, guard_output
  std::shared_ptr<GuardStreamState> guard_stream;  // guard_output, for a streamed answer

  // The outcome, filled as the call goes.
  std::string target;          // the logical model that answered (or was tried last)
  std::string upstream;        // the upstream that answered, or "local"
  int status = 0;              // the HTTP status the caller got
  std::string outcome = "ok";  // ok, or the error's kind ("upstream_error", "timeout", ...)
  Usage usage;
  int attempts = 0;
  int retries = 0;
  int fallbacks = 0;
  bool failover = false;
  bool streamed = false;
  bool broken_stream = false;   // a stream that ended with an error event after tokens
  int64_t first_token_ns = -1;  // from `received`; -1 when none came
  int64_t upstream_ns = 0;      // spent waiting for upstreams
  int64_t gateway_ns = 0;       // the gateway's own time: everything else
  // call, for an answer from a knowledge base (gateway/knowledge.h): the vector store searched,
  // the files of the passages put in the prompt (each once, in source order) and the time the
  // search took.
  std::string knowledge_store;
  std::vector<std::string> knowledge_files;
  int64_t search_ns = 0;
  // audit: the answer as the caller got it (a stream's events' data in order), kept only while
  // an audit log records the call.
  std::string audited_answer;
};

class Stage {
 public:
  virtual ~Stage() = default;
  virtual std::string_view name() const = 0;
  // On the way in. A non-OK status ends the call: the caller gets it as an error answer.
  virtual Status OnRequest(CallContext& call) {
    (void)call;
    return Status::Ok();
  }
  // Each piece of the answer on the way out: a whole answer's body, or one stream event's data
  // (without the "data: " framing). May rewrite `data`; a non-OK status ends the answer with an
  // error (for a stream, an error event).
  virtual Status OnAnswer(CallContext& call, std::string& data) {
    (void)call;
    (void)data;
    return Status::Ok();
  }
  // Once, when a streamed answer has all arrived and before its [DONE] goes out: may append
  // events' data (without the framing) to send first; each then passes the later stages'
  // OnAnswer. A non-OK status ends the stream with an error event instead of [DONE].
  virtual Status OnAnswerEnd(CallContext& call, std::vector<std::string>& events) {
    (void)call;
    (void)events;
    return Status::Ok();
  }
  // Once, when the call has ended (answered, failed, or the caller went away).
  virtual void OnComplete(const CallContext& call) { (void)call; }
};

// A stage that lets everything pass (tests build pipelines of them).
class PassThroughStage final : public Stage {
 public:
  explicit PassThroughStage(std::string_view name) : name_(name) {}
  std::string_view name() const override { return name_; }

 private:
  std::string_view name_;
};

class Pipeline {
 public:
  // REQUIRES: one stage per name of kStageOrder except "call", in any order (they are put in
  // kStageOrder's); CHECKed.
  explicit Pipeline(std::vector<std::unique_ptr<Stage>> stages);

  // Runs the stages before `call`; stops at the first error, returning it.
  Status Request(CallContext& call) const;
  // Runs the stages after `call` on one piece of the answer.
  Status Answer(CallContext& call, std::string& data) const;
  // A streamed answer has all arrived: the events the stages after `call` add before [DONE]
  // (OnAnswerEnd), each passed through the stages after the one that added it.
  Result<std::vector<std::string>> AnswerEnd(CallContext& call) const;
  // Tells every stage the call has ended, last stage first.
  void Complete(const CallContext& call) const;

  const Stage& stage(std::string_view name) const;

 private:
  std::vector<std::unique_ptr<Stage>> stages_;  // kStageOrder without "call"
};

}  // namespace rampart::gateway
