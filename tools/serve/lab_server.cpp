#include "tools/serve/lab_server.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Parallel.h>
#include <httplib.h>

#include <chrono>
#include <fstream>
#include <map>
#include <optional>
#include <regex>
#include <set>
#include <thread>

#include <spdlog/spdlog.h>
#include <nlohmann/json.hpp>

#include "model/analysis/ablation.h"
#include "model/generate.h"
#include "tools/cli.h"
#include "tools/eval_request.h"
#include "tools/inspect/html_report.h"
#include "tools/inspect/inspect_request.h"
#include "tools/inspect/inspection_json.h"
#include "tools/sample_request.h"
#include "tools/serve/client_connection.h"
#include "tools/serve/job_pool.h"
#include "train/run/snapshots.h"

namespace tinylm {

// The lab's script, compiled in (tools/serve/CMakeLists.txt); its page is the report's.
extern const char kLabScript[];

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// A refusal: an HTTP status, what was wrong, and where (a query parameter's name, "run",
// "method", "path", "body", ...).
struct ApiError : std::runtime_error {
  ApiError(int status, const std::string& message, std::string where)
      : std::runtime_error(message), status(status), where(std::move(where)) {}
  int status;
  std::string where;
};

// JSON that survives any bytes a request sent: invalid UTF-8 becomes U+FFFD.
std::string dump(const json& doc) {
  return doc.dump(-1, ' ', false, json::error_handler_t::replace) + "\n";
}

void send_error(httplib::Response& res, int status, const std::string& message,
                const std::string& where) {
  res.status = status;
  res.set_content(dump({{"error", message}, {"where", where}}), "application/json");
}

// A flag's name in CLI11's message ("--windows: must be ..."), else `fallback`.
std::string flag_in(const std::string& message, const std::string& fallback) {
  static const std::regex flag("--([a-z][a-z0-9-]*)");
  std::smatch m;
  return std::regex_search(message, m, flag) ? m[1].str() : fallback;
}

// The query's parameters as a command line for `app`, parsed by it: `name=value` is
// --name=value, a bare `name` is --name. `own` are the server's own parameters (run,
// heatmaps); `refused` name a file or the process, never taken from a request.
void parse_query(const httplib::Request& req, CLI::App& app, const std::set<std::string>& own,
                 const std::map<std::string, std::string>& refused, const ServeLimits& limits) {
  static const std::regex name("[a-z][a-z0-9-]*");
  static const std::set<std::string> texts = {"prompt", "clean",   "corrupt",
                                              "stop",   "analogy", "context-drift"};
  std::vector<std::string> args;
  for (auto it = req.params.begin(); it != req.params.end(); ++it) {
    const auto& [key, value] = *it;
    if (req.params.count(key) > 1) throw ApiError(400, key + " is given more than once", key);
    if (own.count(key)) continue;
    if (!std::regex_match(key, name))
      throw ApiError(400, "unknown parameter \"" + key + "\"", "query");
    if (const auto why = refused.find(key); why != refused.end())
      throw ApiError(400, key + " is not served: " + why->second, key);
    if (texts.count(key) && value.size() > limits.max_text_bytes) {
      throw ApiError(400,
                     key + " is " + std::to_string(value.size()) +
                         " bytes; this server takes at most " +
                         std::to_string(limits.max_text_bytes) + " (the text limit)",
                     key);
    }
    args.push_back(value.empty() ? "--" + key : "--" + key + "=" + value);
  }
  std::reverse(args.begin(), args.end());  // CLI11 parses a vector from its back
  try {
    app.parse(args);
  } catch (const CLI::ParseError& e) {
    std::string message = e.what();
    const std::string extras = "The following arguments were not expected: ";
    if (message.rfind(extras, 0) == 0)
      message = "unknown parameter " + message.substr(extras.size());
    throw ApiError(400, message, flag_in(message, "query"));
  }
}

// The flags a request may not set, and why: those of the process, and `more` (a command's
// flags that name a file).
std::map<std::string, std::string> refused_flags(std::map<std::string, std::string> more = {}) {
  more.emplace("threads", "the server's threads are set by serve --threads");
  more.emplace("device", "the server runs on the CPU");
  more.emplace("help", "the API's description is docs/serve-openapi.json");
  return more;
}
const char kNamesAFile[] = "a request names runs by id, never a file";

// A number a request asked for, against its limit.
void check_limit(int64_t value, int64_t limit, const std::string& name, const std::string& what) {
  if (value > limit) {
    throw ApiError(400,
                   name + " is " + std::to_string(value) + "; this server allows at most " +
                       std::to_string(limit) + " (" + what + ")",
                   name);
  }
}

// Sets LibTorch's intra-op threads for the calling thread, once.
void use_request_threads(int threads) {
  thread_local int set = 0;
  if (set != threads) {
    at::set_num_threads(threads);
    set = threads;
  }
}

// A Server-Sent Event; data is one line of JSON.
std::string event(const std::string& name, const json& data) {
  return "event: " + name + "\ndata: " + data.dump(-1, ' ', false, json::error_handler_t::replace) +
         "\n\n";
}

// Holds one of the open streams while it lives.
class StreamSlot {
 public:
  StreamSlot(std::atomic<int>& open, int max) : open_(open) {
    if (open_.fetch_add(1) >= max) {
      open_.fetch_sub(1);
      throw ApiError(503,
                     "too many open streams: this server holds at most " + std::to_string(max) +
                         " (/api/sample and /api/live together); close one and try again",
                     "streams");
    }
  }
  ~StreamSlot() { open_.fetch_sub(1); }
  StreamSlot(const StreamSlot&) = delete;
  StreamSlot& operator=(const StreamSlot&) = delete;

