// The live lab's requests (tools/serve/lab_server.h): a server in this process, on a free
// loopback port, serving a small run, answers what the fuzzer sends over a real socket. The
// input's first byte picks where it goes: the query string of /api/inspect, /api/eval or
// /api/sample (with a body when the input holds a blank line), or the whole request as raw
// bytes. Every answer must be an HTTP response; none may be a 5xx other than 503 (a limit
// reached); every refusal must be JSON with "error" and "where"; and the server must answer
// the next input. A broken promise aborts, and libFuzzer reports it.
#include <ATen/CPUGeneratorImpl.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <thread>

#include <nlohmann/json.hpp>

#include "data/char_tokenizer.h"
#include "tests/fuzz/fuzz_support.h"
#include "tools/serve/lab_server.h"
#include "train/run/checkpoint.h"

namespace {

// How the last round trip whose answer was not whole ended.
std::string& last_ending() {
  static std::string ending;
  return ending;
}

// The answer that broke a promise goes to stderr with the report, and how its reading ended
// where it was cut short (empty, or a head without its whole body).
void require(bool ok, const std::string& answer = "") {
  if (ok) return;
  std::fprintf(stderr, "the answer: %s\n", answer.substr(0, 2000).c_str());
  if (!last_ending().empty()) std::fprintf(stderr, "it ended: %s\n", last_ending().c_str());
  std::abort();
}

// A run of a tiny random model over "abcde", its corpus beside it.
std::filesystem::path make_run() {
  const std::filesystem::path dir = tinylm::fuzz::scratch_dir() / "run";
  tinylm::fuzz::write_file(tinylm::fuzz::scratch_dir() / "corpus.txt",
                           std::string(4000, 'a') + "abcdeedcba" + std::string(200, 'e'));
  tinylm::RunConfig config;
  config.model.n_layer = 2;
  config.model.n_head = 2;
  config.model.n_embd = 16;
  config.model.block_size = 16;
  config.model.vocab_size = 5;
  config.data.path = (tinylm::fuzz::scratch_dir() / "corpus.txt").string();
  config.data.cache_dir = (tinylm::fuzz::scratch_dir() / "cache").string();
  tinylm::GPT model(config.model);
  auto rng = at::make_generator<at::CPUGeneratorImpl>(3);
  model->init_weights(rng);
  tinylm::save_checkpoint(dir, config, tinylm::CharTokenizer::from_text("abcde"), model, {}, {});
  return dir;
}

struct Lab {
  Lab() : runs({make_run()}) {
    tinylm::ServeOptions options;
    options.port = 0;
    options.http_threads = 8;
    options.idle_timeout_s = 1;  // a raw request cut short or kept alive: a second, not five
    server = std::make_unique<tinylm::LabServer>(runs, options);
    port = server->bind();
    thread = std::thread([this] { server->listen(); });
  }
  tinylm::ServedRuns runs;
  std::unique_ptr<tinylm::LabServer> server;
  std::thread thread;
  int port = 0;
};

// Whether `answer` holds one whole response: its head, then Content-Length bytes, or the
// last chunk of a chunked body.
bool whole(const std::string& answer) {
  const size_t head = answer.find("\r\n\r\n");
  if (head == std::string::npos) return false;
  const std::string lower = [&] {
    std::string h = answer.substr(0, head);
    for (char& c : h) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return h;
  }();
  if (const size_t at = lower.find("\r\ncontent-length: "); at != std::string::npos)
    return answer.size() >= head + 4 + std::strtoull(lower.c_str() + at + 18, nullptr, 10);
  if (lower.find("\r\ntransfer-encoding: chunked") != std::string::npos)
    return answer.size() >= head + 9 && answer.compare(answer.size() - 5, 5, "0\r\n\r\n") == 0;
  return false;  // read until the server closes
}

// libFuzzer's -timeout raises SIGALRM every second, and a blocking call of this thread that
// it lands in fails with EINTR (the cause of this target's rare failures, with an empty
// answer or a head without its body): each call below is retried, as a client's would be.
// A blocking connect that is interrupted goes on by itself; this waits for it.
bool connect_to(int fd, const sockaddr_in& address) {
  if (connect(fd, reinterpret_cast<const sockaddr*>(&address), sizeof address) == 0) return true;
  if (errno != EINTR) return false;
  pollfd ready{fd, POLLOUT, 0};
  while (poll(&ready, 1, 30000) < 0)
    if (errno != EINTR) return false;
  int error = 0;
  socklen_t length = sizeof error;
  return getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &length) == 0 && error == 0;
}

