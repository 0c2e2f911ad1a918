// TLS for the native gRPC transport (see grpc_tls.h).

#include "net/grpc_tls.h"

#include <openssl/err.h>
#include <openssl/pem.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstdint>
#include <vector>

namespace rampart::net {

// The reason of OpenSSL's last error, for messages.
std::string TlsError() {
  const unsigned long code = ERR_get_error();
  if (code == 0) return "unknown TLS error";
  char text[256];
  ERR_error_string_n(code, text, sizeof(text));
  ERR_clear_error();
  return text;
}

namespace {

// TLS reads and writes the socket through this BIO rather than OpenSSL's own socket BIO, whose
// write() raises SIGPIPE when the client has gone: send() here passes MSG_NOSIGNAL.
int BioWrite(BIO* bio, const char* data, int length) {
  BIO_clear_retry_flags(bio);
  const int fd = static_cast<int>(reinterpret_cast<intptr_t>(BIO_get_data(bio)));
  const ssize_t sent = ::send(fd, data, static_cast<size_t>(length), MSG_NOSIGNAL);
  if (sent < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
    BIO_set_retry_write(bio);
  }
  return static_cast<int>(sent);
}

int BioRead(BIO* bio, char* data, int length) {
  BIO_clear_retry_flags(bio);
  const int fd = static_cast<int>(reinterpret_cast<intptr_t>(BIO_get_data(bio)));
  const ssize_t got = ::recv(fd, data, static_cast<size_t>(length), 0);
  if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
    BIO_set_retry_read(bio);
  }
  return static_cast<int>(got);
}

long BioControl(BIO*, int command, long, void*) {  // NOLINT(runtime/int): OpenSSL's signature
  return command == BIO_CTRL_FLUSH ? 1 : 0;
}

}  // namespace

BIO* SocketBio(int fd) {
  static BIO_METHOD* const kMethod = [] {
    BIO_METHOD* method = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "grpc socket");
    BIO_meth_set_write(method, &BioWrite);
    BIO_meth_set_read(method, &BioRead);
    BIO_meth_set_ctrl(method, &BioControl);
    return method;
  }();
  BIO* bio = BIO_new(kMethod);
  if (bio == nullptr) return nullptr;
  BIO_set_data(bio, reinterpret_cast<void*>(static_cast<intptr_t>(fd)));
  BIO_set_init(bio, 1);
  return bio;
}

namespace {

// ALPN: gRPC clients offer "h2" and require it.
int SelectH2(SSL*, const unsigned char** out, unsigned char* out_length, const unsigned char* in,
             unsigned int in_length, void*) {
  static const unsigned char kH2[] = {2, 'h', '2'};
  unsigned char* selected = nullptr;
  if (SSL_select_next_proto(&selected, out_length, kH2, sizeof(kH2), in, in_length) !=
      OPENSSL_NPN_NEGOTIATED) {
    return SSL_TLSEXT_ERR_ALERT_FATAL;
  }
  *out = selected;
  return SSL_TLSEXT_ERR_OK;
}

// Every certificate in `pem`, in order. Errors: InvalidArgument when it holds none.
Result<std::vector<X509*>> ReadCertificates(const std::string& pem, std::string_view what) {
  BIO* bio = BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
  std::vector<X509*> certificates;
  while (X509* certificate = PEM_read_bio_X509(bio, nullptr, nullptr, nullptr)) {
    certificates.push_back(certificate);
  }
  ERR_clear_error();  // the end of the text reads as an error
  BIO_free(bio);
  if (certificates.empty()) return InvalidArgument("{}: no PEM certificate in it", what);
  return certificates;
}

}  // namespace

// TLS 1.2+ serving `tls`'s certificate, offering HTTP/2 by ALPN, verifying client certificates
// against its roots when mutual. Errors: InvalidArgument naming the part that does not load.
Result<std::shared_ptr<SSL_CTX>> MakeGrpcTlsContext(const GrpcTls& tls) {
  std::shared_ptr<SSL_CTX> context(SSL_CTX_new(TLS_server_method()), &SSL_CTX_free);
  if (context == nullptr) return Internal("TLS: {}", TlsError());
  SSL_CTX* raw = context.get();
  SSL_CTX_set_min_proto_version(raw, TLS1_2_VERSION);
  SSL_CTX_set_mode(raw, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
  ASSIGN_OR_RETURN(std::vector<X509*> chain, ReadCertificates(tls.cert_chain_pem, "certificate"));
  bool used = SSL_CTX_use_certificate(raw, chain.front()) == 1;
  X509_free(chain.front());
  for (size_t i = 1; i < chain.size(); ++i) {
    // The context takes these over.
    if (used && SSL_CTX_add_extra_chain_cert(raw, chain[i]) == 1) continue;
    X509_free(chain[i]);
  }
  if (!used) return InvalidArgument("certificate: {}", TlsError());
  BIO* key_bio =
      BIO_new_mem_buf(tls.private_key_pem.data(), static_cast<int>(tls.private_key_pem.size()));
  EVP_PKEY* key = PEM_read_bio_PrivateKey(key_bio, nullptr, nullptr, nullptr);
  BIO_free(key_bio);
  if (key == nullptr) return InvalidArgument("private key: {}", TlsError());
  used = SSL_CTX_use_PrivateKey(raw, key) == 1;
  EVP_PKEY_free(key);
  if (!used || SSL_CTX_check_private_key(raw) != 1) {
    return InvalidArgument("private key: does not belong to the certificate ({})", TlsError());
  }
  if (!tls.root_certs_pem.empty()) {
    ASSIGN_OR_RETURN(std::vector<X509*> roots, ReadCertificates(tls.root_certs_pem, "root"));
    X509_STORE* store = SSL_CTX_get_cert_store(raw);
    for (X509* root : roots) {
      X509_STORE_add_cert(store, root);
      X509_free(root);
    }
  }
  if (tls.mutual) {
    SSL_CTX_set_verify(raw, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, nullptr);
  }
  SSL_CTX_set_alpn_select_cb(raw, &SelectH2, nullptr);
  return context;
}

}  // namespace rampart::net
