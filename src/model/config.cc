#include "model/config.h"

#include <algorithm>
#include <charconv>
#include <set>

#include <fmt/ranges.h>
#include <google/protobuf/io/tokenizer.h>
#include <google/protobuf/text_format.h>
#include <google/protobuf/util/json_util.h>

#include "json/reader.h"
#include "json/writer.h"

namespace rampart::model {
namespace {

// Collects TextFormat's diagnostics with the file name and position.
class ErrorCollector final : public google::protobuf::io::ErrorCollector {
 public:
  explicit ErrorCollector(std::string_view file) : file_(file) {}

  void AddError(int line, google::protobuf::io::ColumnNumber column,
                const std::string& message) override {
    if (error_.empty()) error_ = fmt::format("{}:{}:{}: {}", file_, line + 1, column + 1, message);
  }
  void AddWarning(int line, google::protobuf::io::ColumnNumber column,
                  const std::string& message) override {
    warnings_.push_back(fmt::format("{}:{}:{}: {}", file_, line + 1, column + 1, message));
  }

  const std::string& error() const { return error_; }
  std::vector<std::string> TakeWarnings() { return std::move(warnings_); }

 private:
  std::string file_;
  std::string error_;
  std::vector<std::string> warnings_;
};

Status CheckDims(std::string_view file, std::string_view what,
                 const google::protobuf::RepeatedField<int64_t>& dims, bool has_reshape) {
  if (dims.empty() && !has_reshape) {
    return InvalidArgument("{}: {}: 'dims' must list at least one dimension", file, what);
  }
  for (int64_t dim : dims) {
    if (dim == 0 || dim < -1) {
      return InvalidArgument("{}: {}: dims must be positive or -1 (variable), got {}", file, what,
                             dim);
    }
  }
  return Status::Ok();
}

// The element counts of the runs of fixed dims between variable (-1) ones: [2, 4, -1, 6] gives
// {8, 6}, [3] gives {3}, [] gives {1}. Empty when a count overflows int64.
std::vector<int64_t> FixedRuns(const google::protobuf::RepeatedField<int64_t>& dims) {
  std::vector<int64_t> runs{1};
  for (int64_t dim : dims) {
    if (dim == -1) {
      runs.push_back(1);
    } else if (__builtin_mul_overflow(runs.back(), dim, &runs.back())) {
      return {};
    }
  }
  return runs;
}

// A reshape must hold what dims hold, as Triton checks: its dims positive or -1, and the same
// element count between each pair of variable dims (so the variable dims pair up in order and a
// request's sizes for them carry over).
template <typename Tensor>
Status CheckReshape(std::string_view file, std::string_view what, const Tensor& tensor) {
  if (!tensor.has_reshape()) return Status::Ok();
  const auto& reshape = tensor.reshape().shape();
  for (int64_t dim : reshape) {
    if (dim == 0 || dim < -1) {
      return InvalidArgument("{}: {}: reshape dims must be positive or -1 (variable), got {}", file,
                             what, dim);
    }
  }
  const std::vector<int64_t> dims_runs = FixedRuns(tensor.dims());
  const std::vector<int64_t> reshape_runs = FixedRuns(reshape);
  if (dims_runs.empty() || reshape_runs.empty() || dims_runs != reshape_runs) {
    return InvalidArgument(
        "{}: {}: dims [{}] and reshape [{}] differ in size (they must hold as many elements, "
        "counted between variable dims alike)",
        file, what, fmt::join(tensor.dims(), ","), fmt::join(reshape, ","));
  }
  return Status::Ok();
}

template <typename Tensors>
Status CheckTensors(std::string_view file, std::string_view kind, const Tensors& tensors) {
  std::set<std::string> seen;
  for (int i = 0; i < tensors.size(); ++i) {
    const auto& tensor = tensors.Get(i);
    const std::string what = fmt::format("{}[{}] '{}'", kind, i, tensor.name());
    if (tensor.name().empty())
      return InvalidArgument("{}: {}[{}]: 'name' is required", file, kind, i);
    if (!seen.insert(tensor.name()).second) {
      return InvalidArgument("{}: {}: the name is used twice", file, what);
    }
    if (tensor.data_type() == inference::TYPE_INVALID) {
      return InvalidArgument("{}: {}: 'data_type' is required", file, what);
    }
    RETURN_IF_ERROR(CheckDims(file, what, tensor.dims(), tensor.has_reshape()));
    RETURN_IF_ERROR(CheckReshape(file, what, tensor));
  }
  return Status::Ok();
}

// The one config input a batch input or output names as `source_input`.
Result<const inference::ModelInput*> SourceInput(
    const ModelConfig& config, const google::protobuf::RepeatedPtrField<std::string>& sources,
    std::string_view file, std::string_view what) {
  if (sources.size() != 1) {
    return InvalidArgument("{}: {}: needs exactly one 'source_input', got {}", file, what,
                           sources.size());
  }
  for (const auto& input : config.input()) {
    if (input.name() == sources[0]) return &input;
  }
  return InvalidArgument("{}: {}: source_input '{}' is not an input of the model", file, what,
                         sources[0]);
}

// allow_ragged_batch and batch_input (Triton's ragged batching): both describe batches, so they
// need max_batch_size > 0; each batch input derives from one config input and feeds inputs of
// its own names, as INT32 or FP32; each batch output scatters outputs of the model by the shape
// of one of its inputs.
Status CheckRaggedBatching(const ModelConfig& config, std::string_view file) {
  for (const auto& input : config.input()) {
    if (input.allow_ragged_batch() && config.max_batch_size() == 0) {
      return InvalidArgument("{}: input '{}': allow_ragged_batch needs max_batch_size > 0", file,
                             input.name());
    }
  }
  std::set<std::string> names;
  for (const auto& input : config.input()) names.insert(input.name());
  for (int i = 0; i < config.batch_input_size(); ++i) {
    const inference::BatchInput& batch_input = config.batch_input(i);
    const std::string what = fmt::format("batch_input[{}]", i);
    if (config.max_batch_size() == 0) {
      return InvalidArgument("{}: {}: needs max_batch_size > 0 (this model does not batch)", file,
                             what);
    }
    if (batch_input.target_name().empty()) {
      return InvalidArgument("{}: {}: 'target_name' is required", file, what);
    }
    for (const std::string& target : batch_input.target_name()) {
      if (target.empty() || !names.insert(target).second) {
        return InvalidArgument(
            "{}: {}: target_name '{}' must be non-empty and differ from every input and other "
            "batch input",
            file, what, target);
      }
    }
    RETURN_IF_ERROR(SourceInput(config, batch_input.source_input(), file, what).status());
    if (batch_input.data_type() != inference::TYPE_INT32 &&
        batch_input.data_type() != inference::TYPE_FP32) {
      return InvalidArgument("{}: {}: data_type must be TYPE_INT32 or TYPE_FP32, got {}", file,
                             what, inference::DataType_Name(batch_input.data_type()));
    }
  }
  for (int i = 0; i < config.batch_output_size(); ++i) {
    const inference::BatchOutput& batch_output = config.batch_output(i);
    const std::string what = fmt::format("batch_output[{}]", i);
    ASSIGN_OR_RETURN(const inference::ModelInput* source,
                     SourceInput(config, batch_output.source_input(), file, what));
    if (batch_output.target_name().empty()) {
      return InvalidArgument("{}: {}: 'target_name' is required", file, what);
    }
    // Each variable dim of the output takes the same dim of the source input.
    const int batch_dims = config.max_batch_size() > 0 ? 1 : 0;
    for (const std::string& target : batch_output.target_name()) {
      const auto output =
          std::find_if(config.output().begin(), config.output().end(),
                       [&](const auto& candidate) { return candidate.name() == target; });
      if (output == config.output().end()) {
        return InvalidArgument("{}: {}: target_name '{}' is not an output of the model", file, what,
                               target);
      }
      if (output->data_type() == inference::TYPE_STRING) {
        return InvalidArgument("{}: {}: output '{}' is TYPE_STRING, which cannot be scattered",
                               file, what, target);
      }
      for (int dim = 0; dim < output->dims_size(); ++dim) {
        if (output->dims(dim) == -1 && dim >= source->dims_size()) {
          return InvalidArgument(
              "{}: {}: output '{}' dim {} is -1 but input '{}' has no dim {} to take it from", file,
              what, target, dim + batch_dims, source->name(), dim + batch_dims);
        }
      }
    }
  }
  return Status::Ok();
}

}  // namespace

std::vector<BackendInput> BackendInputs(const ModelConfig& config) {
  std::vector<BackendInput> inputs;
  for (const auto& input : config.input()) {
    inputs.push_back({input.name(), ToTensorType(input.data_type())});
  }
  for (const auto& batch_input : config.batch_input()) {
    for (const std::string& target : batch_input.target_name()) {
      inputs.push_back({target, ToTensorType(batch_input.data_type())});
    }
  }
  return inputs;
}

Result<ParsedConfig> ParseConfigText(std::string_view text, std::string_view file) {
  ErrorCollector errors(file);
  google::protobuf::TextFormat::Parser parser;
  parser.RecordErrorsTo(&errors);
  // A field the schema does not know is an error, as in Triton: a typo (`dimz: [3]`) would
  // otherwise drop what the author meant and fail later for another reason, or not at all. The
  // schema declares every field Triton's does (model_config.proto).
  ParsedConfig parsed;
  const std::string owned(text);
  if (!parser.ParseFromString(owned, &parsed.config)) {
    return InvalidArgument("{}", errors.error().empty()
                                     ? fmt::format("{}: not a valid model configuration", file)
                                     : errors.error());
  }
  parsed.warnings = errors.TakeWarnings();
  return parsed;
}

Result<ModelConfig> ParseConfigJson(std::string_view json, std::string_view what) {
  ModelConfig config;
  // As Triton reads a load request's config: unknown fields are errors, enum names match in
  // any case.
  google::protobuf::util::JsonParseOptions options;
  options.ignore_unknown_fields = false;
  options.case_insensitive_enum_parsing = true;
  const auto status =
      google::protobuf::util::JsonStringToMessage(std::string(json), &config, options);
  if (!status.ok()) {
    return InvalidArgument("{}: not a valid model configuration: {}", what,
                           std::string(status.message()));
  }
  return config;
}

Status CompleteAndValidate(ModelConfig& config, std::string_view folder_name,
                           std::string_view file) {
  if (config.name().empty()) config.set_name(std::string(folder_name));
  if (config.name() != folder_name) {
    return InvalidArgument("{}: name: '{}' must match the model's folder name '{}'", file,
                           config.name(), folder_name);
  }

  // platform and backend are two spellings of the same choice for the built-in backends.
  if (config.platform() == kPytorchPlatform && config.backend().empty()) {
    config.set_backend(std::string(kPytorchBackend));
  } else if (config.backend() == kPytorchBackend && config.platform().empty()) {
    config.set_platform(std::string(kPytorchPlatform));
  }
  if (config.platform().empty() && config.backend().empty()) {
    return InvalidArgument(
        "{}: one of 'platform' or 'backend' is required (e.g. backend: \"{}\"), unless the first "
        "version folder holds a model.pt",
        file, kPytorchBackend);
  }
  if (config.platform() == kPytorchPlatform && config.backend() != kPytorchBackend) {
    return InvalidArgument("{}: platform '{}' conflicts with backend '{}'", file, config.platform(),
                           config.backend());
  }

  if (config.max_batch_size() < 0) {
    return InvalidArgument("{}: max_batch_size: must be >= 0, got {}", file,
                           config.max_batch_size());
  }
  if (config.platform() != kEnsemblePlatform) {
    if (config.input_size() == 0)
      return InvalidArgument("{}: input: at least one is required", file);
    if (config.output_size() == 0) {
      return InvalidArgument("{}: output: at least one is required", file);
    }
  }
  RETURN_IF_ERROR(CheckTensors(file, "input", config.input()));
  RETURN_IF_ERROR(CheckTensors(file, "output", config.output()));

  if (!config.has_version_policy()) config.mutable_version_policy()->mutable_latest();
  const auto& policy = config.version_policy();
  if (policy.has_latest()) {
    if (policy.latest().num_versions() == 0) {
      config.mutable_version_policy()->mutable_latest()->set_num_versions(1);
    }
  } else if (policy.has_specific()) {
    if (policy.specific().versions().empty()) {
      return InvalidArgument("{}: version_policy.specific: list at least one version", file);
    }
    for (int64_t version : policy.specific().versions()) {
      if (version < 0) {
        return InvalidArgument("{}: version_policy.specific: version {} is negative", file,
                               version);
      }
    }
  } else if (!policy.has_all()) {
    config.mutable_version_policy()->mutable_latest()->set_num_versions(1);
  }

  if (config.has_dynamic_batching()) {
    if (config.max_batch_size() == 0) {
      return InvalidArgument(
          "{}: dynamic_batching: needs max_batch_size > 0 (this model does not batch)", file);
    }
    for (int size : config.dynamic_batching().preferred_batch_size()) {
      if (size <= 0 || size > config.max_batch_size()) {
        return InvalidArgument(
            "{}: dynamic_batching.preferred_batch_size: {} must be in [1, max_batch_size={}]", file,
            size, config.max_batch_size());
      }
    }
  }
  if (config.has_sequence_batching()) {
    return Unimplemented("{}: sequence_batching: sequence batching is not supported by Rampart yet",
                         file);
  }
  RETURN_IF_ERROR(CheckRaggedBatching(config, file));

  if (config.instance_group_size() == 0) {
    auto* group = config.add_instance_group();
    group->set_kind(inference::ModelInstanceGroup::KIND_CPU);
  }
  int64_t instances = 0;
  for (int i = 0; i < config.instance_group_size(); ++i) {
    auto* group = config.mutable_instance_group(i);
    if (group->name().empty()) group->set_name(fmt::format("{}_{}", config.name(), i));
    if (group->count() < 0) {
      return InvalidArgument("{}: instance_group[{}].count: must be >= 1, got {}", file, i,
                             group->count());
    }
    if (group->count() == 0) group->set_count(1);
    instances += group->count();
  }
  if (instances > kMaxInstances) {
    return InvalidArgument("{}: instance_group: {} instances in all; at most {} are allowed", file,
                           instances, kMaxInstances);
  }
  return Status::Ok();
}

namespace {

using google::protobuf::Descriptor;
using google::protobuf::FieldDescriptor;

// Copies a JSON value as it is.
void CopyJson(simdjson::dom::element value, json::Writer& out) {
  switch (value.type()) {
    case simdjson::dom::element_type::ARRAY:
      out.StartArray();
      for (simdjson::dom::element item : json::Value(value).Array()) CopyJson(item, out);
      out.EndArray();
      return;
    case simdjson::dom::element_type::OBJECT:
      out.StartObject();
      for (auto [key, item] : json::Value(value).Object()) {
        out.Key(key);
        CopyJson(item, out);
      }
      out.EndObject();
      return;
    case simdjson::dom::element_type::INT64: out.Int64(value.get_int64().value_unsafe()); return;
    case simdjson::dom::element_type::UINT64: out.Uint64(value.get_uint64().value_unsafe()); return;
    case simdjson::dom::element_type::DOUBLE: out.Double(value.get_double().value_unsafe()); return;
    case simdjson::dom::element_type::STRING: out.String(value.get_string().value_unsafe()); return;
    case simdjson::dom::element_type::BOOL: out.Bool(value.get_bool().value_unsafe()); return;
    case simdjson::dom::element_type::NULL_VALUE: out.Null(); return;
  }
}

// The 64-bit fields Triton's ModelConfigToJson writes as JSON numbers. Its schema's others stay
// protobuf's strings there, and so here: the CUDA graph shapes, the secondary devices' ids, and
// (Triton looks for them one level too high) the initial states' dims.
bool TritonWritesAsNumber(std::string_view path) {
  static const std::set<std::string_view> kNumberFields = {
      "ModelConfig::input::dims",
      "ModelConfig::input::reshape::shape",
      "ModelConfig::output::dims",
      "ModelConfig::output::reshape::shape",
      "ModelConfig::version_policy::specific::versions",
      "ModelConfig::dynamic_batching::max_queue_delay_microseconds",
      "ModelConfig::dynamic_batching::default_queue_policy::default_timeout_microseconds",
      "ModelConfig::dynamic_batching::priority_queue_policy::value::default_timeout_microseconds",
      "ModelConfig::dynamic_batching::priority_levels",
      "ModelConfig::dynamic_batching::default_priority_level",
      "ModelConfig::sequence_batching::direct::max_queue_delay_microseconds",
      "ModelConfig::sequence_batching::oldest::max_queue_delay_microseconds",
      "ModelConfig::sequence_batching::max_sequence_idle_microseconds",
      "ModelConfig::sequence_batching::state::dims",
      "ModelConfig::ensemble_scheduling::step::model_version",
      "ModelConfig::model_warmup::inputs::value::dims",
  };
  return kNumberFields.contains(path);
}

void CopyMessage(simdjson::dom::element object, const Descriptor& message, const std::string& path,
                 json::Writer& out);

// One value of `field` (an element, when the field is repeated), at `path` (the field's, as
// "ModelConfig::input::dims"): a 64-bit integer that Triton writes as a number, which protobuf
// writes as a string, as a JSON number; a message through its own fields.
void CopyFieldValue(simdjson::dom::element value, const FieldDescriptor& field,
                    const std::string& path, json::Writer& out) {
  const bool text =
      value.type() == simdjson::dom::element_type::STRING && TritonWritesAsNumber(path);
  if (field.cpp_type() == FieldDescriptor::CPPTYPE_INT64 && text) {
    int64_t number = 0;
    const std::string_view digits = value.get_string().value_unsafe();
    auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), number);
    if (error == std::errc() && end == digits.data() + digits.size()) return out.Int64(number);
  } else if (field.cpp_type() == FieldDescriptor::CPPTYPE_UINT64 && text) {
    uint64_t number = 0;
    const std::string_view digits = value.get_string().value_unsafe();
    auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), number);
    if (error == std::errc() && end == digits.data() + digits.size()) return out.Uint64(number);
  } else if (field.cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE &&
             value.type() == simdjson::dom::element_type::OBJECT) {
    return CopyMessage(value, *field.message_type(), path, out);
  }
  CopyJson(value, out);
}

