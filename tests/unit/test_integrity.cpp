// Checksums: every tensor in its safetensors header, every file of a checkpoint in state.json,
// state.json over itself. Bytes that rot are refused, naming the file and the tensor.

#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cstdio>
#include <nlohmann/json.hpp>
#include <random>

#include "data/char_tokenizer.h"
#include "data/io/canonical_json.h"
#include "data/io/checksum.h"
#include "data/io/files.h"
#include "data/io/fingerprint.h"
#include "test_util.h"
#include "train/adamw.h"
#include "train/run/checkpoint.h"
#include "train/run/safetensors.h"

namespace tinylm {
namespace {

namespace fs = std::filesystem;
using test::TempDir;

// A small run saved into dir (and, when asked, its best/ copy).
struct ChecksummedRun {
  TempDir dir;
  RunConfig config;
  GPT model{nullptr};

  explicit ChecksummedRun(bool with_best = false) {
    config = load_run_config(test::source_dir() / "configs/tiny.toml");
    config.model.vocab_size = 5;
    model = GPT(config.model);
    auto rng = at::make_generator<at::CPUGeneratorImpl>(3);
    model->init_weights(rng);
    AdamW optimizer(model, TrainConfig{});
    TrainingState state;
    state.step = 7;
    save_checkpoint(dir.path(), config, CharTokenizer::from_text("abcde"), model,
                    optimizer.moments(), state);
    if (with_best) {
      save_checkpoint(dir / "best", config, CharTokenizer::from_text("abcde"), model,
                      optimizer.moments(), state);
    }
  }
};

void flip_one_byte(const fs::path& file, uint64_t offset, uint8_t mask = 0x10) {
  std::string bytes = read_file(file);
  bytes.at(offset) = static_cast<char>(static_cast<uint8_t>(bytes[offset]) ^ mask);
  test::write_text(file, bytes);
}

// Where a safetensors file's tensor data begins.
uint64_t data_offset(const std::string& bytes) {
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= uint64_t(static_cast<uint8_t>(bytes[i])) << (8 * i);
  return 8 + n;
}

TEST(Checksum, IsXxh3Of64BitsAsXxhashSpecifiesIt) {
  // The specification's values (xxHash's own test vectors, and python3-xxhash's xxh3_64).
  EXPECT_EQ(checksum_hex(""), "2d06800538d394c2");
  EXPECT_EQ(checksum_hex("a"), "e6c632b61e964e1f");
  EXPECT_EQ(checksum_hex("tinylm"), to_hex(xxh3_64("tinylm")));
}

TEST(Checksum, SafetensorsCarryOneChecksumPerTensorThatOtherReadersIgnore) {
  const NamedTensors tensors = {{"a", torch::arange(6, torch::kFloat32).reshape({2, 3})},
                                {"b", torch::tensor({1, 2}, torch::kInt64)}};
  const std::string bytes = encode_safetensors(tensors, {{"step", "3"}});
  const auto header = nlohmann::json::parse(bytes.substr(8, data_offset(bytes) - 8));
  const auto& meta = header["__metadata__"];
  EXPECT_EQ(meta["step"], "3");
  const float a[6] = {0, 1, 2, 3, 4, 5};
  EXPECT_EQ(meta["xxh3_64:a"], checksum_hex({reinterpret_cast<const char*>(a), sizeof a}));
  ASSERT_TRUE(meta.contains("xxh3_64:b"));
  const Safetensors file = decode_safetensors(bytes, "t.safetensors");
  EXPECT_TRUE(file.checksummed);
  EXPECT_EQ(file.metadata, (std::map<std::string, std::string>{{"step", "3"}}));
}

TEST(Checksum, EverySingleByteCorruptionOfTensorDataIsDetected) {
  // Every byte of every tensor of a model file, each changed once to another random value.
  ModelConfig c;
  c.n_layer = 1, c.n_head = 2, c.n_embd = 16, c.block_size = 8, c.vocab_size = 11;
  GPT model(c);
  NamedTensors tensors;
  for (const auto& item : model->named_parameters()) tensors.emplace_back(item.key(), item.value());
  const std::string clean = encode_safetensors(tensors, {{"step", "1"}});
  std::mt19937 rng(17);
  std::uniform_int_distribution<int> nonzero(1, 255);
  int64_t detected = 0, tried = 0;
  std::string bytes = clean;
  for (uint64_t at = data_offset(clean); at < clean.size(); ++at) {
    bytes[at] = static_cast<char>(static_cast<uint8_t>(clean[at]) ^ nonzero(rng));
    ++tried;
    try {
      decode_safetensors(bytes, "m.safetensors");
    } catch (const IntegrityError& e) {
      ++detected;
    }
    bytes[at] = clean[at];
  }
  EXPECT_GT(tried, 10000);
  EXPECT_EQ(detected, tried) << "of " << tried << " single-byte corruptions";
  std::printf("[corruptions] %lld of %lld single-byte corruptions of tensor data detected\n",
              static_cast<long long>(detected), static_cast<long long>(tried));
}

TEST(Checksum, ACorruptedTensorIsNamedWithItsFile) {
  ChecksummedRun saved;
  const fs::path model = saved.dir / "model.safetensors";
  const std::string bytes = read_file(model);
  flip_one_byte(model, bytes.size() - 1);  // the last byte: the last tensor's
  const std::string error = test::error_of([&] { load_run(saved.dir.path()); });
  EXPECT_NE(error.find("model.safetensors: tensor "), std::string::npos) << error;
  EXPECT_NE(error.find("fails its checksum"), std::string::npos) << error;
  const Safetensors file = decode_safetensors(bytes, "x");
  EXPECT_EQ(file.tensors.size(), static_cast<size_t>(saved.model->named_parameters().size()));
}

TEST(Checksum, EveryFileOfACheckpointIsInStateJsonAndVerified) {
  ChecksummedRun saved;
  const auto state = nlohmann::json::parse(test::read_text(saved.dir / "state.json"));
  EXPECT_EQ(state["format"], 3);
  std::set<std::string> listed;
  for (const auto& [name, checksum] : state["files"].items()) {
    listed.insert(name);
    EXPECT_EQ(checksum, checksum_hex(read_file(saved.dir / name))) << name;
  }
  EXPECT_EQ(listed, (std::set<std::string>{"config.toml", "config.json", "tokenizer.json",
                                           "model.safetensors", "optimizer.safetensors"}));
  EXPECT_EQ(verify_checkpoint(saved.dir.path()), 7);
  // Each file damaged in turn: refused, naming it.
  for (const std::string name : {"config.toml", "config.json", "tokenizer.json", "state.json"}) {
    ChecksummedRun damaged;
    if (name == "state.json") {  // still valid JSON, one value changed: "step": 7 -> 6
      const std::string text = test::read_text(damaged.dir / name);
      flip_one_byte(damaged.dir / name, text.find("\"step\": 7") + 8, 0x01);
    } else {
      flip_one_byte(damaged.dir / name, 3, 0x01);
    }
    const std::string error = test::error_of([&] { load_run(damaged.dir.path()); });
    EXPECT_NE(error.find(name), std::string::npos) << error;
    EXPECT_NE(error.find("fails its checksum"), std::string::npos) << error;
  }
}

TEST(Checksum, ADamagedHeaderIsCaughtByStateJsonEvenWhenEveryTensorIsIntact) {
  ChecksummedRun saved;
  const fs::path model = saved.dir / "model.safetensors";
  std::string bytes = read_file(model);
  // "step":"7" -> "step":"8": valid JSON, every tensor intact, the wrong step.
  const size_t at = bytes.find("\"step\":\"7\"");
  ASSERT_NE(at, std::string::npos);
  bytes[at + 8] = '8';
  test::write_text(model, bytes);
  const std::string error = test::error_of([&] { load_run(saved.dir.path()); });
  EXPECT_NE(error.find("its header is corrupted"), std::string::npos) << error;
}

TEST(Checksum, AnErrorPointsToBestWhenThatCopyIsIntact) {
  ChecksummedRun saved(/*with_best=*/true);
  flip_one_byte(saved.dir / "model.safetensors",
                read_file(saved.dir / "model.safetensors").size() - 5);
  const std::string error = test::error_of([&] { load_run(saved.dir.path()); });
  EXPECT_NE(error.find((saved.dir / "best").string() + " (step 7) is intact"), std::string::npos)
      << error;
  // With best/ damaged too, no such advice.
  flip_one_byte(saved.dir / "best/config.json", 2);
  const std::string both = test::error_of([&] { load_run(saved.dir.path()); });
  EXPECT_EQ(both.find("is intact"), std::string::npos) << both;
}

TEST(Checksum, ATruncatedStateJsonPointsToBestToo) {
  ChecksummedRun saved(/*with_best=*/true);
  const std::string state = read_file(saved.dir / "state.json");
  test::write_text(saved.dir / "state.json", state.substr(0, state.size() / 2));
  const std::string error = test::error_of([&] { load_run(saved.dir.path()); });
  EXPECT_NE(error.find("state.json is not valid JSON"), std::string::npos) << error;
  EXPECT_NE(error.find((saved.dir / "best").string() + " (step 7) is intact"), std::string::npos)
      << error;
}

TEST(Checksum, AStateJsonWithChecksumsAndADamagedChecksumKeyIsRefused) {
  // One flipped byte in the key's name ("checksum" -> "checksun") must not make the file
  // look like a run from before checksums, whose files load unverified.
  ChecksummedRun saved;
  const std::string text = test::read_text(saved.dir / "state.json");
  const size_t at = text.find("\"checksum\"");
  ASSERT_NE(at, std::string::npos);
  flip_one_byte(saved.dir / "state.json", at + 8, 'm' ^ 'n');
  const std::string error = test::error_of([&] { load_run(saved.dir.path()); });
  EXPECT_NE(error.find("state.json has no \"checksum\""), std::string::npos) << error;
  EXPECT_NE(error.find("format 3"), std::string::npos) << error;
}

TEST(Checksum, StateJsonHashesPythonsCanonicalFormAndFormat2ItsOwn) {
  // A float32 loss widened to a double can sit halfway between two shortest decimal
  // strings: Python's json.dumps writes 3.6619033813476562, nlohmann's dump() ...563. The
  // checksum is over Python's form (a Python reader recomputes it); a state.json of format
  // 2 was hashed over nlohmann's, and still verifies.
  constexpr double kTie = 3.66190338134765625;
  const std::string python = "3.6619033813476562";
  ASSERT_EQ(python_float_repr(kTie), python);
  ASSERT_NE(nlohmann::json(kTie).dump(), python) << "nlohmann now prints ties as Python does";
  for (const int format : {3, 2}) {
    ChecksummedRun saved;
    auto state = nlohmann::json::parse(test::read_text(saved.dir / "state.json"));
    state["best_val_loss"] = kTie;
    state["format"] = format;
    state.erase("checksum");
    const std::string hashed = format == 3 ? canonical_json(state) : state.dump();
    if (format == 3) {
      EXPECT_NE(hashed.find(":" + python + ","), std::string::npos) << hashed;
    }
    state["checksum"] = checksum_hex(hashed);
    test::write_text(saved.dir / "state.json", state.dump(2));
    EXPECT_EQ(verify_checkpoint(saved.dir.path()), 7) << "format " << format;
    // The other form's checksum is refused.
    state["checksum"] = checksum_hex(format == 3 ? state.dump() : canonical_json(state));
    test::write_text(saved.dir / "state.json", state.dump(2));
    EXPECT_NE(
        test::error_of([&] { verify_checkpoint(saved.dir.path()); }).find("fails its checksum"),
        std::string::npos)
        << "format " << format;
  }
}

TEST(Checksum, RunsFromBeforeChecksumsStillLoad) {
  ChecksummedRun saved;
  auto state = nlohmann::json::parse(test::read_text(saved.dir / "state.json"));
  state.erase("files");
  state.erase("checksum");
  state["format"] = 1;
  test::write_text(saved.dir / "state.json", state.dump(2));
  // And tensors without checksums: the file as tinylm 0.1 wrote it.
  NamedTensors tensors;
  for (const auto& item : saved.model->named_parameters()) {
    tensors.emplace_back(item.key(), item.value());
  }
  std::string old = encode_safetensors(tensors, {{"step", "7"}});
  auto header = nlohmann::json::parse(old.substr(8, data_offset(old) - 8));
  for (auto it = header["__metadata__"].begin(); it != header["__metadata__"].end();) {
    it = it.key().rfind("xxh3_64:", 0) == 0 ? header["__metadata__"].erase(it) : std::next(it);
  }
  std::string json = header.dump();
  json.append((8 - json.size() % 8) % 8, ' ');
  std::string rebuilt(8, '\0');
  for (int i = 0; i < 8; ++i) rebuilt[i] = static_cast<char>((json.size() >> (8 * i)) & 0xFF);
  rebuilt += json + old.substr(data_offset(old));
  test::write_text(saved.dir / "model.safetensors", rebuilt);
  EXPECT_FALSE(decode_safetensors(rebuilt, "x").checksummed);
  LoadedRun run = load_run(saved.dir.path());
  EXPECT_TRUE(torch::equal(run.model->named_parameters()["transformer.wte.weight"],
                           saved.model->named_parameters()["transformer.wte.weight"]));
  EXPECT_EQ(load_training_state(saved.dir.path()).step, 7);
  EXPECT_NE(test::error_of([&] { verify_checkpoint(saved.dir.path()); }).find("no checksums"),
            std::string::npos);
}

TEST(Checksum, AChecksumWithoutItsTensorOrATensorWithoutItsChecksumIsADamagedHeader) {
  const NamedTensors tensors = {{"a", torch::ones({3})}, {"b", torch::zeros({2})}};
  std::string bytes = encode_safetensors(tensors);
  const size_t at = bytes.find("xxh3_64:b");
  ASSERT_NE(at, std::string::npos);
  bytes[at + 8] = 'c';  // the checksum of "b" now claims a tensor "c"
  EXPECT_NE(test::error_of([&] { decode_safetensors(bytes, "f"); }).find("does not hold"),
            std::string::npos);
}

}  // namespace
}  // namespace tinylm
