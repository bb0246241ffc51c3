// A main() for the fuzz targets where libFuzzer is not at hand (g++): replays every
// input file named on the command line, or found in a folder named there, through
// LLVMFuzzerTestOneInput once, as `TARGET -runs=0 DIR...` does under libFuzzer.
// Options (arguments starting with '-') are ignored. Under ASan and UBSan a bad input
// ends the process with the sanitizer's report; the count replayed is printed last.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);

namespace {

std::vector<std::filesystem::path> inputs(const std::filesystem::path& where) {
  std::vector<std::filesystem::path> out;
  if (std::filesystem::is_directory(where)) {
    for (const auto& entry : std::filesystem::recursive_directory_iterator(where))
      if (entry.is_regular_file()) out.push_back(entry.path());
  } else {
    out.push_back(where);
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  std::size_t replayed = 0;
  for (int i = 1; i < argc; ++i) {
    if (argv[i][0] == '-') continue;
    for (const auto& path : inputs(argv[i])) {
      std::ifstream in(path, std::ios::binary);
      if (!in) {
        std::fprintf(stderr, "replay: cannot read %s\n", path.c_str());
        return 2;
      }
      const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      LLVMFuzzerTestOneInput(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size());
      ++replayed;
    }
  }
  std::printf("replay: %zu inputs ran clean\n", replayed);
  return 0;
}
