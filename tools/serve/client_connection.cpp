#include "tools/serve/client_connection.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <cstdlib>
#include <cstring>

namespace tinylm {
namespace {

// The address and port of a socket address, as httplib writes them.
bool same_address(const sockaddr_storage& a, const std::string& addr, int port) {
  char text[INET6_ADDRSTRLEN] = {};
  int got_port = -1;
  if (a.ss_family == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(&a);
    inet_ntop(AF_INET, &in->sin_addr, text, sizeof text);
    got_port = ntohs(in->sin_port);
  } else if (a.ss_family == AF_INET6) {
    const auto* in = reinterpret_cast<const sockaddr_in6*>(&a);
    inet_ntop(AF_INET6, &in->sin6_addr, text, sizeof text);
    got_port = ntohs(in->sin6_port);
  } else {
    return false;
  }
  return got_port == port && addr == text;
}

}  // namespace

ClientConnection::ClientConnection(const std::string& local_addr, int local_port,
                                   const std::string& remote_addr, int remote_port) {
  DIR* dir = opendir("/proc/self/fd");
  if (!dir) return;
  while (const dirent* entry = readdir(dir)) {
    char* end = nullptr;
    const long fd = std::strtol(entry->d_name, &end, 10);
    if (end == entry->d_name || *end != '\0') continue;
    sockaddr_storage local{}, peer{};
    socklen_t local_size = sizeof local, peer_size = sizeof peer;
    const int sock = static_cast<int>(fd);
    if (getsockname(sock, reinterpret_cast<sockaddr*>(&local), &local_size) != 0) continue;
    if (getpeername(sock, reinterpret_cast<sockaddr*>(&peer), &peer_size) != 0) continue;
    if (same_address(local, local_addr, local_port) &&
        same_address(peer, remote_addr, remote_port)) {
      fd_ = sock;
      break;
    }
  }
  closedir(dir);
}

bool ClientConnection::closed() const {
  if (fd_ < 0) return false;
  pollfd p{fd_, POLLIN | POLLRDHUP, 0};
  if (poll(&p, 1, 0) <= 0) return false;
  if (p.revents & (POLLRDHUP | POLLHUP | POLLERR)) return true;
  char byte = 0;
  // Readable: either the client's next request (pipelined) or the end of the stream.
  return recv(fd_, &byte, 1, MSG_PEEK | MSG_DONTWAIT) == 0;
}

}  // namespace tinylm
