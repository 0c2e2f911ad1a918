#include "model/config.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

namespace rampart::model {
namespace {

// A config as Triton users write them, including fields Rampart does not act on.
constexpr std::string_view kTritonConfig = R"pb(
  name: "mlp"
  backend: "pytorch"
  max_batch_size: 32 input
  [ {
    name: "INPUT__0"
    data_type: TYPE_FP32
    dims: [ 256 ]
  }] output
  [ {
    name: "OUTPUT__0"
    data_type: TYPE_FP32
    dims: [ 10 ]
    label_filename: "labels.txt"
  }]
  dynamic_batching {
    preferred_batch_size: [ 16, 32 ]
    max_queue_delay_microseconds: 2000
  } instance_group
  [ { count: 2 kind: KIND_CPU }]
  optimization { input_pinned_memory { enable: true } }
  parameters {
    key: "INTRA_OP_THREAD_COUNT"
    value: { string_value: "1" }
  }
)pb";

ModelConfig ParseOrDie(std::string_view text) {
  Result<ParsedConfig> parsed = ParseConfigText(text, "config.pbtxt");
  EXPECT_TRUE(parsed.ok()) << parsed.status().ToString();
  return parsed.ok() ? parsed->config : ModelConfig();
}

TEST(ParseConfigText, ReadsTritonFieldNames) {
  ModelConfig config = ParseOrDie(kTritonConfig);
  EXPECT_EQ(config.name(), "mlp");
  EXPECT_EQ(config.max_batch_size(), 32);
  ASSERT_EQ(config.input_size(), 1);
  EXPECT_EQ(config.input(0).data_type(), inference::TYPE_FP32);
  EXPECT_EQ(config.dynamic_batching().preferred_batch_size_size(), 2);
  EXPECT_EQ(config.instance_group(0).count(), 2);
  EXPECT_EQ(config.parameters().at("INTRA_OP_THREAD_COUNT").string_value(), "1");
}

// A typo must not be dropped for a later, unrelated error (`dims` missing): as Triton, the
// unknown field is the error, with file, line and field.
TEST(ParseConfigText, AnUnknownFieldIsAnErrorNamingFileLineAndField) {
  Result<ParsedConfig> parsed = ParseConfigText(
      "name: \"m\"\nbackend: \"pytorch\"\ninput [\n  { name: \"x\" data_type: TYPE_FP32 dimz: [ 3 "
      "] "
      "}\n]\n",
      "repo/m/config.pbtxt");
  ASSERT_FALSE(parsed.ok());
  EXPECT_EQ(parsed.status().code(), StatusCode::kInvalidArgument);
  const std::string& message = parsed.status().message();
  EXPECT_EQ(message.rfind("repo/m/config.pbtxt:4:", 0), 0u) << message;
  EXPECT_NE(message.find("\"dimz\""), std::string::npos) << message;
  EXPECT_EQ(message.find("at least one dimension"), std::string::npos) << message;

  EXPECT_FALSE(ParseConfigText("name: \"m\"\nfuture_field: 7\n", "m/config.pbtxt").ok());
}

// Fields Rampart does not act on still parse when Triton's schema has them.
TEST(ParseConfigText, AcceptsEveryTritonFieldRampartDoesNotActOn) {
  Result<ParsedConfig> parsed = ParseConfigText(
      R"pb(
        name: "m"
        backend: "pytorch"
        runtime: "model.so" input
        [ {
          name: "x"
          data_type: TYPE_FP32
          dims: [ 3 ]
          is_non_linear_format_io: false
        }] output
        [ {
          name: "y"
          data_type: TYPE_FP32
          dims: [ 3 ]
          is_non_linear_format_io: false
        }] instance_group
        [ {
          kind: KIND_CPU secondary_devices
          [ { kind: KIND_NVDLA device_id: 0 }]
        }]
        optimization {
          execution_accelerators { cpu_execution_accelerator
                                   [ { name: "openvino" }] }
          cuda { graph_spec
                 [ {
                   batch_size: 4
                   input {
                     key: "x"
                     value { dim: [ 3 ] }
                   }
                 }] }
        }
        model_repository_agents { agents
                                  [ {
                                    name: "checksum"
                                    parameters { key: "k" value: "v" }
                                  }] }
        model_metrics { metric_control
                        [ {
                          metric_identifier { family: "nv_inference_first_response_histogram_ms" }
                          histogram_options { buckets: [ 1, 2 ] }
                        }] }
      )pb",
      "m/config.pbtxt");
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_EQ(parsed->config.runtime(), "model.so");
  Result<ParsedConfig> sequence = ParseConfigText(R"pb(
                                                    sequence_batching {
                                                      control_input
                                                      [ {
                                                        name: "START" control
                                                        [ {
                                                          kind: CONTROL_SEQUENCE_START
                                                          int32_false_true: [ 0, 1 ]
                                                        }]
                                                      }] state
                                                      [ {
                                                        input_name: "in"
                                                        output_name: "out"
                                                        data_type: TYPE_FP32
                                                        dims: [ 1 ] initial_state
                                                        [ {
                                                          name: "zero"
                                                          data_type: TYPE_FP32
                                                          dims: [ 1 ]
                                                          zero_data: true
                                                        }]
                                                      }]
                                                      oldest { preserve_ordering: true }
                                                    }
                                                  )pb",
                                                  "m/config.pbtxt");
  ASSERT_TRUE(sequence.ok()) << sequence.status().ToString();
  EXPECT_TRUE(ParseConfigText("ensemble_scheduling { max_inflight_requests: 4 }", "m").ok());
}

