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

// A step model with input `x` and output `y` of the given types.
model::ModelConfig StepModel(std::string_view x_type, std::string_view y_type) {
  auto parsed =
      model::ParseConfigText(fmt::format("name: \"s\" backend: \"fake\" "
                                         "input [ {{ name: \"x\" data_type: {} dims: [ 4 ] }} ] "
                                         "output [ {{ name: \"y\" data_type: {} dims: [ 4 ] }} ]",
                                         x_type, y_type),
                             "config.pbtxt");
  EXPECT_TRUE(parsed.ok()) << parsed.status().ToString();
  return parsed->config;
}

constexpr std::string_view kChain = R"(
    step [ { model_name: "a" input_map { key: "x" value: "IN" } output_map { key: "y" value: "T" } },
           { model_name: "b" input_map { key: "x" value: "T" } output_map { key: "y" value: "OUT" } } ])";

TEST(CheckEnsembleTensors, AcceptsStepsWhoseTypesAgree) {
  const model::ModelConfig step = StepModel("TYPE_FP32", "TYPE_FP32");
  EXPECT_TRUE(CheckEnsembleTensors(Ensemble(kChain), {&step, &step}).ok());
}

// Triton refuses such an ensemble at load; Rampart used to load it and fail every request.
TEST(CheckEnsembleTensors, RefusesTypesThatDisagreeAndUnknownNames) {
  const model::ModelConfig fp32 = StepModel("TYPE_FP32", "TYPE_FP32");
  const model::ModelConfig to_int = StepModel("TYPE_FP32", "TYPE_INT32");
  const model::ModelConfig from_int = StepModel("TYPE_INT32", "TYPE_FP32");

  Status between_steps = CheckEnsembleTensors(Ensemble(kChain), {&to_int, &fp32});
  EXPECT_EQ(between_steps.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(between_steps.message(),
            "ensemble 'e': tensor 'T' is TYPE_INT32 as output 'y' of step 0 ('a') but TYPE_FP32 "
            "as input 'x' of step 1 ('b')");
  Status ensemble_input = CheckEnsembleTensors(Ensemble(kChain), {&from_int, &fp32});
  EXPECT_NE(ensemble_input.message().find("tensor 'IN' is TYPE_FP32 as an ensemble input"),
            std::string::npos)
      << ensemble_input.message();
  Status ensemble_output = CheckEnsembleTensors(Ensemble(kChain), {&fp32, &to_int});
  EXPECT_NE(ensemble_output.message().find("tensor 'OUT' is TYPE_FP32 as an ensemble output"),
            std::string::npos)
      << ensemble_output.message();

  Status unknown = CheckEnsembleTensors(Ensemble(R"(
      step [ { model_name: "a" input_map { key: "z" value: "IN" } output_map { key: "y" value: "OUT" } } ])"),
                                        {&fp32});
  EXPECT_EQ(unknown.message(), "ensemble 'e' step 0: model 'a' has no input 'z'");
}

}  // namespace
}  // namespace rampart::serve
