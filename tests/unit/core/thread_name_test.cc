#include "core/thread_name.h"

#include <gtest/gtest.h>
#include <pthread.h>

#include <future>
#include <string>
#include <thread>

namespace rampart {
namespace {

std::string NameOf(std::thread& thread) {
  char name[16] = {};
  pthread_getname_np(thread.native_handle(), name, sizeof(name));
  return name;
}

TEST(NameThisThread, NamesTheCallingThreadAndCutsAtFifteenCharacters) {
  for (const auto& [wanted, expected] :
       {std::pair<std::string, std::string>{"http-io-0", "http-io-0"},
        {"inst-a_very_long_model_name", "inst-a_very_lon"}}) {
    std::promise<void> named;
    std::promise<void> done;
    std::thread thread([&, wanted = wanted] {
      NameThisThread(wanted);
      named.set_value();
      done.get_future().wait();
    });
    named.get_future().wait();
    EXPECT_EQ(NameOf(thread), expected);
    done.set_value();
    thread.join();
  }
}

}  // namespace
}  // namespace rampart