 private:
  std::atomic<int>& open_;
};

// The snapshot steps on disk, from their file names (written whole, by rename).
std::set<int64_t> snapshot_steps(const fs::path& run_dir) {
  std::set<int64_t> steps;
  static const std::regex file("step_([0-9]{1,18})\\.safetensors");
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(run_dir / "snapshots", ec)) {
    std::smatch m;
    const std::string name = e.path().filename().string();
    if (std::regex_match(name, m, file)) steps.insert(std::stoll(m[1].str()));
  }
  return steps;
}

}  // namespace

struct LabServer::Impl {
  Impl(ServedRuns& runs, ServeOptions options)
      : runs(runs),
        options(std::move(options)),
        heavy(this->options.limits.heavy_workers, this->options.limits.heavy_waiting) {}

  ServedRuns& runs;
  ServeOptions options;
  httplib::Server server;
  JobPool heavy;
  std::atomic<int> streams{0};
  std::atomic<bool> stopping{false};
  std::string page;                         // the report's page with the lab's script
  httplib::Server::Handler method_refusal;  // 405 on the lab's paths, 404 elsewhere

  // The run a request names: its `run` parameter, an id from /api/runs.
  ServedRuns::Entry run_of(const httplib::Request& req) {
    if (!req.has_param("run")) throw ApiError(400, "run is required: an id from /api/runs", "run");
    const std::string id = req.get_param_value("run");
    const std::optional<ServedRuns::Entry> entry = runs.find(id);
    if (!entry) throw ApiError(404, "no run with id \"" + id + "\" (see /api/runs)", "run");
    return *entry;
  }

  std::shared_ptr<ServedModel> model_of(const ServedRuns::Entry& entry) {
    try {
      return runs.model(entry.id);
    } catch (const std::exception& e) {
      throw ApiError(503, e.what(), "run");
    }
  }

  // Runs `work` on the heavy pool and waits for it; a client that goes away, or the server
  // stopping, cancels it.
  std::string heavy_job(const httplib::Request& req, const ServedRuns::Entry& entry,
                        const std::function<std::string(ServedModel&)>& work) {
    const Cancel cancel = std::make_shared<std::atomic<bool>>(false);
    std::string result;
    std::future<void> done;
    try {
      done = heavy.submit([&, cancel] {
        use_request_threads(options.request_threads);
        const std::shared_ptr<ServedModel> served = model_of(entry);
        const std::vector<HookHandle> stop = cancellable(served->run.model, cancel);
        result = work(*served);
      });
    } catch (const QueueFull& e) {
      throw ApiError(503, e.what(), "heavy jobs");
    }
    std::optional<ClientConnection> client;
    while (done.wait_for(std::chrono::milliseconds(50)) != std::future_status::ready) {
      if (!client) client.emplace(req.local_addr, req.local_port, req.remote_addr, req.remote_port);
      if (client->closed() && !cancel->exchange(true))
        spdlog::info("{} {}: the client went away; cancelling", req.method, req.path);
      if (stopping) cancel->store(true);  // the server stops: no job holds it up
    }
    done.get();  // rethrows the job's error
    return result;
  }