TEST(ParseConfigJson, RefusesUnknownFieldsAndReadsEnumsInAnyCase) {
  Result<ModelConfig> config = ParseConfigJson(
      R"({"max_batch_size": 4, "input": [{"name": "x", "data_type": "type_fp32", "dims": [3]}]})",
      "override");
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_EQ(config->input(0).data_type(), inference::TYPE_FP32);
  Result<ModelConfig> typo = ParseConfigJson(
      R"({"input": [{"name": "x", "data_type": "TYPE_FP32", "dimz": [3]}]})", "override");
  ASSERT_FALSE(typo.ok());
  EXPECT_NE(typo.status().message().find("dimz"), std::string::npos) << typo.status().message();
}

TEST(ParseConfigText, SyntaxErrorsNameFileLineAndColumn) {
  Result<ParsedConfig> parsed =
      ParseConfigText("name: \"m\"\nmax_batch_size: \"eight\"\n", "repo/m/config.pbtxt");
  ASSERT_FALSE(parsed.ok());
  EXPECT_EQ(parsed.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(parsed.status().message().rfind("repo/m/config.pbtxt:2:", 0), 0u)
      << parsed.status().message();
}

TEST(CompleteAndValidate, FillsTritonDefaults) {
  ModelConfig config = ParseOrDie(R"pb(
    platform: "pytorch_libtorch" input
    [ {
      name: "x"
      data_type: TYPE_INT32
      dims: [ -1 ]
    }] output
    [ {
      name: "y"
      data_type: TYPE_INT32
      dims: [ -1 ]
    }]
  )pb");
  ASSERT_TRUE(CompleteAndValidate(config, "folder", "f").ok());
  EXPECT_EQ(config.name(), "folder");
  EXPECT_EQ(config.backend(), "pytorch");
  EXPECT_EQ(config.version_policy().latest().num_versions(), 1u);
  ASSERT_EQ(config.instance_group_size(), 1);
  EXPECT_EQ(config.instance_group(0).count(), 1);
  EXPECT_EQ(config.instance_group(0).kind(), inference::ModelInstanceGroup::KIND_CPU);

  ModelConfig by_backend = ParseOrDie(kTritonConfig);
  ASSERT_TRUE(CompleteAndValidate(by_backend, "mlp", "f").ok());
  EXPECT_EQ(by_backend.platform(), "pytorch_libtorch");
}

struct BadConfig {
  std::string_view text;
  std::string_view expected_message;
};

class CompleteAndValidateRejects : public ::testing::TestWithParam<BadConfig> {};

TEST_P(CompleteAndValidateRejects, WithAPreciseMessage) {
  ModelConfig config = ParseOrDie(GetParam().text);
  Status status = CompleteAndValidate(config, "m", "m/config.pbtxt");
  ASSERT_FALSE(status.ok());
  EXPECT_NE(status.message().find(GetParam().expected_message), std::string::npos)
      << status.message();
  EXPECT_EQ(status.message().rfind("m/config.pbtxt", 0), 0u) << status.message();
}

constexpr std::string_view kIo = R"pb(
  input
  [ {
    name: "x"
    data_type: TYPE_FP32
    dims: [ 4 ]
  }] output
  [ {
    name: "y"
    data_type: TYPE_FP32
    dims: [ 4 ]
  }]
)pb";

