// libFuzzer target: the YAML + Jinja spec loader and the schedule compiler.
// Any input may be rejected with SpecError; nothing else may escape, crash or hang.
// The first line of the input, when it starts with "#!", is split off as a second
// file, so merging by top-level key is exercised too.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "looptrace/error.hpp"
#include "looptrace/schedule.hpp"
#include "looptrace/spec/load.hpp"
#include "looptrace/stream.hpp"

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
  const looptrace::JinjaVariables vars = {
      {"N_EINSUMS", std::int64_t{2}}, {"M", std::int64_t{8}}, {"KN", std::int64_t{4}},
      {"N", std::int64_t{6}}, {"NAME", std::string("x")}};
  try {
    const looptrace::Spec spec = looptrace::load_spec_text(sources, vars);
    const looptrace::Schedule schedule = looptrace::compile_schedule(spec);
    if (schedule.n_timesteps < 0) __builtin_trap();  // a wrapped count
    // A few timesteps from the start and from the middle (which seeks): bounded work,
    // since a schedule may run 2^62 timesteps with nothing to touch in most.
    for (int middle = 0; middle < 2; ++middle) {
      looptrace::TraceOptions options;
      options.max_tile_points = 4096;
      options.from = middle ? schedule.n_timesteps / 2 : 0;
      options.to = *options.from + 16;
      looptrace::AccessStream stream(schedule, options);
      std::int64_t last = -1;
      for (int b = 0; b < 4; ++b) {
        auto batch = stream.next_batch(1024);
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
