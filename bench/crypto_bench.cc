// Envelope AEAD throughput: crypto::Seal and crypto::Open for 1 KiB and 1 MiB with both suites,
// against OpenSSL's raw EVP cipher on the same bytes in the same run (EVP_EncryptUpdate on a
// context initialised once, into a preallocated buffer: what `openssl speed -evp` times). For the
// SM4 suite a second baseline adds the HMAC-SM3 pass (raw SM4-CTR + raw HMAC-SM3), the least any
// encrypt-then-MAC construction can cost. bench/crypto_bench.sh runs this beside `openssl speed`
// and prints the ratios; docs/benchmarks.md has the figures.

#include <benchmark/benchmark.h>
#include <openssl/core_names.h>
#include <openssl/evp.h>

#include <string>
#include <vector>

#include "crypto/aead.h"
#include "crypto/digest.h"
#include "crypto/signature.h"

namespace {

using rampart::crypto::AeadAlgorithm;

std::string Payload(size_t size) {
  std::string payload(size, '\0');
  for (size_t i = 0; i < size; ++i) payload[i] = static_cast<char>(i * 131 + 7);
  return payload;
}

const std::string& Key() {
  static const std::string key = rampart::crypto::RandomBytes(rampart::crypto::kAeadKeyBytes);
  return key;
}

constexpr char kAssociatedData[] = "tenant=t1;region=cn-north-1;class=CONFIDENTIAL";

void BM_Seal(benchmark::State& state, AeadAlgorithm algorithm) {
  const std::string plaintext = Payload(static_cast<size_t>(state.range(0)));
  for (auto _ : state) {
    auto sealed = rampart::crypto::Seal(algorithm, Key(), plaintext, kAssociatedData);
    if (!sealed.ok()) state.SkipWithError("seal failed");
    benchmark::DoNotOptimize(sealed);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * state.range(0));
}

void BM_Open(benchmark::State& state, AeadAlgorithm algorithm) {
  const std::string plaintext = Payload(static_cast<size_t>(state.range(0)));
  auto sealed = rampart::crypto::Seal(algorithm, Key(), plaintext, kAssociatedData);
  for (auto _ : state) {
    auto opened = rampart::crypto::Open(algorithm, Key(), *sealed, kAssociatedData);
    if (!opened.ok()) state.SkipWithError("open failed");
    benchmark::DoNotOptimize(opened);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * state.range(0));
}

// `openssl speed -evp CIPHER`'s loop: one context, initialised once; EVP_EncryptUpdate only.
void BM_RawEvpCipher(benchmark::State& state, const char* name) {
  const std::string plaintext = Payload(static_cast<size_t>(state.range(0)));
  std::vector<unsigned char> out(plaintext.size() + 32);
  EVP_CIPHER* cipher = EVP_CIPHER_fetch(nullptr, name, nullptr);
  EVP_CIPHER_CTX* context = EVP_CIPHER_CTX_new();
  const std::string iv(16, '\x01');
  EVP_EncryptInit_ex2(context, cipher, reinterpret_cast<const unsigned char*>(Key().data()),
                      reinterpret_cast<const unsigned char*>(iv.data()), nullptr);
  for (auto _ : state) {
    int written = 0;
    if (EVP_EncryptUpdate(context, out.data(), &written,
                          reinterpret_cast<const unsigned char*>(plaintext.data()),
                          static_cast<int>(plaintext.size())) != 1) {
      state.SkipWithError("EVP_EncryptUpdate failed");
    }
    benchmark::DoNotOptimize(out.data());
  }
  EVP_CIPHER_CTX_free(context);
  EVP_CIPHER_free(cipher);
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * state.range(0));
}

