#include "data/io/files.h"

#include <fstream>
#include <sstream>
#include <stdexcept>

#include "data/io/fingerprint.h"

namespace tinylm {
namespace fs = std::filesystem;

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) throw std::runtime_error("cannot open " + path.string());
  // One read into a string of the file's size: a stringstream would grow and copy a
  // checkpoint's gigabyte several times over.
  const std::streamoff size = in.tellg();
  if (size < 0) {  // not seekable (a pipe): read it as a stream
    in.clear();
    std::ostringstream buffer;
    buffer << in.rdbuf();
    if (in.bad()) throw std::runtime_error("cannot read " + path.string());
    return buffer.str();
  }
  std::string bytes(static_cast<size_t>(size), '\0');
  in.seekg(0);
  in.read(bytes.data(), size);
  if (in.gcount() != size) {
    throw std::runtime_error("cannot read " + path.string() + ": it changed size while read");
  }
  return bytes;
}

uint64_t fingerprint_files(const std::vector<fs::path>& files) {
  Fingerprint fingerprint;
  std::string buffer(size_t{1} << 20, '\0');
  for (const fs::path& file : files) {
    fingerprint.add_field(file.filename().string());
    std::ifstream in(file, std::ios::binary);
    if (!in) throw std::runtime_error("cannot open " + file.string());
    while (in) {
      in.read(buffer.data(), static_cast<std::streamsize>(buffer.size()));
      fingerprint.add(std::string_view(buffer.data(), static_cast<size_t>(in.gcount())));
    }
    if (in.bad()) throw std::runtime_error("cannot read " + file.string());
    fingerprint.add("\n--\n");
  }
  return fingerprint.value();
}

}  // namespace tinylm
