// InferenceServer's ensembles over the fake `add` backend: loading, cycles, unloading with their
// step models, and what a request in flight keeps (its step models, priority, timeout) and counts.

#include <gtest/gtest.h>

#include <future>
#include <mutex>
#include <vector>

#include "server_repository.h"

namespace rampart::serve {
namespace {

TEST(InferenceServer, EnsemblesThatWouldCallEachOtherAreRefused) {
  RepositoryDir repository;
  backend::BackendRegistry backends = AddBackends();
  InferenceServer server(ExplicitMode(repository.path(), /*strict=*/false), backends);
  WriteModel(repository.path(), "one", ChainConfig("one", 1));
  WriteModel(repository.path(), "two", ChainConfig("two", 1, "one", /*step_is_chain=*/true));
  ASSERT_TRUE(server.LoadModel("add").ok());
  ASSERT_TRUE(server.LoadModel("one").ok());
  ASSERT_TRUE(server.LoadModel("two").ok());
  // Reloading `one` with `two` as its step would make a request recurse without end.
  WriteModel(repository.path(), "one", ChainConfig("one", 1, "two", /*step_is_chain=*/true));
  Status cycle = server.LoadModel("one");
  ASSERT_FALSE(cycle.ok());
  EXPECT_EQ(cycle.message(), "ensemble 'one': its steps call it again (one -> two -> one)");
  EXPECT_TRUE(server.GetModel("one", kLatestVersion).ok());  // the serving version stays
  server.Shutdown(std::chrono::milliseconds(0));
}

// Writes `step` (the fake `add` under that name, one row per execution, with `extra` in its
// config) and `chain`, an ensemble of one call to it, also one row per request.
void WriteOneRowChain(const std::filesystem::path& repository, std::string_view step,
                      std::string_view extra) {
  std::string config = kAddConfig;
  config.replace(config.find("name: \"add\""), 11, fmt::format("name: \"{}\"", step));
  config.replace(config.find("max_batch_size: 4"), 17, "max_batch_size: 1");
  WriteModel(repository, step, config + std::string(extra) + "\n");
  std::string chain = ChainConfig("chain", 1, step);
  chain.replace(chain.find("max_batch_size: 4"), 17, "max_batch_size: 1");
  WriteModel(repository, "chain", chain);
}

// `chain` (two `add` steps) loaded in explicit mode, with one request on its first step, held at
// the gate.
class ChainOnItsFirstStep {
 public:
  ChainOnItsFirstStep() {
    WriteModel(repository_.path(), "chain", ChainConfig("chain", 2));
    EXPECT_TRUE(server_.LoadModel("add").ok());
    EXPECT_TRUE(server_.LoadModel("chain").ok());
    Gate().Close();
    server_.Infer(EnsembleRequest("chain", kHold),
                  [this](Result<std::unique_ptr<InferResponse>> result) {
                    answer_.set_value(std::move(result));
                  });
    Gate().WaitForWaiting(1);  // step 1 is executing
  }
  InferenceServer& server() { return server_; }
  Result<std::unique_ptr<InferResponse>> Answer() { return answer_.get_future().get(); }

