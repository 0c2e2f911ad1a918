#pragma once

// Throwaway X.509 material for TLS tests, made at test time with OpenSSL's C API (no keys are
// checked in): a self-signed CA, and leaf certificates it signs for "localhost" / 127.0.0.1 that
// serve both as server and as client certificates. EC P-256 keys, valid for one day.

#include <string>

namespace rampart::testing {

struct KeyAndCert {
  std::string key_pem;
  std::string cert_pem;
};

// A self-signed certificate authority named `common_name`.
KeyAndCert MakeCertificateAuthority(const std::string& common_name);

// A certificate for `common_name` with subjectAltName DNS:localhost and IP:127.0.0.1, usable for
// TLS servers and clients, signed by `ca`. `extra_subject_alt_names` adds entries in OpenSSL's
// config syntax ("URI:spiffe://td/ns/a,DNS:batch.example,email:a@example.com").
KeyAndCert MakeLeafCertificate(const KeyAndCert& ca, const std::string& common_name,
                               const std::string& extra_subject_alt_names = "");

}  // namespace rampart::testing
