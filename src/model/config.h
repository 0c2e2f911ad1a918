#pragma once

// Reading, completing and validating Triton model configurations (config.pbtxt).
//
// Parsing uses protobuf's TextFormat against Rampart's copy of Triton's schema
// (model_config.proto), so Triton's files parse unchanged. A field the schema does not know is an
// error, as in Triton (the schema declares all of Triton's fields). Every error names the file,
// the field and the reason. Functions are pure and thread-safe.

#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "model/model_config.pb.h"
#include "tensor/tensor.h"

namespace rampart::model {

using inference::ModelConfig;

struct ParsedConfig {
  ModelConfig config;
  std::vector<std::string> warnings;  // protobuf's warnings about the text, if any
};

// Parses config.pbtxt text. `file` only labels messages. Errors: InvalidArgument
// "<file>:<line>:<column>: <reason>" for bad syntax, a value of the wrong type and a field the
// schema does not know (`Message type "inference.ModelInput" has no field named "dimz".`).
Result<ParsedConfig> ParseConfigText(std::string_view text, std::string_view file);

// Parses a config in protobuf's JSON mapping (the repository API's `config` override), as Triton
// does: a field the schema does not know is an error, enum names match in any case. `what`
// labels messages.
Result<ModelConfig> ParseConfigJson(std::string_view json, std::string_view what);

// Fills what Triton fills when a config leaves it out (name from the model's folder, version
// policy latest/1, one CPU instance, backend <-> platform) and checks every rule Rampart relies on
// later. `file` labels messages.
Status CompleteAndValidate(ModelConfig& config, std::string_view folder_name,
                           std::string_view file);

// What a backend's Execute receives, in order: the config's inputs (each batch's requests
// concatenated along dim 0, or flattened into one dimension where allow_ragged_batch is set),
// then one tensor per batch_input target name, which the server makes for each batch
// (serve/batch_assembly.h).
struct BackendInput {
  std::string name;
  tensor::DataType datatype;
};
std::vector<BackendInput> BackendInputs(const ModelConfig& config);

// The config as Triton's GET /v2/models/{m}/config writes it: protobuf's JSON mapping with
// Triton's field names, every field printed (defaults too), 64-bit integers as JSON numbers
// (protobuf writes them as strings; Triton converts them back). ParseConfigJson reads both.
std::string ConfigToJson(const ModelConfig& config);

// A config's data type as a wire tensor type (TYPE_STRING -> BYTES).
tensor::DataType ToTensorType(inference::DataType type);

// The shape the model sees for `input`, which has a `reshape`, given the shape it was sent in
// (which matches the input's dims): the reshape's dims in place of the sent ones, after the batch
// dimension when `batched`, its variable dims taking the sent sizes of the input's variable dims
// in order (as Triton does).
tensor::Shape ReshapedShape(const inference::ModelInput& input, const tensor::Shape& sent,
                            bool batched);

// The shape in which an output with a `reshape` is answered, given the shape the model produced
// (which must match the reshape): the output's dims in place of the reshape's, after the batch
// dimension when `batched`, the variable dims keeping the model's sizes in order (Triton's
// InferenceResponse::Output::Reshape). Errors: Internal when `produced` does not match the
// reshape.
Result<tensor::Shape> AnsweredShape(const inference::ModelOutput& output,
                                    const tensor::Shape& produced, bool batched);

// Whether `shape` from position `offset` on (1 to skip a batch dimension) has the config `dims`,
// -1 matching any size.
bool ShapeMatchesDims(const google::protobuf::RepeatedField<int64_t>& dims,
                      const tensor::Shape& shape, size_t offset);

// The most instances one model may ask for, over all its instance groups.
inline constexpr int64_t kMaxInstances = 1024;

// The canonical platform/backend names of the backends Rampart knows about.
inline constexpr std::string_view kPytorchPlatform = "pytorch_libtorch";
inline constexpr std::string_view kPytorchBackend = "pytorch";
inline constexpr std::string_view kEnsemblePlatform = "ensemble";

}  // namespace rampart::model
