#include "api/kserve_grpc_reflection.h"

#include <cstdint>
#include <optional>
#include <set>

#include <fmt/format.h>
#include <google/protobuf/descriptor.h>
#include <google/protobuf/descriptor.pb.h>
#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <google/protobuf/wire_format_lite.h>

namespace rampart::api::grpc_reflection {
namespace {

using google::protobuf::DescriptorPool;
using google::protobuf::FileDescriptor;
using google::protobuf::internal::WireFormatLite;
using google::protobuf::io::CodedInputStream;

// Field numbers (grpc/reflection/v1alpha/reflection.proto).
enum RequestField : uint32_t {
  kFileByFilename = 3,
  kFileContainingSymbol = 4,
  kFileContainingExtension = 5,
  kAllExtensionNumbersOfType = 6,
  kListServices = 7,
};
enum ResponseField : uint32_t {
  kValidHost = 1,
  kOriginalRequest = 2,
  kFileDescriptorResponse = 4,
  kAllExtensionNumbersResponse = 5,
  kListServicesResponse = 6,
  kErrorResponse = 7,
};
// gRPC status codes an error_response carries.
constexpr int kInvalidArgument = 3;
constexpr int kNotFound = 5;
constexpr int kUnimplemented = 12;

// A message being written: fields appended in the wire format.
class Writer {
 public:
  void String(uint32_t field, std::string_view value) {
    Tag(field, WireFormatLite::WIRETYPE_LENGTH_DELIMITED);
    Varint(value.size());
    out_.append(value);
  }
  void Int(uint32_t field, int64_t value) {
    Tag(field, WireFormatLite::WIRETYPE_VARINT);
    Varint(static_cast<uint64_t>(value));
  }
  std::string Take() { return std::move(out_); }

 private:
  void Tag(uint32_t field, WireFormatLite::WireType type) {
    Varint(WireFormatLite::MakeTag(static_cast<int>(field), type));
  }
  void Varint(uint64_t value) {
    while (value >= 0x80) {
      out_.push_back(static_cast<char>(value | 0x80));
      value >>= 7;
    }
    out_.push_back(static_cast<char>(value));
  }
  std::string out_;
};

// The request's one field of interest.
struct Request {
  std::string host;
  uint32_t kind = 0;      // a RequestField; 0 when none is set
  std::string value;      // its string (a name), or ExtensionRequest's containing_type
  int32_t extension = 0;  // ExtensionRequest's extension_number
};

std::optional<Request> Parse(std::string_view bytes) {
  CodedInputStream input(reinterpret_cast<const uint8_t*>(bytes.data()),
                         static_cast<int>(bytes.size()));
  Request request;
  while (uint32_t tag = input.ReadTag()) {
    const uint32_t field = WireFormatLite::GetTagFieldNumber(tag);
    const auto type = WireFormatLite::GetTagWireType(tag);
    if (type != WireFormatLite::WIRETYPE_LENGTH_DELIMITED) {
      if (!WireFormatLite::SkipField(&input, tag)) return std::nullopt;
      continue;
    }
    std::string value;
    if (!WireFormatLite::ReadString(&input, &value)) return std::nullopt;
    if (field == 1) {
      request.host = std::move(value);
    } else if (field == kFileContainingExtension) {
      request.kind = field;
      CodedInputStream inner(reinterpret_cast<const uint8_t*>(value.data()),
                             static_cast<int>(value.size()));
      while (uint32_t inner_tag = inner.ReadTag()) {
        const uint32_t inner_field = WireFormatLite::GetTagFieldNumber(inner_tag);
        uint32_t number = 0;
        if (inner_field == 1 && WireFormatLite::GetTagWireType(inner_tag) ==
                                    WireFormatLite::WIRETYPE_LENGTH_DELIMITED) {
          if (!WireFormatLite::ReadString(&inner, &request.value)) return std::nullopt;
        } else if (inner_field == 2 &&
                   WireFormatLite::GetTagWireType(inner_tag) == WireFormatLite::WIRETYPE_VARINT) {
          if (!inner.ReadVarint32(&number)) return std::nullopt;
          request.extension = static_cast<int32_t>(number);
        } else if (!WireFormatLite::SkipField(&inner, inner_tag)) {
          return std::nullopt;
        }
      }
    } else if (field >= kFileByFilename && field <= kListServices) {
      request.kind = field;
      request.value = std::move(value);
    }
  }
  if (!input.ConsumedEntireMessage()) return std::nullopt;
  return request;
}

std::string Error(int code, std::string_view message) {
  Writer error;
  error.Int(1, code);
  error.String(2, message);
  return error.Take();
}

// FileDescriptorResponse: `file` and every file it depends on, each once.
std::string Files(const FileDescriptor* file) {
  Writer files;
  std::set<const FileDescriptor*> seen;
  std::vector<const FileDescriptor*> pending = {file};
  while (!pending.empty()) {
    const FileDescriptor* next = pending.back();
    pending.pop_back();
    if (!seen.insert(next).second) continue;
    google::protobuf::FileDescriptorProto proto;
    next->CopyTo(&proto);
    files.String(1, proto.SerializeAsString());
    for (int i = 0; i < next->dependency_count(); ++i) pending.push_back(next->dependency(i));
  }
  return files.Take();
}

}  // namespace

std::string Answer(std::string_view request_bytes, const std::vector<std::string>& services) {
  Writer response;
  const std::optional<Request> request = Parse(request_bytes);
  if (!request) {
    response.String(kErrorResponse,
                    Error(kInvalidArgument, "the reflection request does not parse"));
    return response.Take();
  }
  response.String(kValidHost, request->host);
  response.String(kOriginalRequest, request_bytes);
  const DescriptorPool& pool = *DescriptorPool::generated_pool();
  const FileDescriptor* file = nullptr;
  switch (request->kind) {
    case kListServices: {
      Writer list;
      for (const std::string& service : services) {
        Writer entry;
        entry.String(1, service);
        list.String(1, entry.Take());
      }
      response.String(kListServicesResponse, list.Take());
      return response.Take();
    }
    case kFileByFilename: file = pool.FindFileByName(request->value); break;
    case kFileContainingSymbol: file = pool.FindFileContainingSymbol(request->value); break;
    case kFileContainingExtension: {
      const auto* type = pool.FindMessageTypeByName(request->value);
      const auto* extension =
          type != nullptr ? pool.FindExtensionByNumber(type, request->extension) : nullptr;
      if (extension != nullptr) file = extension->file();
      break;
    }
    case kAllExtensionNumbersOfType: {
      const auto* type = pool.FindMessageTypeByName(request->value);
      if (type == nullptr) {
        response.String(kErrorResponse,
                        Error(kNotFound, fmt::format("type not found: {}", request->value)));
        return response.Take();
      }
      std::vector<const google::protobuf::FieldDescriptor*> extensions;
      pool.FindAllExtensions(type, &extensions);
      Writer numbers;
      numbers.String(1, request->value);
      for (const auto* extension : extensions) numbers.Int(2, extension->number());
      response.String(kAllExtensionNumbersResponse, numbers.Take());
      return response.Take();
    }
    default:
      response.String(kErrorResponse, Error(kUnimplemented, "unknown reflection request"));
      return response.Take();
  }
  if (file == nullptr) {
    response.String(kErrorResponse, Error(kNotFound, fmt::format("not found: {}", request->value)));
    return response.Take();
  }
  response.String(kFileDescriptorResponse, Files(file));
  return response.Take();
}

}  // namespace rampart::api::grpc_reflection