  void runs_list(const httplib::Request&, httplib::Response& res) {
    json list = json::array();
    for (const ServedRuns::Entry& e : runs.runs()) {
      const std::optional<int64_t> step = ServedRuns::step_on_disk(e.dir);
      json saes = json::array();  // the SAEs `tinylm features` wrote, for inspect's features=
      std::error_code ec;
      for (const auto& sae : fs::directory_iterator(e.dir / "saes", ec)) {
        if (fs::exists(sae.path() / "cfg.json")) saes.push_back(sae.path().filename().string());
      }
      std::sort(saes.begin(), saes.end());
      list.push_back({{"id", e.id},
                      {"path", e.dir.string()},
                      {"step", step ? json(*step) : json(nullptr)},
                      {"saes", saes}});
    }
    res.set_content(dump({{"runs", list}}), "application/json");
  }

  void inspect(const httplib::Request& req, httplib::Response& res) {
    InspectArgs args;
    CLI::App app("inspect");
    add_inspect_options(&app, args);
    parse_query(
        req, app, {"run", "heatmaps"},
        refused_flags(
            {{"text", kNamesAFile}, {"html", kNamesAFile}, {"json", "the answer is the JSON"}}),
        options.limits);
    const ServeLimits& limits = options.limits;
    check_limit(args.windows, limits.max_windows, "windows", "windows per inspection");
    check_limit(args.probes, limits.max_probes, "probes", "probe sequences per inspection");
    check_limit(args.context, limits.max_context, "context", "tokens per window");
    check_limit(args.tokens, limits.max_view_tokens, "tokens",
                "tokens per positions or drift view");
    const std::string heatmaps = req.has_param("heatmaps") ? req.get_param_value("heatmaps") : "";
    if (!heatmaps.empty() && heatmaps != "spelled" && heatmaps != "packed")
      throw ApiError(400, "heatmaps is spelled (as inspect --json) or packed (as the report)",
                     "heatmaps");
    check_inspect_args(args);
    const ServedRuns::Entry entry = run_of(req);
    if (!args.features.empty()) {  // a name under the run's saes/, never a path
      if (args.features.find('/') != std::string::npos || args.features[0] == '.')
        throw ApiError(400, "features names an SAE in the run's saes/ directory, not a path", "features");
      if (!fs::is_directory(entry.dir / "saes" / args.features))
        throw ApiError(404, "no SAE named \"" + args.features + "\" in " + (entry.dir / "saes").string() +
                                " (`tinylm features` writes them there)", "features");
    }
    const bool heavy_views = args.features.size() > 0 || args.heads || args.ablate || args.patch || args.positions ||
                             args.drift || args.composition || args.circuits || args.geometry ||
                             args.all || (!args.ablate_heads.empty() && args.ablation == "mean");
    const auto work = [&](ServedModel& served) {
      const Inspection out = run_inspection(served.run, entry.dir, args, served.kept.get());
      return dump(inspection_json(out, served.run,
                                  heatmaps == "packed" ? HeatmapEncoder(pack_heatmaps)
                                                       : HeatmapEncoder(spelled_out_heatmap)));
    };
    std::string body;
    if (heavy_views) {
      body = heavy_job(req, entry, work);
    } else {
      use_request_threads(options.request_threads);
      body = work(*model_of(entry));
    }
    res.set_content(body, "application/json");
  }

  void eval(const httplib::Request& req, httplib::Response& res) {
    EvalArgs args;
    std::string ablate;
    CLI::App app("eval");
    add_eval_options(&app, args);
    app.add_option("--ablate", ablate, "Heads to zero, L.H[,L.H...]");
    parse_query(req, app, {"run"},
                refused_flags({{"text", kNamesAFile},
                               {"logits", "the server writes no files"},
                               {"json", "the answer is the JSON"}}),
                options.limits);
    check_limit(args.context, options.limits.max_context, "context", "tokens per window");
    const std::vector<HeadRef> heads = heads_of(ablate);
    const ServedRuns::Entry entry = run_of(req);
    res.set_content(heavy_job(req, entry,
                              [&](ServedModel& served) {
                                check_heads_or_400(served, heads);
                                const std::vector<HookHandle> zeroed =
                                    zero_ablate(served.run.model, heads);
                                return dump(run_eval_request(served.run, entry.dir, args).scores);
                              }),
                    "application/json");
  }

  static std::vector<HeadRef> heads_of(const std::string& text) {
    if (text.empty()) return {};
    try {
      return parse_head_list(text);
    } catch (const std::invalid_argument& e) {
      throw ApiError(400, std::string("ablate: ") + e.what(), "ablate");
    }
  }
  static void check_heads_or_400(const ServedModel& served, const std::vector<HeadRef>& heads) {
    try {
      check_heads(served.run.model->config(), heads);
    } catch (const std::invalid_argument& e) {
      throw ApiError(400, std::string("ablate: ") + e.what(), "ablate");
    }
  }

