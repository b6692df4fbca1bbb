// safetensors and the run directory: exact round trips, and damaged files caught before use.

#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <regex>

#include <nlohmann/json.hpp>

#include "data/char_tokenizer.h"
#include "test_util.h"
#include "train/checkpoint.h"
#include "train/safetensors.h"

namespace tinylm {
namespace {

using test::TempDir;

std::string decode_error(const std::string& bytes) {
  try {
    decode_safetensors(bytes, "f.safetensors");
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

// A file with a hand-written header, for corruption tests.
std::string with_header(const std::string& header, size_t data_bytes) {
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((header.size() >> (8 * i)) & 0xFF);
  return out + header + std::string(data_bytes, '\0');
}

TEST(Safetensors, RoundTripIsExact) {
  const torch::Tensor a = torch::randn({3, 5}), b = torch::arange(7, torch::kInt64), s = torch::tensor(42L);
  const std::string bytes = encode_safetensors({{"a", a}, {"b", b}, {"s", s}}, {{"step", "9"}});
  const Safetensors back = decode_safetensors(bytes, "x");
  EXPECT_TRUE(torch::equal(back.tensors.at("a"), a));
  EXPECT_TRUE(torch::equal(back.tensors.at("b"), b));
  EXPECT_EQ(back.tensors.at("s").dim(), 0);
  EXPECT_EQ(back.tensors.at("s").item<int64_t>(), 42);
  EXPECT_EQ(back.metadata.at("step"), "9");
}

TEST(Safetensors, LayoutFollowsTheSpec) {
  const std::string bytes = encode_safetensors({{"w", torch::ones({2, 2})}});
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= uint64_t(static_cast<unsigned char>(bytes[i])) << (8 * i);
  EXPECT_EQ((8 + n) % 8, 0u);  // data starts aligned
  const auto header = nlohmann::json::parse(bytes.substr(8, n));
  EXPECT_EQ(header["w"]["dtype"], "F32");
  EXPECT_EQ(header["w"]["shape"], nlohmann::json({2, 2}));
  EXPECT_EQ(header["w"]["data_offsets"], nlohmann::json({0, 16}));
  EXPECT_EQ(bytes.size(), 8 + n + 16);
  float first;
  std::memcpy(&first, bytes.data() + 8 + n, 4);
  EXPECT_EQ(first, 1.0f);  // little-endian float32
}

TEST(Safetensors, DamagedFilesAreClearErrors) {
  const std::string good = encode_safetensors({{"w", torch::ones({4, 4})}});
  EXPECT_NE(decode_error(good.substr(0, 5)).find("shorter than"), std::string::npos);
  EXPECT_NE(decode_error(good.substr(0, 30)).find("exceeds the file"), std::string::npos);
  EXPECT_NE(decode_error(good.substr(0, good.size() - 4)).find("outside"), std::string::npos);
  EXPECT_NE(decode_error(with_header("{not json", 0)).find("not JSON"), std::string::npos);
  EXPECT_NE(decode_error(with_header(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}})", 4))
                .find("need 8"), std::string::npos);
  EXPECT_NE(decode_error(with_header(R"({"w":{"dtype":"Q4","shape":[1],"data_offsets":[0,4]}})", 4))
                .find("unsupported dtype"), std::string::npos);
  EXPECT_NE(decode_error(with_header(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                                     R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})", 12))
                .find("overlap"), std::string::npos);
  EXPECT_NE(decode_error(with_header(R"({"w":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})", 4))
                .find("negative"), std::string::npos);
}

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
    save_checkpoint(dir.path(), config, CharTokenizer::from_text("abcde"), model, optimizer, {});
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

TEST(Checkpoint, DamagedRunFilesAreClearErrors) {
  const auto error_after = [](const std::function<void(const std::filesystem::path&)>& damage) {
    SavedRun saved;
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
  EXPECT_NE(error_after([&](auto d) { truncate(d / "model.safetensors", 1000); }).find("truncated?"),
            std::string::npos);
  EXPECT_NE(error_after([&](auto d) { truncate(d / "config.json", 20); }).find("config.json is not valid JSON"),
            std::string::npos);
  EXPECT_NE(error_after([&](auto d) { truncate(d / "tokenizer.json", 10); }).find("tokenizer.json is not valid JSON"),
            std::string::npos);
  EXPECT_NE(error_after([&](auto d) {
              test::write_text(d / "config.json", R"({"n_layer": 3, "n_head": 2, "n_embd": 32, "block_size": 32,
                "vocab_size": 5, "dropout": 0.0, "bias": true, "pos_encoding": "learned", "tie_weights": true})");
              test::write_text(d / "config.toml",
                               std::regex_replace(test::read_text(d / "config.toml"), std::regex("n_layer = 2"), "n_layer = 3"));
            }).find("lacks transformer.h.2"),
            std::string::npos);
  EXPECT_NE(error_after([&](auto d) { test::write_text(d / "config.json", R"({"n_layer": 2})"); })
                .find("\"n_head\" is missing"),
            std::string::npos);
  EXPECT_NE(error_after([&](auto d) { test::write_text(d / "tokenizer.json", R"({"type":"char","vocab":["a"]})"); })
                .find("its tokenizer has 1 ids but config.json says vocab_size 5"),
            std::string::npos);
  EXPECT_NE(error_after([&](auto d) { std::filesystem::remove(d / "model.safetensors"); })
                .find("is not a tinylm run directory"),
            std::string::npos);
}

TEST(Checkpoint, WritesReplaceFilesWithoutLeavingTemporaries) {
  SavedRun saved;
  AdamW optimizer(saved.model, TrainConfig{});
  save_checkpoint(saved.dir.path(), saved.config, CharTokenizer::from_text("abcde"), saved.model, optimizer, {});
  for (const auto& entry : std::filesystem::directory_iterator(saved.dir.path())) {
    EXPECT_EQ(entry.path().filename().string().find(".tmp-"), std::string::npos) << entry.path();
  }
}

}  // namespace
}  // namespace tinylm
