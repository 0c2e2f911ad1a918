#include "api/kserve_codec.h"

#include <charconv>
#include <cstring>
#include <limits>
#include <type_traits>

#include "json/reader.h"
#include "json/writer.h"

namespace rampart::api {
namespace {

using tensor::DataType;

// How deeply `data` arrays may nest.
constexpr int kMaxDepth = 32;

// The largest JSON text an I/O thread's parser stays sized for between requests: simdjson keeps
// about 15 bytes per byte of the largest document it parsed, so this bounds what each I/O thread
// holds to ~15 MiB; larger requests allocate their parse buffers and free them when decoded.
constexpr size_t kKeptParserBytes = size_t{1} << 20;

Status NestedTooDeeply(std::string_view tensor) {
  return InvalidArgument("input '{}': 'data' is nested too deeply", tensor);
}

Status ElementTypeError(simdjson::dom::element element, std::string_view tensor, size_t index,
                        std::string_view wanted) {
  return InvalidArgument("input '{}': data element {} must be {}, got {}", tensor, index, wanted,
                         json::Value(element).KindName());
}

template <typename T>
Status ElementRangeError(std::string_view tensor, size_t index, T value, DataType type) {
  return InvalidArgument("input '{}': data element {} = {} is out of range for {}", tensor, index,
                         value, tensor::DataTypeName(type));
}

// Converts the JSON scalar `element` (the tensor's element number `index`) to `T`, the storage
// type of `type`: bool for BOOL, float/double for FP32/FP64 (integers are accepted), and the
// fixed-width integer for the integer types (range-checked).
template <typename T>
Status ReadElement(simdjson::dom::element element, DataType type, std::string_view tensor,
                   size_t index, T& value) {
  if constexpr (std::is_same_v<T, bool>) {
    if (element.get_bool().get(value) != simdjson::SUCCESS) {
      return ElementTypeError(element, tensor, index, "a boolean");
    }
  } else if constexpr (std::is_floating_point_v<T>) {
    double d = 0;
    if (element.get_double().get(d) != simdjson::SUCCESS) {
      int64_t i = 0;
      uint64_t u = 0;
      if (element.get_int64().get(i) == simdjson::SUCCESS) {
        d = static_cast<double>(i);
      } else if (element.get_uint64().get(u) == simdjson::SUCCESS) {
        d = static_cast<double>(u);
      } else {
        return ElementTypeError(element, tensor, index, "a number");
      }
    }
    value = static_cast<T>(d);
  } else if constexpr (std::is_unsigned_v<T>) {
    uint64_t u = 0;
    if (element.get_uint64().get(u) != simdjson::SUCCESS) {
      return ElementTypeError(element, tensor, index, "a non-negative integer");
    }
    if (u > std::numeric_limits<T>::max()) return ElementRangeError(tensor, index, u, type);
    value = static_cast<T>(u);
  } else {
    int64_t i = 0;
    if (element.get_int64().get(i) != simdjson::SUCCESS) {
      return ElementTypeError(element, tensor, index, "an integer");
    }
    if (i < std::numeric_limits<T>::min() || i > std::numeric_limits<T>::max()) {
      return ElementRangeError(tensor, index, i, type);
    }
    value = static_cast<T>(i);
  }
  return Status::Ok();
}

// Flattens `data` (nested arrays, row-major) into `out`, which has room for `capacity` elements
// of the fixed-size type `T`. Every element is counted in `count`; those past the capacity are
// checked but not stored, so the caller can report how many `data` really holds.
template <typename T>
class FixedSizeFlattener {
 public:
  FixedSizeFlattener(DataType type, std::string_view tensor, char* out, size_t capacity)
      : type_(type), tensor_(tensor), out_(out), capacity_(capacity) {}

  Status Flatten(simdjson::dom::element data, int depth) {
    if (!data.is_array()) return Store(data);
    if (depth > kMaxDepth) return NestedTooDeeply(tensor_);
    for (simdjson::dom::element element : json::Value(data).Array()) {
      // Scalars, the common case, without a call per element.
      RETURN_IF_ERROR(element.is_array() ? Flatten(element, depth + 1) : Store(element));
    }
    return Status::Ok();
  }

  size_t count() const { return count_; }

 private:
  Status Store(simdjson::dom::element element) {
    T value{};
    RETURN_IF_ERROR(ReadElement(element, type_, tensor_, count_, value));
    if (count_ < capacity_) std::memcpy(out_ + count_ * sizeof(T), &value, sizeof(T));
    ++count_;
    return Status::Ok();
  }

