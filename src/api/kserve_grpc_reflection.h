#pragma once

// gRPC server reflection (`grpc.reflection.v1alpha.ServerReflection`) for the native engine
// (internal to api/kserve_grpc; the core engine has gRPC's own plugin). What grpcurl and other
// tools ask: the services served, and the .proto files (as FileDescriptorProtos, with their
// dependencies) that define a symbol, a file name or an extension, from the descriptors the
// server is built with. The messages are read and written with protobuf's wire format directly:
// gRPC's library defines their generated classes, unexported, in the same process.
// Pure; thread-safe.

#include <string>
#include <string_view>
#include <vector>

namespace rampart::api::grpc_reflection {

inline constexpr std::string_view kMethod =
    "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo";
inline constexpr std::string_view kServiceName = "grpc.reflection.v1alpha.ServerReflection";

// The serialized ServerReflectionResponse to the serialized ServerReflectionRequest `request`:
// `services` for list_services; the files of a symbol, file name or extension (an error_response
// NOT_FOUND naming it when there is none); the extension numbers of a type. A request that does
// not parse gets an error_response INVALID_ARGUMENT.
std::string Answer(std::string_view request, const std::vector<std::string>& services);

}  // namespace rampart::api::grpc_reflection
