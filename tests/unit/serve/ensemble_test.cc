#include "serve/ensemble.h"

#include <gtest/gtest.h>

namespace rampart::serve {
namespace {

model::ModelConfig Ensemble(std::string_view steps) {
  auto parsed = model::ParseConfigText(
      fmt::format("name: \"e\" platform: \"ensemble\" "
                  "input [ {{ name: \"IN\" data_type: TYPE_FP32 dims: [ 4 ] }} ] "
                  "output [ {{ name: \"OUT\" data_type: TYPE_FP32 dims: [ 4 ] }} ] "
                  "ensemble_scheduling {{ {} }}",
                  steps),
      "config.pbtxt");
  EXPECT_TRUE(parsed.ok()) << parsed.status().ToString();
  return parsed->config;
}

TEST(ValidateEnsemble, AcceptsAChainAndParallelBranches) {
  EXPECT_TRUE(ValidateEnsemble(Ensemble(R"(
      step [ { model_name: "a" input_map { key: "x" value: "IN" } output_map { key: "y" value: "T" } },
             { model_name: "b" input_map { key: "x" value: "T" } output_map { key: "y" value: "OUT" } },
             { model_name: "c" input_map { key: "x" value: "IN" } output_map { key: "y" value: "SIDE" } } ])"))
                  .ok());
}

TEST(ValidateEnsemble, RejectsGraphsThatCannotRun) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"", "needs at least one step"},
      {R"(step [ { model_name: "a" input_map { key: "x" value: "NOPE" } output_map { key: "y" value: "OUT" } } ])",
       "can never run: no ensemble input or step produces NOPE"},
      {R"(step [ { model_name: "a" input_map { key: "x" value: "T2" } output_map { key: "y" value: "T1" } },
                 { model_name: "b" input_map { key: "x" value: "T1" } output_map { key: "y" value: "T2" } } ])",
       "or the steps form a cycle"},
      {R"(step [ { model_name: "a" input_map { key: "x" value: "IN" } output_map { key: "y" value: "OUT" } },
                 { model_name: "b" input_map { key: "x" value: "IN" } output_map { key: "y" value: "OUT" } } ])",
       "tensor 'OUT' is produced by steps 0 and 1"},
      {R"(step [ { model_name: "a" input_map { key: "x" value: "IN" } output_map { key: "y" value: "T" } } ])",
       "no step produces output 'OUT'"},
      {R"(step [ { model_name: "e" input_map { key: "x" value: "IN" } output_map { key: "y" value: "OUT" } } ])",
       "cannot call itself"},
      {R"(step [ { input_map { key: "x" value: "IN" } output_map { key: "y" value: "OUT" } } ])",
       "model_name is required"},
  };
  for (const auto& [steps, message] : cases) {
    Status status = ValidateEnsemble(Ensemble(steps));
    ASSERT_FALSE(status.ok()) << steps;
    EXPECT_NE(status.message().find(message), std::string::npos) << status.message();
  }
}

}  // namespace
}  // namespace rampart::serve