void CopyMessage(simdjson::dom::element object, const Descriptor& message, const std::string& path,
                 json::Writer& out) {
  out.StartObject();
  for (auto [key, value] : json::Value(object).Object()) {
    out.Key(key);
    const FieldDescriptor* field = message.FindFieldByName(std::string(key));
    const std::string field_path = fmt::format("{}::{}", path, key);
    if (field == nullptr) {
      CopyJson(value, out);
    } else if (field->is_map() && value.type() == simdjson::dom::element_type::OBJECT) {
      // Keys stay strings (JSON's keys are); the values are the entries' `value` field.
      const FieldDescriptor& entry_value = *field->message_type()->map_value();
      const std::string value_path = field_path + "::value";
      out.StartObject();
      for (auto [entry_key, entry] : json::Value(value).Object()) {
        out.Key(entry_key);
        CopyFieldValue(entry, entry_value, value_path, out);
      }
      out.EndObject();
    } else if (field->is_repeated() && value.type() == simdjson::dom::element_type::ARRAY) {
      out.StartArray();
      for (simdjson::dom::element item : json::Value(value).Array()) {
        CopyFieldValue(item, *field, field_path, out);
      }
      out.EndArray();
    } else {
      CopyFieldValue(value, *field, field_path, out);
    }
  }
  out.EndObject();
}

}  // namespace

