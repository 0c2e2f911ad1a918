#pragma once

// Client certificates as identities read them (core/peer.h's PeerCertificate), from an OpenSSL
// X509 (the HTTPS server's verified peer) or from PEM text (gRPC's AuthContext hands the client
// certificate over as PEM): one conversion, so both front ends see the same fields.
//
// Also the peer address of a connected socket, as text without the port. Thread-safe.

#include <openssl/x509.h>
#include <sys/socket.h>

#include <string>
#include <string_view>

#include "core/peer.h"
#include "core/status.h"

namespace rampart::net {

// subject (RFC 4514, as X509_NAME_print_ex writes it with XN_FLAG_RFC2253), the subject's CN,
// the DNS, URI and e-mail subjectAltNames in certificate order, and the SHA-256 fingerprint of
// the DER encoding in lower-case hex. InvalidArgument when `certificate` is null or its
// encoding cannot be read.
Result<PeerCertificate> PeerCertificateFromX509(X509* certificate);

// The same from one PEM certificate (the first, when there are several). InvalidArgument when
// the text holds none.
Result<PeerCertificate> PeerCertificateFromPem(std::string_view pem);

// "10.1.2.3" or "2001:db8::1" for an IPv4 or IPv6 socket address (an IPv4-mapped IPv6 address
// is written as IPv4); empty for anything else.
std::string AddressText(const sockaddr* address);

}  // namespace rampart::net