// Raw SM4-CTR then raw HMAC-SM3 over the ciphertext: the floor for the SM4 suite.
void BM_RawSm4CtrThenHmacSm3(benchmark::State& state) {
  const std::string plaintext = Payload(static_cast<size_t>(state.range(0)));
  std::vector<unsigned char> out(plaintext.size() + 32);
  EVP_CIPHER* cipher = EVP_CIPHER_fetch(nullptr, "SM4-CTR", nullptr);
  EVP_CIPHER_CTX* context = EVP_CIPHER_CTX_new();
  const std::string iv(16, '\x01');
  EVP_EncryptInit_ex2(context, cipher, reinterpret_cast<const unsigned char*>(Key().data()),
                      reinterpret_cast<const unsigned char*>(iv.data()), nullptr);
  EVP_MAC* mac = EVP_MAC_fetch(nullptr, "HMAC", nullptr);
  EVP_MAC_CTX* mac_context = EVP_MAC_CTX_new(mac);
  char digest_name[] = "SM3";
  OSSL_PARAM params[] = {OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, digest_name, 0),
                         OSSL_PARAM_construct_end()};
  unsigned char tag[32];
  for (auto _ : state) {
    int written = 0;
    size_t tag_length = 0;
    if (EVP_EncryptUpdate(context, out.data(), &written,
                          reinterpret_cast<const unsigned char*>(plaintext.data()),
                          static_cast<int>(plaintext.size())) != 1 ||
        EVP_MAC_init(mac_context, reinterpret_cast<const unsigned char*>(Key().data()), 32,
                     params) != 1 ||
        EVP_MAC_update(mac_context, out.data(), static_cast<size_t>(written)) != 1 ||
        EVP_MAC_final(mac_context, tag, &tag_length, sizeof(tag)) != 1) {
      state.SkipWithError("raw SM4-CTR + HMAC-SM3 failed");
    }
    benchmark::DoNotOptimize(tag);
  }
  EVP_MAC_CTX_free(mac_context);
  EVP_MAC_free(mac);
  EVP_CIPHER_CTX_free(context);
  EVP_CIPHER_free(cipher);
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * state.range(0));
}

void BM_Sign(benchmark::State& state, rampart::crypto::SignatureAlgorithm algorithm) {
  auto key = rampart::crypto::SigningKey::Generate(algorithm);
  const std::string message(32, 'r');  // a checkpoint's root hash
  for (auto _ : state) benchmark::DoNotOptimize(key->Sign(message));
}

void BM_Verify(benchmark::State& state, rampart::crypto::SignatureAlgorithm algorithm) {
  auto key = rampart::crypto::SigningKey::Generate(algorithm);
  const rampart::crypto::VerifyingKey verifying = key->Public();
  const std::string message(32, 'r');
  const std::string signature = *key->Sign(message);
  for (auto _ : state) benchmark::DoNotOptimize(verifying.Verify(message, signature));
}

constexpr int64_t kKiB = 1024;
constexpr int64_t kMiB = 1024 * 1024;

BENCHMARK_CAPTURE(BM_Seal, aes_256_gcm, AeadAlgorithm::kAes256Gcm)->Arg(kKiB)->Arg(kMiB);
BENCHMARK_CAPTURE(BM_Open, aes_256_gcm, AeadAlgorithm::kAes256Gcm)->Arg(kKiB)->Arg(kMiB);
BENCHMARK_CAPTURE(BM_RawEvpCipher, aes_256_gcm, "AES-256-GCM")->Arg(kKiB)->Arg(kMiB);
BENCHMARK_CAPTURE(BM_Seal, sm4_ctr_hmac_sm3, AeadAlgorithm::kSm4CtrHmacSm3)->Arg(kKiB)->Arg(kMiB);
BENCHMARK_CAPTURE(BM_Open, sm4_ctr_hmac_sm3, AeadAlgorithm::kSm4CtrHmacSm3)->Arg(kKiB)->Arg(kMiB);
BENCHMARK_CAPTURE(BM_RawEvpCipher, sm4_ctr, "SM4-CTR")->Arg(kKiB)->Arg(kMiB);
BENCHMARK(BM_RawSm4CtrThenHmacSm3)->Arg(kKiB)->Arg(kMiB);
BENCHMARK_CAPTURE(BM_Sign, sm2_sm3, rampart::crypto::SignatureAlgorithm::kSm2Sm3);
BENCHMARK_CAPTURE(BM_Verify, sm2_sm3, rampart::crypto::SignatureAlgorithm::kSm2Sm3);
BENCHMARK_CAPTURE(BM_Sign, ed25519, rampart::crypto::SignatureAlgorithm::kEd25519);
BENCHMARK_CAPTURE(BM_Verify, ed25519, rampart::crypto::SignatureAlgorithm::kEd25519);

}  // namespace

BENCHMARK_MAIN();
