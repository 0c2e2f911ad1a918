#include "serve/warmup.h"

#include <fstream>
#include <random>
#include <sstream>

#include <fmt/ranges.h>

namespace rampart::serve {
namespace {

Result<tensor::Tensor> SampleInput(const model::ModelConfig& config,
                                   const inference::ModelWarmup& sample,
                                   const inference::ModelInput& input,
                                   const std::filesystem::path& version_directory) {
  auto it = sample.inputs().find(input.name());
  if (it == sample.inputs().end()) {
    return InvalidArgument("model_warmup '{}' has no data for input '{}'", sample.name(),
                           input.name());
  }
  const inference::ModelWarmup::Input& spec = it->second;
  tensor::Tensor tensor;
  tensor.name = input.name();
  tensor.datatype = model::ToTensorType(spec.data_type());
  if (tensor.datatype != model::ToTensorType(input.data_type())) {
    return InvalidArgument("model_warmup '{}': input '{}' has data_type {} but the model takes {}",
                           sample.name(), input.name(), tensor::DataTypeName(tensor.datatype),
                           tensor::DataTypeName(model::ToTensorType(input.data_type())));
  }
  if (config.max_batch_size() > 0)
    tensor.shape.push_back(std::max<uint32_t>(1, sample.batch_size()));
  tensor.shape.insert(tensor.shape.end(), spec.dims().begin(), spec.dims().end());
  // As a request's shape is checked: a reshape, or the model itself, relies on it.
  if (!model::ShapeMatchesDims(input.dims(), tensor.shape, config.max_batch_size() > 0 ? 1 : 0)) {
    return InvalidArgument("model_warmup '{}': input '{}' has dims [{}] but the model takes [{}]",
                           sample.name(), input.name(), fmt::join(spec.dims(), ","),
                           fmt::join(input.dims(), ","));
  }
  const std::optional<int64_t> count = tensor::ElementCount(tensor.shape);
  if (!count) {
    return InvalidArgument("model_warmup '{}': input '{}' has invalid dims", sample.name(),
                           input.name());
  }
  const auto elements = static_cast<size_t>(*count);
  if (spec.has_input_data_file()) {
    const std::filesystem::path file = version_directory / "warmup" / spec.input_data_file();
    std::ifstream in(file, std::ios::binary);
    if (!in) return NotFound("model_warmup '{}': cannot read '{}'", sample.name(), file.string());
    std::ostringstream bytes;
    bytes << in.rdbuf();
    tensor.data = bytes.str();
  } else if (tensor.datatype == tensor::DataType::kBytes) {
    for (size_t i = 0; i < elements; ++i) {
      RETURN_IF_ERROR(tensor::AppendBytesElement("", tensor.data));
    }
  } else {
    const std::optional<uint64_t> bytes =
        tensor::ByteSize(*count, tensor::DataTypeSize(tensor.datatype));
    if (!bytes) {
      return InvalidArgument("model_warmup '{}': input '{}' has dims too large", sample.name(),
                             input.name());
    }
    tensor.data.assign(*bytes, '\0');
    if (spec.random_data()) {
      std::mt19937 random(0);
      // Random bytes make invalid BOOL values; keep those 0/1.
      for (char& byte : tensor.data) {
        byte = static_cast<char>(tensor.datatype == tensor::DataType::kBool ? random() & 1
                                                                            : random() & 0x3f);
      }
    }
  }
  RETURN_IF_ERROR(tensor::ValidateByteSize(
      fmt::format("model_warmup '{}' input '{}'", sample.name(), input.name()), tensor.datatype,
      tensor.shape, tensor.data));
  // The sample's dims are the config's, as a request's are: the model sees the reshape.
  if (input.has_reshape()) {
    tensor.shape = model::ReshapedShape(input, tensor.shape, config.max_batch_size() > 0);
  }
  return tensor;
}

}  // namespace

Status WarmUp(backend::ModelInstance& instance, const model::ModelConfig& config,
              const BatchAssembly& assembly, const std::filesystem::path& version_directory) {
  instance.PrepareThread();  // warm up with the settings the instance serves with
  for (const inference::ModelWarmup& sample : config.model_warmup()) {
    std::vector<tensor::Tensor> inputs;
    for (const auto& input : config.input()) {
      if (input.optional() && !sample.inputs().contains(input.name())) continue;
      ASSIGN_OR_RETURN(tensor::Tensor tensor,
                       SampleInput(config, sample, input, version_directory));
      inputs.push_back(std::move(tensor));
    }
    if (!assembly.PassThrough()) {
      const int64_t items =
          config.max_batch_size() > 0 ? std::max<uint32_t>(1, sample.batch_size()) : 1;
      inputs = assembly.Assemble({&inputs}, {items});
    }
    for (uint32_t run = 0; run < std::max<uint32_t>(1, sample.count()); ++run) {
      std::vector<tensor::Tensor> copy = inputs;
      Result<backend::ExecutionResult> result = instance.Execute(copy);
      if (!result.ok()) {
        return result.status().WithContext(fmt::format("model_warmup '{}'", sample.name()));
      }
    }
  }
  return Status::Ok();
}

}  // namespace rampart::serve
