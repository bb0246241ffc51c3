#include "common.hpp"

#include <iostream>

#include "looptrace/error.hpp"

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

// CLI11 saturates an out-of-range integer to the type's limit; refuse it instead.
// `is_signed` false also refuses a minus sign (CLI11 wraps "-1" for an unsigned seed).
CLI::Validator whole_number(bool is_signed) {
  return CLI::Validator(
      [is_signed](std::string& text) -> std::string {
        const std::string limit = is_signed ? "9223372036854775807" : "18446744073709551615";
        try {
          std::size_t used = 0;
          if (is_signed) std::stoll(text, &used, 10);
          else if (text.find('-') == std::string::npos) std::stoull(text, &used, 10);
          if (used == text.size() && used > 0) return {};
        } catch (const std::out_of_range&) {
          return "'" + text + "' is larger than " + limit;
        } catch (const std::exception&) {
        }
        return "'" + text + "' is not a whole number" + (is_signed ? "" : " from 0 to " + limit);
      },
      is_signed ? "INT" : "UINT");
}

}  // namespace

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
        ->check(whole_number(true))
        ->check(CLI::PositiveNumber);
  app.add_option("--max-timesteps", options.max_timesteps,
                 "Only the first N timesteps (the exact prefix)")
      ->check(whole_number(true))
      ->check(CLI::NonNegativeNumber);
  app.add_option("--from", options.from, "Start of the timestep window [from, to)")
      ->check(whole_number(true))
      ->check(CLI::NonNegativeNumber);
  app.add_option("--to", options.to, "End of the timestep window [from, to)")
      ->check(whole_number(true))
      ->check(CLI::NonNegativeNumber);
  app.add_option("--sample-timesteps", options.sample_timesteps,
                 "K distinct timesteps of the window, chosen uniformly, in time order")
      ->check(whole_number(true))
      ->check(CLI::NonNegativeNumber);
  app.add_option("--seed", options.seed, "Seed for --sample-timesteps")
      ->capture_default_str()
      ->check(whole_number(false));
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
  for (const auto& w : spec.warnings) std::cerr << "looptrace: " << w.str() << "\n";
}

Schedule CommonArgs::load() {
  JinjaVariables vars;
  for (const auto& d : defines) {
    auto [key, value] = parse_define(d);
    vars[key] = std::move(value);  // a later -D of the same name wins
  }
  const Spec spec = load_spec(files, vars);
  print_warnings(spec);
  return compile_schedule(spec);
}

}  // namespace looptrace::cli
