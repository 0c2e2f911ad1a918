#include <gtest/gtest.h>

#include "gateway/stages.h"
#include "metrics/registry.h"

namespace rampart::gateway {
namespace {

// Records what it is told in a shared log; fails its request when told to.
class Probe final : public Stage {
 public:
  Probe(std::string_view name, std::vector<std::string>& log, bool refuse = false)
      : name_(name), log_(log), refuse_(refuse) {}
  std::string_view name() const override { return name_; }
  Status OnRequest(CallContext&) override {
    log_.push_back("in:" + std::string(name_));
    return refuse_ ? PermissionDenied("{} says no", name_) : Status::Ok();
  }
  Status OnAnswer(CallContext&, std::string& data) override {
    log_.push_back("out:" + std::string(name_));
    data.append("+").append(name_);
    return Status::Ok();
  }
  void OnComplete(const CallContext&) override { log_.push_back("done:" + std::string(name_)); }

 private:
  std::string_view name_;
  std::vector<std::string>& log_;
  bool refuse_;
};

std::vector<std::unique_ptr<Stage>> Probes(std::vector<std::string>& log,
                                           std::string_view refusing = {}) {
  std::vector<std::unique_ptr<Stage>> stages;
  // Given in reverse: the pipeline puts them in its own order.
  for (size_t i = kStageOrder.size(); i-- > 0;) {
    if (i == kCallStage) continue;
    stages.push_back(std::make_unique<Probe>(kStageOrder[i], log, kStageOrder[i] == refusing));
  }
  return stages;
}

TEST(PipelineTest, OwnsTheOrder) {
  std::vector<std::string> log;
  Pipeline pipeline(Probes(log));
  CallContext call;
  ASSERT_TRUE(pipeline.Request(call).ok());
  std::string data = "x";
  ASSERT_TRUE(pipeline.Answer(call, data).ok());
  pipeline.Complete(call);
  EXPECT_EQ(log, (std::vector<std::string>{
                     "in:parse", "in:authenticate", "in:authorise", "in:quota", "in:route",
                     "in:guard_input", "out:guard_output", "out:account", "out:audit", "done:audit",
                     "done:account", "done:guard_output", "done:guard_input", "done:route",
                     "done:quota", "done:authorise", "done:authenticate", "done:parse"}));
  EXPECT_EQ(data, "x+guard_output+account+audit");
}

TEST(PipelineTest, AStageEndsTheCallEarly) {
  std::vector<std::string> log;
  Pipeline pipeline(Probes(log, "authorise"));
  CallContext call;
  const Status status = pipeline.Request(call);
  EXPECT_EQ(status.code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(log, (std::vector<std::string>{"in:parse", "in:authenticate", "in:authorise"}));
}

TEST(PipelineTest, StandardStagesParseAndRoute) {
  metrics::Registry registry;
  GatewayMetrics metrics(registry);
  Pipeline pipeline = StandardPipeline(metrics, false);
  GatewayConfig config;
  config.upstreams.push_back({.name = "u", .url = "http://127.0.0.1:9/v1"});
  config.targets.push_back({.name = "m", .endpoints = {{.upstream = "u"}}});
  Router router(config);
  CallContext call;
  call.router = &router;
  call.http.body = R"({"model":"m","messages":[{"role":"user","content":"hi"}]})";
  ASSERT_TRUE(pipeline.Request(call).ok());
  EXPECT_EQ(call.request.model, "m");
  EXPECT_EQ(call.plan.chain, (std::vector<std::string>{"m"}));

  CallContext unknown;
  unknown.router = &router;
  unknown.http.body = R"({"model":"x","messages":[{"role":"user","content":"hi"}]})";
  EXPECT_EQ(pipeline.Request(unknown).code(), StatusCode::kNotFound);
  EXPECT_EQ(unknown.error_param, "model");

  call.status = 200;
  call.target = "m";
  call.usage = Usage{.prompt_tokens = 3, .completion_tokens = 4, .total_tokens = 7};
  pipeline.Complete(call);
  const std::string exposition = registry.Exposition();
  EXPECT_NE(exposition.find(R"(rampart_gateway_requests_total{route="direct",model="m",)"
                            R"(operation="chat.completions",code="200"} 1)"),
            std::string::npos)
      << exposition;
  EXPECT_NE(exposition.find(R"(rampart_gateway_tokens_total{route="direct",model="m",)"
                            R"(kind="completion",estimated="false"} 4)"),
            std::string::npos);
}

}  // namespace
}  // namespace rampart::gateway
