// `looptrace merge FILE...`: the summaries of adjacent shards (`looptrace summary
// --shard I/N`, in any order) combined into the summary of the whole window.
#include <unistd.h>

#include <fstream>
#include <iostream>
#include <iterator>
#include <sstream>

#include "common.hpp"
#include "looptrace/error.hpp"
#include "looptrace/sinks/output.hpp"
#include "looptrace/sinks/summary_json.hpp"
#include "looptrace/summary.hpp"

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
    for (const auto& path : *files) {
      const std::string text = read_all(path);
      nlohmann::ordered_json j;
      try {
        j = nlohmann::ordered_json::parse(text);
      } catch (const nlohmann::json::parse_error& e) {
        const std::size_t at = e.byte > 0 ? e.byte - 1 : 0;
        throw SpecError(locate(path, text, at), "not JSON: " + std::string(e.what()));
      }
      shards.push_back(summary_from_json(j, path));
    }
    TraceSummary merged = merge_summaries(std::move(shards), *files);
    OutputBuffer out(STDOUT_FILENO);
    out.write(summary_json(merged).dump());
    out.put('\n');
    out.flush();
  });
}

}  // namespace looptrace::cli
