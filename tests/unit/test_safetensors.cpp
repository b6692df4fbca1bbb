// The safetensors format: exact round trips, the header nanoGPT and Python read, and
// damaged files caught before use.

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <nlohmann/json.hpp>

#include "test_util.h"
#include "train/run/safetensors.h"

namespace tinylm {
namespace {

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
  const torch::Tensor a = torch::randn({3, 5}), b = torch::arange(7, torch::kInt64),
                      s = torch::tensor(42L);
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
  EXPECT_NE(
      decode_error(with_header(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}})", 4))
          .find("need 8"),
      std::string::npos);
  EXPECT_NE(decode_error(with_header(R"({"w":{"dtype":"Q4","shape":[1],"data_offsets":[0,4]}})", 4))
                .find("unsupported dtype"),
            std::string::npos);
  EXPECT_NE(decode_error(with_header(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                                     R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                                     12))
                .find("overlap"),
            std::string::npos);
  EXPECT_NE(
      decode_error(with_header(R"({"w":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})", 4))
          .find("negative"),
      std::string::npos);
}

}  // namespace
}  // namespace tinylm
