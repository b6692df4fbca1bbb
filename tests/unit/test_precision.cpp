// train.dtype = "auto": bfloat16 exactly where the hardware has bfloat16 units, with the
// reason; an explicit dtype is kept as given. Which OpenBLAS kernels run, and why.

#include <gtest/gtest.h>

#include <strings.h>

#include <cstdlib>
#include <fstream>

#include "train/blas_core.h"
#include "train/precision.h"

namespace tinylm {
namespace {

const torch::Device kCpu(torch::kCPU);

TEST(Precision, AutoTakesBfloat16WhereTheCpuHasBfloat16Units) {
  for (const char* unit : {"amx_bf16", "avx512_bf16"}) {
    const PrecisionChoice c = choose_precision(Dtype::kAuto, kCpu, {"avx2", "avx512f", unit});
    EXPECT_EQ(c.dtype, Dtype::kBfloat16) << unit;
    EXPECT_NE(c.reason.find(unit), std::string::npos) << c.reason;
  }
}

TEST(Precision, AutoKeepsFloat32WhereBfloat16WouldBeEmulated) {
  const PrecisionChoice avx2 = choose_precision(Dtype::kAuto, kCpu, {"sse2", "avx2", "fma"});
  EXPECT_EQ(avx2.dtype, Dtype::kFloat32);
  EXPECT_NE(avx2.reason.find("neither amx_bf16 nor avx512_bf16"), std::string::npos);
  const PrecisionChoice unknown = choose_precision(Dtype::kAuto, kCpu, {});
  EXPECT_EQ(unknown.dtype, Dtype::kFloat32);
  EXPECT_NE(unknown.reason.find("could not be read"), std::string::npos);
}

TEST(Precision, AnExplicitDtypeIsKept) {
  EXPECT_EQ(choose_precision(Dtype::kFloat32, kCpu, {"amx_bf16"}).dtype, Dtype::kFloat32);
  EXPECT_EQ(choose_precision(Dtype::kBfloat16, kCpu, {"avx2"}).dtype, Dtype::kBfloat16);
  EXPECT_EQ(choose_precision(Dtype::kAuto, torch::Device(torch::kCUDA, 0), {}).dtype,
            Dtype::kBfloat16);
}

TEST(Precision, NoBfloat16WhereNoBfloat16MatmulCanBeMade) {
  // oneDNN capped below the CPU's bfloat16 units (ONEDNN_MAX_CPU_ISA) makes no bfloat16
  // product, though the CPU's flags have the units: "auto" keeps float32 and says why, and
  // an explicit "bfloat16" is refused by name instead of failing in the first matmul.
  const auto refused = [] { return std::optional<std::string>("no primitive for bfloat16"); };
  const PrecisionChoice c =
      choose_precision(Dtype::kAuto, kCpu, {"avx2", "avx512f", "avx512_bf16"}, refused);
  EXPECT_EQ(c.dtype, Dtype::kFloat32);
  EXPECT_NE(c.reason.find("no primitive for bfloat16"), std::string::npos) << c.reason;
  EXPECT_NE(c.reason.find("ONEDNN_MAX_CPU_ISA"), std::string::npos) << c.reason;
  try {
    choose_precision(Dtype::kBfloat16, kCpu, {"avx512_bf16"}, refused);
    ADD_FAILURE() << "an explicit bfloat16 was taken where no bfloat16 matmul can be made";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("ONEDNN_MAX_CPU_ISA"), std::string::npos) << e.what();
  }
  // Asked only where bfloat16 would be chosen on the CPU: the trial product costs a oneDNN
  // primitive.
  int asked = 0;
  const auto counting = [&] {
    ++asked;
    return std::optional<std::string>();
  };
  choose_precision(Dtype::kFloat32, kCpu, {"avx512_bf16"}, counting);
  choose_precision(Dtype::kAuto, kCpu, {"avx2"}, counting);
  choose_precision(Dtype::kBfloat16, torch::Device(torch::kCUDA, 0), {}, counting);
  EXPECT_EQ(asked, 0);
  EXPECT_EQ(choose_precision(Dtype::kAuto, kCpu, {"amx_bf16"}, counting).dtype, Dtype::kBfloat16);
  EXPECT_EQ(asked, 1);
}

TEST(Precision, ThisProcessMakesABfloat16Matmul) {
  // Every CPU does, with bfloat16 units or through LibTorch's emulation, unless the
  // environment caps oneDNN (tests/cli/test_cli.cpp runs that case).
  if (std::getenv("ONEDNN_MAX_CPU_ISA") || std::getenv("DNNL_MAX_CPU_ISA"))
    GTEST_SKIP() << "oneDNN is capped in this environment";
  EXPECT_EQ(bfloat16_matmul_refusal(), std::nullopt);
}

TEST(Precision, ReadsThisMachinesFlags) {
  std::ifstream in("/proc/cpuinfo");
  std::string text((std::istreambuf_iterator<char>(in)), {});
  if (text.find("\nflags") == std::string::npos && text.rfind("flags", 0) != 0)
    GTEST_SKIP() << "no x86 flags line in /proc/cpuinfo";
  const std::set<std::string> flags = cpu_flags();
  EXPECT_FALSE(flags.empty());
  for (const std::string& f : flags) EXPECT_NE(text.find(" " + f), std::string::npos) << f;
}

TEST(Precision, DescribesTheCpuByNameFamilyAndModel) {
  // "AMD EPYC" alone named a Zen 1 and a Zen 5 alike.
  std::ifstream in("/proc/cpuinfo");
  std::string line, family, model;
  while (std::getline(in, line) && line.rfind("model name", 0) != 0) {
    if (line.rfind("cpu family", 0) == 0) family = line.substr(line.find(':') + 2);
    if (line.rfind("model", 0) == 0) model = line.substr(line.find(':') + 2);
  }
  if (family.empty()) GTEST_SKIP() << "no cpu family in /proc/cpuinfo (not x86)";
  const std::string description = cpu_description();
  EXPECT_NE(description.find(", family " + family + " model " + model + " ("), std::string::npos)
      << description;
}

TEST(Precision, TheProcessCallsTheMallocTheBuildLinked) {
  // Each executable links tcmalloc where the build found it (CMakeLists.txt); a link order
  // that let glibc's malloc come first would lose, silently, the step time it is there for.
  const std::string library = malloc_library();
#ifdef TINYLM_TCMALLOC
  EXPECT_NE(library.find("tcmalloc"), std::string::npos) << library;
#else
  EXPECT_EQ(library.find("tcmalloc"), std::string::npos) << library;
#endif
}

TEST(BlasCore, SaysWhichKernelsRanAndWhatChoseThem) {
  EXPECT_EQ(describe_blas_core("Cooperlake", nullptr), "OpenBLAS Cooperlake kernels");
  EXPECT_EQ(describe_blas_core("Haswell", "Haswell"),
            "OpenBLAS Haswell kernels (OPENBLAS_CORETYPE=Haswell)");
  EXPECT_EQ(describe_blas_core("", nullptr), "not OpenBLAS");
}

TEST(BlasCore, NamesTheKernelsThisProcessRuns) {
  // Debian's OpenBLAS is the BLAS (scripts/install-deps.sh); OPENBLAS_CORETYPE, where set,
  // chose its kernels as it loaded.
  const std::string core = blas_core();
  ASSERT_FALSE(core.empty()) << "the BLAS is not OpenBLAS";
  if (const char* coretype = std::getenv("OPENBLAS_CORETYPE")) {
    EXPECT_EQ(::strcasecmp(core.c_str(), coretype), 0) << core << " against " << coretype;
  }
  EXPECT_EQ(blas_core_description(), describe_blas_core(core, std::getenv("OPENBLAS_CORETYPE")));
}

}  // namespace
}  // namespace tinylm
