// InferenceServer over the fake `add` backend: readiness, the repository index, control modes,
// poll mode, ensembles, canaries, hot reload and shutdown.

#include "serve/server.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <future>

#include "add_backend.h"
#include "testing/eventually.h"

namespace rampart::serve {
namespace {

TEST(InferenceServer, UnknownModelAndVersionUseTritonWording) {
  backend::BackendRegistry backends;
  InferenceServer server(ServerOptions{}, backends);
  Status unknown = server.GetModel("nope", kLatestVersion).status();
  EXPECT_EQ(unknown.code(), StatusCode::kNotFound);
  EXPECT_EQ(unknown.message(), "Request for unknown model: 'nope' is not found");
  Status done;
  server.Infer(Request({}),
               [&done](Result<std::unique_ptr<InferResponse>> r) { done = r.status(); });
  EXPECT_EQ(done.code(), StatusCode::kNotFound);
}

// A repository on disk: `add` (the fake backend, version 1) and `broken` (a config that does not
// parse).
class RepositoryDir {
 public:
  RepositoryDir() {
    char pattern[] = "/tmp/rampart_server_test.XXXXXX";
    EXPECT_NE(mkdtemp(pattern), nullptr);
    path_ = pattern;
    std::filesystem::create_directories(path_ / "add" / "1");
    std::ofstream(path_ / "add" / "config.pbtxt") << kAddConfig;
    std::filesystem::create_directories(path_ / "broken" / "1");
    std::ofstream(path_ / "broken" / "config.pbtxt") << "name: \"broken\" max_batch_size: eight";
  }
  ~RepositoryDir() { std::filesystem::remove_all(path_); }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

ServerOptions ExplicitMode(const std::filesystem::path& repository, bool strict) {
  ServerOptions options;
  options.repository = repository;
  options.control_mode = ModelControlMode::kExplicit;
  options.strict_readiness = strict;
  return options;
}

TEST(InferenceServer, StrictReadinessNeedsEveryModelButUnloadedOnes) {
  RepositoryDir repository;
  backend::BackendRegistry backends = AddBackends();
  InferenceServer server(ExplicitMode(repository.path(), /*strict=*/true), backends);
  ASSERT_TRUE(server.LoadStartupModels().ok());
  EXPECT_TRUE(server.IsReady());  // explicit mode, nothing asked for yet
  ASSERT_TRUE(server.LoadModel("add").ok());
  EXPECT_TRUE(server.IsReady());
  ASSERT_TRUE(server.UnloadModel("add").ok());
  EXPECT_TRUE(server.IsReady());  // unloaded on request: not counted, as in Triton
  EXPECT_FALSE(server.LoadModel("broken").ok());
  EXPECT_FALSE(server.IsReady());
  ASSERT_TRUE(server.LoadModel("add").ok());
  EXPECT_FALSE(server.IsReady());  // `broken` still failed
  server.Shutdown(std::chrono::milliseconds(0));
  EXPECT_FALSE(server.IsReady());
}

// Clients find the models they may load in the index: Triton lists those no load has tried by
// name only, and so does Rampart; load and unload outside explicit mode are Unavailable (503).
TEST(InferenceServer, TheIndexListsModelsNoLoadHasTriedByNameOnly) {
  RepositoryDir repository;
  backend::BackendRegistry backends = AddBackends();
  InferenceServer server(ExplicitMode(repository.path(), /*strict=*/false), backends);
  std::vector<ModelIndexEntry> index = server.RepositoryIndex();
  ASSERT_EQ(index.size(), 2u);
  EXPECT_EQ(index[0].name, "add");
  EXPECT_EQ(index[0].state, "");
  EXPECT_EQ(index[1].name, "broken");
  EXPECT_EQ(index[1].state, "");
  ASSERT_TRUE(server.LoadModel("add").ok());
  index = server.RepositoryIndex();
  ASSERT_EQ(index.size(), 2u);
  EXPECT_EQ(index[0].name, "add");
  EXPECT_EQ(index[0].version, "1");
  EXPECT_EQ(index[0].state, "READY");
  EXPECT_EQ(index[1].name, "broken");
  EXPECT_EQ(index[1].state, "");

  InferenceServer fixed(ServerOptions{.repository = repository.path()}, backends);
  EXPECT_EQ(fixed.LoadModel("add").code(), StatusCode::kUnavailable);
  EXPECT_EQ(fixed.UnloadModel("add").code(), StatusCode::kUnavailable);

  // Once a shutdown began, loads (which can take long) are refused, so the exit keeps its timeout.
  server.Shutdown(std::chrono::milliseconds(0));
  EXPECT_EQ(server.LoadModel("add").message(), "the server is shutting down");
  EXPECT_EQ(server.UnloadModel("add").message(), "the server is shutting down");
}

TEST(InferenceServer, WithoutStrictReadinessAFailedModelLeavesTheServerReady) {
  RepositoryDir repository;
  backend::BackendRegistry backends = AddBackends();
  InferenceServer server(ExplicitMode(repository.path(), /*strict=*/false), backends);
  EXPECT_FALSE(server.LoadModel("broken").ok());
  EXPECT_TRUE(server.IsReady());
  server.Shutdown(std::chrono::milliseconds(0));
  EXPECT_FALSE(server.IsReady());
}

// An ensemble `name` of `steps` chained `add` calls: A + B, then (A + B) + B, ...; its output SUM.
// `step_model` is called by the fake backend's names (INPUT0, INPUT1, OUTPUT0), or, when
// `step_is_chain`, by those of another such ensemble (A, B, SUM).
std::string ChainConfig(std::string_view name, int steps, std::string_view step_model = "add",
                        bool step_is_chain = false) {
  const char* first_input = step_is_chain ? "A" : "INPUT0";
  const char* second_input = step_is_chain ? "B" : "INPUT1";
  const char* output = step_is_chain ? "SUM" : "OUTPUT0";
  std::string text = fmt::format(
      "name: \"{}\" platform: \"ensemble\" max_batch_size: 4 "
      "input [ {{ name: \"A\" data_type: TYPE_INT32 dims: [ -1 ] }}, "
      "{{ name: \"B\" data_type: TYPE_INT32 dims: [ -1 ] }} ] "
      "output [ {{ name: \"SUM\" data_type: TYPE_INT32 dims: [ -1 ] }} ] "
      "ensemble_scheduling {{ step [ ",
      name);
  for (int i = 0; i < steps; ++i) {
    const std::string in = i == 0 ? "A" : fmt::format("T{}", i);
    const std::string out = i == steps - 1 ? "SUM" : fmt::format("T{}", i + 1);
    text += fmt::format(
        "{}{{ model_name: \"{}\" input_map {{ key: \"{}\" value: \"{}\" }} "
        "input_map {{ key: \"{}\" value: \"B\" }} "
        "output_map {{ key: \"{}\" value: \"{}\" }} }}",
        i == 0 ? "" : ", ", step_model, first_input, in, second_input, output, out);
  }
  return text + " ] }";
}

void WriteModel(const std::filesystem::path& repository, std::string_view name,
                const std::string& config) {
  std::filesystem::create_directories(repository / name / "1");
  std::ofstream(repository / name / "config.pbtxt") << config;
}

std::unique_ptr<InferRequest> EnsembleRequest(std::string_view name, int32_t first) {
  auto request = Request({Int32Tensor("A", {1, 2}, {first, 1}), Int32Tensor("B", {1, 2}, {1, 1})});
  request->model_name = std::string(name);
  return request;
}

ServerOptions PollMode(const std::filesystem::path& repository) {
  ServerOptions options;
  options.repository = repository;
  options.control_mode = ModelControlMode::kPoll;
  options.strict_readiness = true;
  options.poll_interval = std::chrono::hours(1);  // the test calls Poll itself
  return options;
}

TEST(InferenceServer, PollForgetsAModelThatLeftWithoutEverLoading) {
  RepositoryDir repository;  // `add` and `broken`
  backend::BackendRegistry backends = AddBackends();
  InferenceServer server(PollMode(repository.path()), backends);
  ASSERT_TRUE(server.LoadStartupModels().ok());
  EXPECT_FALSE(server.IsReady());  // `broken` failed to load
  std::filesystem::remove_all(repository.path() / "broken");
  server.Poll();
  EXPECT_TRUE(server.IsReady());
  for (const ModelIndexEntry& entry : server.RepositoryIndex()) EXPECT_NE(entry.name, "broken");
  server.Shutdown(std::chrono::milliseconds(0));
}

TEST(InferenceServer, PollLoadsAnEnsembleAfterTheStepModelThatAppearedWithIt) {
  RepositoryDir repository;
  backend::BackendRegistry backends = AddBackends();
  std::filesystem::remove_all(repository.path() / "broken");
  std::filesystem::remove_all(repository.path() / "add");
  InferenceServer server(PollMode(repository.path()), backends);
  ASSERT_TRUE(server.LoadStartupModels().ok());
  // "a_pipe" sorts before its step model "add".
  WriteModel(repository.path(), "a_pipe", ChainConfig("a_pipe", 1));
  WriteModel(repository.path(), "add", kAddConfig);
  server.Poll();  // seen once
  server.Poll();  // settled: loaded
  EXPECT_TRUE(server.GetModel("add", kLatestVersion).ok());
  EXPECT_TRUE(server.GetModel("a_pipe", kLatestVersion).ok());
  EXPECT_TRUE(server.IsReady());
  server.Shutdown(std::chrono::milliseconds(0));
}

TEST(InferenceServer, PollRetriesAnEnsembleOnceItsStepModelIsMended) {
  RepositoryDir repository;
  backend::BackendRegistry backends = AddBackends();
  std::filesystem::remove_all(repository.path() / "broken");
  WriteModel(repository.path(), "add", "name: \"add\" max_batch_size: eight");
  WriteModel(repository.path(), "pipe", ChainConfig("pipe", 1));
  InferenceServer server(PollMode(repository.path()), backends);
  ASSERT_TRUE(server.LoadStartupModels().ok());
  EXPECT_FALSE(server.GetModel("pipe", kLatestVersion).ok());  // its step model failed
  WriteModel(repository.path(), "add", kAddConfig);            // mended; `pipe` unchanged
  server.Poll();
  server.Poll();
  EXPECT_TRUE(server.GetModel("add", kLatestVersion).ok());
  EXPECT_TRUE(server.GetModel("pipe", kLatestVersion).ok());
  EXPECT_TRUE(server.IsReady());
  server.Shutdown(std::chrono::milliseconds(0));
}

TEST(InferenceServer, PollUnloadsAnEnsembleWhoseStepModelLeft) {
  RepositoryDir repository;
  backend::BackendRegistry backends = AddBackends();
  std::filesystem::remove_all(repository.path() / "broken");
  WriteModel(repository.path(), "pipe", ChainConfig("pipe", 1));
  InferenceServer server(PollMode(repository.path()), backends);
  ASSERT_TRUE(server.LoadStartupModels().ok());
  ASSERT_TRUE(server.GetModel("pipe", kLatestVersion).ok());
  std::filesystem::remove_all(repository.path() / "add");
  server.Poll();
  EXPECT_FALSE(server.GetModel("add", kLatestVersion).ok());
  EXPECT_FALSE(server.GetModel("pipe", kLatestVersion).ok());  // it could not run
  server.Shutdown(std::chrono::milliseconds(0));
}

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

TEST(InferenceServer, AShutdownLetsAnEnsembleInFlightFinishItsSteps) {
  RepositoryDir repository;
  backend::BackendRegistry backends = AddBackends();
  InferenceServer server(ExplicitMode(repository.path(), /*strict=*/false), backends);
  WriteModel(repository.path(), "chain", ChainConfig("chain", 2));
  ASSERT_TRUE(server.LoadModel("add").ok());
  ASSERT_TRUE(server.LoadModel("chain").ok());
  Gate().Close();
  std::promise<Result<std::unique_ptr<InferResponse>>> answer;
  server.Infer(EnsembleRequest("chain", kHold),
               [&answer](Result<std::unique_ptr<InferResponse>> result) {
                 answer.set_value(std::move(result));
               });
  Gate().WaitForWaiting(1);  // step 1 is executing
  auto drained = std::async(std::launch::async,
                            [&server] { return server.Shutdown(std::chrono::seconds(10)); });
  while (server.IsReady()) std::this_thread::yield();  // the drain has begun
  Gate().Open();  // step 1 finishes; step 2 starts while the server drains
  Result<std::unique_ptr<InferResponse>> result = answer.get_future().get();
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
  RepositoryDir repository;
  backend::BackendRegistry backends = AddBackends();
  InferenceServer server(ExplicitMode(repository.path(), /*strict=*/false), backends);
  WriteModel(repository.path(), "chain", ChainConfig("chain", 2));
  ASSERT_TRUE(server.LoadModel("add").ok());
  ASSERT_TRUE(server.LoadModel("chain").ok());
  Gate().Close();
  std::promise<Result<std::unique_ptr<InferResponse>>> answer;
  server.Infer(EnsembleRequest("chain", kHold),
               [&answer](Result<std::unique_ptr<InferResponse>> result) {
                 answer.set_value(std::move(result));
               });
  Gate().WaitForWaiting(1);  // step 1 is executing
  ASSERT_TRUE(server.UnloadModel("add").ok());
  EXPECT_FALSE(server.GetModel("chain", kLatestVersion).ok());  // unloaded with it
  Gate().Open();
  Result<std::unique_ptr<InferResponse>> result = answer.get_future().get();
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  const auto* sum = reinterpret_cast<const int32_t*>((*result)->outputs[0].data.data());
  EXPECT_EQ(sum[0], kHold + 2);  // (A + B) + B
  server.Shutdown(std::chrono::milliseconds(0));
}

// Triton's ensemble gives each step's request the ensemble request's priority: a priority-1
// ensemble request's step overtakes a request waiting at the step model's default level 2.
TEST(InferenceServer, AnEnsembleStepCarriesTheRequestsPriority) {
  RepositoryDir repository;
  std::string prioritized = kAddConfig;
  prioritized.replace(prioritized.find("name: \"add\""), 11, "name: \"levels\"");
  prioritized.replace(prioritized.find("max_batch_size: 4"), 17, "max_batch_size: 1");
  prioritized += "dynamic_batching { priority_levels: 2 default_priority_level: 2 }\n";
  WriteModel(repository.path(), "levels", prioritized);
  std::string chain = ChainConfig("chain", 1, "levels");
  chain.replace(chain.find("max_batch_size: 4"), 17, "max_batch_size: 1");
  WriteModel(repository.path(), "chain", chain);
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

// `add` loaded in explicit mode, with one request executing on its one instance (held at the
// gate) and one queued behind it: what a shutdown past its deadline finds.
class HeldAndQueued {
 public:
  HeldAndQueued() {
    EXPECT_TRUE(server_.LoadModel("add").ok());
    Gate().Close();
    Send(kHold, running_);
    Gate().WaitForWaiting(1);  // the one instance is busy
    Send(1, queued_);
  }
  InferenceServer& server() { return server_; }
  const RepositoryDir& repository() const { return repository_; }

  // The queued request must be answered now, not run after the deadline; the execution under
  // way still finishes. Opens the gate either way.
  void ExpectQueuedRefusedAndRunningDone() {
    auto abandoned = queued_.get_future();
    const std::future_status answered = abandoned.wait_for(std::chrono::seconds(10));
    Gate().Open();
    ASSERT_EQ(answered, std::future_status::ready);
    Result<std::unique_ptr<InferResponse>> refused = abandoned.get();
    EXPECT_EQ(refused.status().code(), StatusCode::kUnavailable);
    EXPECT_EQ(refused.status().message(), "the server is shutting down");
    EXPECT_TRUE(running_.get_future().get().ok());
  }

 private:
  void Send(int32_t first, std::promise<Result<std::unique_ptr<InferResponse>>>& promise) {
    server_.Infer(
        Request({Int32Tensor("INPUT0", {1, 2}, {first, 1}), Int32Tensor("INPUT1", {1, 2}, {1, 1})}),
        [&promise](Result<std::unique_ptr<InferResponse>> result) {
          promise.set_value(std::move(result));
        });
  }

  RepositoryDir repository_;
  backend::BackendRegistry backends_ = AddBackends();
  // Before the server, which may still answer them as it goes.
  std::promise<Result<std::unique_ptr<InferResponse>>> running_;
  std::promise<Result<std::unique_ptr<InferResponse>>> queued_;
  InferenceServer server_{ExplicitMode(repository_.path(), /*strict=*/false), backends_};
};

// Serves `add` versions 1 and 2 and starts a canary from 1 to 2 (the default stages and limits).
void StartCanaryOnAdd(InferenceServer& server, const RepositoryDir& repository) {
  std::filesystem::create_directories(repository.path() / "add" / "2");
  WriteModel(repository.path(), "add", std::string(kAddConfig) + "version_policy: { all { } }");
  ASSERT_TRUE(server.LoadModel("add").ok());
  CanaryPolicy policy;
  policy.baseline = 1;
  policy.candidate = 2;
  ASSERT_TRUE(server.StartCanary("add", policy).ok());
}

TEST(InferenceServer, ACanaryDoesNotCountRequestsTheirClientsGaveUpOn) {
  RepositoryDir repository;
  backend::BackendRegistry backends = AddBackends();
  InferenceServer server(ExplicitMode(repository.path(), /*strict=*/false), backends);
  ASSERT_NO_FATAL_FAILURE(StartCanaryOnAdd(server, repository));
  // 5 % of 100 requests reach the candidate: 5 failures would roll it back (0.5 % of 200).
  auto gone = std::make_shared<std::atomic<bool>>(true);
  for (int i = 0; i < 100; ++i) {
    std::promise<Result<std::unique_ptr<InferResponse>>> answer;
    auto request =
        Request({Int32Tensor("INPUT0", {1, 2}, {1, 2}), Int32Tensor("INPUT1", {1, 2}, {1, 1})});
    request->cancelled = gone;  // its client has gone away
    server.Infer(std::move(request), [&answer](Result<std::unique_ptr<InferResponse>> result) {
      answer.set_value(std::move(result));
    });
    EXPECT_EQ(answer.get_future().get().status().code(), StatusCode::kCancelled);
  }
  Result<CanaryStatus> status = server.GetCanary("add");
  ASSERT_TRUE(status.ok());
  EXPECT_EQ(status->state, CanaryState::kRunning) << status->last_decision;
  EXPECT_EQ(status->candidate_failures, 0u);
  server.Shutdown(std::chrono::milliseconds(0));
}

TEST(InferenceServer, AShutdownPastItsDeadlineAnswersWhatIsStillQueued) {
  HeldAndQueued held;
  EXPECT_EQ(held.server().Shutdown(std::chrono::milliseconds(0)), 2);
  held.ExpectQueuedRefusedAndRunningDone();
}

TEST(InferenceServer, ACanaryEndsWhenItsBaselineIsNoLongerLoaded) {
  RepositoryDir repository;
  backend::BackendRegistry backends = AddBackends();
  InferenceServer server(ExplicitMode(repository.path(), /*strict=*/false), backends);
  ASSERT_NO_FATAL_FAILURE(StartCanaryOnAdd(server, repository));
  // A reload that serves only version 2: requests the canary sent to 1 would fail NotFound.
  WriteModel(repository.path(), "add", kAddConfig);
  ASSERT_TRUE(server.LoadModel("add").ok());
  EXPECT_EQ(server.GetCanary("add").status().code(), StatusCode::kNotFound);
  for (int i = 0; i < 50; ++i) {
    std::promise<Result<std::unique_ptr<InferResponse>>> answer;
    server.Infer(
        Request({Int32Tensor("INPUT0", {1, 2}, {1, 2}), Int32Tensor("INPUT1", {1, 2}, {1, 1})}),
        [&answer](Result<std::unique_ptr<InferResponse>> result) {
          answer.set_value(std::move(result));
        });
    ASSERT_TRUE(answer.get_future().get().ok());
  }
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

// A request that looked a version up before a reload replaced it, and whose thread was then held
// up past the old version's buffer window, still finds that version working; the version stops
// once the request has let it go.
TEST(InferenceServer, AReplacedVersionStopsOnlyOnceNoRequestHoldsIt) {
  RepositoryDir repository;
  std::string config = kAddConfig;
  config += "version_policy: { all {} }\n";
  WriteModel(repository.path(), "add", config);
  std::filesystem::create_directories(repository.path() / "add" / "2");
  backend::BackendRegistry backends = AddBackends();
  InferenceServer server(ExplicitMode(repository.path(), /*strict=*/false), backends);
  ASSERT_TRUE(server.LoadModel("add").ok());
  // Version 1 as a request has it between its lookup and its queue.
  Result<std::shared_ptr<ModelVersion>> held = server.GetModel("add", 1);
  ASSERT_TRUE(held.ok());

  config.replace(config.find("max_batch_size: 4"), 17, "max_batch_size: 8");
  WriteModel(repository.path(), "add", config);
  ASSERT_TRUE(server.LoadModel("add").ok());  // both versions replaced, with one buffer window
  // Version 2 goes when the window has passed; version 1, considered in the same pass, stays.
  ASSERT_TRUE(testing::Eventually([&] { return server.RetiringVersions() < 2; }));
  EXPECT_EQ(server.RetiringVersions(), 1u);

  auto request =
      Request({Int32Tensor("INPUT0", {1, 2}, {1, 2}), Int32Tensor("INPUT1", {1, 2}, {10, 20})});
  ASSERT_TRUE((*held)->Validate(*request).ok());
  std::promise<Result<std::unique_ptr<InferResponse>>> answered;
  (*held)->Enqueue(std::move(request), [&answered](Result<std::unique_ptr<InferResponse>> result) {
    answered.set_value(std::move(result));
  });
  Result<std::unique_ptr<InferResponse>> answer = answered.get_future().get();
  ASSERT_TRUE(answer.ok()) << answer.status().ToString();
  const auto* sum = reinterpret_cast<const int32_t*>((*answer)->outputs[0].data.data());
  EXPECT_EQ(sum[0], 11);
  EXPECT_EQ(sum[1], 22);

  held = std::shared_ptr<ModelVersion>();  // the request lets it go
  EXPECT_TRUE(testing::Eventually([&] { return server.RetiringVersions() == 0; }));
}

TEST(InferenceServer, AShutdownPastItsDeadlineAlsoAnswersWhatAReplacedVersionHolds) {
  HeldAndQueued held;
  std::string changed = kAddConfig;  // a larger max_batch_size: a new version is built
  changed.replace(changed.find("max_batch_size: 4"), 17, "max_batch_size: 8");
  WriteModel(held.repository().path(), "add", changed);
  // The old version now retires, still holding both requests.
  ASSERT_TRUE(held.server().LoadModel("add").ok());
  EXPECT_EQ(held.server().Shutdown(std::chrono::milliseconds(0)), 2);
  held.ExpectQueuedRefusedAndRunningDone();
}

}  // namespace
}  // namespace rampart::serve
