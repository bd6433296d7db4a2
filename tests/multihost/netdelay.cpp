// netdelay — a fixed one-way latency for the packets a namespace host sends, where the kernel has no
// tc netem (CONFIG_NET_SCH_NETEM, as on the VMs this project is developed on). tests/multihost/netns.sh
// runs one per host, with an iptables rule that queues the host's outgoing packets to it:
//
//   iptables -A OUTPUT -o eth0 -j NFQUEUE --queue-num 0 --queue-bypass
//   netdelay 0 500            # queue 0, 500 us: every packet leaves 500 us after it was queued
//
// Packets stay in the kernel (only their metadata comes here: NFQNL_COPY_META, GSO packets whole) and
// are accepted in order, in batches, once they have waited the delay: the same delay for all keeps
// their order. It talks nfnetlink_queue directly (no libnetfilter_queue). It asks for SCHED_FIFO so
// that busy ranks on the same cores do not add to the delay. SIGTERM or SIGINT: it accepts what is
// still queued and exits 0; the rule's --queue-bypass then lets packets through undelayed.
#include <arpa/inet.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netfilter/nfnetlink_queue.h>
#include <linux/netlink.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <string>
#include <vector>

namespace {

volatile sig_atomic_t g_stop = 0;
void on_signal(int) { g_stop = 1; }

[[noreturn]] void die(const std::string& what) {
  std::fprintf(stderr, "netdelay: %s: %s\n", what.c_str(), std::strerror(errno));
  std::exit(1);
}

int64_t now_ns() {
  timespec t{};
  clock_gettime(CLOCK_MONOTONIC, &t);
  return int64_t{t.tv_sec} * 1000000000 + t.tv_nsec;
}

// One nfnetlink_queue message being built: nlmsghdr, nfgenmsg, then attributes.
class Message {
 public:
  Message(uint16_t type, uint16_t queue, uint16_t flags) {
    nlmsghdr h{};
    h.nlmsg_type = static_cast<uint16_t>((NFNL_SUBSYS_QUEUE << 8) | type);
    h.nlmsg_flags = static_cast<uint16_t>(NLM_F_REQUEST | flags);
    append(&h, sizeof h);
    nfgenmsg g{};
    g.nfgen_family = AF_UNSPEC;
    g.version = NFNETLINK_V0;
    g.res_id = htons(queue);
    append(&g, sizeof g);
  }
  void attribute(uint16_t type, const void* data, size_t len) {
    nlattr a{};
    a.nla_type = type;
    a.nla_len = static_cast<uint16_t>(NLA_HDRLEN + len);
    append(&a, sizeof a);
    append(data, len);
  }
  void send(int fd) {
    auto* h = reinterpret_cast<nlmsghdr*>(buf_);
    h->nlmsg_len = static_cast<uint32_t>(size_);
    sockaddr_nl kernel{};
    kernel.nl_family = AF_NETLINK;
    if (sendto(fd, buf_, size_, 0, reinterpret_cast<sockaddr*>(&kernel), sizeof kernel) < 0)
      die("sending to nfnetlink_queue");
  }

