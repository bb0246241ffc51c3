#include "suggest.hpp"

#include <algorithm>
#include <cctype>

namespace looptrace::cli {

std::size_t edit_distance(std::string_view a, std::string_view b) {
  // Optimal string alignment: Levenshtein plus the swap of two neighbours ("tarce").
  const std::size_t n = a.size(), m = b.size();
  std::vector<std::vector<std::size_t>> d(n + 1, std::vector<std::size_t>(m + 1));
  for (std::size_t i = 0; i <= n; ++i) d[i][0] = i;
  for (std::size_t j = 0; j <= m; ++j) d[0][j] = j;
  for (std::size_t i = 1; i <= n; ++i)
    for (std::size_t j = 1; j <= m; ++j) {
      const std::size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  return d[n][m];
}

std::optional<std::string> closest(std::string_view word, const std::vector<std::string>& candidates,
                                   bool always) {
  const std::string* best = nullptr;
  std::size_t best_distance = 0;
  for (const auto& c : candidates) {
    const std::size_t d = edit_distance(word, c);
    if (!best || d < best_distance) best = &c, best_distance = d;
  }
  if (!best) return std::nullopt;
  // Near enough: at most a third of the word wrong (and 2 edits for short words).
  const std::size_t allowed = std::max<std::size_t>(2, word.size() / 3);
  if (!always && best_distance > allowed) return std::nullopt;
  return *best;
}

namespace {

std::string join(const std::vector<std::string>& items, const std::string& separator) {
  std::string out;
  for (const auto& s : items) out += (out.empty() ? "" : separator) + s;
  return out;
}

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
    if (auto nearest = closest(arg, names, true)) message += "; the closest is '" + *nearest + "'";
    return message + " (subcommands: " + join(names, ", ") + ")";
  }
  return std::nullopt;
}

}  // namespace looptrace::cli
