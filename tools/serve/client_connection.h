#pragma once
// Whether the client of a request is still there. cpp-httplib 0.11 (Debian 12's) hands a
// handler the connection's addresses but not its socket, so the socket is found among the
// process's descriptors by those addresses (getsockname and getpeername on each), once, and
// then asked without blocking: a peer that closed shows as end of file or a hang-up. (A
// client that only shuts down its sending side looks the same, and is taken as gone:
// browsers, curl and Python's clients never do.) Where
// the socket cannot be found the client counts as present: work is never cancelled by
// mistake.

#include <string>

namespace tinylm {

class ClientConnection {
 public:
  ClientConnection(const std::string& local_addr, int local_port, const std::string& remote_addr,
                   int remote_port);
  bool closed() const;

 private:
  int fd_ = -1;
};

}  // namespace tinylm
