#pragma once

// Who is at the other end of a connection, as a front end saw it: the peer's IP address and, on
// a mutual-TLS connection, the client certificate it presented (already verified against the
// configured CA by the TLS layer). Filled once per connection by the HTTP server (src/net) and
// per call by the gRPC front end; read by authentication (src/identity) and policy conditions.

#include <string>
#include <vector>

namespace rampart {

// The parts of a verified client certificate that identities map from.
struct PeerCertificate {
  std::string subject;                 // RFC 4514 form, "CN=alice,OU=research,O=Acme"
  std::string common_name;             // the subject's CN, or empty
  std::vector<std::string> dns_names;  // subjectAltName DNS entries
  std::vector<std::string> uris;       // subjectAltName URIs (a SPIFFE ID is "spiffe://...")
  std::vector<std::string> emails;     // subjectAltName e-mail addresses
  std::string sha256_fingerprint;      // of the DER certificate, lower-case hex
};

struct Peer {
  std::string address;  // IP address without the port ("127.0.0.1", "::1"); empty if unknown
  bool has_certificate = false;
  PeerCertificate certificate;  // when has_certificate
};

}  // namespace rampart