INSTANTIATE_TEST_SUITE_P(
    Rules, CompleteAndValidateRejects,
    ::testing::Values(
        BadConfig{"name: \"other\" backend: \"pytorch\"", "must match the model's folder name"},
        BadConfig{"input [ { name: \"x\" data_type: TYPE_FP32 dims: [4] } ]",
                  "one of 'platform' or 'backend' is required"},
        BadConfig{"backend: \"pytorch\" max_batch_size: -1", "max_batch_size: must be >= 0"},
        BadConfig{"backend: \"pytorch\" output [ { name: \"y\" data_type: TYPE_FP32 dims: [1] } ]",
                  "input: at least one is required"},
        BadConfig{"backend: \"pytorch\" input [ { name: \"x\" data_type: TYPE_FP32 dims: [ 0 ] } ] "
                  "output [ { name: \"y\" data_type: TYPE_FP32 dims: [1] } ]",
                  "input[0] 'x': dims must be positive or -1"},
        BadConfig{"backend: \"pytorch\" input [ { name: \"x\" dims: [ 1 ] } ] "
                  "output [ { name: \"y\" data_type: TYPE_FP32 dims: [1] } ]",
                  "'data_type' is required"},
        BadConfig{"backend: \"pytorch\" input [ { name: \"x\" data_type: TYPE_FP32 } ] "
                  "output [ { name: \"y\" data_type: TYPE_FP32 dims: [1] } ]",
                  "'dims' must list at least one dimension"},
        BadConfig{"backend: \"pytorch\" input [ { name: \"x\" data_type: TYPE_FP32 dims: [1] }, "
                  "{ name: \"x\" data_type: TYPE_FP32 dims: [1] } ] "
                  "output [ { name: \"y\" data_type: TYPE_FP32 dims: [1] } ]",
                  "the name is used twice"},
        BadConfig{"platform: \"pytorch_libtorch\" backend: \"onnxruntime\"",
                  "conflicts with backend"},
        BadConfig{"backend: \"pytorch\" max_batch_size: 8 dynamic_batching { "
                  "preferred_batch_size: [ 16 ] } input [ { name: \"x\" data_type: TYPE_FP32 "
                  "dims: [1] } ] output [ { name: \"y\" data_type: TYPE_FP32 dims: [1] } ]",
                  "preferred_batch_size: 16 must be in [1, max_batch_size=8]"},
        BadConfig{
            "backend: \"pytorch\" dynamic_batching { } input [ { name: \"x\" data_type: "
            "TYPE_FP32 dims: [1] } ] output [ { name: \"y\" data_type: TYPE_FP32 dims: [1] } ]",
            "needs max_batch_size > 0"},
        BadConfig{"backend: \"pytorch\" version_policy { specific { } } input [ { name: \"x\" "
                  "data_type: TYPE_FP32 dims: [1] } ] output [ { name: \"y\" data_type: TYPE_FP32 "
                  "dims: [1] } ]",
                  "list at least one version"},
        // Ragged batching: batch inputs describe batches, from an input, under names of their own.
        BadConfig{"backend: \"pytorch\" input [ { name: \"x\" data_type: TYPE_FP32 dims: [-1] "
                  "allow_ragged_batch: true } ] output [ { name: \"y\" data_type: TYPE_FP32 "
                  "dims: [1] } ]",
                  "input 'x': allow_ragged_batch needs max_batch_size > 0"},
        BadConfig{"backend: \"pytorch\" max_batch_size: 4 input [ { name: \"x\" data_type: "
                  "TYPE_FP32 dims: [-1] } ] output [ { name: \"y\" data_type: TYPE_FP32 dims: [1] "
                  "} ] batch_input [ { target_name: \"n\" data_type: TYPE_INT32 source_input: "
                  "\"z\" } ]",
                  "batch_input[0]: source_input 'z' is not an input of the model"},
        BadConfig{"backend: \"pytorch\" max_batch_size: 4 input [ { name: \"x\" data_type: "
                  "TYPE_FP32 dims: [-1] } ] output [ { name: \"y\" data_type: TYPE_FP32 dims: [1] "
                  "} ] batch_input [ { target_name: \"x\" data_type: TYPE_INT32 source_input: "
                  "\"x\" } ]",
                  "target_name 'x' must be non-empty and differ from every input"},
        BadConfig{"backend: \"pytorch\" max_batch_size: 4 input [ { name: \"x\" data_type: "
                  "TYPE_FP32 dims: [-1] } ] output [ { name: \"y\" data_type: TYPE_FP32 dims: [1] "
                  "} ] batch_input [ { source_input: \"x\" data_type: TYPE_INT32 } ]",
                  "batch_input[0]: 'target_name' is required"},
        BadConfig{"backend: \"pytorch\" max_batch_size: 4 input [ { name: \"x\" data_type: "
                  "TYPE_FP32 dims: [-1] } ] output [ { name: \"y\" data_type: TYPE_FP32 dims: [1] "
                  "} ] batch_input [ { target_name: \"n\" data_type: TYPE_INT64 source_input: "
                  "\"x\" } ]",
                  "data_type must be TYPE_INT32 or TYPE_FP32, got TYPE_INT64"},
        BadConfig{"backend: \"pytorch\" max_batch_size: 4 input [ { name: \"x\" data_type: "
                  "TYPE_FP32 dims: [-1] } ] output [ { name: \"y\" data_type: TYPE_FP32 dims: [1] "
                  "} ] batch_input [ { target_name: \"n\" data_type: TYPE_INT32 source_input: "
                  "\"x\" source_input: \"x\" } ]",
                  "needs exactly one 'source_input', got 2"},
        BadConfig{"backend: \"pytorch\" batch_input [ { target_name: \"n\" data_type: TYPE_INT32 "
                  "source_input: \"x\" } ] input [ { name: \"x\" data_type: TYPE_FP32 dims: [-1] "
                  "} ] output [ { name: \"y\" data_type: TYPE_FP32 dims: [1] } ]",
                  "batch_input[0]: needs max_batch_size > 0"},
        BadConfig{"backend: \"pytorch\" max_batch_size: 4 input [ { name: \"x\" data_type: "
                  "TYPE_FP32 dims: [-1] } ] output [ { name: \"y\" data_type: TYPE_FP32 dims: [1] "
                  "} ] batch_output [ { target_name: \"z\" source_input: \"x\" } ]",
                  "batch_output[0]: target_name 'z' is not an output of the model"},
        BadConfig{"backend: \"pytorch\" max_batch_size: 4 input [ { name: \"x\" data_type: "
                  "TYPE_FP32 dims: [-1] } ] output [ { name: \"y\" data_type: TYPE_FP32 dims: [1] "
                  "} ] batch_output [ { target_name: \"y\" source_input: \"w\" } ]",
                  "batch_output[0]: source_input 'w' is not an input of the model"},
        BadConfig{"backend: \"pytorch\" max_batch_size: 4 input [ { name: \"x\" data_type: "
                  "TYPE_FP32 dims: [-1] } ] output [ { name: \"y\" data_type: TYPE_FP32 dims: "
                  "[-1, -1] } ] batch_output [ { target_name: \"y\" source_input: \"x\" } ]",
                  "output 'y' dim 2 is -1 but input 'x' has no dim 2 to take it from"},
        // A reshape holds what dims hold (a request is checked against dims, and the model reads
        // the reshape's element count from its buffer).
        BadConfig{"backend: \"pytorch\" input [ { name: \"x\" data_type: TYPE_FP32 dims: [4] "
                  "reshape { shape: [1000000] } } ] output [ { name: \"y\" data_type: TYPE_FP32 "
                  "dims: [1] } ]",
                  "input[0] 'x': dims [4] and reshape [1000000] differ in size"},
        BadConfig{"backend: \"pytorch\" input [ { name: \"x\" data_type: TYPE_FP32 dims: [-1, 2] "
                  "reshape { shape: [2, -1] } } ] output [ { name: \"y\" data_type: TYPE_FP32 "
                  "dims: [1] } ]",
                  "dims [-1,2] and reshape [2,-1] differ in size"},
        BadConfig{"backend: \"pytorch\" input [ { name: \"x\" data_type: TYPE_FP32 dims: [4] "
                  "reshape { shape: [-2, -2] } } ] output [ { name: \"y\" data_type: TYPE_FP32 "
                  "dims: [1] } ]",
                  "reshape dims must be positive or -1 (variable), got -2"},
        BadConfig{
            "backend: \"pytorch\" input [ { name: \"x\" data_type: TYPE_FP32 dims: [1] } ] "
            "output [ { name: \"y\" data_type: TYPE_FP32 dims: [6] reshape { shape: [4] } } ]",
            "output[0] 'y': dims [6] and reshape [4] differ in size"},
        BadConfig{"backend: \"pytorch\" input [ { name: \"x\" data_type: TYPE_FP32 dims: "
                  "[4611686018427387904, 4] reshape { shape: [1] } } ] output [ { name: \"y\" "
                  "data_type: TYPE_FP32 dims: [1] } ]",
                  "differ in size"},
        BadConfig{"backend: \"pytorch\" instance_group [ { count: 2147483647 }, { count: "
                  "2147483647 } ] input [ { name: \"x\" data_type: TYPE_FP32 dims: [1] } ] "
                  "output [ { name: \"y\" data_type: TYPE_FP32 dims: [1] } ]",
                  "instance_group: 4294967294 instances in all; at most 1024 are allowed"}));

