#include "identity/identity.h"

namespace rampart::identity {

std::string_view MethodName(Method method) {
  switch (method) {
    case Method::kAnonymous: return "anonymous";
    case Method::kApiKey: return "api_key";
    case Method::kJwt: return "jwt";
    case Method::kMtls: return "mtls";
  }
  return "unknown";
}

}  // namespace rampart::identity
