// TOML configs: strict keys with suggestions, types, ranges, overrides, and a faithful round
// trip.

#include <gtest/gtest.h>

#include "test_util.h"
#include "train/run/run_config.h"

namespace tinylm {
namespace {

using test::TempDir;

// Loads `toml` (with a [data] path unless it has its own [data]) and returns the error.
std::string load_error(const std::string& toml) {
  TempDir dir;
  const bool has_data = toml.find("[data]") != std::string::npos;
  test::write_text(dir / "c.toml", toml + (has_data ? "" : "\n[data]\npath = \"corpus.txt\"\n"));
  try {
    load_run_config(dir / "c.toml");
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

TEST(RunConfig, ShippedConfigsLoad) {
  const RunConfig c = load_run_config(test::source_dir() / "configs/shakespeare_char_nanogpt.toml");
  EXPECT_EQ(c.model.n_layer, 4);
  EXPECT_EQ(c.model.n_embd, 128);
  EXPECT_EQ(c.model.pos_encoding, PosEncoding::kLearned);
  EXPECT_EQ(c.train.batch_size, 12);
  EXPECT_EQ(c.train.max_iters, 2000);
  EXPECT_DOUBLE_EQ(c.train.beta2, 0.99);
  EXPECT_DOUBLE_EQ(c.train.min_lr, 1e-4);
  // The fast recipe: a smaller model with the modern block, and Muon.
  const RunConfig fast = load_run_config(test::source_dir() / "configs/shakespeare_char.toml");
  EXPECT_EQ(fast.model.n_layer, 3);
  EXPECT_EQ(fast.model.n_embd, 96);
  EXPECT_EQ(fast.train.optimizer, OptimizerKind::kMuon);
  EXPECT_EQ(fast.model.pos_encoding, PosEncoding::kRope);
  EXPECT_EQ(fast.model.norm, NormKind::kRmsNorm);
  EXPECT_EQ(fast.model.mlp, MlpKind::kSwiglu);
  // nanoGPT's GPU recipe, as its config/train_shakespeare_char.py has it.
  const RunConfig gpu = load_run_config(test::source_dir() / "configs/shakespeare_char_gpu.toml");
  EXPECT_EQ(gpu.model.n_layer, 6);
  EXPECT_EQ(gpu.model.n_head, 6);
  EXPECT_EQ(gpu.model.n_embd, 384);
  EXPECT_EQ(gpu.model.block_size, 256);
  EXPECT_DOUBLE_EQ(gpu.model.dropout, 0.2);
  EXPECT_EQ(gpu.train.batch_size, 64);
  EXPECT_EQ(gpu.train.max_iters, 5000);
  EXPECT_DOUBLE_EQ(gpu.train.learning_rate, 1e-3);
  EXPECT_EQ(gpu.train.device, "cuda");
  EXPECT_EQ(gpu.train.dtype, Dtype::kBfloat16);
  for (const char* name :
       {"tiny", "shakespeare_bpe", "tinystories", "induction", "induction_four_heads"}) {
    EXPECT_NO_THROW(load_run_config(test::source_dir() / "configs" / (std::string(name) + ".toml")))
        << name;
  }
}

TEST(RunConfig, CorpusPathIsRelativeToTheConfigFile) {
  const RunConfig c = load_run_config(test::source_dir() / "configs/shakespeare_char.toml");
  EXPECT_EQ(std::filesystem::path(c.data.path), test::shakespeare().lexically_normal());
  RunConfig overridden = c;
  apply_overrides(overridden, {"data.path=corpus/here.txt"});  // the command line: as given
  EXPECT_EQ(overridden.data.path, "corpus/here.txt");
}

TEST(RunConfig, DeviceAndDistTimeoutAreChecked) {
  EXPECT_NE(load_error("[train]\ndevice = \"gpu\"\n")
                .find("train.device must be cpu, cuda or cuda:N (got \"gpu\")"),
            std::string::npos);
  EXPECT_NE(load_error("[train]\ndevice = \"cuda:x\"\n").find("train.device must be"),
            std::string::npos);
  EXPECT_EQ(load_error("[train]\ndevice = \"cuda:1\"\n"), "");
  EXPECT_NE(load_error("[train]\ndist_timeout_s = 0.0\n").find("train.dist_timeout_s must be > 0"),
            std::string::npos);
}

TEST(RunConfig, UnknownKeyNamesTheClosest) {
  const std::string e = load_error("[model]\nn_layers = 4\n");
  EXPECT_NE(e.find("unknown config key model.n_layers"), std::string::npos) << e;
  EXPECT_NE(e.find("did you mean model.n_layer?"), std::string::npos) << e;
  EXPECT_NE(load_error("[train]\nlearning_rat = 1e-3\n").find("train.learning_rate"),
            std::string::npos);
  EXPECT_NE(load_error("[modle]\nn_layer = 4\n").find("unknown config section [modle]"),
            std::string::npos);
}

TEST(RunConfig, WrongTypeNamesKeyAndLine) {
  const std::string e = load_error("[model]\nn_layer = 4\nn_head = \"four\"\n");
  EXPECT_NE(e.find("model.n_head"), std::string::npos) << e;
  EXPECT_NE(e.find(":3)"), std::string::npos) << e;
  EXPECT_NE(e.find("expected an integer, got a string"), std::string::npos) << e;
  EXPECT_NE(load_error("[train]\nlearning_rate = true\n").find("expected a number"),
            std::string::npos);
  EXPECT_NE(load_error("[model\n").find("c.toml:1"), std::string::npos);  // a TOML syntax error
}

TEST(RunConfig, OutOfRangeValuesAreErrors) {
  EXPECT_NE(load_error("[model]\nn_embd = 130\n").find("must be divisible by model.n_head"),
            std::string::npos);
  EXPECT_NE(load_error("[train]\nlearning_rate = -0.1\n").find("train.learning_rate must be > 0"),
            std::string::npos);
  EXPECT_NE(load_error("[data]\npath = \"c.txt\"\ntrain_fraction = 1.5\n")
                .find("data.train_fraction must be in (0, 1)"),
            std::string::npos);
  EXPECT_NE(load_error("[model]\npos_encoding = \"t5\"\n")
                .find("learned, sinusoidal, rope, none, relative, alibi"),
            std::string::npos);
  EXPECT_NE(load_error("[sample]\ntop_p = 0\n").find("sample.top_p"), std::string::npos);
  EXPECT_NE(load_error("[data]\nsource = \"induction\"\ninduction_symbols = 65\n")
                .find("data.induction_symbols must be in [2, 64] (got 65)"),
            std::string::npos);
  EXPECT_NE(load_error("[data]\nsource = \"induction\"\ninduction_repeat_min = 9\n"
                       "induction_repeat_max = 8\n")
                .find("data.induction_repeat_max (8) must be >= data.induction_repeat_min (9)"),
            std::string::npos);
}

TEST(RunConfig, OverridesUseTheSameNames) {
  RunConfig c = load_run_config(test::source_dir() / "configs/tiny.toml");
  apply_overrides(c, {"train.max_iters=7", "train.learning_rate=2e-3", "model.pos_encoding=none",
                      "model.bias=false", "sample.prompt=ROMEO:"});
  EXPECT_EQ(c.train.max_iters, 7);
  EXPECT_DOUBLE_EQ(c.train.learning_rate, 2e-3);
  EXPECT_EQ(c.model.pos_encoding, PosEncoding::kNone);
  EXPECT_FALSE(c.model.bias);
  EXPECT_EQ(c.sample.prompt, "ROMEO:");
  EXPECT_THROW(apply_overrides(c, {"train.max_iter=7"}), std::invalid_argument);
  EXPECT_THROW(apply_overrides(c, {"train.max_iters=seven"}), std::invalid_argument);
  EXPECT_THROW(apply_overrides(c, {"train.max_iters"}), std::invalid_argument);
}

// A string that is not UTF-8 is a usage error naming the key, before any check of the key
// quotes it (fuzz_config_overrides found one that crashed the device check's message).
TEST(RunConfig, AStringOverrideMustBeUtf8) {
  RunConfig c = load_run_config(test::source_dir() / "configs/tiny.toml");
  try {
    apply_overrides(c, {"train.device=t\xFF\xFF"});
    FAIL() << "accepted a value that is not UTF-8";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("train.device must be UTF-8 text (byte 1 is not)"),
              std::string::npos)
        << e.what();
  }
  RunConfig fresh = load_run_config(test::source_dir() / "configs/tiny.toml");
  apply_overrides(fresh, {"sample.prompt=caf\xC3\xA9"});  // UTF-8 is taken as given
  EXPECT_EQ(fresh.sample.prompt, "caf\xC3\xA9");
}

TEST(RunConfig, ResolvedTomlReadsBackTheSame) {
  RunConfig c = load_run_config(test::source_dir() / "configs/shakespeare_char.toml");
  c.sample.prompt = "\nA \"quoted\" line\\\t\xC3\xA9";
  c.train.learning_rate = 0.1 + 0.2;  // not exactly representable in few digits
  TempDir dir;
  test::write_text(dir / "r.toml", to_toml(c));
  const RunConfig back = load_run_config(dir / "r.toml");
  EXPECT_EQ(to_toml(back), to_toml(c));
  EXPECT_EQ(back.sample.prompt, c.sample.prompt);
  EXPECT_EQ(back.train.learning_rate, c.train.learning_rate);
  EXPECT_NE(to_toml(c).find("train_fraction = 0.9\n"), std::string::npos);
}

}  // namespace
}  // namespace tinylm
