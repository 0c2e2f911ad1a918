#include "audit/recorder.h"

#include <openssl/evp.h>

#include <utility>

#include "core/logging.h"

namespace rampart::audit {
namespace {

std::string Base64(std::string_view bytes) {
  std::string out(4 * ((bytes.size() + 2) / 3), '\0');
  const int written = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                      reinterpret_cast<const unsigned char*>(bytes.data()),
                                      static_cast<int>(bytes.size()));
  out.resize(static_cast<size_t>(written));
  return out;
}

}  // namespace

Recorder::Recorder(Append append, Seal seal, RecorderOptions options, OnRefused on_refused)
    : append_(std::move(append)),
      seal_(std::move(seal)),
      options_(std::move(options)),
      on_refused_(std::move(on_refused)) {}

std::string Recorder::SealContent(std::string_view plaintext, std::string_view tenant) const {
  if (!seal_) {
    if (on_refused_) on_refused_("seal");
    return "";
  }
  const SealContext context{
      .tenant = tenant, .region = options_.region, .data_class = kSealedDataClass};
  Result<std::string> sealed = seal_(plaintext, context);
  if (!sealed.ok()) {
    // The status names the key and what is wrong with it, never the content.
    LOG_WARN("audit: sealing a record's content failed: {}", sealed.status().ToString());
    if (on_refused_) on_refused_("seal");
    return "";
  }
  return Base64(*sealed);
}

void Recorder::Record(AuditRecord&& record, AuditContent content,
                      UniqueFunction<void(Status)> done) {
  const ContentDigests digests{.algorithm = options_.digest,
                               .request = crypto::Hash(options_.digest, content.request),
                               .response = crypto::Hash(options_.digest, content.response)};
  if (content.full) {
    record.request_sealed = SealContent(content.request, record.tenant);
    record.response_sealed = SealContent(content.response, record.tenant);
  }
  append_(record, digests, [this, done = std::move(done)](Status status) mutable {
    if (!status.ok() && on_refused_) on_refused_("unavailable");
    if (done) done(std::move(status));
  });
}

}  // namespace rampart::audit