  const DataType type_;
  const std::string_view tensor_;
  char* const out_;
  const size_t capacity_;
  size_t count_ = 0;
};

// Flattens `data` into `out` as BYTES elements (length-prefixed strings).
Status FlattenBytes(simdjson::dom::element data, std::string_view tensor, size_t& count,
                    std::string& out, int depth) {
  if (!data.is_array()) {
    std::string_view text;
    if (data.get_string().get(text) != simdjson::SUCCESS) {
      return ElementTypeError(data, tensor, count, "a string");
    }
    RETURN_IF_ERROR(
        tensor::AppendBytesElement(text, out).WithContext(fmt::format("input '{}'", tensor)));
    ++count;
    return Status::Ok();
  }
  if (depth > kMaxDepth) return NestedTooDeeply(tensor);
  for (simdjson::dom::element element : json::Value(data).Array()) {
    RETURN_IF_ERROR(FlattenBytes(element, tensor, count, out, depth + 1));
  }
  return Status::Ok();
}

// `max_elements` bounds what the JSON text can hold: when the shape asks for more, `data` cannot
// match it, so nothing is stored (the elements are still checked and counted for the message)
// and a huge shape in a small body costs no memory.
template <typename T>
Status FlattenFixedSize(simdjson::dom::element data, tensor::Tensor& tensor, size_t expected,
                        size_t max_elements, size_t& count) {
  const size_t capacity = expected <= max_elements ? expected : 0;
  tensor.data.resize(capacity * sizeof(T));
  FixedSizeFlattener<T> flattener(tensor.datatype, tensor.name, tensor.data.data(), capacity);
  Status status = flattener.Flatten(data, 0);
  count = flattener.count();
  return status;
}

// Writes the JSON `data` of `tensor` (nested arrays, row-major) into tensor.data; counts its
// elements in `count`. `expected` is the shape's element count; `max_elements` the most elements
// the request's JSON text could hold.
Status FlattenData(simdjson::dom::element data, tensor::Tensor& tensor, size_t expected,
                   size_t max_elements, size_t& count) {
  const auto fixed = [&]<typename T>(T) {
    return FlattenFixedSize<T>(data, tensor, expected, max_elements, count);
  };
  switch (tensor.datatype) {
    case DataType::kBool: return fixed(bool{});
    case DataType::kUint8: return fixed(uint8_t{});
    case DataType::kUint16: return fixed(uint16_t{});
    case DataType::kUint32: return fixed(uint32_t{});
    case DataType::kUint64: return fixed(uint64_t{});
    case DataType::kInt8: return fixed(int8_t{});
    case DataType::kInt16: return fixed(int16_t{});
    case DataType::kInt32: return fixed(int32_t{});
    case DataType::kInt64: return fixed(int64_t{});
    case DataType::kFp32: return fixed(float{});
    case DataType::kFp64: return fixed(double{});
    case DataType::kBytes: return FlattenBytes(data, tensor.name, count, tensor.data, 0);
    case DataType::kFp16:
    case DataType::kBf16:
      return InvalidArgument(
          "input '{}': {} data cannot be sent as JSON; use the binary tensor data extension",
          tensor.name, tensor::DataTypeName(tensor.datatype));
    case DataType::kInvalid: break;
  }
  return InvalidArgument("input '{}': unsupported datatype", tensor.name);
}

Result<tensor::Shape> ReadShape(json::Value value, std::string_view tensor) {
  if (!value.IsArray()) {
    return InvalidArgument("input '{}': 'shape' must be an array of integers", tensor);
  }
  tensor::Shape shape;
  shape.reserve(value.Array().size());
  for (simdjson::dom::element element : value.Array()) {
    int64_t dim = 0;
    if (element.get_int64().get(dim) != simdjson::SUCCESS || dim < 0) {
      return InvalidArgument("input '{}': 'shape' must hold non-negative integers", tensor);
    }
    shape.push_back(dim);
  }
  return shape;
}

// `json_bytes` is the size of the request's JSON text.
Result<tensor::Tensor> DecodeInput(json::Value input, size_t position, size_t json_bytes,
                                   std::string_view binary, size_t& binary_offset) {
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
    // Whether it is the size the shape needs is the model's check (Triton's words, naming it).
    return tensor;
  }
  if (!data) {
    return InvalidArgument("input '{}': 'data' is required (or parameters.binary_data_size)",
                           tensor.name);
  }
  size_t count = 0;
  // Each element takes at least two bytes of JSON: a digit and a comma or bracket.
  const size_t max_elements = json_bytes / 2;
  RETURN_IF_ERROR(
      FlattenData(data->raw(), tensor, static_cast<size_t>(*expected), max_elements, count));
  if (static_cast<int64_t>(count) != *expected) {
    return InvalidArgument("input '{}': shape {} needs {} elements but 'data' has {}", tensor.name,
                           tensor::ShapeToString(tensor.shape), *expected, count);
  }
  return tensor;
}

// The request's parameters, as Triton's HTTP front end reads them (ParseJsonTritonParams):
// its reserved ones must have their types; sequence_id (an unsigned integer or a string) and
// sequence_start/_end (booleans) mean nothing to a model without a sequence batcher, as to
// Triton's; keys starting with "triton_" are Triton's own and refused; any other (custom)
// parameter must be a string, a number or a boolean, and no backend of Rampart's reads one.
Status DecodeParameters(json::Value parameters, DecodedInfer& decoded) {
  if (!parameters.IsObject()) return InvalidArgument("'parameters' must be an object");
  for (auto [key, element] : parameters.Object()) {
    const json::Value value(element);
    const std::string what = fmt::format("parameters.{}", key);
    const std::string unable = fmt::format("Unable to parse '{}'", key);
    Status status;
    if (key == "sequence_id") {
      if (!value.GetUint64(what).ok()) status = value.GetString(what).status().WithContext(unable);
    } else if (key == "sequence_start" || key == "sequence_end") {
      status = value.GetBool(what).status().WithContext(unable);
    } else if (key == "priority") {
      Result<uint64_t> priority = value.GetUint64(what);
      if (priority.ok()) decoded.request->priority = *priority;
      status = priority.status().WithContext(unable);
    } else if (key == "timeout") {
      Result<uint64_t> timeout = value.GetUint64(what);
      if (timeout.ok()) decoded.request->timeout_us = *timeout;
      status = timeout.status().WithContext(unable);
    } else if (key == "binary_data_output") {
      Result<bool> binary = value.GetBool(what);
      if (binary.ok()) decoded.encoding.all_binary = *binary;
      status = binary.status().WithContext(unable);
    } else if (key.starts_with("triton_")) {
      status = InvalidArgument(
          "parameter keys starting with 'triton_' are reserved for Triton usage and should not be "
          "specified.");
    } else if (value.IsObject() || value.IsArray() || value.IsNull()) {
      status = InvalidArgument(
          "parameter '{}' has invalid type. It should be either 'int', 'bool', or 'string'.", key);
    }
    RETURN_IF_ERROR(status);
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

// The infer request in `json_text`, parsed with `parser`, its binary inputs taken from `binary`.
// Nothing in the result points into the parser.
Result<DecodedInfer> DecodeDocument(json::Parser& parser, std::string_view json_text,
                                    std::string_view binary) {
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
  request.inputs.reserve(inputs->Array().size());
  size_t binary_offset = 0;
  size_t position = 0;
  for (simdjson::dom::element input : inputs->Array()) {
    ASSIGN_OR_RETURN(tensor::Tensor tensor, DecodeInput(json::Value(input), position++,
                                                        json_text.size(), binary, binary_offset));
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
      bool binary_output = false;  // Triton's CheckBinaryOutputData
      if (auto parameters = output.Find("parameters")) {
        if (!parameters->IsObject()) {
          return InvalidArgument("output '{}': 'parameters' must be an object", name_text);
        }
        if (auto binary_flag = parameters->Find("binary_data")) {
          ASSIGN_OR_RETURN(binary_output, binary_flag->GetBool("parameters.binary_data"));
        }
        if (parameters->Find("classification")) {
          return Unimplemented("output '{}': the classification extension is not supported",
                               name_text);
        }
      }
      decoded.encoding.per_output.emplace_back(std::string(name_text), binary_output);
    }
  }
  return decoded;
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
  Result<DecodedInfer> decoded = DecodeDocument(parser, json_text, binary);
  // One large request must not pin its parse buffers on this I/O thread once it is decoded.
  parser.ShrinkTo(kKeptParserBytes);
  return decoded;
}

Result<EncodedInfer> EncodeInferResponse(const serve::InferResponse& response,
                                         const OutputEncoding& encoding) {
  json::Writer writer;
  // One allocation for most answers: numbers take up to about three characters of text per
  // byte of data (an INT32 up to 11 and a comma), binary data follows the JSON as it is.
  size_t estimate = 128 + response.model_name.size() + response.id.size();
  for (const tensor::Tensor& output : response.outputs) {
    estimate += 128 + (encoding.Binary(output.name) ? 1 : 3) * output.data.size();
  }
  writer.Reserve(estimate);
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
  encoded.body = writer.Take();
  if (any_binary) {
    encoded.header_length = encoded.body.size();
    for (const tensor::Tensor& output : response.outputs) {
      if (encoding.Binary(output.name)) encoded.body += output.data;
    }
  }
  return encoded;
}

}  // namespace rampart::api
