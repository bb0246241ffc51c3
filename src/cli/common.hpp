// What every subcommand shares: the spec files, -D, and the trace options.
#pragma once

#include <CLI/CLI.hpp>

#include <string>
#include <vector>

#include "looptrace/options.hpp"
#include "looptrace/compile/schedule.hpp"
#include "looptrace/frontend/load.hpp"

namespace looptrace::cli {

// The option groups a subcommand offers: only those that change what it does.
enum Offer : unsigned {
  offer_tensors = 1,          // --tensors
  offer_max_tile_points = 2,  // --max-tile-points (only where tiles are projected)
  offer_all = ~0u,
};

struct CommonArgs {
  std::vector<std::string> files;
  std::vector<std::string> defines;
  std::string tensors, einsums, shard;
  TraceOptions options;

  // The files, -D, --einsums and the timestep selection, and what `offer` adds.
  void add_to(CLI::App& app, unsigned offer = offer_all);
  // Loads and compiles the spec and resolves the options; throws SpecError.
  Schedule load();
  TraceOptions resolved() const;
};

// Validators for numeric options: a whole number in [min, max] (unsigned: any
// uint64), refused with "takes a whole number >= 1, not 0".
CLI::Validator whole_number(std::int64_t min, std::int64_t max = INT64_MAX);
CLI::Validator whole_number_u64();

// Writes a whole document to `path` ('-': stdout). A file that cannot be opened is a
// SpecError (exit 2), a failed write a WriteError (exit 1), a closed stdout neither.
void write_output(const std::string& path, const std::string& text);

// --progress, for the subcommands that draw a progress line (trace, plot, summary).
void add_progress_flag(CLI::App& app);

// Prints a spec's warnings (a top-level key given twice, a -D nothing used) to stderr.
void print_warnings(const Spec& spec);

void add_summary_command(CLI::App& app);
void add_trace_command(CLI::App& app);
void add_plot_command(CLI::App& app);
void add_iterations_command(CLI::App& app);
void add_movement_command(CLI::App& app);
void add_transfers_command(CLI::App& app);
void add_describe_command(CLI::App& app);
void add_merge_command(CLI::App& app);
void add_cache_command(CLI::App& app);
void add_timeline_command(CLI::App& app);

}  // namespace looptrace::cli
