// The run directory: exact round trips, and damaged files caught before use.

#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <nlohmann/json.hpp>
#include <regex>

#include "data/char_tokenizer.h"
#include "test_util.h"
#include "train/adamw.h"
#include "train/run/checkpoint.h"
#include "train/run/safetensors.h"

namespace tinylm {
namespace {

using test::TempDir;

struct SavedRun {
  TempDir dir;
  RunConfig config;
  GPT model{nullptr};

  SavedRun() {
    config = load_run_config(test::source_dir() / "configs/tiny.toml");
    config.model.vocab_size = 5;
    model = GPT(config.model);
    auto rng = at::make_generator<at::CPUGeneratorImpl>(3);
    model->init_weights(rng);
    AdamW optimizer(model, TrainConfig{});
    save_checkpoint(dir.path(), config, CharTokenizer::from_text("abcde"), model,
                    optimizer.moments(), {});
  }
};

TEST(Checkpoint, SaveLoadGivesBitIdenticalLogits) {
  SavedRun saved;
  saved.model->eval();
  LoadedRun run = load_run(saved.dir.path());
  torch::NoGradGuard no_grad;
  const auto x = torch::tensor({{0, 1, 2, 3, 4, 0, 1}}, torch::kInt64);
  EXPECT_TRUE(torch::equal(run.model->forward(x), saved.model->forward(x)));
  EXPECT_EQ(run.tokenizer->vocab_size(), 5);
  EXPECT_EQ(to_toml(run.config), to_toml(saved.config));
}

// state.json as tinylm wrote it before checksums (format 1): no manifest, no checksum.
void strip_checksums(const std::filesystem::path& dir) {
  auto state = nlohmann::json::parse(test::read_text(dir / "state.json"));
  state.erase("files");
  state.erase("checksum");
  state["format"] = 1;
  test::write_text(dir / "state.json", state.dump(2));
}

// Behind the checksums, and for runs from before them: each file's contents are validated.
TEST(Checkpoint, DamagedRunFilesAreClearErrors) {
  const auto error_after = [](const std::function<void(const std::filesystem::path&)>& damage) {
    SavedRun saved;
    strip_checksums(saved.dir.path());
    damage(saved.dir.path());
    try {
      load_run(saved.dir.path());
    } catch (const std::exception& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  const auto truncate = [](const std::filesystem::path& file, uintmax_t keep) {
    std::filesystem::resize_file(file, keep);
  };
  EXPECT_NE(
      error_after([&](auto d) { truncate(d / "model.safetensors", 1000); }).find("truncated?"),
      std::string::npos);
  EXPECT_NE(error_after([&](auto d) {
              truncate(d / "config.json", 20);
            }).find("config.json is not valid JSON"),
            std::string::npos);
  EXPECT_NE(error_after([&](auto d) {
              truncate(d / "tokenizer.json", 10);
            }).find("tokenizer.json is not valid JSON"),
            std::string::npos);
  EXPECT_NE(error_after([&](auto d) {
              test::write_text(d / "config.json",
                               R"({"n_layer": 3, "n_head": 2, "n_embd": 32, "block_size": 32,
                "vocab_size": 5, "dropout": 0.0, "bias": true, "pos_encoding": "learned", "tie_weights": true})");
              test::write_text(d / "config.toml",
                               std::regex_replace(test::read_text(d / "config.toml"),
                                                  std::regex("n_layer = 2"), "n_layer = 3"));
            }).find("lacks transformer.h.2"),
            std::string::npos);
  EXPECT_NE(error_after([&](auto d) {
              test::write_text(d / "config.json", R"({"n_layer": 2})");
            }).find("\"n_head\" is missing"),
            std::string::npos);
  EXPECT_NE(error_after([&](auto d) {
              test::write_text(d / "tokenizer.json", R"({"type":"char","vocab":["a"]})");
            }).find("its tokenizer has 1 ids but config.json says vocab_size 5"),
            std::string::npos);
  EXPECT_NE(error_after([&](auto d) {
              std::filesystem::remove(d / "model.safetensors");
            }).find("is not a tinylm run directory"),
            std::string::npos);
}

TEST(Checkpoint, WritesReplaceFilesWithoutLeavingTemporaries) {
  SavedRun saved;
  AdamW optimizer(saved.model, TrainConfig{});
  save_checkpoint(saved.dir.path(), saved.config, CharTokenizer::from_text("abcde"), saved.model,
                  optimizer.moments(), {});
  for (const auto& entry : std::filesystem::directory_iterator(saved.dir.path())) {
    EXPECT_EQ(entry.path().filename().string().find(".tmp-"), std::string::npos) << entry.path();
  }
}

}  // namespace
}  // namespace tinylm
