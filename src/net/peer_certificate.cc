#include "net/peer_certificate.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>

#include <cstring>
#include <memory>

namespace rampart::net {
namespace {

struct BioDeleter {
  void operator()(BIO* bio) const { BIO_free(bio); }
};
struct X509Deleter {
  void operator()(X509* certificate) const { X509_free(certificate); }
};
struct NamesDeleter {
  void operator()(GENERAL_NAMES* names) const { GENERAL_NAMES_free(names); }
};

std::string Text(const ASN1_STRING* text) {
  return std::string(reinterpret_cast<const char*>(ASN1_STRING_get0_data(text)),
                     static_cast<size_t>(ASN1_STRING_length(text)));
}

}  // namespace

Result<PeerCertificate> PeerCertificateFromX509(X509* certificate) {
  if (certificate == nullptr) return InvalidArgument("no client certificate");
  PeerCertificate result;

  const X509_NAME* subject = X509_get_subject_name(certificate);
  std::unique_ptr<BIO, BioDeleter> bio(BIO_new(BIO_s_mem()));
  if (bio == nullptr || X509_NAME_print_ex(bio.get(), subject, 0, XN_FLAG_RFC2253) < 0) {
    return InvalidArgument("cannot read the certificate's subject");
  }
  char* data = nullptr;
  const long length = BIO_get_mem_data(bio.get(), &data);
  result.subject.assign(data, static_cast<size_t>(length));

  // The last CN is the most specific one (RFC 6125 §6.4.4).
  int last = -1;
  for (int i = X509_NAME_get_index_by_NID(subject, NID_commonName, -1); i >= 0;
       i = X509_NAME_get_index_by_NID(subject, NID_commonName, i)) {
    last = i;
  }
  if (last >= 0) {
    result.common_name = Text(X509_NAME_ENTRY_get_data(X509_NAME_get_entry(subject, last)));
  }

  std::unique_ptr<GENERAL_NAMES, NamesDeleter> names(static_cast<GENERAL_NAMES*>(
      X509_get_ext_d2i(certificate, NID_subject_alt_name, nullptr, nullptr)));
  for (int i = 0; names != nullptr && i < sk_GENERAL_NAME_num(names.get()); ++i) {
    const GENERAL_NAME* name = sk_GENERAL_NAME_value(names.get(), i);
    switch (name->type) {
      case GEN_DNS: result.dns_names.push_back(Text(name->d.dNSName)); break;
      case GEN_URI: result.uris.push_back(Text(name->d.uniformResourceIdentifier)); break;
      case GEN_EMAIL: result.emails.push_back(Text(name->d.rfc822Name)); break;
      default: break;
    }
  }

  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int digest_length = 0;
  if (X509_digest(certificate, EVP_sha256(), digest, &digest_length) != 1) {
    return InvalidArgument("cannot fingerprint the certificate");
  }
  constexpr std::string_view kDigits = "0123456789abcdef";
  result.sha256_fingerprint.reserve(digest_length * 2);
  for (unsigned int i = 0; i < digest_length; ++i) {
    result.sha256_fingerprint.push_back(kDigits[digest[i] >> 4]);
    result.sha256_fingerprint.push_back(kDigits[digest[i] & 0xf]);
  }
  return result;
}

Result<PeerCertificate> PeerCertificateFromPem(std::string_view pem) {
  std::unique_ptr<BIO, BioDeleter> bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  std::unique_ptr<X509, X509Deleter> certificate(
      bio != nullptr ? PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr) : nullptr);
  if (certificate == nullptr) return InvalidArgument("not a PEM certificate");
  return PeerCertificateFromX509(certificate.get());
}

std::string AddressText(const sockaddr* address) {
  char text[INET6_ADDRSTRLEN] = {};
  if (address == nullptr) return {};
  if (address->sa_family == AF_INET) {
    const auto* v4 = reinterpret_cast<const sockaddr_in*>(address);
    if (inet_ntop(AF_INET, &v4->sin_addr, text, sizeof(text)) == nullptr) return {};
    return text;
  }
  if (address->sa_family == AF_INET6) {
    const auto* v6 = reinterpret_cast<const sockaddr_in6*>(address);
    if (IN6_IS_ADDR_V4MAPPED(&v6->sin6_addr)) {
      if (inet_ntop(AF_INET, &v6->sin6_addr.s6_addr[12], text, sizeof(text)) == nullptr) return {};
      return text;
    }
    if (inet_ntop(AF_INET6, &v6->sin6_addr, text, sizeof(text)) == nullptr) return {};
    return text;
  }
  return {};
}

}  // namespace rampart::net
