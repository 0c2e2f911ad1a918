#pragma once

// The KServe gRPC front end on Rampart's own HTTP/2 transport (net/grpc_server.h) instead of
// gRPC core (internal to api/kserve_grpc; `--grpc-engine native`). The same methods, access
// control, audit records, byte budget and drain as the core front end (api/kserve_grpc.h says
// what each does); calls run on the transport's I/O threads, a fast model directly there, and an
// answer completed on an instance thread is handed to the connection's thread to be written.
//
// Differences from the core engine (docs/grpc-transport.md): answers go uncompressed (requests
// may come compressed with gzip or deflate); reflection is Rampart's own
// (api/kserve_grpc_reflection.h).

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>

#include "api/kserve_grpc.h"
#include "core/status.h"
#include "net/grpc_server.h"
#include "serve/server.h"

namespace rampart::api::grpc_native {

class NativeFront {
 public:
  // `tls`: the PEM text of options.tls's files, read by the caller. Errors: InvalidArgument for
  // TLS material that does not load; Unavailable when the address cannot be bound.
  static Result<std::unique_ptr<NativeFront>> Start(serve::InferenceServer& server,
                                                    const KServeGrpcOptions& options,
                                                    std::optional<net::GrpcTls> tls);
  ~NativeFront();
  NativeFront(const NativeFront&) = delete;
  NativeFront& operator=(const NativeFront&) = delete;

  int port() const;
  // Health answers NOT_SERVING and every open stream finishes once its requests in flight are
  // answered (UNAVAILABLE). Idempotent.
  void StopServing();
  // Stops taking calls, waits up to `timeout` for those in flight, cancels the rest. Idempotent.
  void Shutdown(std::chrono::milliseconds timeout);
  uint64_t cancelled_calls() const;

 private:
  struct Impl;
  explicit NativeFront(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace rampart::api::grpc_native
