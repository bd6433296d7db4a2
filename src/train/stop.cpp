// train/stop.cpp — the stop signals' handlers (stop.hpp).
#include "stop.hpp"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <memory>

#include "axonn/core/error.hpp"
#include "axonn/core/log.hpp"

namespace axonn::train::detail {

namespace {

// Written by the handler: lock-free atomics are async-signal-safe.
std::atomic<int> g_first{0};
std::atomic<int> g_count{0};
std::atomic<bool> g_installed{false};
static_assert(std::atomic<int>::is_always_lock_free);

constexpr int kBase[] = {SIGTERM, SIGINT};
struct sigaction g_previous[3];

// The handlers' own stack. oneDNN's JIT GEMM kernels (before oneDNN PR #4855; Debian 12 has 2.6)
// point rsp into a heap buffer while they run, and a signal handled on the interrupted stack writes
// its frame (about 1 KiB with the AVX state) below rsp, into the heap: stopped runs died in free()
// about one time in ten. On this stack (SA_ONSTACK) the frame goes nowhere else. It is the
// installing thread's; process-directed signals go to the main thread, which installs them.
std::unique_ptr<char[]> g_alt_stack;
stack_t g_previous_stack{};
bool g_stack_installed = false;

// The status flags of standard output and error before the first signal made them non-blocking.
int g_output_flags[3] = {-1, -1, -1};

void set_outputs_nonblocking() {
  for (int fd = 1; fd <= 2; fd++)
    if (g_output_flags[fd] >= 0) (void)fcntl(fd, F_SETFL, g_output_flags[fd] | O_NONBLOCK);
}

void restore_outputs() {
  for (int fd = 1; fd <= 2; fd++)
    if (g_output_flags[fd] >= 0) (void)fcntl(fd, F_SETFL, g_output_flags[fd]);
}

void on_stop_signal(int sig) {
  if (g_count.fetch_add(1) == 0) {
    g_first.store(sig);
    // From now on no write to the outputs blocks: mpirun stops reading its ranks' output for seconds
    // when it is signalled, and a rank blocked writing a line would never reach the stop (and its
    // checkpoint). A write blocked at this moment restarts (SA_RESTART) and sees the flag: EAGAIN.
    // log_message keeps what it could not write for flush_log_output(), after the checkpoint.
    // (fcntl is async-signal-safe.)
    set_outputs_nonblocking();
    return;
  }
  // the second: the signal's default action (terminate), now
  restore_outputs();
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
  const long min_size = sysconf(_SC_SIGSTKSZ);
  stack_t alt{};
  alt.ss_size = static_cast<size_t>(std::max<long>(64 * 1024, min_size > 0 ? 4 * min_size : 0));
  g_alt_stack = std::make_unique<char[]>(alt.ss_size);
  alt.ss_sp = g_alt_stack.get();
  AXONN_CHECK(sigaltstack(&alt, &g_previous_stack) == 0, "sigaltstack: ", std::strerror(errno));
  g_stack_installed = true;
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  // SA_RESTART: a blocked write or read goes on, the loop looks after the step; SA_ONSTACK: above
  sa.sa_flags = SA_RESTART | SA_ONSTACK;
  for (int fd = 1; fd <= 2; fd++) g_output_flags[fd] = fcntl(fd, F_GETFL);
  for (int i = 0; i < 2; i++) sigaction(kBase[i], &sa, &g_previous[i]);
  if (extra_) sigaction(extra_, &sa, &g_previous[2]);
}

StopSignals::~StopSignals() {
  for (int i = 0; i < 2; i++) sigaction(kBase[i], &g_previous[i], nullptr);
  if (extra_) sigaction(extra_, &g_previous[2], nullptr);
  // the lines a stop held back, the checkpoint safe: a moment for them (mpirun may not read at all
  // until the ranks end, and then SIGKILLs them: never wait longer than its default second)
  flush_log_output(500);
  restore_outputs();  // a terminal shared with the shell must not stay non-blocking
  if (g_stack_installed) {
    // the stack in use cannot be replaced: no handler of ours runs any more here
    sigaltstack(&g_previous_stack, nullptr);
    g_stack_installed = false;
    g_alt_stack.reset();
  }
  g_installed.store(false);
}

int StopSignals::received() const { return g_first.load(); }

int stop_signal_received() { return g_installed.load() ? g_first.load() : 0; }

std::string StopSignals::names() const {
  return "SIGTERM, SIGINT" + (extra_ ? ", " + signal_name(extra_) : std::string());
}

}  // namespace axonn::train::detail