  void sample(const httplib::Request& req, httplib::Response& res) {
    SampleArgs args;
    std::string ablate;
    CLI::App app("sample");
    add_sample_options(&app, args);
    app.add_option("--ablate", ablate, "Heads to zero, L.H[,L.H...]");
    parse_query(req, app, {"run"}, refused_flags(), options.limits);
    const std::vector<HeadRef> heads = heads_of(ablate);
    const ServedRuns::Entry entry = run_of(req);
    std::shared_ptr<ServedModel> served = model_of(entry);
    check_heads_or_400(*served, heads);
    const SampleConfig s = sample_config(served->run.config, args);
    check_limit(s.max_new_tokens, options.limits.max_new_tokens, "max-new-tokens",
                "tokens per sample");
    check_limit(s.num_samples, options.limits.max_samples, "num-samples", "samples per request");
    std::vector<int64_t> context = sample_context(served->run, s, args);
    auto slot = std::make_shared<StreamSlot>(streams, options.limits.max_streams);
    res.set_header("Cache-Control", "no-store");
    res.set_chunked_content_provider("text/event-stream", [this, served, s, args, heads, context,
                                                           slot](size_t, httplib::DataSink& sink) {
      use_request_threads(options.request_threads);
      GPT& model = served->run.model;
      const std::vector<HookHandle> zeroed = zero_ablate(model, heads);
      GenerationOptions generation;
      generation.max_new_tokens = s.max_new_tokens;
      generation.num_samples = s.num_samples;
      generation.sampling = s.sampling();
      generation.use_cache = !args.no_cache;
      auto rng = at::make_generator<at::CPUGeneratorImpl>(static_cast<uint64_t>(s.seed));
      SampleTexts texts(s, false);
      std::string prompts;
      for (int64_t i = 0; i < texts.samples(); ++i)
        prompts += event("prompt", {{"sample", i}, {"text", texts.take(i, false)}});
      if (!sink.write(prompts.data(), prompts.size())) return false;
      int64_t generated = 0;
      bool gone = false;
      const auto start = std::chrono::steady_clock::now();
      // Every token is an event; they leave at most 5 ms after they are drawn, a write
      // (three syscalls, a chunk) per batch rather than per token: the first at once.
      std::string pending;
      auto sent = start - std::chrono::milliseconds(5);
      try {
        generate(model, context, generation, rng, [&](int64_t sample, int64_t id) {
          ++generated;
          const bool more = texts.add(sample, served->run.tokenizer->token_bytes(id));
          pending +=
              event("token", {{"sample", sample}, {"id", id}, {"text", texts.take(sample, false)}});
          const auto now = std::chrono::steady_clock::now();
          if (now - sent >= std::chrono::milliseconds(5)) {
            if (stopping || !sink.write(pending.data(), pending.size())) gone = true;
            pending.clear();
            sent = now;
          }
          return more && !gone;
        });
      } catch (const std::exception& e) {
        const std::string error = event("error", {{"error", e.what()}, {"where", "sample"}});
        sink.write(error.data(), error.size());
        sink.done();
        return true;
      }
      if (gone) return false;
      const double seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      std::string tail = std::move(pending);
      for (int64_t i = 0; i < texts.samples(); ++i) {
        const std::string rest = texts.take(i, true);
        if (!rest.empty()) tail += event("token", {{"sample", i}, {"text", rest}});
      }
      tail += event("done", {{"tokens", generated},
                             {"seconds", seconds},
                             {"tokens_per_second", static_cast<double>(generated) / seconds}});
      sink.write(tail.data(), tail.size());
      sink.done();
      return true;
    });
  }