// Sends `request` and reads one answer: until it is whole, the server closes, or 30 s pass.
std::string round_trip(int port, const std::string& request) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  require(fd >= 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  require(connect_to(fd, address));
  timeval timeout{30, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
  // No half-close after the request: httplib then answers nothing, and the lab takes a
  // client's FIN for its leaving (tools/serve/client_connection.h). A server that refuses
  // a request before reading all of it may close first: the rest is then not sent.
  for (size_t sent = 0; sent < request.size();) {
    const ssize_t w = write(fd, request.data() + sent, request.size() - sent);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) break;
    sent += static_cast<size_t>(w);
  }
  std::string answer;
  char buffer[65536];
  const auto start = std::chrono::steady_clock::now();
  ssize_t n = 1;
  while (!whole(answer)) {
    n = read(fd, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    answer.append(buffer, static_cast<size_t>(n));
  }
  // How an answer that is not whole ended, for the report of a broken promise.
  last_ending().clear();
  if (!whole(answer)) {
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                        std::chrono::steady_clock::now() - start)
                        .count();
    last_ending() = (n == 0 ? std::string("the server closed the connection")
                            : std::string("read failed: ") + std::strerror(errno)) +
                    " after " + std::to_string(ms) + " ms and " + std::to_string(answer.size()) +
                    " bytes";
  }
  close(fd);
  return answer;
}

// The status of an answer, and its refusal's JSON checked.
void check_answer(const std::string& answer) {
  require(answer.rfind("HTTP/1.1 ", 0) == 0 && answer.size() >= 12, answer);
  const int status = std::atoi(answer.substr(9, 3).c_str());
  require(status >= 200 && (status < 500 || status == 503), answer);
  if (status >= 400) {
    const size_t body = answer.find("\r\n\r\n");
    require(body != std::string::npos, answer);
    const nlohmann::json doc = nlohmann::json::parse(answer.substr(body + 4), nullptr, false);
    require(doc.is_object() && doc.contains("error") && doc.contains("where"), answer);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static Lab* lab = new Lab();  // lives for the process: its threads serve every input
  if (size == 0) return 0;
  const std::string input(reinterpret_cast<const char*>(data) + 1, size - 1);
  static const char* kPaths[] = {"/api/inspect", "/api/eval", "/api/sample"};
  if (data[0] % 4 == 3) {
    // Raw bytes, ended as a request's head ends: httplib's parser first. Any answer it
    // gives must still keep the promises.
    const std::string answer = round_trip(lab->port, input + "\r\n\r\n");
    if (!answer.empty()) check_answer(answer);
  } else {
    const size_t blank = input.find("\n\n");
    const std::string query = input.substr(0, blank);
    const std::string body = blank == std::string::npos ? "" : input.substr(blank + 2);
    std::string request = std::string("GET ") + kPaths[data[0] % 4] + "?run=run&" + query +
                          " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n";
    if (!body.empty()) request += "Content-Length: " + std::to_string(body.size()) + "\r\n";
    const std::string answer = round_trip(lab->port, request + "\r\n" + body);
    // A query with a space or a line break ends the request line early: a 400, or nothing.
    if (!answer.empty()) check_answer(answer);
  }
  // The server answers the next request.
  check_answer(
      round_trip(lab->port, "GET /api/runs HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"));
  return 0;
}
