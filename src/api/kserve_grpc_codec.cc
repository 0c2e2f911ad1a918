#include "api/kserve_grpc_codec.h"

#include <charconv>
#include <cstring>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "model/config.h"

namespace rampart::api {
namespace {

using inference::InferParameter;
using inference::InferTensorContents;
using inference::ModelInferRequest;
using tensor::DataType;

// Appends one fixed-size element's bytes to `out` (hosts are little-endian: x86-64, aarch64).
template <typename T>
void AppendRaw(T value, std::string& out) {
  char bytes[sizeof(T)];
  std::memcpy(bytes, &value, sizeof(T));
  out.append(bytes, sizeof(T));
}

// The typed-contents field a datatype travels in; nullptr for FP16/BF16 (raw only).
const char* ContentsFieldFor(DataType type) {
  switch (type) {
    case DataType::kBool: return "bool_contents";
    case DataType::kInt8:
    case DataType::kInt16:
    case DataType::kInt32: return "int_contents";
    case DataType::kInt64: return "int64_contents";
    case DataType::kUint8:
    case DataType::kUint16:
    case DataType::kUint32: return "uint_contents";
    case DataType::kUint64: return "uint64_contents";
    case DataType::kFp32: return "fp32_contents";
    case DataType::kFp64: return "fp64_contents";
    case DataType::kBytes: return "bytes_contents";
    default: return nullptr;
  }
}

struct ContentsField {
  const char* name;
  int size;
};

std::vector<ContentsField> SetContentsFields(const InferTensorContents& contents) {
  const ContentsField all[] = {
      {"bool_contents", contents.bool_contents_size()},
      {"int_contents", contents.int_contents_size()},
      {"int64_contents", contents.int64_contents_size()},
      {"uint_contents", contents.uint_contents_size()},
      {"uint64_contents", contents.uint64_contents_size()},
      {"fp32_contents", contents.fp32_contents_size()},
      {"fp64_contents", contents.fp64_contents_size()},
      {"bytes_contents", contents.bytes_contents_size()},
  };
  std::vector<ContentsField> set;
  for (const ContentsField& field : all) {
    if (field.size > 0) set.push_back(field);
  }
  return set;
}

// Appends integers after checking each fits `Out`.
template <typename Out, typename In>
Status AppendChecked(const google::protobuf::RepeatedField<In>& values, const tensor::Tensor& t,
                     std::string& out) {
  out.reserve(static_cast<size_t>(values.size()) * sizeof(Out));
  for (int i = 0; i < values.size(); ++i) {
    const In value = values.Get(i);
    if (!std::in_range<Out>(value)) {
      return InvalidArgument("input '{}': element {} = {} is out of range for {}", t.name, i, value,
                             tensor::DataTypeName(t.datatype));
    }
    AppendRaw(static_cast<Out>(value), out);
  }
  return Status::Ok();
}

// Copies a repeated field whose in-memory layout already is the wire layout.
template <typename T>
void AppendSame(const google::protobuf::RepeatedField<T>& values, std::string& out) {
  out.append(reinterpret_cast<const char*>(values.data()),
             static_cast<size_t>(values.size()) * sizeof(T));
}

Status DecodeContents(const InferTensorContents& contents, int64_t element_count,
                      tensor::Tensor& t) {
  const char* wanted = ContentsFieldFor(t.datatype);
  if (wanted == nullptr) {
    return InvalidArgument(
        "input '{}': {} data cannot travel in typed contents; send it in raw_input_contents",
        t.name, tensor::DataTypeName(t.datatype));
  }
  const std::vector<ContentsField> set = SetContentsFields(contents);
  for (const ContentsField& field : set) {
    if (std::strcmp(field.name, wanted) != 0) {
      return InvalidArgument("input '{}': datatype {} takes {}, but {} is set", t.name,
                             tensor::DataTypeName(t.datatype), wanted, field.name);
    }
  }
  const int count = set.empty() ? 0 : set.front().size;
  if (count != element_count) {
    return InvalidArgument("input '{}': shape {} needs {} elements but {} has {}", t.name,
                           tensor::ShapeToString(t.shape), element_count, wanted, count);
  }
  switch (t.datatype) {
    case DataType::kBool:
      t.data.reserve(static_cast<size_t>(count));
      for (bool value : contents.bool_contents()) t.data.push_back(value ? 1 : 0);
      return Status::Ok();
    case DataType::kInt8: return AppendChecked<int8_t>(contents.int_contents(), t, t.data);
    case DataType::kInt16: return AppendChecked<int16_t>(contents.int_contents(), t, t.data);
    case DataType::kInt32: AppendSame(contents.int_contents(), t.data); return Status::Ok();
    case DataType::kInt64: AppendSame(contents.int64_contents(), t.data); return Status::Ok();
    case DataType::kUint8: return AppendChecked<uint8_t>(contents.uint_contents(), t, t.data);
    case DataType::kUint16: return AppendChecked<uint16_t>(contents.uint_contents(), t, t.data);
    case DataType::kUint32: AppendSame(contents.uint_contents(), t.data); return Status::Ok();
    case DataType::kUint64: AppendSame(contents.uint64_contents(), t.data); return Status::Ok();
    case DataType::kFp32: AppendSame(contents.fp32_contents(), t.data); return Status::Ok();
    case DataType::kFp64: AppendSame(contents.fp64_contents(), t.data); return Status::Ok();
    case DataType::kBytes:
      for (const std::string& element : contents.bytes_contents()) {
        RETURN_IF_ERROR(tensor::AppendBytesElement(element, t.data)
                            .WithContext(fmt::format("input '{}'", t.name)));
      }
      return Status::Ok();
    default: break;
  }
  return InvalidArgument("input '{}': unsupported datatype", t.name);
}

// The request's parameters, as Triton's gRPC front end reads them (SetInferenceRequestMetadata),
// with its words: its reserved ones must have their types; sequence_id, sequence_start and
// sequence_end mean nothing to a model without a sequence batcher, as to Triton's; of the keys
// starting with "triton_" only Triton's triton_enable_empty_final_response is allowed (it
// concerns decoupled models, which Rampart has not); any other (custom) parameter must be an
// int64, bool, string or double, and no backend of Rampart's reads one.
Status DecodeParameters(const ModelInferRequest& request, serve::InferRequest& out) {
  constexpr std::string_view kAllowedTritonKey = "triton_enable_empty_final_response";
  for (const auto& [name, parameter] : request.parameters()) {
    const InferParameter::ParameterChoiceCase type = parameter.parameter_choice_case();
    if (name == "sequence_id") {
      if (type != InferParameter::kInt64Param && type != InferParameter::kStringParam) {
        return InvalidArgument(
            "invalid value type for 'sequence_id' parameter, expected int64_param or "
            "string_param.");
      }
    } else if (name == "sequence_start" || name == "sequence_end" || name == kAllowedTritonKey) {
      if (type != InferParameter::kBoolParam) {
        return InvalidArgument("invalid value type for '{}' parameter, expected bool_param.", name);
      }
    } else if (name == "priority") {
      if (type == InferParameter::kUint64Param) {
        out.priority = parameter.uint64_param();
      } else if (type == InferParameter::kInt64Param && parameter.int64_param() >= 0) {
        out.priority = static_cast<uint64_t>(parameter.int64_param());
      } else if (type == InferParameter::kInt64Param) {
        return InvalidArgument("invalid value for 'priority', expected value >= 0.");
      } else {
        return InvalidArgument(
            "invalid value type for 'priority' parameter, expected int64_param or "
            "uint64_param.");
      }
    } else if (name == "timeout") {
      if (type != InferParameter::kInt64Param) {
        return InvalidArgument("invalid value type for 'timeout' parameter, expected int64_param.");
      }
      // Triton reads a negative one as a huge unsigned timeout; refused here instead.
      if (parameter.int64_param() < 0) {
        return InvalidArgument("invalid value for 'timeout', expected value >= 0.");
      }
      out.timeout_us = static_cast<uint64_t>(parameter.int64_param());
    } else if (name.starts_with("triton_")) {
      return InvalidArgument(
          "parameter keys starting with 'triton_' are reserved for Triton usage. Only the "
          "following keys starting with 'triton_' are allowed: {}",
          kAllowedTritonKey);
    } else if (type != InferParameter::kInt64Param && type != InferParameter::kBoolParam &&
               type != InferParameter::kStringParam && type != InferParameter::kDoubleParam) {
      return InvalidArgument(
          "invalid value type for '{}' parameter, expected int64_param, bool_param, or "
          "string_param.",
          name);
    }
  }
  return Status::Ok();
}

Status RejectSharedMemory(const google::protobuf::Map<std::string, InferParameter>& parameters,
                          std::string_view what, std::string_view name) {
  if (parameters.contains("shared_memory_region")) {
    return Unimplemented("{} '{}': shared memory is not supported; send the data in the request",
                         what, name);
  }
  return Status::Ok();
}

void FillDuration(const serve::Duration& duration, inference::StatisticDuration& out) {
  out.set_count(duration.count);
  out.set_ns(duration.ns);
}

}  // namespace

grpc::Status ToGrpcStatus(const Status& status) {
  grpc::StatusCode code = grpc::StatusCode::UNKNOWN;
  switch (status.code()) {
    case StatusCode::kOk: return grpc::Status::OK;
    case StatusCode::kCancelled: code = grpc::StatusCode::CANCELLED; break;
    case StatusCode::kInvalidArgument: code = grpc::StatusCode::INVALID_ARGUMENT; break;
    case StatusCode::kNotFound: code = grpc::StatusCode::NOT_FOUND; break;
    case StatusCode::kAlreadyExists: code = grpc::StatusCode::ALREADY_EXISTS; break;
    case StatusCode::kPermissionDenied: code = grpc::StatusCode::PERMISSION_DENIED; break;
    case StatusCode::kResourceExhausted: code = grpc::StatusCode::RESOURCE_EXHAUSTED; break;
    case StatusCode::kFailedPrecondition: code = grpc::StatusCode::FAILED_PRECONDITION; break;
    case StatusCode::kUnimplemented: code = grpc::StatusCode::UNIMPLEMENTED; break;
    case StatusCode::kInternal: code = grpc::StatusCode::INTERNAL; break;
    case StatusCode::kUnavailable: code = grpc::StatusCode::UNAVAILABLE; break;
    case StatusCode::kUnauthenticated: code = grpc::StatusCode::UNAUTHENTICATED; break;
    // gRPC's own answer to a message over the size limit.
    case StatusCode::kPayloadTooLarge: code = grpc::StatusCode::RESOURCE_EXHAUSTED; break;
  }
  // Every error carries a message, as Triton's do.
  return grpc::Status(code, status.message().empty() ? std::string(StatusCodeName(status.code()))
                                                     : status.message());
}

Result<int64_t> ParseModelVersion(std::string_view version) {
  if (version.empty()) return serve::kLatestVersion;
  int64_t number = 0;
  auto [ptr, error] = std::from_chars(version.data(), version.data() + version.size(), number);
  if (error != std::errc() || ptr != version.data() + version.size() || number < 0) {
    return InvalidArgument("'{}' is not a valid model version (a non-negative integer)", version);
  }
  return number;
}

Result<std::unique_ptr<serve::InferRequest>> DecodeInferRequest(ModelInferRequest& request) {
  auto out = std::make_unique<serve::InferRequest>();
  out->model_name = request.model_name();
  ASSIGN_OR_RETURN(out->model_version, ParseModelVersion(request.model_version()));
  out->id = request.id();
  RETURN_IF_ERROR(DecodeParameters(request, *out));

  // First: tritonclient sends no raw_input_contents entry for a shared-memory input, so a
  // request mixing one with raw inputs would otherwise fail the count check below, unclearly.
  for (const auto& input : request.inputs()) {
    RETURN_IF_ERROR(RejectSharedMemory(input.parameters(), "input", input.name()));
  }
  const bool raw = request.raw_input_contents_size() > 0;
  if (raw && request.raw_input_contents_size() != request.inputs_size()) {
    return InvalidArgument(
        "raw_input_contents has {} entries but the request has {} inputs; send one entry per "
        "input, in input order",
        request.raw_input_contents_size(), request.inputs_size());
  }
  out->inputs.reserve(static_cast<size_t>(request.inputs_size()));
  for (int i = 0; i < request.inputs_size(); ++i) {
    const ModelInferRequest::InferInputTensor& input = request.inputs(i);
    tensor::Tensor t;
    t.name = input.name();
    if (t.name.empty()) return InvalidArgument("inputs[{}]: 'name' is required", i);
    const std::optional<DataType> type = tensor::DataTypeFromName(input.datatype());
    if (!type) {
      return InvalidArgument("input '{}': unknown datatype '{}'", t.name, input.datatype());
    }
    t.datatype = *type;
    t.shape.assign(input.shape().begin(), input.shape().end());
    for (int64_t dim : t.shape) {
      if (dim < 0) {
        return InvalidArgument("input '{}': shape {} has a negative dimension", t.name,
                               tensor::ShapeToString(t.shape));
      }
    }
    const std::optional<int64_t> count = tensor::ElementCount(t.shape);
    if (!count) return InvalidArgument("input '{}': shape is too large", t.name);
    if (raw) {
      if (input.has_contents()) {
        return InvalidArgument(
            "input '{}': 'contents' must not be set when the request uses raw_input_contents",
            t.name);
      }
      // Whether it is the size the shape needs is the model's check (Triton's words, naming it).
      t.data.swap(*request.mutable_raw_input_contents(i));
    } else if (input.has_contents()) {
      RETURN_IF_ERROR(DecodeContents(input.contents(), *count, t));
    } else if (*count > 0) {
      return InvalidArgument("input '{}': no data; set 'contents' or raw_input_contents", t.name);
    }
    out->inputs.push_back(std::move(t));
  }

  for (const ModelInferRequest::InferRequestedOutputTensor& output : request.outputs()) {
    if (output.name().empty()) return InvalidArgument("outputs[]: 'name' is required");
    RETURN_IF_ERROR(RejectSharedMemory(output.parameters(), "output", output.name()));
    if (output.parameters().contains("classification")) {
      return Unimplemented("output '{}': the classification extension is not supported",
                           output.name());
    }
    out->requested_outputs.push_back(output.name());
  }
  return out;
}

void EncodeInferResponse(serve::InferResponse& response, inference::ModelInferResponse& out) {
  out.set_model_name(response.model_name);
  out.set_model_version(std::to_string(response.model_version));
  out.set_id(response.id);
  for (tensor::Tensor& tensor : response.outputs) {
    inference::ModelInferResponse::InferOutputTensor& output = *out.add_outputs();
    output.set_name(tensor.name);
    output.set_datatype(std::string(tensor::DataTypeName(tensor.datatype)));
    output.mutable_shape()->Add(tensor.shape.begin(), tensor.shape.end());
    *out.add_raw_output_contents() = std::move(tensor.data);
  }
}

void FillModelMetadata(const serve::ModelMetadata& metadata,
                       inference::ModelMetadataResponse& out) {
  out.set_name(metadata.name);
  for (const std::string& version : metadata.versions) out.add_versions(version);
  out.set_platform(metadata.platform);
  const auto fill = [](const std::vector<serve::TensorMetadata>& tensors, auto& fields) {
    for (const serve::TensorMetadata& tensor : tensors) {
      inference::ModelMetadataResponse::TensorMetadata& field = *fields.Add();
      field.set_name(tensor.name);
      field.set_datatype(tensor.datatype);
      for (int64_t dim : tensor.shape) field.add_shape(dim);
    }
  };
  fill(metadata.inputs, *out.mutable_inputs());
  fill(metadata.outputs, *out.mutable_outputs());
}

void FillModelStatistics(const serve::ModelVersion& model, inference::ModelStatistics& out) {
  const serve::StatisticsSnapshot stats = model.statistics().Snapshot();
  out.set_name(model.name());
  out.set_version(std::to_string(model.version()));
  out.set_last_inference(stats.last_inference_ms);
  out.set_inference_count(stats.inference_count);
  out.set_execution_count(stats.execution_count);
  inference::InferStatistics& infer = *out.mutable_inference_stats();
  FillDuration(stats.success, *infer.mutable_success());
  FillDuration(stats.fail, *infer.mutable_fail());
  FillDuration(stats.queue, *infer.mutable_queue());
  FillDuration(stats.compute_input, *infer.mutable_compute_input());
  FillDuration(stats.compute_infer, *infer.mutable_compute_infer());
  FillDuration(stats.compute_output, *infer.mutable_compute_output());
  // No response cache yet: present and zero, as HTTP reports them.
  infer.mutable_cache_hit();
  infer.mutable_cache_miss();
  for (const auto& [size, batch] : stats.batch_stats) {
    inference::InferBatchStatistics& each = *out.add_batch_stats();
    each.set_batch_size(size);
    FillDuration(batch.compute_input, *each.mutable_compute_input());
    FillDuration(batch.compute_infer, *each.mutable_compute_infer());
    FillDuration(batch.compute_output, *each.mutable_compute_output());
  }
}

}  // namespace rampart::api
