#include "suggest.hpp"

#include <algorithm>
#include <cctype>

#include "support/text.hpp"

namespace looptrace::cli {

namespace {

// "--max-timesteps" and "-D" for every option of `app` (help included).
std::vector<std::string> option_names(const CLI::App& app) {
  std::vector<std::string> names;
  for (const CLI::Option* opt : app.get_options()) {
    for (const auto& l : opt->get_lnames()) names.push_back("--" + l);
    for (const auto& s : opt->get_snames()) names.push_back("-" + s);
  }
  return names;
}

std::vector<const CLI::App*> subcommands_of(const CLI::App& app) {
  return app.get_subcommands([](const CLI::App*) { return true; });
}

bool looks_like_number(const std::string& arg) {
  return arg.size() > 1 && (std::isdigit(static_cast<unsigned char>(arg[1])) || arg[1] == '.');
}

// The option as written: "--max-timestep" of "--max-timestep=3", "-x" of "-xVALUE".
std::string option_of(const std::string& arg) {
  if (arg.rfind("--", 0) == 0) return arg.substr(0, arg.find('='));
  return arg.substr(0, 2);
}

std::string unknown_option(const CLI::App& app, const std::string& option, const std::string& where) {
  std::string message = "unknown option '" + option + "'" + where;
  std::vector<std::string> candidates = option_names(app);
  if (option.size() <= 2)  // one letter: only a different case is a likely slip (-d for -D)
    std::erase_if(candidates, [&](const std::string& c) {
      return c.size() != 2 || std::tolower(static_cast<unsigned char>(c[1])) !=
                                  std::tolower(static_cast<unsigned char>(option[1]));
    });
  if (auto near = closest(option, candidates)) message += "; did you mean '" + *near + "'?";
  // Name the subcommands that do have it: it may be in the wrong place.
  std::vector<std::string> elsewhere;
  const CLI::App* root = app.get_parent() ? app.get_parent() : &app;
  for (const CLI::App* sub : subcommands_of(*root)) {
    if (sub == &app) continue;
    const auto names = option_names(*sub);
    if (std::find(names.begin(), names.end(), option) != names.end()) elsewhere.push_back(sub->get_name());
  }
  if (!elsewhere.empty()) {
    std::string subs = join(std::vector<std::string>(elsewhere.begin(), elsewhere.end() - 1), ", ");
    subs += (subs.empty() ? "" : " and ") + elsewhere.back();
    message += " (" + option + " is an option of " + subs + ")";
  }
  return message + " (see '" + (app.get_parent() ? "looptrace " + app.get_name() : std::string("looptrace")) +
         " --help')";
}

}  // namespace

std::optional<std::string> unknown_argument(const CLI::App& app, const std::vector<std::string>& args) {
  const CLI::App* current = &app;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--") return std::nullopt;  // the rest are positional
    if (arg.size() > 1 && arg[0] == '-' && !looks_like_number(arg)) {
      const std::string option = option_of(arg);
      const auto names = option_names(*current);
      if (std::find(names.begin(), names.end(), option) == names.end())
        return unknown_option(*current, option,
                              current == &app ? "" : " for 'looptrace " + current->get_name() + "'");
      continue;
    }
    if (current != &app) continue;  // a file or an option's value
    std::vector<std::string> names;
    for (const CLI::App* sub : subcommands_of(app)) names.push_back(sub->get_name());
    const auto sub = std::find(names.begin(), names.end(), arg);
    if (sub != names.end()) {
      current = subcommands_of(app)[std::size_t(sub - names.begin())];
      continue;
    }
    std::string message = "unknown subcommand '" + arg + "'";
    if (auto near = closest(arg, names)) return message + "; did you mean '" + *near + "'?";
    if (auto nearest = closest(arg, names, std::string_view::npos)) message += "; the closest is '" + *nearest + "'";
    return message + " (subcommands: " + join(names, ", ") + ")";
  }
  return std::nullopt;
}

}  // namespace looptrace::cli
