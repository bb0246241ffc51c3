// Feed the transfer trace of one memory level to your own memory model: here a DRAM
// with banks and open-row buffers that counts row hits, misses and conflicts and
// estimates how many cycles the requests take.
//
//   build/examples/transfer_model LEVEL SPEC.yaml... [-D KEY=VALUE]... [--banks N]
//       [--row-bytes B] [--line-bytes L] [--cycles-per-timestep C]
//
// The transfer stage hands over, in time order, the requests between LEVEL and its
// children (fills read from LEVEL, drains written to it), each for one line of
// --line-bytes bytes. The model: rows of --row-bytes bytes interleaved over --banks
// banks (row r of the address space is row r / banks of bank r % banks); each bank
// keeps its last row open. A request to the open row is a hit (kCas cycles), to an
// idle bank a miss (kRcd + kCas), to another row a conflict (kRp + kRcd + kCas). A
// request arrives at cycle timestep x C and starts when its bank is free; banks work
// in parallel. The estimate is when the last bank finishes.
#include <algorithm>
#include <charconv>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include "looptrace/frontend/load.hpp"
#include "looptrace/stages/transfers.hpp"

namespace {

// DRAM timings in cycles (DDR4-2400-like): column access, row activation, precharge.
constexpr std::uint64_t kCas = 16, kRcd = 16, kRp = 16;

class OpenRowDram {
 public:
  OpenRowDram(std::uint64_t banks, std::uint64_t row_bytes) : row_bytes_(row_bytes), banks_(banks) {}

  enum class Outcome { hit, miss, conflict };

  Outcome access(std::uint64_t address, std::uint64_t arrival) {
    const std::uint64_t global_row = address / row_bytes_;
    Bank& bank = banks_[global_row % banks_.size()];
    const std::uint64_t row = global_row / banks_.size();
    Outcome outcome = !bank.open ? Outcome::miss : bank.row == row ? Outcome::hit : Outcome::conflict;
    const std::uint64_t latency = outcome == Outcome::hit ? kCas : outcome == Outcome::miss ? kRcd + kCas
                                                                                           : kRp + kRcd + kCas;
    bank.open = true, bank.row = row;
    bank.free_at = std::max(bank.free_at, arrival) + latency;
    finish_ = std::max(finish_, bank.free_at);
    return outcome;
  }
  std::uint64_t finish() const { return finish_; }

