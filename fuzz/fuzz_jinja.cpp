// libFuzzer target: the Jinja engine (templates and Python-style expressions).
// The first line of the input is evaluated as a Python expression (a rank size); the
// rest is rendered as a template with a few variables and a host function. Either may
// be rejected with SpecError or JinjaError; nothing else may escape, crash or hang, and
// a rendered template's line map covers every output line.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <set>
#include <string>
#include <string_view>

#include "looptrace/support/error.hpp"
#include "frontend/jinja.hpp"  // internal: the template engine

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const std::size_t newline = std::min(input.find('\n'), input.size());
  using looptrace::JinjaValue;
  const looptrace::JinjaVariables vars = {
      {"N", 6},
      {"S", "abc"},
      {"F", 2.5},
      {"B", false},
      {"L", JinjaValue(looptrace::JinjaList{1, 2, 3})},
      {"D", JinjaValue(looptrace::JinjaDict{{"a", 1}, {"b", JinjaValue(looptrace::JinjaList{"x"})}})}};
  try {
    looptrace::evaluate_python_expression(input.substr(0, newline), [&](std::string_view name) -> std::optional<JinjaValue> {
      if (auto it = vars.find(name); it != vars.end()) return it->second;
      return std::nullopt;
    });
  } catch (const looptrace::JinjaError&) {
  }
  looptrace::JinjaGlobals globals;
  globals["echo"] = [](looptrace::JinjaCall& call) -> JinjaValue {
    return call.args.empty() ? JinjaValue() : call.args[0];
  };
  looptrace::JinjaOptions options;
  options.globals = &globals;
  options.max_iterations = 100'000;
  std::set<std::string, std::less<>> looked_up;
  options.looked_up = &looked_up;
  options.defines = &vars;
  try {
    const auto r = looptrace::render_jinja(input.substr(std::min(newline + 1, input.size())), vars, "t.yaml", options);
    const std::size_t lines = std::size_t(std::count(r.text.begin(), r.text.end(), '\n')) + 1;
    if (r.source_line.size() != lines || r.source_file.size() != lines) __builtin_trap();
    for (int f : r.source_file)
      if (f < 0 || std::size_t(f) >= r.files.size()) __builtin_trap();
  } catch (const looptrace::SpecError& e) {
    if (std::string_view(e.what()).empty()) __builtin_trap();
  }
  return 0;
}
