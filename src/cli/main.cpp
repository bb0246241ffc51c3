// The looptrace command: subcommands over one spec -> schedule -> stages -> sinks flow.
// Exit status: 0 done (also when the reader of stdout went away), 2 bad input,
// 1 an internal failure or a failed write, 128 + signal after Ctrl-C (SIGINT) or SIGTERM.
#include <cerrno>
#include <csignal>
#include <cstring>
#include <cstdio>
#include <iostream>
#include <new>

#include "common.hpp"
#include "looptrace/support/error.hpp"
#include "looptrace/sinks/output.hpp"
#include "suggest.hpp"

// What went to std::cout (describe, merge, help) must have reached the file: a full
// disk is an error (exit 1), a reader that went away is not (exit 0).
static int finish_stdout() {
  errno = 0;
  std::cout.flush();
  if (std::cout && std::fflush(stdout) == 0) return 0;
  if (errno == EPIPE) return 0;
  std::cerr << "looptrace: error: cannot write standard output"
            << (errno ? std::string(": ") + std::strerror(errno) : std::string()) << "\n";
  return 1;
}

int main(int argc, char** argv) {
  std::signal(SIGPIPE, SIG_IGN);  // a closed pipe shows up as EPIPE, handled below
  looptrace::exit_between_records_on_interrupt();  // Ctrl-C: whole records, then exit 130
  CLI::App app{"looptrace: which tensor elements a LoopTree mapping touches at each timestep"};
  app.set_version_flag("--version", "looptrace " LOOPTRACE_VERSION, "Print the version and exit");
  app.require_subcommand(1);
  looptrace::cli::add_summary_command(app);
  looptrace::cli::add_trace_command(app);
  looptrace::cli::add_plot_command(app);
  looptrace::cli::add_iterations_command(app);
  looptrace::cli::add_movement_command(app);
  looptrace::cli::add_transfers_command(app);
  looptrace::cli::add_cache_command(app);
  looptrace::cli::add_timeline_command(app);
  looptrace::cli::add_merge_command(app);
  looptrace::cli::add_describe_command(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e) == 0 ? finish_stdout() : 1;
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e) == 0 ? finish_stdout() : 1;
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e) == 0 ? finish_stdout() : 1;
  } catch (const CLI::ParseError& e) {
    // A misspelt subcommand or option makes CLI11 complain about something else (the
    // next word taken as a file): name the misspelling, and what was meant.
    if (auto unknown = looptrace::cli::unknown_argument(app, std::vector<std::string>(argv + 1, argv + argc))) {
      std::cerr << "looptrace: error: " << looptrace::printable(*unknown) << "\n";
      return 2;
    }
    if (dynamic_cast<const CLI::ValidationError*>(&e)) {
      // "--max-timesteps: takes a whole number >= 0, not -1" reads as a sentence without the colon.
      std::string message = e.what();
      if (auto colon = message.find(": takes "); colon != std::string::npos) message.erase(colon, 1);
      std::cerr << "looptrace: error: " << looptrace::printable(message) << "\n";
      return 2;
    }
    app.exit(e);
    return 2;
  } catch (const looptrace::SpecError& e) {
    std::cerr << "looptrace: " << looptrace::printable(e.where().str().empty() ? "" : e.where().str() + ": ")
              << "error: " << looptrace::printable(e.message()) << "\n";
    return 2;
  } catch (const looptrace::BrokenPipe&) {
    return 0;
  } catch (const looptrace::WriteError& e) {
    std::cerr << "looptrace: error: " << e.what() << "\n";
    return 1;
  } catch (const std::bad_alloc&) {  // not a bug to report: the run needs more memory than it got
    std::cerr << "looptrace: error: out of memory (narrow the selection with --tensors, --from/--to or "
                 "--max-timesteps)\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "looptrace: internal error: " << looptrace::printable(e.what()) << "\n";
    return 1;
  } catch (...) {  // never terminate() on something unexpected
    std::cerr << "looptrace: internal error: an unknown exception\n";
    return 1;
  }
  return finish_stdout();
}