 private:
  struct Bank {
    bool open = false;
    std::uint64_t row = 0, free_at = 0;
  };
  std::uint64_t row_bytes_;
  std::vector<Bank> banks_;
  std::uint64_t finish_ = 0;
};

struct UsageError {
  std::string message;
};

struct Arguments {
  std::string level;
  std::vector<std::string> files;
  looptrace::Defines vars;
  std::uint64_t banks = 8, row_bytes = 2048, line_bytes = 64, cycles_per_timestep = 1;
};

// A whole number in [1, limit] (from_chars: "abc", "-3", "4x" and "" are all refused).
std::uint64_t whole_number(const std::string& option, const std::string& text, std::uint64_t limit) {
  std::uint64_t v = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (error != std::errc() || end != text.data() + text.size() || v < 1 || v > limit)
    throw UsageError{option + " takes a whole number from 1 to " + std::to_string(limit) + ", not '" + text + "'"};
  return v;
}

Arguments parse_arguments(int argc, char** argv) {
  if (argc < 3) throw UsageError{argc < 2 ? "no LEVEL and no spec file" : "no spec file"};
  Arguments out;
  out.level = argv[1];
  if (out.level.empty() || out.level[0] == '-') throw UsageError{"the first argument is the LEVEL, not '" + out.level + "'"};
  for (int i = 2; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 == argc) throw UsageError{arg + " takes a value"};
      return argv[++i];
    };
    if (arg == "-D") {
      try {  // parse_define names the variable on a bad value
        out.vars.insert(looptrace::parse_define(value()));
      } catch (const looptrace::SpecError& e) {
        throw UsageError{e.message()};
      }
    } else if (arg == "--banks") {
      out.banks = whole_number(arg, value(), 1 << 16);
    } else if (arg == "--row-bytes") {
      out.row_bytes = whole_number(arg, value(), std::uint64_t(1) << 30);
    } else if (arg == "--line-bytes") {
      out.line_bytes = whole_number(arg, value(), std::uint64_t(1) << 30);
    } else if (arg == "--cycles-per-timestep") {
      out.cycles_per_timestep = whole_number(arg, value(), std::uint64_t(1) << 20);
    } else if (arg.size() > 1 && arg[0] == '-') {
      throw UsageError{"unknown option '" + arg + "'"};
    } else if (!std::ifstream(arg)) {
      throw UsageError{"cannot read the spec file '" + arg + "'"};
    } else {
      out.files.push_back(arg);
    }
  }
  if (out.files.empty()) throw UsageError{"no spec file"};
  // A line that straddled two rows would be two accesses: keep rows whole lines.
  if (out.row_bytes % out.line_bytes != 0)
    throw UsageError{"--row-bytes (" + std::to_string(out.row_bytes) + ") must be a multiple of --line-bytes (" +
                     std::to_string(out.line_bytes) + ")"};
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const Arguments args = parse_arguments(argc, argv);
    const looptrace::Schedule schedule = looptrace::compile_schedule(looptrace::load_spec(args.files, args.vars));
    looptrace::TransferOptions options;
    options.level = args.level;
    options.line_bytes = args.line_bytes;
    auto requests = looptrace::transfer_pipeline(schedule, {}, options);

    OpenRowDram dram(args.banks, args.row_bytes);
    struct Counts {
      std::int64_t reads = 0, writes = 0, hits = 0, misses = 0, conflicts = 0;
    };
    Counts all;
    std::map<std::string, Counts> per_tensor;
    for (auto batch = requests.next_batch(); !batch.empty(); batch = requests.next_batch())
      for (const looptrace::TransferRequest& r : batch) {
        const auto outcome = dram.access(r.address, std::uint64_t(r.timestep) * args.cycles_per_timestep);
        for (Counts* c : {&all, &per_tensor[schedule.tensors[r.tensor].name]}) {
          ++(r.write ? c->writes : c->reads);
          ++(outcome == OpenRowDram::Outcome::hit ? c->hits
             : outcome == OpenRowDram::Outcome::miss ? c->misses
                                                     : c->conflicts);
        }
      }
    std::cout << "DRAM model: " << args.banks << " banks, " << args.row_bytes << "-byte rows, "
              << args.line_bytes << "-byte lines, " << args.cycles_per_timestep << " cycles per timestep\n"
              << args.level << " and its children over " << schedule.n_timesteps << " timesteps\n"
              << "requests: " << all.reads + all.writes << " (" << all.reads << " reads, " << all.writes
              << " writes)\n"
              << "row hits: " << all.hits << "\nrow misses: " << all.misses << "\nrow conflicts: " << all.conflicts
              << "\nestimated cycles: " << dram.finish() << "\n";
    for (const auto& [tensor, c] : per_tensor)
      std::cout << "  " << tensor << ": " << c.reads << " reads, " << c.writes << " writes, " << c.hits
                << " row hits\n";
  } catch (const UsageError& e) {  // bad arguments: exit status 2, as looptrace's
    std::cerr << "transfer_model: error: " << e.message << "\n"
              << "usage: transfer_model LEVEL SPEC.yaml... [-D KEY=VALUE]... [--banks N] [--row-bytes B] "
                 "[--line-bytes L] [--cycles-per-timestep C]\n";
    return 2;
  } catch (const looptrace::SpecError& e) {  // bad spec or level
    std::cerr << "transfer_model: error: " << e.what() << "\n";
    return 2;
  }
  return 0;
}
