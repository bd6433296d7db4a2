// train/stop.cpp — the stop signals' handlers (stop.hpp).
#include "stop.hpp"

#include <signal.h>

#include <atomic>
#include <cstring>

#include "axonn/core/error.hpp"

namespace axonn::train::detail {

namespace {

// Written by the handler: lock-free atomics are async-signal-safe.
std::atomic<int> g_first{0};
std::atomic<int> g_count{0};
std::atomic<bool> g_installed{false};
static_assert(std::atomic<int>::is_always_lock_free);

constexpr int kBase[] = {SIGTERM, SIGINT};
struct sigaction g_previous[3];

void on_stop_signal(int sig) {
  if (g_count.fetch_add(1) == 0) {
    g_first.store(sig);
    return;
  }
  // the second: the signal's default action (terminate), now
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  sigaction(sig, &dfl, nullptr);
  raise(sig);
}

}  // namespace

int parse_stop_signal(const std::string& name) {
  std::string n = name.rfind("SIG", 0) == 0 ? name.substr(3) : name;
  if (n == "none") return 0;
  if (n == "USR1") return SIGUSR1;
  if (n == "USR2") return SIGUSR2;
  if (n == "HUP") return SIGHUP;
  throw InvalidArgument("--stop-signal '" + name + "': use USR1, USR2, HUP or none (SIGTERM and SIGINT always stop)");
}

std::string signal_name(int sig) {
  switch (sig) {
    case SIGTERM: return "SIGTERM";
    case SIGINT: return "SIGINT";
    case SIGUSR1: return "SIGUSR1";
    case SIGUSR2: return "SIGUSR2";
    case SIGHUP: return "SIGHUP";
    default: return "signal " + std::to_string(sig);
  }
}

StopSignals::StopSignals(int extra) : extra_(extra) {
  AXONN_CHECK(!g_installed.exchange(true), "stop-signal handlers are already installed in this process");
  g_first.store(0);
  g_count.store(0);
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;  // a blocked write or read goes on; the loop looks after the step
  for (int i = 0; i < 2; i++) sigaction(kBase[i], &sa, &g_previous[i]);
  if (extra_) sigaction(extra_, &sa, &g_previous[2]);
}

StopSignals::~StopSignals() {
  for (int i = 0; i < 2; i++) sigaction(kBase[i], &g_previous[i], nullptr);
  if (extra_) sigaction(extra_, &g_previous[2], nullptr);
  g_installed.store(false);
}

int StopSignals::received() const { return g_first.load(); }

std::string StopSignals::names() const {
  return "SIGTERM, SIGINT" + (extra_ ? ", " + signal_name(extra_) : std::string());
}

}  // namespace axonn::train::detail