TEST(CompleteAndValidate, AcceptsReshapesThatKeepTheSizeBetweenVariableDims) {
  for (std::string_view io :
       {"dims: [ 4 ] reshape { shape: [ 2, 2 ] }", "dims: [ -1 ] reshape { shape: [ -1 ] }",
        "dims: [ 2, 4, -1, 6 ] reshape { shape: [ 8, -1, 1, 6 ] }",
        "dims: [ 1 ] reshape { shape: [ ] }"}) {
    ModelConfig config = ParseOrDie(fmt::format(
        "backend: \"pytorch\" input [ {{ name: \"x\" data_type: TYPE_FP32 {} }} ] output [ {{ "
        "name: \"y\" data_type: TYPE_FP32 dims: [ 1 ] }} ]",
        io));
    EXPECT_TRUE(CompleteAndValidate(config, "m", "f").ok()) << io;
  }
}

TEST(ReshapedShape, VariableDimsTakeTheSizesTheyWereSentWith) {
  ModelConfig config = ParseOrDie(R"pb(
    backend: "pytorch"
    max_batch_size: 8 input
    [ {
      name: "x"
      data_type: TYPE_FP32
      dims: [ 2, 4, -1, 6 ]
      reshape { shape: [ 8, -1, 1, 6 ] }
    }] output
    [ {
      name: "y"
      data_type: TYPE_FP32
      dims: [ 1 ]
    }]
  )pb");
  ASSERT_TRUE(CompleteAndValidate(config, "m", "f").ok());
  EXPECT_EQ(ReshapedShape(config.input(0), {3, 2, 4, 7, 6}, /*batched=*/true),
            (tensor::Shape{3, 8, 7, 1, 6}));
  EXPECT_EQ(ReshapedShape(config.input(0), {2, 4, 5, 6}, /*batched=*/false),
            (tensor::Shape{8, 5, 1, 6}));
}