 private:
  RepositoryDir repository_;
  backend::BackendRegistry backends_ = AddBackends();
  // Before the server, which may still answer it as it goes.
  std::promise<Result<std::unique_ptr<InferResponse>>> answer_;
  InferenceServer server_{ExplicitMode(repository_.path(), /*strict=*/false), backends_};
};

TEST(InferenceServer, AShutdownLetsAnEnsembleInFlightFinishItsSteps) {
  ChainOnItsFirstStep held;
  InferenceServer& server = held.server();
  auto drained = std::async(std::launch::async,
                            [&server] { return server.Shutdown(std::chrono::seconds(10)); });
  while (server.IsReady()) std::this_thread::yield();  // the drain has begun
  Gate().Open();  // step 1 finishes; step 2 starts while the server drains
  Result<std::unique_ptr<InferResponse>> result = held.Answer();
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  EXPECT_EQ(drained.get(), 0);
  // New requests are refused.
  Status refused;
  server.Infer(EnsembleRequest("chain", 1),
               [&refused](Result<std::unique_ptr<InferResponse>> r) { refused = r.status(); });
  EXPECT_EQ(refused.code(), StatusCode::kUnavailable);
}

// Triton's ensemble holds its models' handles for the request's life: unloading a step model
// while a request is on its first step does not fail the second.
TEST(InferenceServer, AnEnsembleInFlightKeepsItsStepModelsThroughAnUnload) {
  ChainOnItsFirstStep held;
  InferenceServer& server = held.server();
  const Status unloaded = server.UnloadModel("add");
  const bool chain_gone = !server.GetModel("chain", kLatestVersion).ok();  // unloaded with it
  Gate().Open();
  EXPECT_TRUE(unloaded.ok()) << unloaded.ToString();
  EXPECT_TRUE(chain_gone);
  Result<std::unique_ptr<InferResponse>> result = held.Answer();
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  const auto* sum = reinterpret_cast<const int32_t*>((*result)->outputs[0].data.data());
  EXPECT_EQ(sum[0], kHold + 2);  // (A + B) + B
  server.Shutdown(std::chrono::milliseconds(0));
}

// Triton's ensemble gives each step's request the ensemble request's priority: a priority-1
// ensemble request's step overtakes a request waiting at the step model's default level 2.
TEST(InferenceServer, AnEnsembleStepCarriesTheRequestsPriority) {
  RepositoryDir repository;
  WriteOneRowChain(repository.path(), "levels",
                   "dynamic_batching { priority_levels: 2 default_priority_level: 2 }");
  backend::BackendRegistry backends = AddBackends();
  InferenceServer server(ExplicitMode(repository.path(), /*strict=*/false), backends);
  ASSERT_TRUE(server.LoadModel("levels").ok());
  ASSERT_TRUE(server.LoadModel("chain").ok());

  std::mutex mutex;
  std::vector<std::string> answered;  // in the order the instance ran them
  std::promise<void> all_answered;
  auto record = [&](std::string what) {
    return [&, what](Result<std::unique_ptr<InferResponse>> result) {
      EXPECT_TRUE(result.ok()) << what << ": " << result.status().ToString();
      std::lock_guard lock(mutex);
      answered.push_back(what);
      if (answered.size() == 3) all_answered.set_value();
    };
  };
  auto direct = [](int32_t first) {
    auto request =
        Request({Int32Tensor("INPUT0", {1, 2}, {first, 1}), Int32Tensor("INPUT1", {1, 2}, {1, 1})});
    request->model_name = "levels";
    return request;
  };
  Gate().Close();
  server.Infer(direct(kHold), record("held"));
  Gate().WaitForWaiting(1);  // the one instance is busy
  server.Infer(direct(1), record("level 2"));
  auto ensemble = EnsembleRequest("chain", 2);
  ensemble->priority = 1;
  server.Infer(std::move(ensemble), record("ensemble at level 1"));
  Gate().Open();
  all_answered.get_future().wait();
  EXPECT_EQ(answered, (std::vector<std::string>{"held", "ensemble at level 1", "level 2"}));
  server.Shutdown(std::chrono::milliseconds(0));
}

// Triton's ensemble statistics: one execution of the request's batch, with the steps' queue and
// compute times added up.
TEST(InferenceServer, AnEnsembleCountsItsBatchAndItsStepsTimes) {
  RepositoryDir repository;
  backend::BackendRegistry backends = AddBackends();
  InferenceServer server(ExplicitMode(repository.path(), /*strict=*/false), backends);
  WriteModel(repository.path(), "chain", ChainConfig("chain", 2));
  ASSERT_TRUE(server.LoadModel("add").ok());
  ASSERT_TRUE(server.LoadModel("chain").ok());
  auto request = Request({Int32Tensor("A", {2, 1}, {1, 2}), Int32Tensor("B", {2, 1}, {1, 1})});
  request->model_name = "chain";
  std::promise<Result<std::unique_ptr<InferResponse>>> answer;
  server.Infer(std::move(request), [&answer](Result<std::unique_ptr<InferResponse>> result) {
    answer.set_value(std::move(result));
  });
  ASSERT_TRUE(answer.get_future().get().ok());

  const StatisticsSnapshot steps = (*server.GetModel("add", 1))->statistics().Snapshot();
  const StatisticsSnapshot ensemble = (*server.GetModel("chain", 1))->statistics().Snapshot();
  EXPECT_EQ(steps.execution_count, 2u);
  EXPECT_EQ(ensemble.inference_count, 2u);
  EXPECT_EQ(ensemble.execution_count, 1u);
  ASSERT_TRUE(ensemble.batch_stats.contains(2));
  EXPECT_EQ(ensemble.batch_stats.at(2).compute_infer.count, 1u);
  EXPECT_EQ(ensemble.success.count, 1u);
  EXPECT_EQ(ensemble.queue.count, 1u);
  EXPECT_GT(steps.queue.ns, 0u);
  EXPECT_EQ(ensemble.queue.ns, steps.queue.ns);
  EXPECT_EQ(ensemble.compute_infer.ns, steps.compute_infer.ns);
  EXPECT_EQ(ensemble.batch_stats.at(2).compute_infer.ns, steps.compute_infer.ns);
  server.Shutdown(std::chrono::milliseconds(0));
}

TEST(InferenceServer, UnloadingAModelTakesTheEnsemblesThatCallIt) {
  RepositoryDir repository;
  backend::BackendRegistry backends = AddBackends();
  InferenceServer server(ExplicitMode(repository.path(), /*strict=*/true), backends);
  WriteModel(repository.path(), "one", ChainConfig("one", 1));
  WriteModel(repository.path(), "two",
             ChainConfig("two", 1, "one", /*step_is_chain=*/true));  // through `one`
  for (const char* name : {"add", "one", "two"}) ASSERT_TRUE(server.LoadModel(name).ok());
  // They could not run without `add` (Triton unloads them too).
  ASSERT_TRUE(server.UnloadModel("add").ok());
  EXPECT_FALSE(server.GetModel("one", kLatestVersion).ok());
  EXPECT_FALSE(server.GetModel("two", kLatestVersion).ok());
  EXPECT_TRUE(server.IsReady());  // unloaded on request, as far as readiness goes
  server.Shutdown(std::chrono::milliseconds(0));
}

// As Triton loads an ensemble's composing models: loading `two` (calling `one`, calling `add`)
// loads both; with unload_dependents, unloading it unloads those its load brought in, not a
// model loaded on request, nor one another loaded ensemble still calls.
TEST(InferenceServer, AnEnsembleLoadBringsItsStepModelsAndTakesThemAlongOnRequest) {
  RepositoryDir repository;
  backend::BackendRegistry backends = AddBackends();
  InferenceServer server(ExplicitMode(repository.path(), /*strict=*/true), backends);
  WriteModel(repository.path(), "one", ChainConfig("one", 1));
  WriteModel(repository.path(), "two", ChainConfig("two", 1, "one", /*step_is_chain=*/true));
  WriteModel(repository.path(), "three", ChainConfig("three", 2));
  const auto loaded = [&server](const char* name) {
    return server.GetModel(name, kLatestVersion).ok();
  };
  ASSERT_TRUE(server.LoadModel("two").ok());
  EXPECT_TRUE(loaded("one"));
  EXPECT_TRUE(loaded("add"));
  // Without the flag the step models stay.
  ASSERT_TRUE(server.UnloadModel("two").ok());
  EXPECT_FALSE(loaded("two"));
  EXPECT_TRUE(loaded("one"));
  EXPECT_TRUE(loaded("add"));
  // With it they go, as none was loaded on request and nothing else calls them.
  ASSERT_TRUE(server.LoadModel("two").ok());
  ASSERT_TRUE(server.UnloadModel("two", /*unload_dependents=*/true).ok());
  EXPECT_FALSE(loaded("one"));
  EXPECT_FALSE(loaded("add"));
  EXPECT_TRUE(server.IsReady());  // unloaded models do not count

  // `three` also calls `add`: it stays while `three` is loaded; `one` goes.
  ASSERT_TRUE(server.LoadModel("two").ok());
  ASSERT_TRUE(server.LoadModel("three").ok());
  ASSERT_TRUE(server.UnloadModel("two", /*unload_dependents=*/true).ok());
  EXPECT_FALSE(loaded("one"));
  EXPECT_TRUE(loaded("add"));
  ASSERT_TRUE(server.UnloadModel("three", /*unload_dependents=*/true).ok());
  EXPECT_FALSE(loaded("add"));

  // A step model loaded on request stays (an explicit load of one brought in counts too).
  ASSERT_TRUE(server.LoadModel("add").ok());
  ASSERT_TRUE(server.LoadModel("two").ok());
  ASSERT_TRUE(server.LoadModel("one").ok());
  ASSERT_TRUE(server.UnloadModel("two", /*unload_dependents=*/true).ok());
  EXPECT_TRUE(loaded("one"));
  EXPECT_TRUE(loaded("add"));
  server.Shutdown(std::chrono::milliseconds(0));
}

// A step model that fails fails the ensemble with its reason; the index shows both.
TEST(InferenceServer, AnEnsembleWhoseStepModelFailsToLoadFailsWithItsReason) {
  RepositoryDir repository;
  backend::BackendRegistry backends = AddBackends();
  InferenceServer server(ExplicitMode(repository.path(), /*strict=*/false), backends);
  WriteModel(repository.path(), "pipe", ChainConfig("pipe", 1, "broken"));
  const Status failed = server.LoadModel("pipe");
  ASSERT_FALSE(failed.ok());
  EXPECT_EQ(failed.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(failed.message().find("ensemble 'pipe': step model 'broken' failed to load: "),
            std::string::npos)
      << failed.message();
  for (const ModelIndexEntry& entry : server.RepositoryIndex()) {
    if (entry.name == "pipe" || entry.name == "broken") {
      EXPECT_EQ(entry.state, "UNAVAILABLE") << entry.name;
    }
  }
  // An ensemble that calls itself through another is refused, not loaded without end.
  WriteModel(repository.path(), "one", ChainConfig("one", 1, "two", /*step_is_chain=*/true));
  WriteModel(repository.path(), "two", ChainConfig("two", 1, "one", /*step_is_chain=*/true));
  EXPECT_FALSE(server.LoadModel("one").ok());
  EXPECT_FALSE(server.GetModel("one", kLatestVersion).ok());
  server.Shutdown(std::chrono::milliseconds(0));
}

// Triton's ensemble gives each step's request the ensemble request's timeout too: a step that
// waits behind a busy instance past it is rejected, and so is the ensemble request.
TEST(InferenceServer, AnEnsembleStepCarriesTheRequestsTimeout) {
  RepositoryDir repository;
  WriteOneRowChain(repository.path(), "timed",
                   "dynamic_batching { default_queue_policy { default_timeout_microseconds: "
                   "3600000000 allow_timeout_override: true } }");
  backend::BackendRegistry backends = AddBackends();
  InferenceServer server(ExplicitMode(repository.path(), /*strict=*/false), backends);
  ASSERT_TRUE(server.LoadModel("timed").ok());
  ASSERT_TRUE(server.LoadModel("chain").ok());

  auto held =
      Request({Int32Tensor("INPUT0", {1, 2}, {kHold, 1}), Int32Tensor("INPUT1", {1, 2}, {1, 1})});
  held->model_name = "timed";
  std::promise<Status> held_answer;
  Gate().Close();
  server.Infer(std::move(held), [&](Result<std::unique_ptr<InferResponse>> result) {
    held_answer.set_value(result.status());
  });
  Gate().WaitForWaiting(1);  // the one instance is busy until the gate opens
  auto ensemble = EnsembleRequest("chain", 2);
  ensemble->timeout_us = 1000;  // 1 ms in the step model's queue
  std::promise<Status> answer;
  server.Infer(std::move(ensemble), [&](Result<std::unique_ptr<InferResponse>> result) {
    answer.set_value(result.status());
  });
  // Answered by the queue's timer while the gate is still closed.
  std::future<Status> answered = answer.get_future();
  const std::future_status ready = answered.wait_for(std::chrono::seconds(10));
  Gate().Open();
  ASSERT_EQ(ready, std::future_status::ready);
  const Status status = answered.get();
  EXPECT_EQ(status.code(), StatusCode::kUnavailable);
  EXPECT_NE(status.message().find("Request timeout expired"), std::string::npos)
      << status.message();
  EXPECT_TRUE(held_answer.get_future().get().ok());
  server.Shutdown(std::chrono::milliseconds(0));
}

}  // namespace
}  // namespace rampart::serve
