// `looptrace merge FILE...`: the summaries of adjacent shards (`looptrace summary
// --shard I/N`, in any order) combined into the summary of the whole window.
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <iostream>
#include <iterator>
#include <sstream>

#include "common.hpp"
#include "looptrace/support/error.hpp"
#include "looptrace/sinks/output.hpp"
#include "looptrace/sinks/summary_json.hpp"
#include "looptrace/closed_form/summary.hpp"

namespace looptrace::cli {

namespace {

std::string read_all(const std::string& path) {
  if (path == "-") return {std::istreambuf_iterator<char>(std::cin), {}};
  std::ifstream in(path, std::ios::binary);
  if (!in) throw SpecError(SourceLocation{path, 0, 0}, "cannot read the file");
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// The line and column of byte `offset` of `text` (1-based).
SourceLocation locate(const std::string& path, const std::string& text, std::size_t offset) {
  SourceLocation where{path, 1, 1};
  for (std::size_t i = 0; i < std::min(offset, text.size()); ++i) {
    if (text[i] == '\n') ++where.line, where.column = 1;
    else ++where.column;
  }
  return where;
}

}  // namespace

void add_merge_command(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "merge", "Combine the summaries of adjacent shards (summary --shard I/N) into the whole run's");
  auto files = std::make_shared<std::vector<std::string>>();
  cmd->add_option("files", *files, "Summary JSON files of the shards ('-': standard input)")->required();
  cmd->callback([files] {
    std::vector<TraceSummary> shards;
    std::vector<std::string> names;
    for (const auto& path : *files) {
      // A file holds one summary or several, one after the other (e.g. JSON Lines from
      // `parallel looptrace summary ... | looptrace merge -`).
      const std::string text = read_all(path);
      std::size_t at = text.find_first_not_of(" \t\r\n");
      if (at == std::string::npos) throw SpecError(SourceLocation{path, 0, 0}, "no summary in the file");
      for (int k = 1; at != std::string::npos; ++k) {
        std::istringstream in(text.substr(at));
        nlohmann::ordered_json j;
        try {
          in >> j;
        } catch (const nlohmann::json::parse_error& e) {
          const std::size_t offset = at + (e.byte > 0 ? e.byte - 1 : 0);
          throw SpecError(locate(path, text, offset), "not JSON: " + std::string(e.what()));
        }
        const std::string name = k == 1 && text.find_first_not_of(" \t\r\n", at + std::size_t(in.tellg())) == std::string::npos
                                     ? path : path + " (summary " + std::to_string(k) + ")";
        shards.push_back(summary_from_json(j, name));
        names.push_back(name);
        at = in.tellg() < 0 ? std::string::npos : text.find_first_not_of(" \t\r\n", at + std::size_t(in.tellg()));
      }
    }
    TraceSummary merged = merge_summaries(std::move(shards), names);
    OutputBuffer out(STDOUT_FILENO);
    out.write(summary_json(merged).dump());
    out.put('\n');
    out.flush();
  });
}

}  // namespace looptrace::cli
