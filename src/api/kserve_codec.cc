#include "api/kserve_codec.h"

#include <charconv>
#include <cstring>
#include <limits>

#include "json/reader.h"
#include "json/writer.h"

namespace rampart::api {
namespace {

using tensor::AppendRaw;
using tensor::DataType;

// Appends one JSON scalar as an element of `type`.
Status AppendElement(json::Value value, DataType type, std::string_view tensor, size_t index,
                     std::string& out) {
  const auto type_error = [&](std::string_view wanted) {
    return InvalidArgument("input '{}': data element {} must be {}, got {}", tensor, index, wanted,
                           value.KindName());
  };
  const simdjson::dom::element element = value.raw();
  switch (type) {
    case DataType::kBool: {
      bool b = false;
      if (element.get_bool().get(b) != simdjson::SUCCESS) return type_error("a boolean");
      out.push_back(b ? 1 : 0);
      return Status::Ok();
    }
    case DataType::kFp32:
    case DataType::kFp64: {
      double d = 0;
      if (element.get_double().get(d) != simdjson::SUCCESS) {
        int64_t i = 0;
        uint64_t u = 0;
        if (element.get_int64().get(i) == simdjson::SUCCESS) {
          d = static_cast<double>(i);
        } else if (element.get_uint64().get(u) == simdjson::SUCCESS) {
          d = static_cast<double>(u);
        } else {
          return type_error("a number");
        }
      }
      if (type == DataType::kFp32) {
        AppendRaw(static_cast<float>(d), out);
      } else {
        AppendRaw(d, out);
      }
      return Status::Ok();
    }
    case DataType::kUint8:
    case DataType::kUint16:
    case DataType::kUint32:
    case DataType::kUint64: {
      uint64_t u = 0;
      if (element.get_uint64().get(u) != simdjson::SUCCESS) {
        return type_error("a non-negative integer");
      }
      const uint64_t max = type == DataType::kUint8    ? std::numeric_limits<uint8_t>::max()
                           : type == DataType::kUint16 ? std::numeric_limits<uint16_t>::max()
                           : type == DataType::kUint32 ? std::numeric_limits<uint32_t>::max()
                                                       : std::numeric_limits<uint64_t>::max();
      if (u > max) {
        return InvalidArgument("input '{}': data element {} = {} is out of range for {}", tensor,
                               index, u, tensor::DataTypeName(type));
      }
      switch (type) {
        case DataType::kUint8: AppendRaw(static_cast<uint8_t>(u), out); break;
        case DataType::kUint16: AppendRaw(static_cast<uint16_t>(u), out); break;
        case DataType::kUint32: AppendRaw(static_cast<uint32_t>(u), out); break;
        default: AppendRaw(u, out); break;
      }
      return Status::Ok();
    }
    case DataType::kInt8:
    case DataType::kInt16:
    case DataType::kInt32:
    case DataType::kInt64: {
      int64_t i = 0;
      if (element.get_int64().get(i) != simdjson::SUCCESS) return type_error("an integer");
      const int64_t min = type == DataType::kInt8    ? std::numeric_limits<int8_t>::min()
                          : type == DataType::kInt16 ? std::numeric_limits<int16_t>::min()
                          : type == DataType::kInt32 ? std::numeric_limits<int32_t>::min()
                                                     : std::numeric_limits<int64_t>::min();
      const int64_t max = type == DataType::kInt8    ? std::numeric_limits<int8_t>::max()
                          : type == DataType::kInt16 ? std::numeric_limits<int16_t>::max()
                          : type == DataType::kInt32 ? std::numeric_limits<int32_t>::max()
                                                     : std::numeric_limits<int64_t>::max();
      if (i < min || i > max) {
        return InvalidArgument("input '{}': data element {} = {} is out of range for {}", tensor,
                               index, i, tensor::DataTypeName(type));
      }
      switch (type) {
        case DataType::kInt8: AppendRaw(static_cast<int8_t>(i), out); break;
        case DataType::kInt16: AppendRaw(static_cast<int16_t>(i), out); break;
        case DataType::kInt32: AppendRaw(static_cast<int32_t>(i), out); break;
        default: AppendRaw(i, out); break;
      }
      return Status::Ok();
    }
    case DataType::kBytes: {
      std::string_view text;
      if (element.get_string().get(text) != simdjson::SUCCESS) return type_error("a string");
      tensor::AppendBytesElement(text, out);
      return Status::Ok();
    }
    case DataType::kFp16:
    case DataType::kBf16:
      return InvalidArgument(
          "input '{}': {} data cannot be sent as JSON; use the binary tensor data extension",
          tensor, tensor::DataTypeName(type));
    case DataType::kInvalid: break;
  }
  return InvalidArgument("input '{}': unsupported datatype", tensor);
}

// Flattens `data` (nested arrays, row-major) into `out`; counts elements in `count`.
Status AppendData(json::Value data, DataType type, std::string_view tensor, size_t& count,
                  std::string& out, int depth) {
  if (!data.IsArray()) {
    RETURN_IF_ERROR(AppendElement(data, type, tensor, count, out));
    ++count;
    return Status::Ok();
  }
  if (depth > 32) return InvalidArgument("input '{}': 'data' is nested too deeply", tensor);
  for (simdjson::dom::element element : data.Array()) {
    RETURN_IF_ERROR(AppendData(json::Value(element), type, tensor, count, out, depth + 1));
  }
  return Status::Ok();
}

Result<tensor::Shape> ReadShape(json::Value value, std::string_view tensor) {
  if (!value.IsArray()) {
    return InvalidArgument("input '{}': 'shape' must be an array of integers", tensor);
  }
  tensor::Shape shape;
  for (simdjson::dom::element element : value.Array()) {
    int64_t dim = 0;
    if (element.get_int64().get(dim) != simdjson::SUCCESS || dim < 0) {
      return InvalidArgument("input '{}': 'shape' must hold non-negative integers", tensor);
    }
    shape.push_back(dim);
  }
  return shape;
}

Result<tensor::Tensor> DecodeInput(json::Value input, size_t position, std::string_view binary,
                                   size_t& binary_offset) {
  if (!input.IsObject()) return InvalidArgument("inputs[{}] must be an object", position);
  tensor::Tensor tensor;
  auto name = input.Find("name");
  if (!name) return InvalidArgument("inputs[{}]: 'name' is required", position);
  ASSIGN_OR_RETURN(std::string_view name_text, name->GetString("inputs[].name"));
  tensor.name = std::string(name_text);

  auto datatype = input.Find("datatype");
  if (!datatype) return InvalidArgument("input '{}': 'datatype' is required", tensor.name);
  ASSIGN_OR_RETURN(std::string_view datatype_text, datatype->GetString("datatype"));
  auto type = tensor::DataTypeFromName(datatype_text);
  if (!type) {
    return InvalidArgument("input '{}': unknown datatype '{}'", tensor.name, datatype_text);
  }
  tensor.datatype = *type;

  auto shape = input.Find("shape");
  if (!shape) return InvalidArgument("input '{}': 'shape' is required", tensor.name);
  ASSIGN_OR_RETURN(tensor.shape, ReadShape(*shape, tensor.name));
  const std::optional<int64_t> expected = tensor::ElementCount(tensor.shape);
  if (!expected) return InvalidArgument("input '{}': shape is too large", tensor.name);

  std::optional<uint64_t> binary_size;
  if (auto parameters = input.Find("parameters")) {
    if (!parameters->IsObject()) {
      return InvalidArgument("input '{}': 'parameters' must be an object", tensor.name);
    }
    if (auto size = parameters->Find("binary_data_size")) {
      ASSIGN_OR_RETURN(binary_size, size->GetUint64("parameters.binary_data_size"));
    }
  }
  auto data = input.Find("data");
  if (binary_size) {
    if (data) {
      return InvalidArgument("input '{}': has both 'data' and binary_data_size", tensor.name);
    }
    if (*binary_size > binary.size() - binary_offset) {
      return InvalidArgument(
          "input '{}': binary_data_size {} runs past the end of the binary data ({} bytes left)",
          tensor.name, *binary_size, binary.size() - binary_offset);
    }
    tensor.data.assign(binary.substr(binary_offset, *binary_size));
    binary_offset += *binary_size;
    RETURN_IF_ERROR(tensor::ValidateByteSize(fmt::format("input '{}'", tensor.name),
                                             tensor.datatype, tensor.shape, tensor.data));
    return tensor;
  }
  if (!data) {
    return InvalidArgument("input '{}': 'data' is required (or parameters.binary_data_size)",
                           tensor.name);
  }
  const size_t element_size = tensor::DataTypeSize(tensor.datatype);
  if (element_size > 0) tensor.data.reserve(static_cast<size_t>(*expected) * element_size);
  size_t count = 0;
  RETURN_IF_ERROR(AppendData(*data, tensor.datatype, tensor.name, count, tensor.data, 0));
  if (static_cast<int64_t>(count) != *expected) {
    return InvalidArgument("input '{}': shape {} needs {} elements but 'data' has {}", tensor.name,
                           tensor::ShapeToString(tensor.shape), *expected, count);
  }
  return tensor;
}

Status DecodeParameters(json::Value parameters, DecodedInfer& decoded) {
  if (!parameters.IsObject()) return InvalidArgument("'parameters' must be an object");
  if (auto binary = parameters.Find("binary_data_output")) {
    ASSIGN_OR_RETURN(decoded.encoding.all_binary, binary->GetBool("parameters.binary_data_output"));
  }
  if (auto priority = parameters.Find("priority")) {
    ASSIGN_OR_RETURN(decoded.request->priority, priority->GetUint64("parameters.priority"));
  }
  if (auto timeout = parameters.Find("timeout")) {
    ASSIGN_OR_RETURN(decoded.request->timeout_us, timeout->GetUint64("parameters.timeout"));
  }
  for (std::string_view sequence : {"sequence_id", "sequence_start", "sequence_end"}) {
    if (parameters.Find(sequence)) {
      return Unimplemented("parameter '{}': sequence batching is not supported", sequence);
    }
  }
  return Status::Ok();
}

template <typename T>
T ReadRaw(const char* bytes) {
  T value;
  std::memcpy(&value, bytes, sizeof(T));
  return value;
}

Status WriteData(const tensor::Tensor& tensor, json::Writer& writer) {
  const char* bytes = tensor.data.data();
  const size_t size = tensor.data.size();
  writer.StartArray();
  switch (tensor.datatype) {
    case DataType::kBool:
      for (size_t i = 0; i < size; ++i) writer.Bool(bytes[i] != 0);
      break;
    case DataType::kUint8:
      for (size_t i = 0; i < size; ++i) writer.Uint64(ReadRaw<uint8_t>(bytes + i));
      break;
    case DataType::kUint16:
      for (size_t i = 0; i + 2 <= size; i += 2) writer.Uint64(ReadRaw<uint16_t>(bytes + i));
      break;
    case DataType::kUint32:
      for (size_t i = 0; i + 4 <= size; i += 4) writer.Uint64(ReadRaw<uint32_t>(bytes + i));
      break;
    case DataType::kUint64:
      for (size_t i = 0; i + 8 <= size; i += 8) writer.Uint64(ReadRaw<uint64_t>(bytes + i));
      break;
    case DataType::kInt8:
      for (size_t i = 0; i < size; ++i) writer.Int64(ReadRaw<int8_t>(bytes + i));
      break;
    case DataType::kInt16:
      for (size_t i = 0; i + 2 <= size; i += 2) writer.Int64(ReadRaw<int16_t>(bytes + i));
      break;
    case DataType::kInt32:
      for (size_t i = 0; i + 4 <= size; i += 4) writer.Int64(ReadRaw<int32_t>(bytes + i));
      break;
    case DataType::kInt64:
      for (size_t i = 0; i + 8 <= size; i += 8) writer.Int64(ReadRaw<int64_t>(bytes + i));
      break;
    case DataType::kFp32:
      for (size_t i = 0; i + 4 <= size; i += 4) writer.Float(ReadRaw<float>(bytes + i));
      break;
    case DataType::kFp64:
      for (size_t i = 0; i + 8 <= size; i += 8) writer.Double(ReadRaw<double>(bytes + i));
      break;
    case DataType::kBytes: {
      ASSIGN_OR_RETURN(std::vector<std::string_view> elements,
                       tensor::SplitBytesElements(tensor.data));
      for (std::string_view element : elements) writer.String(element);
      break;
    }
    case DataType::kFp16:
    case DataType::kBf16:
    case DataType::kInvalid:
      return InvalidArgument(
          "output '{}': {} data cannot be sent as JSON; request it with "
          "\"parameters\":{{\"binary_data\":true}}",
          tensor.name, tensor::DataTypeName(tensor.datatype));
  }
  writer.EndArray();
  return Status::Ok();
}

}  // namespace

bool OutputEncoding::Binary(std::string_view output) const {
  for (const auto& [name, binary] : per_output) {
    if (name == output) return binary;
  }
  return all_binary;
}

Result<DecodedInfer> DecodeInferRequest(std::string_view body,
                                        std::optional<std::string_view> header_length) {
  std::string_view json_text = body;
  std::string_view binary;
  if (header_length) {
    size_t length = 0;
    const char* end = header_length->data() + header_length->size();
    auto [ptr, error] = std::from_chars(header_length->data(), end, length);
    if (error != std::errc() || ptr != end) {
      return InvalidArgument("Inference-Header-Content-Length '{}' is not a byte count",
                             *header_length);
    }
    if (length > body.size()) {
      return InvalidArgument(
          "Inference-Header-Content-Length {} is larger than the request body ({} bytes)", length,
          body.size());
    }
    json_text = body.substr(0, length);
    binary = body.substr(length);
  }

  thread_local json::Parser parser;
  ASSIGN_OR_RETURN(json::Value root, parser.Parse(json_text));
  if (!root.IsObject()) return InvalidArgument("the infer request must be a JSON object");

  DecodedInfer decoded;
  decoded.request = std::make_unique<serve::InferRequest>();
  serve::InferRequest& request = *decoded.request;
  if (auto id = root.Find("id")) {
    ASSIGN_OR_RETURN(std::string_view id_text, id->GetString("id"));
    request.id = std::string(id_text);
  }
  if (auto parameters = root.Find("parameters")) {
    RETURN_IF_ERROR(DecodeParameters(*parameters, decoded));
  }

  auto inputs = root.Find("inputs");
  if (!inputs) return InvalidArgument("'inputs' is required");
  if (!inputs->IsArray()) return InvalidArgument("'inputs' must be an array");
  size_t binary_offset = 0;
  size_t position = 0;
  for (simdjson::dom::element input : inputs->Array()) {
    ASSIGN_OR_RETURN(tensor::Tensor tensor,
                     DecodeInput(json::Value(input), position++, binary, binary_offset));
    request.inputs.push_back(std::move(tensor));
  }
  if (binary_offset != binary.size()) {
    return InvalidArgument("{} bytes of binary data follow the JSON but no input claims them",
                           binary.size() - binary_offset);
  }

  if (auto outputs = root.Find("outputs")) {
    if (!outputs->IsArray()) return InvalidArgument("'outputs' must be an array");
    for (simdjson::dom::element element : outputs->Array()) {
      json::Value output(element);
      if (!output.IsObject()) return InvalidArgument("each of 'outputs' must be an object");
      auto name = output.Find("name");
      if (!name) return InvalidArgument("outputs[]: 'name' is required");
      ASSIGN_OR_RETURN(std::string_view name_text, name->GetString("outputs[].name"));
      request.requested_outputs.emplace_back(name_text);
      if (auto parameters = output.Find("parameters")) {
        if (!parameters->IsObject()) {
          return InvalidArgument("output '{}': 'parameters' must be an object", name_text);
        }
        if (auto binary_flag = parameters->Find("binary_data")) {
          ASSIGN_OR_RETURN(bool flag, binary_flag->GetBool("parameters.binary_data"));
          decoded.encoding.per_output.emplace_back(std::string(name_text), flag);
        }
        if (parameters->Find("classification")) {
          return Unimplemented("output '{}': the classification extension is not supported",
                               name_text);
        }
      }
    }
  }
  return decoded;
}

Result<EncodedInfer> EncodeInferResponse(const serve::InferResponse& response,
                                         const OutputEncoding& encoding) {
  json::Writer writer;
  writer.StartObject();
  writer.Key("model_name");
  writer.String(response.model_name);
  writer.Key("model_version");
  writer.String(std::to_string(response.model_version));
  if (!response.id.empty()) {
    writer.Key("id");
    writer.String(response.id);
  }
  writer.Key("outputs");
  writer.StartArray();
  bool any_binary = false;
  for (const tensor::Tensor& output : response.outputs) {
    writer.StartObject();
    writer.Key("name");
    writer.String(output.name);
    writer.Key("datatype");
    writer.String(tensor::DataTypeName(output.datatype));
    writer.Key("shape");
    writer.StartArray();
    for (int64_t dim : output.shape) writer.Int64(dim);
    writer.EndArray();
    if (encoding.Binary(output.name)) {
      any_binary = true;
      writer.Key("parameters");
      writer.StartObject();
      writer.Key("binary_data_size");
      writer.Uint64(output.data.size());
      writer.EndObject();
    } else {
      writer.Key("data");
      RETURN_IF_ERROR(WriteData(output, writer));
    }
    writer.EndObject();
  }
  writer.EndArray();
  writer.EndObject();

  EncodedInfer encoded;
  encoded.body = writer.str();
  if (any_binary) {
    encoded.header_length = encoded.body.size();
    for (const tensor::Tensor& output : response.outputs) {
      if (encoding.Binary(output.name)) encoded.body += output.data;
    }
  }
  return encoded;
}

}  // namespace rampart::api
