#pragma once

// Internal to src/net: TLS for the native gRPC transport (grpc_server.h), on OpenSSL.

#include <openssl/ssl.h>

#include <memory>
#include <string>

#include "core/status.h"
#include "net/grpc_server.h"

namespace rampart::net {

// TLS 1.2+ serving `tls`'s certificate, offering HTTP/2 by ALPN (gRPC clients require "h2"),
// verifying client certificates against its roots when mutual. Errors: InvalidArgument naming
// the part that does not load.
Result<std::shared_ptr<SSL_CTX>> MakeGrpcTlsContext(const GrpcTls& tls);

// A BIO on socket `fd` (not owned), for SSL_set_bio: it sends with MSG_NOSIGNAL, where
// OpenSSL's own socket BIO writes with write() and raises SIGPIPE when the client has gone.
// Null when OpenSSL cannot make one.
BIO* SocketBio(int fd);

// The reason of OpenSSL's last error (cleared), for messages.
std::string TlsError();

}  // namespace rampart::net
