#include "core/thread_name.h"

#include <pthread.h>

#include <string>

namespace rampart {

void NameThisThread(std::string_view name) {
  // The kernel's limit is 16 bytes with the terminating NUL.
  const std::string truncated(name.substr(0, 15));
  pthread_setname_np(pthread_self(), truncated.c_str());
}

}  // namespace rampart