  void live(const httplib::Request& req, httplib::Response& res) {
    CLI::App app("live");
    std::string from = "end";
    app.add_option("--from", from)->check(CLI::IsMember({"start", "end"}));
    parse_query(req, app, {"run"}, {}, options.limits);
    const ServedRuns::Entry entry = run_of(req);
    auto slot = std::make_shared<StreamSlot>(streams, options.limits.max_streams);
    res.set_header("Cache-Control", "no-store");
    const fs::path dir = entry.dir;
    const std::string id = entry.id;
    res.set_chunked_content_provider(
        "text/event-stream", [this, dir, id, from, slot](size_t, httplib::DataSink& sink) {
          const fs::path metrics = dir / "metrics.jsonl";
          std::error_code ec;
          uintmax_t offset = from == "start" ? 0 : fs::file_size(metrics, ec);
          if (ec) offset = 0;
          std::set<int64_t> seen = from == "start" ? std::set<int64_t>{} : snapshot_steps(dir);
          std::optional<int64_t> step = ServedRuns::step_on_disk(dir);
          std::string first = event("hello", {{"run", id}, {"step", step ? json(*step) : json()}});
          if (from == "start") step.reset();  // the history ends with the checkpoint of now
          if (!sink.write(first.data(), first.size())) return false;
          auto last_write = std::chrono::steady_clock::now();
          while (!stopping) {
            std::string out;
            const uintmax_t size = fs::file_size(metrics, ec);
            if (!ec && size < offset) offset = 0;  // a resume cut the file back: read it again
            if (!ec && size > offset) {
              std::ifstream in(metrics, std::ios::binary);
              in.seekg(static_cast<std::streamoff>(offset));
              std::string line;
              // Whole lines only: one still being written is read on a later pass.
              while (std::getline(in, line) && !in.eof()) {
                offset += line.size() + 1;
                const json record = json::parse(line, nullptr, false);
                if (!record.is_discarded()) out += event("metrics", record);
              }
            }
            for (const int64_t s : snapshot_steps(dir)) {
              if (seen.insert(s).second) out += event("snapshot", {{"step", s}});
            }
            if (const auto now_step = ServedRuns::step_on_disk(dir); now_step && now_step != step) {
              step = now_step;
              out += event("checkpoint", {{"step", *step}});
            }
            const auto now = std::chrono::steady_clock::now();
            if (out.empty() && now - last_write > std::chrono::seconds(10)) out = ": alive\n\n";
            if (!out.empty()) {
              if (!sink.write(out.data(), out.size())) return false;
              last_write = now;
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(250));
          }
          sink.done();
          return true;
        });
  }

  // Wraps an API handler: every refusal becomes its 4xx with {"error", "where"}.
  httplib::Server::Handler api(void (Impl::*handler)(const httplib::Request&, httplib::Response&)) {
    return [this, handler](const httplib::Request& req, httplib::Response& res) {
      try {
        (this->*handler)(req, res);
      } catch (const ApiError& e) {
        send_error(res, e.status, e.what(), e.where);
      } catch (const UsageError& e) {
        // "inspect: choose a view: --prompt TEXT, --heads, ..." is about the whole query.
        const std::string message = e.what();
        send_error(res, 400, message,
                   message.rfind("inspect:", 0) == 0 ? "query" : flag_in(message, "query"));
      } catch (const Cancelled& e) {
        send_error(res, 499, e.what(), "client");
      } catch (const std::invalid_argument& e) {
        send_error(res, 400, e.what(), flag_in(e.what(), "query"));
      } catch (const std::exception& e) {
        // What the run or the text cannot give (a token not in the vocabulary, texts of
        // different lengths, a split missing from disk): the request, not the server.
        send_error(res, 422, e.what(), flag_in(e.what(), "run"));
      }
    };
  }

