// The PII guard's cost in the gateway: a call through the standard pipeline (parse, route,
// guard_input, guard_output, account) with the guard off and on, with the real detector, and
// the cost per streamed chunk of guard_output's stream redaction.
//
// Prints, for each case, microseconds per call (or per chunk) with the guard off and on, and the
// difference (what the guard adds). In-process: no sockets, no upstream; the figures are the
// gateway's own CPU time, which is what the guard adds to a call's latency.
//
// Usage: build/bench/guard_stage_bench [--iterations N]

#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "gateway/guard_stages.h"
#include "gateway/stages.h"
#include "metrics/registry.h"

namespace {

using namespace rampart;
using Clock = std::chrono::steady_clock;

constexpr std::string_view kPrompt =
    "你好，我是客户张三，手机号 13800138000，邮箱 zhang.san@example.com。我上周在你们的网店买了"
    "一台笔记本电脑，订单号 2026113012345678，到现在还没有发货。请帮我查一下物流情况，另外我想"
    "把收货地址改成公司地址。Hello, could you also tell me whether the warranty covers the "
    "battery, and how long a repair usually takes? Thanks a lot for your help today.";

std::string ChatRequest(bool stream) {
  return fmt::format(
      R"({{"model":"chat","stream":{},"messages":[{{"role":"system","content":"You are a helpful )"
      R"(customer service assistant."}},{{"role":"user","content":"{}"}}]}})",
      stream ? "true" : "false", kPrompt);
}

std::string ChatAnswer() {
  return fmt::format(
      R"({{"id":"x","object":"chat.completion","created":1,"model":"chat","choices":[{{"index":0,)"
      R"("message":{{"role":"assistant","content":"{}"}},"finish_reason":"stop"}}],)"
      R"("usage":{{"prompt_tokens":120,"completion_tokens":140,"total_tokens":260}}}})",
      kPrompt);
}

// Stream chunks of about `size` bytes of kPrompt each (cut on character boundaries).
std::vector<std::string> Chunks(size_t size) {
  std::vector<std::string> chunks;
  const std::string_view text = kPrompt;
  size_t from = 0;
  while (from < text.size()) {
    size_t to = std::min(text.size(), from + size);
    while (to < text.size() && (static_cast<uint8_t>(text[to]) & 0xC0) == 0x80) ++to;
    chunks.push_back(fmt::format(
        R"({{"id":"s","object":"chat.completion.chunk","created":1,"model":"chat","choices":)"
        R"([{{"index":0,"delta":{{"content":"{}"}},"finish_reason":null}}]}})",
        text.substr(from, to - from)));
    from = to;
  }
  return chunks;
}

struct Setup {
  gateway::GatewayConfig config;
  std::unique_ptr<gateway::Router> router;
  gateway::GuardRuntime guard;
};

Setup MakeSetup(bool on, const std::shared_ptr<const guard::Detector>& detector) {
  Setup setup;
  setup.config.upstreams.push_back({.name = "u", .url = "http://127.0.0.1:9/v1"});
  setup.config.targets.push_back({.name = "chat", .endpoints = {{.upstream = "u"}}});
  if (on) {
    setup.config.guard.defaults = {.input = gateway::GuardMode::kRedact,
                                   .output = gateway::GuardMode::kRedact,
                                   .block = {"SECRET"}};
  }
  setup.router = std::make_unique<gateway::Router>(setup.config);
  static const auto keys = std::make_shared<guard::GuardKeys>(guard::GuardKeys::Generate());
  setup.guard = {.detector = detector,
                 .keys = keys,
                 .tenant_keys = keys->ForTenant(guard::kDefaultTenant),
                 .config = &setup.config};
  return setup;
}

gateway::CallContext NewCall(const Setup& setup, bool stream) {
  gateway::CallContext call;
  call.router = setup.router.get();
  call.guard = &setup.guard;
  call.http.body = ChatRequest(stream);
  return call;
}

double WholeCallMicros(const gateway::Pipeline& pipeline, const Setup& setup, int iterations) {
  const std::string answer = ChatAnswer();
  const auto start = Clock::now();
  for (int i = 0; i < iterations; ++i) {
    gateway::CallContext call = NewCall(setup, false);
    if (!pipeline.Request(call).ok()) std::abort();
    std::string body = answer;
    if (!pipeline.Answer(call, body).ok()) std::abort();
    call.status = 200;
    pipeline.Complete(call);
  }
  return std::chrono::duration<double, std::micro>(Clock::now() - start).count() / iterations;
}

double ChunkMicros(const gateway::Pipeline& pipeline, const Setup& setup, int iterations,
                   const std::vector<std::string>& chunks) {
  gateway::CallContext prepared = NewCall(setup, true);
  if (!pipeline.Request(prepared).ok()) std::abort();
  const auto start = Clock::now();
  for (int i = 0; i < iterations; ++i) {
    gateway::CallContext call;
    call.operation = prepared.operation;
    call.request.stream = true;
    call.plan = prepared.plan;
    call.guard = prepared.guard;
    for (const std::string& chunk : chunks) {
      std::string data = chunk;
      if (!pipeline.Answer(call, data).ok()) std::abort();
    }
    if (!pipeline.AnswerEnd(call).ok()) std::abort();
  }
  const double total = std::chrono::duration<double, std::micro>(Clock::now() - start).count();
  return total / iterations / static_cast<double>(chunks.size());
}

}  // namespace

int main(int argc, char** argv) {
  int iterations = 20000;
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::strcmp(argv[i], "--iterations") == 0) iterations = std::atoi(argv[i + 1]);
  }
  Result<std::unique_ptr<guard::Detector>> created = guard::Detector::Create({});
  if (!created.ok()) {
    std::fprintf(stderr, "%s\n", created.status().ToString().c_str());
    return 1;
  }
  const std::shared_ptr<const guard::Detector> detector = std::move(created).value();
  metrics::Registry registry;
  gateway::GatewayMetrics metrics(registry);
  const gateway::Pipeline pipeline = gateway::StandardPipeline(metrics, false);
  const Setup off = MakeSetup(false, detector);
  const Setup on = MakeSetup(true, detector);
  std::printf(
      "detector engine: %s; prompt and answer %zu bytes of mixed Chinese and English "
      "with 2 entities; %d iterations\n\n",
      std::string(detector->engine()).c_str(), kPrompt.size(), iterations);
  // Warm up.
  WholeCallMicros(pipeline, on, iterations / 10);
  const double whole_off = WholeCallMicros(pipeline, off, iterations);
  const double whole_on = WholeCallMicros(pipeline, on, iterations);
  std::printf("%-34s %10s %10s %10s\n", "case", "off (us)", "on (us)", "added (us)");
  std::printf("%-34s %10.2f %10.2f %10.2f\n", "whole call (request + answer)", whole_off, whole_on,
              whole_on - whole_off);
  for (size_t size : {4, 16, 64}) {
    const std::vector<std::string> chunks = Chunks(size);
    const double chunk_off = ChunkMicros(pipeline, off, iterations / 10, chunks);
    const double chunk_on = ChunkMicros(pipeline, on, iterations / 10, chunks);
    const std::string name = fmt::format("per chunk, ~{} bytes of content", size);
    std::printf("%-34s %10.2f %10.2f %10.2f\n", name.c_str(), chunk_off, chunk_on,
                chunk_on - chunk_off);
  }
  return 0;
}