TEST(CompleteAndValidate, AcceptsTritonsRaggedBatchingExample) {
  ModelConfig config = ParseOrDie(R"pb(
    backend: "pytorch"
    max_batch_size: 16 input
    [ {
      name: "INPUT"
      data_type: TYPE_FP32
      dims: [ -1 ]
      allow_ragged_batch: true
    }] output
    [ {
      name: "OUTPUT"
      data_type: TYPE_FP32
      dims: [ 1 ]
    }] batch_input
    [ {
      kind: BATCH_ACCUMULATED_ELEMENT_COUNT
      target_name: "INDEX"
      data_type: TYPE_FP32
      source_input: "INPUT"
    }]
  )pb");
  ASSERT_TRUE(CompleteAndValidate(config, "m", "f").ok());
  const std::vector<BackendInput> inputs = BackendInputs(config);
  ASSERT_EQ(inputs.size(), 2u);
  EXPECT_EQ(inputs[0].name, "INPUT");
  EXPECT_EQ(inputs[1].name, "INDEX");
  EXPECT_EQ(inputs[1].datatype, tensor::DataType::kFp32);
}

// Triton's ModelConfigToJson writes 64-bit integers as JSON numbers (protobuf writes strings),
// so a client can use `dims` as a shape.
TEST(ConfigToJson, UsesTritonNamesAndInt64AsNumbers) {
  ModelConfig config = ParseOrDie(kTritonConfig);
  const std::string json = ConfigToJson(config);
  EXPECT_NE(json.find(R"("max_batch_size":32)"), std::string::npos) << json;
  EXPECT_NE(json.find(R"("dims":[256])"), std::string::npos) << json;
  EXPECT_NE(json.find(R"("data_type":"TYPE_FP32")"), std::string::npos) << json;
  EXPECT_NE(json.find(R"("max_queue_delay_microseconds":2000)"), std::string::npos) << json;
  EXPECT_NE(json.find(R"("INTRA_OP_THREAD_COUNT":{"string_value":"1"})"), std::string::npos)
      << json;
}

