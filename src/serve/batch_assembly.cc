#include "serve/batch_assembly.h"

#include <algorithm>

#include "core/check.h"

namespace rampart::serve {
namespace {

// The element count of a request's input, which validation has checked against its bytes, so
// it cannot overflow.
int64_t Elements(const tensor::Tensor& tensor) {
  const std::optional<int64_t> count = tensor::ElementCount(tensor.shape);
  CHECK(count.has_value());
  return *count;
}

// Appends `values` to `out` as INT32 or FP32.
void AppendValues(const std::vector<int64_t>& values, tensor::DataType datatype, std::string& out) {
  for (int64_t value : values) {
    if (datatype == tensor::DataType::kFp32) {
      const auto element = static_cast<float>(value);
      out.append(reinterpret_cast<const char*>(&element), sizeof(element));
    } else {
      const auto element = static_cast<int32_t>(value);
      out.append(reinterpret_cast<const char*>(&element), sizeof(element));
    }
  }
}

// A batched output must have the batch's items as dim 0 (rules 5 and 7). Errors: Internal.
Status CheckBatchDimension(const tensor::Tensor& output, int64_t items) {
  if (!output.shape.empty() && output.shape[0] == items) return Status::Ok();
  return Internal("output '{}' has shape {} but the batch holds {} items", output.name,
                  tensor::ShapeToString(output.shape), items);
}

}  // namespace

BatchAssembly BatchAssembly::FromConfig(const model::ModelConfig& config) {
  BatchAssembly assembly;
  assembly.batching_ = config.max_batch_size() > 0;
  for (const auto& output : config.output()) {
    if (output.has_reshape()) assembly.reshaped_outputs_.push_back(output);
  }
  for (const auto& input : config.input()) {
    if (input.allow_ragged_batch()) assembly.ragged_.push_back(input.name());
  }
  for (const auto& batch_input : config.batch_input()) {
    assembly.batch_inputs_.push_back(
        {batch_input.kind(),
         {batch_input.target_name().begin(), batch_input.target_name().end()},
         model::ToTensorType(batch_input.data_type()),
         batch_input.source_input(0)});
  }
  for (const auto& batch_output : config.batch_output()) {
    for (const std::string& target : batch_output.target_name()) {
      BatchOutput scattered{target, batch_output.source_input(0), {}};
      if (config.max_batch_size() > 0) scattered.shape.push_back(-1);
      for (const auto& output : config.output()) {
        if (output.name() == target) {
          scattered.shape.insert(scattered.shape.end(), output.dims().begin(), output.dims().end());
        }
      }
      assembly.batch_outputs_.push_back(std::move(scattered));
    }
  }
  return assembly;
}

const BatchAssembly::BatchOutput* BatchAssembly::FindBatchOutput(std::string_view output) const {
  for (const BatchOutput& batch_output : batch_outputs_) {
    if (batch_output.target == output) return &batch_output;
  }
  return nullptr;
}

Status BatchAssembly::Finish(std::vector<tensor::Tensor>& outputs, int64_t items,
                             bool passed_through) const {
  if (passed_through && batching_) {
    for (const tensor::Tensor& output : outputs)
      RETURN_IF_ERROR(CheckBatchDimension(output, items));
  }
  for (const inference::ModelOutput& config : reshaped_outputs_) {
    for (tensor::Tensor& output : outputs) {
      if (output.name != config.name()) continue;
      ASSIGN_OR_RETURN(output.shape, model::AnsweredShape(config, output.shape, batching_));
    }
  }
  for (const tensor::Tensor& output : outputs) {
    // The model's answer is wrong, not the request: Triton answers "output tensor shape does not
    // match size of output" as an internal error too.
    const Status fits = tensor::ValidateByteSize(output.datatype, output.shape, output.data,
                                                 "output '{}'", output.name);
    if (!fits.ok()) return Internal("{}", fits.message());
  }
  return Status::Ok();
}

bool BatchAssembly::IsRagged(std::string_view input) const {
  return std::find(ragged_.begin(), ragged_.end(), input) != ragged_.end();
}

tensor::Tensor BatchAssembly::Make(const BatchInput& spec,
                                   const std::vector<const tensor::Tensor*>& sources) {
  tensor::Tensor out{{}, spec.datatype, {}, {}};
  std::vector<int64_t> values;
  switch (spec.kind) {
    case inference::BatchInput::BATCH_ELEMENT_COUNT:
      for (const tensor::Tensor* source : sources) values.push_back(Elements(*source));
      out.shape = {static_cast<int64_t>(values.size())};
      break;
    case inference::BatchInput::BATCH_ACCUMULATED_ELEMENT_COUNT:
    case inference::BatchInput::BATCH_ACCUMULATED_ELEMENT_COUNT_WITH_ZERO: {
      if (spec.kind == inference::BatchInput::BATCH_ACCUMULATED_ELEMENT_COUNT_WITH_ZERO) {
        values.push_back(0);
      }
      int64_t sum = 0;
      for (const tensor::Tensor* source : sources) values.push_back(sum += Elements(*source));
      out.shape = {static_cast<int64_t>(values.size())};
      break;
    }
    case inference::BatchInput::BATCH_MAX_ELEMENT_COUNT_AS_SHAPE: {
      int64_t most = 0;
      for (const tensor::Tensor* source : sources) most = std::max(most, Elements(*source));
      values.assign(static_cast<size_t>(most), 0);
      out.shape = {most};
      break;
    }
    case inference::BatchInput::BATCH_ITEM_SHAPE:
    case inference::BatchInput::BATCH_ITEM_SHAPE_FLATTEN: {
      int64_t items = 0;
      const size_t rank = sources.front()->shape.empty() ? 0 : sources.front()->shape.size() - 1;
      for (const tensor::Tensor* source : sources) {
        if (source->shape.empty()) continue;  // batched models' inputs have dim 0 (validated)
        for (int64_t item = 0; item < source->shape[0]; ++item) {
          values.insert(values.end(), source->shape.begin() + 1, source->shape.end());
        }
        items += source->shape[0];
      }
      out.shape = spec.kind == inference::BatchInput::BATCH_ITEM_SHAPE
                      ? tensor::Shape{items, static_cast<int64_t>(rank)}
                      : tensor::Shape{static_cast<int64_t>(values.size())};
      break;
    }
    default: break;  // validated: no other kinds
  }
  out.data.reserve(values.size() * sizeof(int32_t));
  AppendValues(values, spec.datatype, out.data);
  return out;
}

std::vector<tensor::Tensor> BatchAssembly::Assemble(
    const std::vector<std::vector<tensor::Tensor>*>& requests,
    const std::vector<int64_t>& items) const {
  std::vector<tensor::Tensor>& first = *requests.front();
  // Batch inputs first: they read the requests' shapes, which the inputs below may take.
  std::vector<tensor::Tensor> made;
  for (const BatchInput& spec : batch_inputs_) {
    std::vector<const tensor::Tensor*> sources;
    for (const std::vector<tensor::Tensor>* inputs : requests) {
      for (const tensor::Tensor& input : *inputs) {
        if (input.name == spec.source) sources.push_back(&input);
      }
    }
    if (sources.size() != requests.size()) continue;  // an optional source input left out
    const tensor::Tensor values = Make(spec, sources);
    for (const std::string& target : spec.targets) {
      made.push_back(values);
      made.back().name = target;
    }
  }

  int64_t total_items = 0;
  for (int64_t count : items) total_items += count;
  std::vector<tensor::Tensor> inputs(first.size());
  for (size_t i = 0; i < first.size(); ++i) {
    const bool ragged = IsRagged(first[i].name);
    inputs[i].name = first[i].name;
    inputs[i].datatype = first[i].datatype;
    if (ragged) {
      int64_t elements = 0;
      for (const std::vector<tensor::Tensor>* request : requests) {
        elements += Elements((*request)[i]);
      }
      inputs[i].shape = {elements};
    } else {
      inputs[i].shape = first[i].shape;
      if (!inputs[i].shape.empty()) inputs[i].shape[0] = total_items;
    }
    if (requests.size() == 1) {
      inputs[i].data = std::move(first[i].data);
      continue;
    }
    size_t bytes = 0;
    for (const std::vector<tensor::Tensor>* request : requests) bytes += (*request)[i].data.size();
    inputs[i].data.reserve(bytes);
    for (const std::vector<tensor::Tensor>* request : requests) {
      inputs[i].data += (*request)[i].data;
    }
  }
  for (tensor::Tensor& tensor : made) inputs.push_back(std::move(tensor));
  return inputs;
}

Result<std::vector<std::vector<tensor::Tensor>>> BatchAssembly::Scatter(
    std::vector<tensor::Tensor>& outputs, const std::vector<std::vector<tensor::Tensor>*>& requests,
    const std::vector<int64_t>& items) const {
  std::vector<std::vector<tensor::Tensor>> parts(requests.size());
  int64_t total_items = 0;
  for (int64_t count : items) total_items += count;
  for (const tensor::Tensor& output : outputs) {
    const BatchOutput* scattered = FindBatchOutput(output.name);
    if (scattered == nullptr) {
      ASSIGN_OR_RETURN(std::vector<tensor::Tensor> split, SplitOutput(output, items, total_items));
      for (size_t r = 0; r < requests.size(); ++r) parts[r].push_back(std::move(split[r]));
      continue;
    }
    // Rule 6: the parts' shapes come from each request's source input.
    const size_t element_size = tensor::DataTypeSize(output.datatype);
    size_t offset = 0;
    for (size_t r = 0; r < requests.size(); ++r) {
      const auto source = std::find_if(
          requests[r]->begin(), requests[r]->end(),
          [&](const tensor::Tensor& input) { return input.name == scattered->source; });
      tensor::Tensor part{output.name, output.datatype, scattered->shape, {}};
      for (size_t dim = 0; dim < part.shape.size(); ++dim) {
        if (part.shape[dim] != -1) continue;
        if (source == requests[r]->end() || dim >= source->shape.size()) {
          return Internal("output '{}': its dim {} follows input '{}', which the request {}",
                          output.name, dim, scattered->source,
                          source == requests[r]->end() ? "left out" : "has fewer dims");
        }
        part.shape[dim] = source->shape[dim];
      }
      // The part's shape comes from the model's config and the request: its size is checked.
      const std::optional<int64_t> count = tensor::ElementCount(part.shape);
      const std::optional<uint64_t> part_bytes =
          count ? tensor::ByteSize(*count, element_size) : std::nullopt;
      if (!part_bytes) {
        return Internal("output '{}': the part for request {} of {}, shape {}, is too large",
                        output.name, r + 1, requests.size(), tensor::ShapeToString(part.shape));
      }
      const auto bytes = static_cast<size_t>(*part_bytes);
      if (bytes > output.data.size() - offset) {
        return Internal(
            "output '{}' holds {} bytes, but its parts for the batch's requests need "
            "more (request {} of {} ends at byte {})",
            output.name, output.data.size(), r + 1, requests.size(), offset + bytes);
      }
      part.data.assign(output.data, offset, bytes);
      offset += bytes;
      parts[r].push_back(std::move(part));
    }
  }
  return parts;
}

Result<std::vector<tensor::Tensor>> SplitOutput(const tensor::Tensor& output,
                                                const std::vector<int64_t>& items, int64_t total) {
  RETURN_IF_ERROR(CheckBatchDimension(output, total));
  std::vector<tensor::Tensor> parts;
  parts.reserve(items.size());
  if (output.datatype == tensor::DataType::kBytes) {
    ASSIGN_OR_RETURN(std::vector<std::string_view> elements,
                     tensor::SplitBytesElements(output.data));
    if (total == 0 || elements.size() % static_cast<size_t>(total) != 0) {
      return Internal("output '{}' has {} BYTES elements for {} items", output.name,
                      elements.size(), total);
    }
    const size_t per_item = elements.size() / static_cast<size_t>(total);
    size_t element = 0;
    for (int64_t count : items) {
      tensor::Tensor part{output.name, output.datatype, output.shape, {}};
      part.shape[0] = count;
      for (size_t e = 0; e < per_item * static_cast<size_t>(count); ++e) {
        // Each element came from a 4-byte length prefix, so it fits one again.
        RETURN_IF_ERROR(tensor::AppendBytesElement(elements[element++], part.data));
      }
      parts.push_back(std::move(part));
    }
    return parts;
  }
  const size_t per_item = output.data.size() / static_cast<size_t>(total);
  size_t offset = 0;
  for (int64_t count : items) {
    tensor::Tensor part{output.name, output.datatype, output.shape, {}};
    part.shape[0] = count;
    const size_t bytes = per_item * static_cast<size_t>(count);
    part.data.assign(output.data, offset, bytes);
    offset += bytes;
    parts.push_back(std::move(part));
  }
  return parts;
}

}  // namespace rampart::serve
