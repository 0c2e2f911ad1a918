#pragma once

// Signals the main thread waits for: SIGINT and SIGTERM (shut down) and SIGHUP (reload the
// gateway's config). Rampart's threads block them and the main thread waits for
// them, but library threads started before main() do not block them (OpenBLAS starts its pool
// from a constructor), and the kernel delivers a signal to any thread that does not block it:
// with the default action that killed the process if the signal came before the main thread
// waited. So a handler catches them wherever they land and writes the signal number to a pipe,
// which the main thread waits on.

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>

namespace rampart::app {

class ServeSignals {
 public:
  // Installs the handler and blocks the signals in this thread and every thread it starts.
  ServeSignals() {
    if (pipe2(fds_, O_CLOEXEC | O_NONBLOCK) != 0) {
      std::perror("rampart: pipe2");
      std::exit(1);
    }
    write_fd_ = fds_[1];
    struct sigaction action = {};
    action.sa_handler = &ServeSignals::OnSignal;
    action.sa_flags = SA_RESTART;
    sigemptyset(&action.sa_mask);
    sigset_t signals;
    sigemptyset(&signals);
    for (int signal : {SIGINT, SIGTERM, SIGHUP}) {
      sigaddset(&signals, signal);
      sigaction(signal, &action, nullptr);
    }
    pthread_sigmask(SIG_BLOCK, &signals, &unblocked_);
    sigdelset(&unblocked_, SIGINT);
    sigdelset(&unblocked_, SIGTERM);
    sigdelset(&unblocked_, SIGHUP);
  }

  // Blocks until one of the signals arrives; returns it. The signals are unblocked for this
  // thread only while it waits, so one that arrived earlier is handled here and then.
  int Wait() {
    pollfd poll = {fds_[0], POLLIN, 0};
    while (true) {
      unsigned char signal = 0;
      if (read(fds_[0], &signal, 1) == 1) return signal;
      ppoll(&poll, 1, nullptr, &unblocked_);  // EINTR after the handler ran here: read again
    }
  }

 private:
  static void OnSignal(int signal) {
    const int saved = errno;
    const auto byte = static_cast<unsigned char>(signal);
    [[maybe_unused]] const ssize_t written = write(write_fd_, &byte, 1);
    errno = saved;
  }

  static inline int write_fd_ = -1;  // for the handler
  int fds_[2] = {-1, -1};            // never closed: the handler may run until exit
  sigset_t unblocked_;               // the thread's mask while waiting
};

}  // namespace rampart::app