  void routes() {
    const auto asset = [](const char* body, const char* type) {
      return [body, type](const httplib::Request&, httplib::Response& res) {
        res.set_header("Cache-Control", "no-store");
        res.set_content(body, type);
      };
    };
    page = report_page("null", "<script type=\"module\" src=\"/lab.js\"></script>\n");
    server.Get("/", asset(page.c_str(), "text/html; charset=utf-8"));
    server.Get("/lab.js", asset(kLabScript, "text/javascript; charset=utf-8"));
    server.Get("/api/runs", api(&Impl::runs_list));
    server.Get("/api/inspect", api(&Impl::inspect));
    server.Get("/api/eval", api(&Impl::eval));
    server.Get("/api/sample", api(&Impl::sample));
    server.Get("/api/live", api(&Impl::live));
    static const std::set<std::string> paths = {
        "/", "/lab.js", "/api/runs", "/api/inspect", "/api/eval", "/api/sample", "/api/live"};
    const auto not_allowed = [](const httplib::Request& req, httplib::Response& res) {
      res.body.clear();
      if (paths.count(req.path)) {
        send_error(res, 405,
                   req.method + " is not allowed on " + req.path + ": the lab is GET only",
                   "method");
        res.set_header("Allow", "GET");
      } else {
        send_error(res, 404, "no such path: " + req.path, "path");
      }
    };
    method_refusal = not_allowed;
    server.Post(".*", not_allowed);
    server.Put(".*", not_allowed);
    server.Delete(".*", not_allowed);
    server.Patch(".*", not_allowed);
    server.Options(".*", not_allowed);
    server.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
      // No compression: on loopback it only costs, and Debian's httplib picks brotli at its
      // slowest quality for any browser (1 MB/s: 10 s for a run's snapshots). httplib has no
      // switch for it, so the request stops asking. (The Request is httplib's own mutable
      // object, handed to this handler as const.)
      const_cast<httplib::Request&>(req).headers.erase("Accept-Encoding");
      // httplib reads no body of a GET; its length alone says what was sent.
      if (req.get_header_value<uint64_t>("Content-Length") > options.limits.max_body_bytes) {
        send_error(res, 413,
                   "the body is over " + std::to_string(options.limits.max_body_bytes) +
                       " bytes: the lab's API takes none",
                   "body");
        res.set_header("Connection", "close");
        return httplib::Server::HandlerResponse::Handled;
      }
      if (req.target.size() > options.limits.max_query_bytes) {
        send_error(res, 414,
                   "the request target is " + std::to_string(req.target.size()) +
                       " bytes; this server takes at most " +
                       std::to_string(options.limits.max_query_bytes),
                   "query");
        return httplib::Server::HandlerResponse::Handled;
      }
      return httplib::Server::HandlerResponse::Unhandled;
    });
    // Whatever httplib refuses itself (an unknown path, a body over the limit, a target too
    // long, a malformed request) gets the same JSON.
    server.set_error_handler(httplib::Server::HandlerWithResponse(
        [this](const httplib::Request& req, httplib::Response& res) {
          if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
          // A POST without a length fails as malformed before its route: the method is the error.
          if (res.status != 413 && res.status != 414 && req.method != "GET" &&
              req.method != "HEAD" && !req.method.empty()) {
            method_refusal(req, res);
            return httplib::Server::HandlerResponse::Handled;
          }
          const std::map<int, std::pair<std::string, std::string>> known = {
              {404, {"no such path: " + req.path, "path"}},
              {413,
               {"the body is over " + std::to_string(options.limits.max_body_bytes) +
                    " bytes: the lab's API takes none",
                "body"}},
              {414, {"the request target is too long", "query"}},
              {400, {"a malformed request", "request"}}};
          const auto it = known.find(res.status);
          send_error(res, res.status,
                     it != known.end()
                         ? it->second.first
                         : "the request was refused (HTTP " + std::to_string(res.status) + ")",
                     it != known.end() ? it->second.second : "request");
          return httplib::Server::HandlerResponse::Handled;
        }));
    server.set_exception_handler(
        [](const httplib::Request&, httplib::Response& res, std::exception_ptr error) {
          std::string what = "internal error";
          try {
            std::rethrow_exception(error);
          } catch (const std::exception& e) {
            what = e.what();
          } catch (...) {}
          send_error(res, 500, what, "server");
        });
    server.set_payload_max_length(options.limits.max_body_bytes);
    // Headers and body leave in separate writes: without TCP_NODELAY, Nagle holds the body
    // until the client's delayed ACK, 40 ms on Linux, on every keep-alive request.
    server.set_tcp_nodelay(true);
    server.set_keep_alive_max_count(10000);  // httplib's default closes after 5 requests
    server.set_read_timeout(options.idle_timeout_s, 0);
    server.set_keep_alive_timeout(options.idle_timeout_s);
    const int threads = options.http_threads;
    server.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  }
};

LabServer::LabServer(ServedRuns& runs, ServeOptions options)
    : impl_(std::make_unique<Impl>(runs, std::move(options))) {
  impl_->routes();
}

LabServer::~LabServer() { stop(); }

int LabServer::bind() {
  Impl& s = *impl_;
  const int port = s.options.port == 0 ? s.server.bind_to_any_port(s.options.host)
                   : s.server.bind_to_port(s.options.host, s.options.port) ? s.options.port
                                                                           : -1;
  if (port < 0) {
    throw std::runtime_error("cannot listen on " + s.options.host + ":" +
                             std::to_string(s.options.port) +
                             " (in use, or not an address of this machine); try --port");
  }
  return port;
}

void LabServer::listen() { impl_->server.listen_after_bind(); }

void LabServer::stop() {
  impl_->stopping = true;
  impl_->server.stop();
}

}  // namespace tinylm
