#include "testing/test_certs.h"

#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <atomic>
#include <memory>
#include <stdexcept>

namespace rampart::testing {
namespace {

template <auto Free>
struct Deleter {
  template <typename T>
  void operator()(T* pointer) const {
    Free(pointer);
  }
};
using KeyPtr = std::unique_ptr<EVP_PKEY, Deleter<EVP_PKEY_free>>;
using CertPtr = std::unique_ptr<X509, Deleter<X509_free>>;
using BioPtr = std::unique_ptr<BIO, Deleter<BIO_free_all>>;

void Check(bool ok, const char* what) {
  if (!ok) throw std::runtime_error(std::string("OpenSSL: ") + what);
}

std::string BioText(BIO* bio) {
  char* data = nullptr;
  const long size = BIO_get_mem_data(bio, &data);
  return std::string(data, static_cast<size_t>(size));
}

std::string KeyPem(EVP_PKEY* key) {
  BioPtr bio(BIO_new(BIO_s_mem()));
  Check(PEM_write_bio_PrivateKey(bio.get(), key, nullptr, nullptr, 0, nullptr, nullptr) == 1,
        "writing a key");
  return BioText(bio.get());
}

std::string CertPem(X509* cert) {
  BioPtr bio(BIO_new(BIO_s_mem()));
  Check(PEM_write_bio_X509(bio.get(), cert) == 1, "writing a certificate");
  return BioText(bio.get());
}

KeyPtr ReadKey(const std::string& pem) {
  BioPtr bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  KeyPtr key(PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr));
  Check(key != nullptr, "reading a key");
  return key;
}

CertPtr ReadCert(const std::string& pem) {
  BioPtr bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  CertPtr cert(PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr));
  Check(cert != nullptr, "reading a certificate");
  return cert;
}

void AddExtension(X509* cert, X509V3_CTX* context, int nid, const char* value) {
  X509_EXTENSION* extension = X509V3_EXT_conf_nid(nullptr, context, nid, value);
  Check(extension != nullptr, "making an extension");
  Check(X509_add_ext(cert, extension, -1) == 1, "adding an extension");
  X509_EXTENSION_free(extension);
}

// Builds and signs a certificate for `key`. `issuer`/`issuer_key` null = self-signed.
CertPtr MakeCert(EVP_PKEY* key, const std::string& common_name, X509* issuer, EVP_PKEY* issuer_key,
                 bool is_ca, const std::string& extra_subject_alt_names = "") {
  static std::atomic<long> serial{1};
  CertPtr cert(X509_new());
  Check(cert != nullptr, "X509_new");
  X509_set_version(cert.get(), 2);
  ASN1_INTEGER_set(X509_get_serialNumber(cert.get()), serial.fetch_add(1));
  X509_gmtime_adj(X509_getm_notBefore(cert.get()), -3600);
  X509_gmtime_adj(X509_getm_notAfter(cert.get()), 24 * 3600);
  Check(X509_set_pubkey(cert.get(), key) == 1, "setting the public key");
  X509_NAME* name = X509_get_subject_name(cert.get());
  Check(X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                                   reinterpret_cast<const unsigned char*>(common_name.c_str()), -1,
                                   -1, 0) == 1,
        "setting the subject");
  X509* signer = issuer != nullptr ? issuer : cert.get();
  Check(X509_set_issuer_name(cert.get(), X509_get_subject_name(signer)) == 1, "setting issuer");

  X509V3_CTX context;
  X509V3_set_ctx(&context, signer, cert.get(), nullptr, nullptr, 0);
  AddExtension(cert.get(), &context, NID_subject_key_identifier, "hash");
  AddExtension(cert.get(), &context, NID_authority_key_identifier, "keyid:always");
  if (is_ca) {
    AddExtension(cert.get(), &context, NID_basic_constraints, "critical,CA:TRUE");
    AddExtension(cert.get(), &context, NID_key_usage, "critical,keyCertSign,cRLSign");
  } else {
    AddExtension(cert.get(), &context, NID_basic_constraints, "critical,CA:FALSE");
    AddExtension(cert.get(), &context, NID_key_usage, "critical,digitalSignature");
    AddExtension(cert.get(), &context, NID_ext_key_usage, "serverAuth,clientAuth");
    std::string alt_names = "DNS:localhost,IP:127.0.0.1";
    if (!extra_subject_alt_names.empty()) alt_names += "," + extra_subject_alt_names;
    AddExtension(cert.get(), &context, NID_subject_alt_name, alt_names.c_str());
  }
  Check(X509_sign(cert.get(), issuer_key != nullptr ? issuer_key : key, EVP_sha256()) > 0,
        "signing");
  return cert;
}

}  // namespace

KeyAndCert MakeCertificateAuthority(const std::string& common_name) {
  KeyPtr key(EVP_EC_gen("P-256"));
  Check(key != nullptr, "generating a key");
  CertPtr cert = MakeCert(key.get(), common_name, nullptr, nullptr, /*is_ca=*/true);
  return {KeyPem(key.get()), CertPem(cert.get())};
}

KeyAndCert MakeLeafCertificate(const KeyAndCert& ca, const std::string& common_name,
                               const std::string& extra_subject_alt_names) {
  KeyPtr ca_key = ReadKey(ca.key_pem);
  CertPtr ca_cert = ReadCert(ca.cert_pem);
  KeyPtr key(EVP_EC_gen("P-256"));
  Check(key != nullptr, "generating a key");
  CertPtr cert = MakeCert(key.get(), common_name, ca_cert.get(), ca_key.get(), /*is_ca=*/false,
                          extra_subject_alt_names);
  return {KeyPem(key.get()), CertPem(cert.get())};
}

}  // namespace rampart::testing
