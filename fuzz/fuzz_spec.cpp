// libFuzzer target: the YAML + Jinja spec loader (AccelForge's dialect, includes too),
// describe_spec and the schedule compiler. Any input may be rejected with SpecError;
// nothing else may escape, crash or hang. A line "---8<---" splits the input into two
// files, so merging by top-level key is exercised too. Includes may read only a
// scratch folder of small files that this target writes once (see fuzz/make_corpus.py
// for seeds that use them).
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>

#include "looptrace/sinks/describe.hpp"
#include "looptrace/support/error.hpp"
#include "looptrace/compile/schedule.hpp"
#include "looptrace/frontend/load.hpp"
#include "looptrace/stream.hpp"

namespace {

// The files that include(), include_all(), include_text() and find_path() may find.
void write_include_folder(const std::filesystem::path& root) {
  const std::pair<const char*, const char*> files[] = {
      {"lib/part.yaml",
       "workload:\n  rank_sizes: {M: {{ M | default(4) }}, K: 3}\n  einsums:\n  - \"Y[m] = X[m, k]\"\n"},
      {"lib/frag.yaml", "renames: {}\n"},
      {"lib/sizes.yaml", "rank_sizes:\n  N: {{ N }}\n  XT: ceil(8 / N)\n"},
      {"parts/p1.yaml", "einsums:\n- \"B[m] = A[m]\"\n"},
      {"parts/p2.yaml", "einsums:\n- \"C[m] = B[m] + A[m]\"\n"},
      {"mapping.yaml", "mapping:\n  nodes:\n  - !Temporal {rank_variable: m, tile_shape: 2}\n  - !Compute {einsum: Y}\n"},
  };
  for (const auto& [name, text] : files) {
    std::filesystem::create_directories((root / name).parent_path());
    std::ofstream(root / name) << text;
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  const auto root = std::filesystem::temp_directory_path() / ("looptrace-fuzz-includes-" + std::to_string(::getpid()));
  write_include_folder(root);
  std::filesystem::current_path(root);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  std::vector<std::pair<std::string, std::string>> sources;
  // "\n---8<---\n" splits the input into two files (a workload and a mapping).
  constexpr std::string_view kCut = "\n---8<---\n";
  if (std::size_t cut = input.find(kCut); cut != std::string_view::npos) {
    sources.emplace_back("a.yaml", std::string(input.substr(0, cut)));
    sources.emplace_back("b.yaml", std::string(input.substr(cut + kCut.size())));
  } else {
    sources.emplace_back("a.yaml", std::string(input));
  }
  const looptrace::Defines vars = {
      {"N_EINSUMS", std::int64_t{2}}, {"M", std::int64_t{8}}, {"KN", std::int64_t{4}},
      {"N", std::int64_t{6}}, {"NAME", std::string("x")}};
  try {
    looptrace::LoadOptions load_options;
    load_options.require_mapping = false;
    load_options.include_root = ".";
    const looptrace::Spec spec = looptrace::load_spec_text(sources, vars, load_options);
    const looptrace::SpecDescription description = looptrace::describe_spec(spec);
    if (description.einsums.size() != spec.workload.einsums.size()) __builtin_trap();
    if (!spec.has_mapping) return 0;
    const looptrace::Schedule schedule = looptrace::compile_schedule(spec);
    // describe's own durations agree with the engine's count.
    if (!description.mapping || description.mapping->duration != schedule.n_timesteps) __builtin_trap();
    if (schedule.n_timesteps < 0) __builtin_trap();  // a wrapped count
    // A few timesteps from the start and from the middle (which seeks): bounded work,
    // since a schedule may run 2^62 timesteps with nothing to touch in most.
    for (int middle = 0; middle < 2; ++middle) {
      looptrace::TraceOptions options;
      options.max_tile_points = 4096;
      options.from = middle ? schedule.n_timesteps / 2 : 0;
      options.to = *options.from + 16;
      looptrace::AccessStream stream(schedule, options, 1024);
      std::int64_t last = -1;
      for (int b = 0; b < 4; ++b) {
        auto batch = stream.next_batch();
        if (batch.empty()) break;
        for (const auto& r : batch) {
          if (r.timestep < last || r.timestep >= schedule.n_timesteps) __builtin_trap();
          last = r.timestep;
        }
      }
    }
  } catch (const looptrace::SpecError& e) {
    if (std::string_view(e.what()).empty()) __builtin_trap();
  }
  return 0;
}
