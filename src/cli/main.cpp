// The looptrace command: subcommands over one spec -> schedule -> stages -> sinks flow.
// Exit status: 0 done (also when the reader of stdout went away), 2 bad input,
// 1 an internal failure.
#include <csignal>
#include <cstdio>
#include <iostream>

#include "common.hpp"
#include "looptrace/error.hpp"
#include "looptrace/sinks/output.hpp"
#include "suggest.hpp"

int main(int argc, char** argv) {
  std::signal(SIGPIPE, SIG_IGN);  // a closed pipe shows up as EPIPE, handled below
  CLI::App app{"looptrace: which tensor elements a LoopTree mapping touches at each timestep"};
  app.set_version_flag("--version", "looptrace " LOOPTRACE_VERSION, "Print the version and exit");
  app.require_subcommand(1);
  looptrace::cli::add_summary_command(app);
  looptrace::cli::add_trace_command(app);
  looptrace::cli::add_plot_command(app);
  looptrace::cli::add_iterations_command(app);
  looptrace::cli::add_movement_command(app);
  looptrace::cli::add_transfers_command(app);
  looptrace::cli::add_merge_command(app);
  looptrace::cli::add_describe_command(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    // A misspelt subcommand or option makes CLI11 complain about something else (the
    // next word taken as a file): name the misspelling, and what was meant.
    if (auto unknown = looptrace::cli::unknown_argument(app, std::vector<std::string>(argv + 1, argv + argc))) {
      std::cerr << "looptrace: error: " << *unknown << "\n";
      return 2;
    }
    app.exit(e);
    return 2;
  } catch (const looptrace::SpecError& e) {
    std::cerr << "looptrace: " << (e.where().str().empty() ? "" : e.where().str() + ": ")
              << "error: " << e.message() << "\n";
    return 2;
  } catch (const looptrace::BrokenPipe&) {
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "looptrace: internal error: " << e.what() << "\n";
    return 1;
  } catch (...) {  // never terminate() on something unexpected
    std::cerr << "looptrace: internal error: an unknown exception\n";
    return 1;
  }
  return 0;
}