// Every 64-bit field Triton converts, in maps and repeated messages too (map keys stay strings).
TEST(ConfigToJson, ConvertsEvery64BitFieldAndReadsBackTheSame) {
  ModelConfig config = ParseOrDie(R"pb(
    name: "m"
    backend: "pytorch"
    max_batch_size: 4
    version_policy { specific { versions: [ 1, 3 ] } } input
    [ {
      name: "I"
      data_type: TYPE_FP32
      dims: [ -1, 4 ]
      reshape { shape: [ -1, 2, 2 ] }
    }] output
    [ {
      name: "O"
      data_type: TYPE_FP32
      dims: [ 4 ]
      reshape { shape: [ 2, 2 ] }
    }]
    dynamic_batching {
      max_queue_delay_microseconds: 18446744073709551615
      priority_levels: 2
      default_priority_level: 1
      default_queue_policy { default_timeout_microseconds: 7 }
      priority_queue_policy {
        key: 2
        value { default_timeout_microseconds: 9 }
      }
    } model_warmup
    [ {
      name: "w"
      batch_size: 1
      inputs {
        key: "I"
        value {
          data_type: TYPE_FP32
          dims: [ 3, 4 ]
          zero_data: true
        }
      }
    }]
  )pb");
  const std::string json = ConfigToJson(config);
  for (std::string_view expected :
       {R"("versions":[1,3])", R"("dims":[-1,4])", R"("shape":[-1,2,2])", R"("dims":[4])",
        R"("shape":[2,2])", R"("max_queue_delay_microseconds":18446744073709551615)",
        R"("priority_levels":2)", R"("default_priority_level":1)",
        R"("default_timeout_microseconds":7)", R"("2":{)", R"("default_timeout_microseconds":9)",
        R"("dims":[3,4])"}) {
    EXPECT_NE(json.find(expected), std::string::npos) << expected << " in " << json;
  }
  EXPECT_EQ(json.find(R"("-1")"), std::string::npos) << json;
  // The load override reads numbers and protobuf's strings alike.
  Result<ModelConfig> numbers = ParseConfigJson(json, "numbers");
  ASSERT_TRUE(numbers.ok()) << numbers.status().ToString();
  EXPECT_EQ(numbers->SerializeAsString(), config.SerializeAsString());
  Result<ModelConfig> strings = ParseConfigJson(
      R"({"input":[{"name":"I","dims":["-1","4"]}],"dynamic_batching":{"max_queue_delay_microseconds":"2000"}})",
      "strings");
  ASSERT_TRUE(strings.ok()) << strings.status().ToString();
  EXPECT_EQ(strings->input(0).dims(0), -1);
  EXPECT_EQ(strings->dynamic_batching().max_queue_delay_microseconds(), 2000u);
}

