#include "tools/bench_serve.h"

#include <ATen/CPUGeneratorImpl.h>
#include <httplib.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <thread>

#include <spdlog/spdlog.h>
#include <nlohmann/json.hpp>

#include "model/generate.h"
#include "tools/serve/lab_server.h"

namespace tinylm {
namespace {

using Clock = std::chrono::steady_clock;
using nlohmann::json;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

struct Latency {
  double p50_ms = 0, p99_ms = 0, per_second = 0;
  int errors = 0, requests = 0;
};

// `clients` threads GET `target` `requests` times each; every answer must be 200.
Latency load(int port, const std::string& target, int clients, int requests) {
  std::vector<std::vector<double>> times(static_cast<size_t>(clients));
  std::atomic<int> errors{0};
  const auto start = Clock::now();
  std::vector<std::thread> threads;
  for (int c = 0; c < clients; ++c) {
    threads.emplace_back([&, c] {
      httplib::Client client("127.0.0.1", port);
      client.set_keep_alive(true);
      client.set_tcp_nodelay(true);
      for (int i = 0; i < requests; ++i) {
        const auto t = Clock::now();
        const auto answer = client.Get(target);
        times[static_cast<size_t>(c)].push_back(seconds_since(t) * 1e3);
        if (!answer || answer->status != 200) ++errors;
      }
    });
  }
  for (std::thread& t : threads) t.join();
  const double wall = seconds_since(start);
  std::vector<double> all;
  for (const auto& v : times) all.insert(all.end(), v.begin(), v.end());
  std::sort(all.begin(), all.end());
  Latency out;
  out.requests = static_cast<int>(all.size());
  out.p50_ms = all[all.size() / 2];
  out.p99_ms = all[std::min(all.size() - 1, all.size() * 99 / 100)];
  out.per_second = static_cast<double>(all.size()) / wall;
  out.errors = errors;
  return out;
}

std::string query(const httplib::Params& params) {
  return httplib::detail::params_to_query_str(params);
}

// The first `n` tokens of a plain English text, decoded back: a prompt of n tokens exactly
// (for a character or byte tokenizer; near it for others).
std::string prompt_of(const LoadedRun& run, int64_t n) {
  std::string text;
  while (static_cast<int64_t>(text.size()) < 8 * n)
    text += "First Citizen: Before we proceed any further, hear me speak. All: Speak, speak. ";
  std::vector<int64_t> ids;
  try {
    ids = run.tokenizer->encode(text, "the benchmark's prompt");
  } catch (const std::exception&) {
    ids.assign(static_cast<size_t>(n), 0);  // a vocabulary without these characters
  }
  ids.resize(static_cast<size_t>(std::min<int64_t>(n, static_cast<int64_t>(ids.size()))));
  std::string prompt;
  for (const int64_t id : ids) prompt += run.tokenizer->token_bytes(id);
  return prompt;
}

}  // namespace

void bench_serve(const BenchServeArgs& args) {
  ServedRuns runs({args.run});
  const ServedRuns::Entry entry = runs.runs().at(0);
  const std::string id = entry.id;
  const std::shared_ptr<ServedModel> served = runs.model(id);
  const ModelConfig& mc = served->run.model->config();
  const int64_t T = std::min<int64_t>(64, mc.block_size);
  const std::string prompt = prompt_of(served->run, T);
  ServeOptions options;
  options.port = 0;
  LabServer server(runs, options);
  const int port = server.bind();
  std::thread listening([&] { server.listen(); });

  const httplib::Params page = {
      {"run", id}, {"prompt", prompt}, {"logit-lens", ""}, {"heatmaps", "packed"}};
  httplib::Params ablated = page;
  ablated.emplace("ablate-heads", "0.0");
  spdlog::info("{} clients x {} requests of a {}-token prompt's views, on {} threads' cores",
               args.clients, args.requests, T, std::thread::hardware_concurrency());
  load(port, "/api/inspect?" + query(page), args.clients, 10);  // warm-up
  const Latency views = load(port, "/api/inspect?" + query(page), args.clients, args.requests);
  const Latency ablation =
      load(port, "/api/inspect?" + query(ablated), args.clients, args.requests);

  // Streamed sampling against generate() in process, alternating, medians of repeats.
  const httplib::Params sample = {{"run", id},
                                  {"prompt", prompt.substr(0, 1)},
                                  {"max-new-tokens", std::to_string(args.max_new_tokens)},
                                  {"num-samples", "1"},
                                  {"seed", "1"}};
  std::vector<double> streamed, direct;
  for (int r = 0; r < args.repeats; ++r) {
    httplib::Client client("127.0.0.1", port);
    client.set_tcp_nodelay(true);
    int64_t tokens = 0;
    const auto start = Clock::now();
    client.Get(("/api/sample?" + query(sample)).c_str(), [&](const char* data, size_t size) {
      for (std::string_view rest(data, size);;) {
        const size_t at = rest.find("event: token");
        if (at == std::string_view::npos) break;
        ++tokens;
        rest = rest.substr(at + 1);
      }
      return true;
    });
    streamed.push_back(static_cast<double>(tokens) / seconds_since(start));

    GenerationOptions generation;
    generation.max_new_tokens = args.max_new_tokens;
    generation.sampling = served->run.config.sample.sampling();
    auto rng = at::make_generator<at::CPUGeneratorImpl>(1);
    const std::vector<int64_t> context =
        served->run.tokenizer->encode(prompt.substr(0, 1), "the prompt");
    int64_t generated = 0;
    const auto t = Clock::now();
    generate(served->run.model, context, generation, rng, [&](int64_t, int64_t) {
      ++generated;
      return true;
    });
    direct.push_back(static_cast<double>(generated) / seconds_since(t));
  }
  server.stop();
  listening.join();
  std::sort(streamed.begin(), streamed.end());
  std::sort(direct.begin(), direct.end());
  const double stream_rate = streamed[streamed.size() / 2], direct_rate = direct[direct.size() / 2];

  if (args.json) {
    const auto as_json = [](const Latency& l) {
      return json{{"p50_ms", l.p50_ms},
                  {"p99_ms", l.p99_ms},
                  {"requests_per_s", l.per_second},
                  {"requests", l.requests},
                  {"errors", l.errors}};
    };
    std::printf("%s\n", json{{"run", entry.dir.string()},
                             {"clients", args.clients},
                             {"prompt_tokens", T},
                             {"prompt_views", as_json(views)},
                             {"one_head_ablated", as_json(ablation)},
                             {"sample_streamed_tokens_per_s", stream_rate},
                             {"sample_tokens_per_s", direct_rate},
                             {"streamed_over_sample", stream_rate / direct_rate}}
                            .dump(2)
                            .c_str());
    return;
  }
  std::printf("lab over loopback: %s, %d clients, a %lld-token prompt\n",
              entry.dir.string().c_str(), args.clients, static_cast<long long>(T));
  std::printf("  %-34s %8s %8s %10s %7s\n", "request", "p50 ms", "p99 ms", "requests/s", "errors");
  for (const auto& [name, l] :
       {std::pair<const char*, const Latency&>{"attention, lens, predictions", views},
        {"the same, one head ablated", ablation}}) {
    std::printf("  %-34s %8.2f %8.2f %10.0f %7d\n", name, l.p50_ms, l.p99_ms, l.per_second,
                l.errors);
  }
  std::printf(
      "  streamed sample: %.0f tokens/s; tinylm sample's generate(): %.0f tokens/s "
      "(%.0f%%)\n",
      stream_rate, direct_rate, 100.0 * stream_rate / direct_rate);
}

}  // namespace tinylm