 private:
  void append(const void* p, size_t n) {
    if (NLMSG_ALIGN(size_ + n) > sizeof buf_) {
      errno = EMSGSIZE;
      die("building a message");
    }
    std::memcpy(buf_ + size_, p, n);
    std::memset(buf_ + size_ + n, 0, NLMSG_ALIGN(size_ + n) - (size_ + n));
    size_ = NLMSG_ALIGN(size_ + n);
  }
  alignas(nlmsghdr) char buf_[256] = {};
  size_t size_ = 0;
};

// Waits for the kernel's answer to a request sent with NLM_F_ACK; a negative error is fatal.
void expect_ack(int fd, const char* what) {
  char buf[4096];
  const ssize_t got = recv(fd, buf, sizeof buf, 0);
  if (got < 0) die(std::string("no answer to ") + what);
  int n = static_cast<int>(got);
  for (auto* h = reinterpret_cast<nlmsghdr*>(buf); NLMSG_OK(h, n); h = NLMSG_NEXT(h, n)) {
    if (h->nlmsg_type != NLMSG_ERROR) continue;
    const auto* e = static_cast<const nlmsgerr*>(NLMSG_DATA(h));
    if (e->error != 0) {
      errno = -e->error;
      die(what);
    }
    return;
  }
}

// Accepts every queued packet with an id up to `id` (ids grow in queue order).
void accept_up_to(int fd, uint16_t queue, uint32_t id) {
  Message m(NFQNL_MSG_VERDICT_BATCH, queue, 0);
  nfqnl_msg_verdict_hdr v{htonl(NF_ACCEPT), htonl(id)};
  m.attribute(NFQA_VERDICT_HDR, &v, sizeof v);
  m.send(fd);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: netdelay QUEUE DELAY_US\n");
    return 2;
  }
  const long queue_arg = std::strtol(argv[1], nullptr, 10);
  const double delay_us = std::strtod(argv[2], nullptr);
  if (queue_arg < 0 || queue_arg > 65535 || !(delay_us >= 0)) {
    std::fprintf(stderr, "netdelay: QUEUE must be 0..65535 and DELAY_US >= 0, got '%s' '%s'\n", argv[1], argv[2]);
    return 2;
  }
  const auto queue = static_cast<uint16_t>(queue_arg);
  const auto delay_ns = static_cast<int64_t>(delay_us * 1e3);
  struct sigaction sa{};
  sa.sa_handler = on_signal;
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);
  sched_param prio{};
  prio.sched_priority = 10;
  if (sched_setscheduler(0, SCHED_FIFO, &prio) != 0)
    std::fprintf(stderr, "netdelay: no SCHED_FIFO (%s): the delay may grow when the cores are busy\n",
                 std::strerror(errno));

  const int fd = socket(AF_NETLINK, SOCK_RAW, NETLINK_NETFILTER);
  if (fd < 0) die("socket(NETLINK_NETFILTER)");
  sockaddr_nl self{};
  self.nl_family = AF_NETLINK;
  if (bind(fd, reinterpret_cast<sockaddr*>(&self), sizeof self) < 0) die("bind");
  const int one = 1, rcvbuf = 16 << 20;
  setsockopt(fd, SOL_NETLINK, NETLINK_NO_ENOBUFS, &one, sizeof one);
  if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &rcvbuf, sizeof rcvbuf) < 0)
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf);

  {  // bind the queue
    Message m(NFQNL_MSG_CONFIG, queue, NLM_F_ACK);
    nfqnl_msg_config_cmd cmd{NFQNL_CFG_CMD_BIND, 0, htons(AF_INET)};
    m.attribute(NFQA_CFG_CMD, &cmd, sizeof cmd);
    m.send(fd);
    expect_ack(fd, "binding the queue (is another netdelay bound to it?)");
  }
  {  // metadata only, GSO packets whole, a long queue that accepts rather than drops when full
    Message m(NFQNL_MSG_CONFIG, queue, NLM_F_ACK);
    nfqnl_msg_config_params params{htonl(0), NFQNL_COPY_META};
    m.attribute(NFQA_CFG_PARAMS, &params, sizeof params);
    const uint32_t maxlen = htonl(1u << 16);
    m.attribute(NFQA_CFG_QUEUE_MAXLEN, &maxlen, sizeof maxlen);
    const uint32_t flags = htonl(NFQA_CFG_F_GSO | NFQA_CFG_F_FAIL_OPEN);
    m.attribute(NFQA_CFG_MASK, &flags, sizeof flags);
    m.attribute(NFQA_CFG_FLAGS, &flags, sizeof flags);
    m.send(fd);
    expect_ack(fd, "configuring the queue");
  }
  std::fprintf(stderr, "netdelay: ready: queue %u, %.1f us\n", queue, delay_us);

  struct Held {
    uint32_t id;
    int64_t release_ns;
  };
  std::deque<Held> held;
  std::vector<char> buf(1 << 20);
  while (!g_stop) {
    // sleep until the oldest packet is due, or a new one arrives
    timespec timeout{}, *wait = nullptr;
    if (!held.empty()) {
      const int64_t left = std::max<int64_t>(0, held.front().release_ns - now_ns());
      timeout.tv_sec = left / 1000000000;
      timeout.tv_nsec = left % 1000000000;
      wait = &timeout;
    }
    pollfd p{fd, POLLIN, 0};
    const int ready = ppoll(&p, 1, wait, nullptr);
    if (ready < 0 && errno != EINTR) die("ppoll");
    if (ready > 0) {
      const ssize_t n = recv(fd, buf.data(), buf.size(), MSG_DONTWAIT);
      if (n < 0 && errno != EAGAIN && errno != EINTR && errno != ENOBUFS) die("recv");
      const int64_t arrived = now_ns();
      int left = n > 0 ? static_cast<int>(n) : 0;
      for (auto* h = reinterpret_cast<nlmsghdr*>(buf.data()); NLMSG_OK(h, left); h = NLMSG_NEXT(h, left)) {
        if ((h->nlmsg_type & 0xff) != NFQNL_MSG_PACKET) continue;
        // the attributes after nfgenmsg; NFQA_PACKET_HDR holds the packet id
        auto* a = reinterpret_cast<nlattr*>(static_cast<char*>(NLMSG_DATA(h)) + NLMSG_ALIGN(sizeof(nfgenmsg)));
        int rest = static_cast<int>(h->nlmsg_len) - static_cast<int>(NLMSG_LENGTH(NLMSG_ALIGN(sizeof(nfgenmsg))));
        while (rest >= static_cast<int>(sizeof(nlattr)) && a->nla_len >= sizeof(nlattr) && a->nla_len <= rest) {
          if ((a->nla_type & NLA_TYPE_MASK) == NFQA_PACKET_HDR) {
            const auto* ph = reinterpret_cast<const nfqnl_msg_packet_hdr*>(reinterpret_cast<char*>(a) + NLA_HDRLEN);
            held.push_back({ntohl(ph->packet_id), arrived + delay_ns});
            break;
          }
          const int step = NLA_ALIGN(a->nla_len);
          rest -= step;
          a = reinterpret_cast<nlattr*>(reinterpret_cast<char*>(a) + step);
        }
      }
    }
    // accept, in one batch, every packet whose delay is over
    const int64_t t = now_ns();
    bool due = false;
    uint32_t last = 0;
    while (!held.empty() && held.front().release_ns <= t) {
      last = held.front().id;
      due = true;
      held.pop_front();
    }
    if (due) accept_up_to(fd, queue, last);
  }
  if (!held.empty()) accept_up_to(fd, queue, held.back().id);
  return 0;
}