// Triton's ValidateModelConfigInt64 lists every 64-bit field of its schema; its ModelConfigToJson
// writes most of them as numbers, a few as protobuf's strings. Rampart's schema, which declares
// all of Triton's fields, must hold no 64-bit field outside that list, and ConfigToJson must
// write each the way Triton does.
void Collect64BitFields(const google::protobuf::Descriptor& message, const std::string& path,
                        int depth, std::set<std::string>& found) {
  if (depth > 8) return;
  for (int i = 0; i < message.field_count(); ++i) {
    const google::protobuf::FieldDescriptor& field = *message.field(i);
    const std::string name = path + "::" + field.name();
    if (field.is_map()) {
      const google::protobuf::FieldDescriptor& key = *field.message_type()->map_key();
      if (key.cpp_type() == google::protobuf::FieldDescriptor::CPPTYPE_INT64 ||
          key.cpp_type() == google::protobuf::FieldDescriptor::CPPTYPE_UINT64) {
        found.insert(name + "::key");
      }
      const google::protobuf::FieldDescriptor& value = *field.message_type()->map_value();
      if (value.message_type() != nullptr) {
        Collect64BitFields(*value.message_type(), name + "::value", depth + 1, found);
      }
    } else if (field.message_type() != nullptr) {
      Collect64BitFields(*field.message_type(), name, depth + 1, found);
    } else if (field.cpp_type() == google::protobuf::FieldDescriptor::CPPTYPE_INT64 ||
               field.cpp_type() == google::protobuf::FieldDescriptor::CPPTYPE_UINT64) {
      found.insert(name);
    }
  }
}

TEST(ConfigToJson, TheSchemaHoldsOnly64BitFieldsTritonConverts) {
  const std::set<std::string> triton = {
      "ModelConfig::input::dims",
      "ModelConfig::input::reshape::shape",
      "ModelConfig::output::dims",
      "ModelConfig::output::reshape::shape",
      "ModelConfig::version_policy::specific::versions",
      "ModelConfig::dynamic_batching::max_queue_delay_microseconds",
      "ModelConfig::dynamic_batching::default_queue_policy::default_timeout_microseconds",
      "ModelConfig::dynamic_batching::priority_queue_policy::value::default_timeout_microseconds",
      "ModelConfig::dynamic_batching::priority_levels",
      "ModelConfig::dynamic_batching::priority_queue_policy::key",  // a JSON key: a string
      "ModelConfig::dynamic_batching::default_priority_level",
      "ModelConfig::sequence_batching::direct::max_queue_delay_microseconds",
      "ModelConfig::sequence_batching::oldest::max_queue_delay_microseconds",
      "ModelConfig::sequence_batching::max_sequence_idle_microseconds",
      "ModelConfig::sequence_batching::state::dims",
      "ModelConfig::sequence_batching::state::initial_state::dims",
      "ModelConfig::ensemble_scheduling::step::model_version",
      "ModelConfig::model_warmup::inputs::value::dims",
      "ModelConfig::optimization::cuda::graph_spec::input::value::dim",
      "ModelConfig::optimization::cuda::graph_spec::graph_lower_bound::input::value::dim",
      "ModelConfig::instance_group::secondary_devices::device_id",
  };
  std::set<std::string> found;
  Collect64BitFields(*ModelConfig::descriptor(), "ModelConfig", 0, found);
  for (const std::string& field : found) EXPECT_TRUE(triton.contains(field)) << field;

  // Those Triton's ModelConfigToJson leaves as strings stay strings; the others are numbers.
  Result<ParsedConfig> parsed = ParseConfigText(R"pb(
                                                  instance_group
                                                  [ {
                                                    kind: KIND_CPU secondary_devices
                                                    [ { kind: KIND_NVDLA device_id: 3 }]
                                                  }]
                                                  optimization {
                                                    cuda { graph_spec
                                                           [ {
                                                             input {
                                                               key: "x"
                                                               value { dim: [ 5 ] }
                                                             }
                                                           }] }
                                                  }
                                                  sequence_batching { state
                                                                      [ {
                                                                        dims: [ 2 ] initial_state
                                                                        [ {
                                                                          dims: [ 4 ]
                                                                          zero_data: true
                                                                        }]
                                                                      }] }
                                                )pb",
                                                "m");
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  const std::string json = ConfigToJson(parsed->config);
  EXPECT_NE(json.find(R"("device_id":"3")"), std::string::npos) << json;
  EXPECT_NE(json.find(R"("dim":["5"])"), std::string::npos) << json;
  EXPECT_NE(json.find(R"("initial_state":[{"data_type":"TYPE_INVALID","dims":["4"])"),
            std::string::npos)
      << json;
  EXPECT_NE(json.find(R"("output_name":"","data_type":"TYPE_INVALID","dims":[2])"),
            std::string::npos)
      << json;
}

}  // namespace
}  // namespace rampart::model
