#include "common.hpp"

#include <unistd.h>

#include <fstream>
#include <iostream>
#include <limits>

#include "looptrace/sinks/output.hpp"
#include "looptrace/support/error.hpp"
#include "progress.hpp"

namespace looptrace::cli {

namespace {

std::vector<std::string> split_list(const std::string& text) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start <= text.size() && !text.empty()) {
    std::size_t comma = text.find(',', start);
    std::string item = text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (!item.empty()) out.push_back(item);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

// The text as the user wrote it, quoted unless it reads as a number.
std::string shown(const std::string& text) {
  const bool numeric = !text.empty() && text.find_first_not_of("+-0123456789.eE") == std::string::npos;
  return numeric ? text : "'" + text + "'";
}

}  // namespace

// CLI11 saturates an out-of-range integer to the type's limit and prints ranges as
// 309-digit doubles; this says what the option takes instead ("takes a whole number
// >= 0, not -1"; main() puts the option's name first). A minus sign is refused for
// unsigned options (CLI11 wraps "-1" for an unsigned seed).
CLI::Validator whole_number(std::int64_t min, std::int64_t max) {
  std::string range = max == std::numeric_limits<std::int64_t>::max()
                          ? ">= " + std::to_string(min)
                          : "from " + std::to_string(min) + " to " + std::to_string(max);
  return CLI::Validator(
      [min, max, range](std::string& text) -> std::string {
        const std::string takes = "takes a whole number " + range + ", not " + shown(text);
        try {
          std::size_t used = 0;
          const long long v = std::stoll(text, &used, 10);
          if (used != text.size() || used == 0) return takes;
          if (v < min || v > max) return takes;
          return {};
        } catch (const std::out_of_range&) {
          return takes + " (too large)";
        } catch (const std::exception&) {
          return takes;
        }
      },
      "INT");
}

CLI::Validator whole_number_u64() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        const std::string takes = "takes a whole number from 0 to 18446744073709551615, not " + shown(text);
        try {
          std::size_t used = 0;
          if (text.find('-') != std::string::npos) return takes;
          std::stoull(text, &used, 10);
          return used == text.size() && used > 0 ? std::string() : takes;
        } catch (const std::exception&) {
          return takes;
        }
      },
      "UINT");
}

void add_progress_flag(CLI::App& app) {
  app.add_flag_callback("--progress", [] { force_progress(true); },
                        "Draw the progress line on stderr even when it is no terminal (a line a second)");
}

void CommonArgs::add_to(CLI::App& app, unsigned offer) {
  app.add_option("files", files, "Spec files (YAML, may be Jinja templates), merged by top-level key")
      ->required()
      ->check(CLI::ExistingFile);
  app.add_option("-D,--define", defines, "Set a template variable: -D KEY=VALUE (repeatable)");
  if (offer & offer_tensors) app.add_option("--tensors", tensors, "Trace only these tensors (comma-separated)");
  app.add_option("--einsums", einsums, "Trace only these Einsums (comma-separated)");
  if (offer & offer_max_tile_points)
    app.add_option("--max-tile-points", options.max_tile_points,
                   "Refuse a timestep whose tile holds more points than this")
        ->capture_default_str()
        ->check(whole_number(1));
  app.add_option("--max-timesteps", options.max_timesteps,
                 "Only the first N timesteps (the exact prefix)")
      ->check(whole_number(0));
  app.add_option("--from", options.from, "Start of the timestep window [from, to)")
      ->check(whole_number(0));
  app.add_option("--to", options.to, "End of the timestep window [from, to)")
      ->check(whole_number(0));
  app.add_option("--sample-timesteps", options.sample_timesteps,
                 "K distinct timesteps of the window, chosen uniformly, in time order")
      ->check(whole_number(0));
  app.add_option("--seed", options.seed, "Seed for --sample-timesteps")
      ->capture_default_str()
      ->check(whole_number_u64());
  app.add_option("--shard", shard, "Shard I/N: the I-th of N nearly equal contiguous timestep ranges");
}

TraceOptions CommonArgs::resolved() const {
  TraceOptions o = options;
  o.tensors = split_list(tensors);
  o.einsums = split_list(einsums);
  if (!shard.empty()) {
    std::size_t slash = shard.find('/');
    try {
      if (slash == std::string::npos) throw std::invalid_argument("no slash");
      std::size_t used = 0;
      std::int64_t i = std::stoll(shard.substr(0, slash), &used);
      if (used != slash) throw std::invalid_argument("index");
      std::string rest = shard.substr(slash + 1);
      std::int64_t n = std::stoll(rest, &used);
      if (used != rest.size()) throw std::invalid_argument("count");
      o.shard = {i, n};
    } catch (const std::exception&) {
      throw SpecError("--shard takes I/N with whole numbers, e.g. 0/4, not '" + shard + "'");
    }
  }
  return o;
}

void print_warnings(const Spec& spec) {
  for (const auto& w : spec.warnings) std::cerr << "looptrace: " << printable(w.str()) << "\n";
}

Schedule CommonArgs::load() {
  Defines vars;
  for (const auto& d : defines) {
    auto [key, value] = parse_define(d);
    vars[key] = std::move(value);  // a later -D of the same name wins
  }
  const Spec spec = load_spec(files, vars);
  print_warnings(spec);
  Schedule schedule = compile_schedule(spec);
  // Before any stage allocates a timestep's spatial instances.
  check_spatial_instances(schedule, options.max_tile_points, split_list(einsums));
  return schedule;
}

void write_output(const std::string& path, const std::string& text) {
  if (path == "-") {
    OutputBuffer out(STDOUT_FILENO);  // a failed write is an error (exit 1), EPIPE is not
    out.write(text);
    out.flush();
    return;
  }
  std::ofstream out(path, std::ios::binary);
  if (!out) throw SpecError("cannot open '" + path + "' for writing");  // a bad -o: exit 2
  out << text;
  out.close();
  if (!out) throw WriteError("cannot write '" + path + "'");
}

}  // namespace looptrace::cli