std::string ConfigToJson(const ModelConfig& config) {
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  options.always_print_primitive_fields = true;
  std::string printed;
  // Printing a message we built ourselves cannot fail; an error would be an invariant breach.
  if (!google::protobuf::util::MessageToJsonString(config, &printed, options).ok()) return "{}";
  // Protobuf's JSON mapping writes 64-bit integers as strings; Triton's ModelConfigToJson
  // (model_config_utils.cc) turns its list of ModelConfig's 64-bit fields back into numbers
  // (dims, reshape shapes, specific versions, the batchers' microseconds and priority levels,
  // ensemble step versions, warm-up dims), so clients can use `dims` as a shape. The same here,
  // for the same list (TritonWritesAsNumber).
  json::Parser parser;
  Result<json::Value> parsed = parser.Parse(printed);
  if (!parsed.ok() || !parsed->IsObject()) return printed;
  json::Writer writer;
  writer.Reserve(printed.size());
  CopyMessage(parsed->raw(), *ModelConfig::descriptor(), "ModelConfig", writer);
  return writer.Take();
}

tensor::DataType ToTensorType(inference::DataType type) {
  return static_cast<tensor::DataType>(static_cast<int>(type));
}

namespace {

// `shape` (matching `from` after the batch dimension when `batched`) with `to` in place of `from`,
// the variable dims keeping their sizes in order; CheckReshape paired `from`'s and `to`'s.
tensor::Shape MapDims(const google::protobuf::RepeatedField<int64_t>& from,
                      const google::protobuf::RepeatedField<int64_t>& to,
                      const tensor::Shape& shape, bool batched) {
  const size_t offset = batched ? 1 : 0;
  std::vector<int64_t> variable;
  for (int i = 0; i < from.size(); ++i) {
    if (from[i] == -1) variable.push_back(shape[offset + static_cast<size_t>(i)]);
  }
  tensor::Shape mapped;
  if (batched) mapped.push_back(shape[0]);
  size_t next = 0;
  for (int64_t dim : to) mapped.push_back(dim == -1 ? variable[next++] : dim);
  return mapped;
}

}  // namespace

tensor::Shape ReshapedShape(const inference::ModelInput& input, const tensor::Shape& sent,
                            bool batched) {
  return MapDims(input.dims(), input.reshape().shape(), sent, batched);
}

Result<tensor::Shape> AnsweredShape(const inference::ModelOutput& output,
                                    const tensor::Shape& produced, bool batched) {
  if (!ShapeMatchesDims(output.reshape().shape(), produced, batched ? 1 : 0)) {
    return Internal(
        "output '{}': the model produced shape {}, which does not match its reshape "
        "[{}]{}",
        output.name(), tensor::ShapeToString(produced), fmt::join(output.reshape().shape(), ","),
        batched ? " after the batch dimension" : "");
  }
  return MapDims(output.reshape().shape(), output.dims(), produced, batched);
}

bool ShapeMatchesDims(const google::protobuf::RepeatedField<int64_t>& dims,
                      const tensor::Shape& shape, size_t offset) {
  if (shape.size() != static_cast<size_t>(dims.size()) + offset) return false;
  for (int i = 0; i < dims.size(); ++i) {
    if (dims[i] != -1 && dims[i] != shape[offset + static_cast<size_t>(i)]) return false;
  }
  return true;
}

}  // namespace rampart::model
