// The Jinja2 template engine. It follows Jinja2's default Environment: no trim_blocks,
// no lstrip_blocks, one trailing newline of the template dropped, `{%-`/`-%}` strip all
// whitespace; and AccelForge's: StrictUndefined and the `{% assert %}` statement.
#include "jinja.hpp"

#include <algorithm>
#include <optional>

#include "jinja_internal.hpp"

namespace looptrace {

using namespace jinja;

const JinjaValue* JinjaCall::kwarg(std::string_view name) const {
  for (const auto& [k, v] : kwargs)
    if (k == name) return &v;
  return nullptr;
}

namespace {

// Rendered bytes. yaml-cpp spends a few hundred bytes a node, and "[1,1,...]" is a
// node every two bytes: 8 MiB of YAML can take ~1 GiB to load. Real specs are kilobytes.
constexpr std::size_t kMaxOutput = 8u << 20;

// ---------------------------------------------------------------- template lexing

enum class PieceKind { Text, Output, Statement };

// Text: [begin, end) of the source. Tags: [begin, end) is the inside without the
// delimiters and whitespace-control marks; `tag` is the offset of the opening `{`.
struct Piece {
  PieceKind kind;
  std::size_t begin, end, tag;
};

class LineTable {
 public:
  explicit LineTable(std::string_view source) {
    starts_.push_back(0);
    for (std::size_t i = 0; i < source.size(); ++i)
      if (source[i] == '\n') starts_.push_back(i + 1);
  }
  int line_of(std::size_t offset) const {
    return static_cast<int>(std::upper_bound(starts_.begin(), starts_.end(), offset) - starts_.begin());
  }
  int column_of(std::size_t offset) const {
    return static_cast<int>(offset - starts_[std::size_t(line_of(offset) - 1)]) + 1;
  }

 private:
  std::vector<std::size_t> starts_;
};

// Jinja2 turns \r\n and \r into \n and drops one trailing newline.
std::string normalize_newlines(std::string_view source) {
  std::string out;
  out.reserve(source.size());
  for (std::size_t i = 0; i < source.size(); ++i) {
    if (source[i] != '\r') {
      out += source[i];
    } else {
      out += '\n';
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
    }
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

class TemplateLexer {
 public:
  TemplateLexer(const std::string& source, const LineTable& lines, const std::string& filename)
      : src_(source), lines_(lines), filename_(filename) {}

  std::vector<Piece> run() {
    std::size_t pos = 0;
    while (pos < src_.size()) {
      const std::size_t open = find_open(pos);
      push_text(pos, open);
      if (open == src_.size()) break;
      pos = tag(open);
    }
    return std::move(pieces_);
  }

 private:
  std::size_t find_open(std::size_t from) const {
    for (std::size_t i = src_.find('{', from); i != std::string::npos; i = src_.find('{', i + 1)) {
      if (i + 1 < src_.size() && (src_[i + 1] == '{' || src_[i + 1] == '%' || src_[i + 1] == '#'))
        return i;
    }
    return src_.size();
  }

  void push_text(std::size_t begin, std::size_t end) {
    if (begin < end) pieces_.push_back({PieceKind::Text, begin, end, begin});
  }

  [[noreturn]] void fail(std::size_t offset, const std::string& message) const {
    throw SpecError({filename_, lines_.line_of(offset), lines_.column_of(offset)}, message);
  }

  // Finds `closer` outside string literals and brackets, so `{{ '}}' }}` and
  // `{{ {'a': {'b': 1}} }}` work, as Jinja2's lexer balances them.
  std::size_t find_close(std::size_t from, std::string_view closer, bool quotes, std::size_t open) const {
    int depth = 0;
    bool closer_in_brackets = false;
    for (std::size_t i = from; i < src_.size(); ++i) {
      if (src_.compare(i, closer.size(), closer) == 0) {
        if (depth == 0) return i;
        closer_in_brackets = true;
      }
      if (quotes && (src_[i] == '(' || src_[i] == '[' || src_[i] == '{')) ++depth;
      if (quotes && depth > 0 && (src_[i] == ')' || src_[i] == ']' || src_[i] == '}')) --depth;
      if (quotes && (src_[i] == '\'' || src_[i] == '"')) {
        const char quote = src_[i];
        for (++i; i < src_.size() && src_[i] != quote; ++i)
          if (src_[i] == '\\') ++i;
        if (i >= src_.size()) fail(open, "unterminated string literal in tag");
      }
    }
    fail(open, "'" + src_.substr(open, 2) + "' is not closed by '" + std::string(closer) + "'" +
                   (closer_in_brackets ? " (a bracket in it is not closed)" : ""));
  }

  // Lexes the tag at `open`; returns the offset after it.
  std::size_t tag(std::size_t open) {
    const char kind = src_[open + 1];
    const std::string closer = kind == '{' ? "}}" : kind == '%' ? "%}" : "#}";
    std::size_t begin = open + 2;
    const bool strip_before = begin < src_.size() && src_[begin] == '-';
    if (strip_before || (kind != '{' && begin < src_.size() && src_[begin] == '+')) ++begin;
    const std::size_t close = find_close(begin, closer, kind != '#', open);
    std::size_t end = close;
    const bool strip_after = end > begin && src_[end - 1] == '-';
    if (strip_after || (kind == '%' && end > begin && src_[end - 1] == '+')) --end;
    if (strip_before) rstrip_previous_text();
    std::size_t after = close + 2;
    while (strip_after && after < src_.size() && is_space(src_[after])) ++after;
    if (kind == '%' && keyword(begin, end) == "raw") return raw(open, after);
    if (kind != '#')
      pieces_.push_back({kind == '{' ? PieceKind::Output : PieceKind::Statement, begin, end, open});
    return after;
  }

  std::string_view keyword(std::size_t begin, std::size_t end) const {
    while (begin < end && is_space(src_[begin])) ++begin;
    while (end > begin && is_space(src_[end - 1])) --end;
    return std::string_view(src_).substr(begin, end - begin);
  }

  // `{% raw %}...{% endraw %}`: the text between, verbatim.
  std::size_t raw(std::size_t open, std::size_t from) {
    for (std::size_t i = src_.find("{%", from); i != std::string::npos; i = src_.find("{%", i + 1)) {
      std::size_t k = i + 2;
      const bool strip_before = k < src_.size() && src_[k] == '-';
      if (strip_before || (k < src_.size() && src_[k] == '+')) ++k;
      while (k < src_.size() && is_space(src_[k])) ++k;
      if (src_.compare(k, 6, "endraw") != 0) continue;
      k += 6;
      while (k < src_.size() && is_space(src_[k])) ++k;
      const bool strip_after = k < src_.size() && src_[k] == '-';
      if (strip_after) ++k;
      if (src_.compare(k, 2, "%}") != 0) continue;
      std::size_t text_end = i;
      if (strip_before)
        while (text_end > from && is_space(src_[text_end - 1])) --text_end;
      push_text(from, text_end);
      std::size_t after = k + 2;
      while (strip_after && after < src_.size() && is_space(src_[after])) ++after;
      return after;
    }
    fail(open, "'{% raw %}' is not closed by '{% endraw %}'");
  }

  void rstrip_previous_text() {
    if (pieces_.empty() || pieces_.back().kind != PieceKind::Text) return;
    Piece& text = pieces_.back();
    while (text.end > text.begin && is_space(src_[text.end - 1])) --text.end;
    if (text.begin == text.end) pieces_.pop_back();
  }

  const std::string& src_;
  const LineTable& lines_;
  const std::string& filename_;
  std::vector<Piece> pieces_;
};

// ---------------------------------------------------------------- template tree

struct Node;
using Body = std::vector<Node>;

struct TextNode {
  std::size_t begin, end;
};
struct OutputNode {
  ExprPtr expr;
};
struct ForNode {
  std::vector<std::string> targets;
  bool unpack = false;  // `for k, v in ...`
  ExprPtr iterable, condition;
  Body body, else_body;
};
struct IfNode {
  std::vector<std::pair<ExprPtr, Body>> branches;
  std::vector<std::size_t> branch_tags;  // where each condition is, for its errors
  Body else_body;
};
struct SetNode {
  std::vector<std::string> targets;
  bool unpack = false;
  std::string attribute;  // `set ns.attribute = ...`
  ExprPtr value;
};
struct BlockSetNode {
  std::string target;
  Body body;
};
struct WithNode {
  std::vector<std::pair<std::string, ExprPtr>> assignments;
  Body body;
};
struct AssertNode {
  ExprPtr condition, message;
};
struct MacroNode {
  std::string name;
  std::vector<std::string> params;
  std::vector<ExprPtr> defaults;  // one per parameter; null: none
  Body body;
};
// {% import NAME as ALIAS %}, {% from NAME import A [as B], ... %}, {% include NAME %}
struct ImportNode {
  ExprPtr name;
  std::string alias;                                      // import ... as ALIAS
  std::vector<std::pair<std::string, std::string>> names;  // from ... import (name, as)
  bool is_from = false;
  bool with_context = false;
};
struct IncludeNode {
  ExprPtr name;
  bool ignore_missing = false;
  bool with_context = true;
};

struct Node {
  std::size_t tag;  // source offset, for error locations
  std::variant<TextNode, OutputNode, ForNode, IfNode, SetNode, BlockSetNode, WithNode, AssertNode, MacroNode,
               ImportNode, IncludeNode>
      content;
};

class TemplateParser {
 public:
  TemplateParser(const std::string& source, std::vector<Piece> pieces, const LineTable& lines,
                 const std::string& filename)
      : src_(source), pieces_(std::move(pieces)), lines_(lines), filename_(filename) {}

  Body run() {
    Body body;
    parse_body(body, {}, 0);  // with no stops, a stray end tag is an error inside
    return body;
  }

 private:
  [[noreturn]] void fail(std::size_t offset, const std::string& message) const {
    throw SpecError({filename_, lines_.line_of(offset), lines_.column_of(offset)}, message);
  }

  // Runs `f`, blaming its JinjaError on the tag at `tag`.
  template <class F>
  void at_tag(std::size_t tag, F&& f) const {
    try {
      f();
    } catch (const JinjaError& problem) {
      fail(tag, problem.what());
    }
  }

  // The terminating tag (`{% endfor %}`, `{% else %}`...) must have nothing after its keyword.
  void expect_stop_end() const {
    at_tag(pieces_[index_ - 1].tag, [this] { stop_tokens_->expect_end(); });
  }

  std::string_view inside(const Piece& p) const { return std::string_view(src_).substr(p.begin, p.end - p.begin); }

  // Appends nodes until a statement whose keyword is in `stops`; returns that keyword
  // ("" at the end of the template) and leaves its tokens in `stop_tokens_`.
  std::string parse_body(Body& out, std::initializer_list<std::string_view> stops, int depth) {
    while (index_ < pieces_.size()) {
      const Piece& piece = pieces_[index_++];
      try {
        if (piece.kind == PieceKind::Text) {
          out.push_back({piece.tag, TextNode{piece.begin, piece.end}});
        } else if (piece.kind == PieceKind::Output) {
          out.push_back({piece.tag, OutputNode{parse_output(piece)}});
        } else if (auto stop = statement(piece, out, stops, depth)) {
          return *stop;
        }
      } catch (const JinjaError& problem) {
        fail(piece.tag, problem.what());
      }
    }
    return {};
  }

  ExprPtr parse_output(const Piece& piece) {
    ExprParser parser(inside(piece));
    if (parser.at_end()) throw JinjaError("empty expression");
    ExprPtr e = parser.tuple();
    parser.expect_end();
    return e;
  }

  std::optional<std::string> statement(const Piece& piece, Body& out,
                                       std::initializer_list<std::string_view> stops, int depth) {
    auto tokens = std::make_unique<ExprParser>(inside(piece));
    ExprParser& parser = *tokens;
    if (parser.peek().kind != Tok::Name) throw JinjaError("expected a statement name");
    const std::string keyword = parser.next().text;
    if (std::find(stops.begin(), stops.end(), keyword) != stops.end()) {
      stop_tokens_ = std::move(tokens);  // the enclosing block reads the rest (an elif's condition)
      return keyword;
    }
    const bool block = keyword == "for" || keyword == "if" || keyword == "with" || keyword == "macro" ||
                       (keyword == "set" && !inside(piece).empty() && inside(piece).find('=') == std::string_view::npos);
    if (depth >= kMaxNesting && block) throw JinjaError("blocks nested too deeply");
    if (keyword == "for") out.push_back({piece.tag, parse_for(parser, piece, depth + 1)});
    else if (keyword == "if") out.push_back({piece.tag, parse_if(parser, piece, depth + 1)});
    else if (keyword == "set") parse_set(parser, piece, out, depth + 1);
    else if (keyword == "with") out.push_back({piece.tag, parse_with(parser, piece, depth + 1)});
    else if (keyword == "assert") out.push_back({piece.tag, parse_assert(parser)});
    else if (keyword == "macro") out.push_back({piece.tag, parse_macro(parser, piece, depth + 1)});
    else if (keyword == "import" || keyword == "from") out.push_back({piece.tag, parse_import(parser, keyword == "from")});
    else if (keyword == "include") out.push_back({piece.tag, parse_include(parser)});
    else if (keyword == "endfor" || keyword == "endif" || keyword == "elif" || keyword == "else" ||
             keyword == "endset" || keyword == "endwith" || keyword == "endraw" || keyword == "endmacro")
      throw JinjaError("unexpected '{% " + keyword + " %}'");
    else if (keyword == "call" || keyword == "filter" || keyword == "block" || keyword == "extends" ||
             keyword == "do" || keyword == "break" || keyword == "continue")
      throw JinjaError("'{% " + keyword + " %}' is not supported");
    else
      throw JinjaError("unknown statement '" + keyword + "'" +
                       did_you_mean(keyword, {"for", "if", "set", "with", "assert", "raw", "macro", "import",
                                              "from", "include"}));
    return std::nullopt;
  }

  // for TARGETS in ITERABLE [if CONDITION]
  ForNode parse_for(ExprParser& parser, const Piece& piece, int depth) {
    ForNode node;
    node.targets = parser.targets("in");
    node.unpack = node.targets.size() > 1 || inside(piece).find(',') < inside(piece).find(" in ");
    if (!parser.accept_name("in")) throw JinjaError("expected 'in' after the loop variable");
    node.iterable = parser.tuple(false, {"if", "recursive"});
    if (parser.accept_name("if")) node.condition = parser.expression();
    if (parser.at_name("recursive")) throw JinjaError("recursive loops are not supported");
    parser.expect_end();
    std::string stop = parse_body(node.body, {"endfor", "else"}, depth);
    if (stop == "else") {
      expect_stop_end();
      stop = parse_body(node.else_body, {"endfor"}, depth);
    }
    if (stop.empty()) fail(piece.tag, "'{% for %}' is not closed by '{% endfor %}'");
    expect_stop_end();
    return node;
  }

  IfNode parse_if(ExprParser& parser, const Piece& piece, int depth) {
    IfNode node;
    std::size_t branch_tag = piece.tag;
    std::unique_ptr<ExprParser> elif;  // the tokens of the current `{% elif %}`
    ExprParser* condition = &parser;
    for (;;) {
      ExprPtr e;
      at_tag(branch_tag, [&] {
        e = condition->tuple();
        condition->expect_end();
      });
      node.branches.emplace_back(std::move(e), Body{});
      node.branch_tags.push_back(branch_tag);
      std::string stop = parse_body(node.branches.back().second, {"elif", "else", "endif"}, depth);
      branch_tag = pieces_[index_ - 1].tag;
      if (stop == "else") {
        expect_stop_end();
        stop = parse_body(node.else_body, {"endif"}, depth);
      }
      if (stop.empty()) fail(piece.tag, "'{% if %}' is not closed by '{% endif %}'");
      if (stop == "endif") {
        expect_stop_end();
        return node;
      }
      elif = std::move(stop_tokens_);
      condition = elif.get();
    }
  }

  // set NAME = e | set A, B = e | set NS.ATTR = e | set NAME %}...{% endset
  void parse_set(ExprParser& parser, const Piece& piece, Body& out, int depth) {
    SetNode node;
    std::string first = parser.expect_identifier("a variable name");
    if (parser.accept_op(".")) {
      node.targets = {first};
      node.attribute = parser.expect_identifier("an attribute name");
    } else {
      node.targets = {first};
      while (parser.accept_op(",")) {
        node.unpack = true;
        if (parser.at_op("=")) break;
        node.targets.push_back(parser.expect_identifier("a variable name"));
      }
    }
    if (!parser.accept_op("=")) {
      if (node.targets.size() != 1 || !node.attribute.empty() || node.unpack)
        throw JinjaError("expected '=' in '{% set %}'");
      if (!parser.at_end()) {
        if (parser.at_op("|")) throw JinjaError("filters on a block '{% set %}' are not supported");
        throw JinjaError("expected '=' in '{% set %}' but found " + describe(parser.peek()));
      }
      BlockSetNode block{first, {}};
      if (parse_body(block.body, {"endset"}, depth).empty())
        fail(piece.tag, "'{% set " + first + " %}' is not closed by '{% endset %}'");
      expect_stop_end();
      out.push_back({piece.tag, std::move(block)});
      return;
    }
    node.value = parser.tuple();
    parser.expect_end();
    out.push_back({piece.tag, std::move(node)});
  }

  WithNode parse_with(ExprParser& parser, const Piece& piece, int depth) {
    WithNode node;
    while (!parser.at_end()) {
      if (!node.assignments.empty()) parser.expect_op(",");
      std::string name = parser.expect_identifier("a variable name");
      parser.expect_op("=");
      node.assignments.emplace_back(std::move(name), parser.expression());
    }
    if (parse_body(node.body, {"endwith"}, depth).empty())
      fail(piece.tag, "'{% with %}' is not closed by '{% endwith %}'");
    expect_stop_end();
    return node;
  }

  // {% macro NAME(a, b=default) %}...{% endmacro %}
  MacroNode parse_macro(ExprParser& parser, const Piece& piece, int depth) {
    MacroNode node;
    node.name = parser.expect_identifier("a macro name");
    parser.expect_op("(");
    while (!parser.at_op(")")) {
      if (!node.params.empty()) parser.expect_op(",");
      node.params.push_back(parser.expect_identifier("a parameter name"));
      node.defaults.push_back(parser.accept_op("=") ? parser.expression() : nullptr);
    }
    parser.expect_op(")");
    parser.expect_end();
    if (parse_body(node.body, {"endmacro"}, depth).empty())
      fail(piece.tag, "'{% macro " + node.name + " %}' is not closed by '{% endmacro %}'");
    expect_stop_end();
    return node;
  }

  // Jinja's `with context` / `without context` suffix.
  static bool context_suffix(ExprParser& parser, bool fallback) {
    if ((parser.at_name("with") || parser.at_name("without")) && parser.peek(1).kind == Tok::Name &&
        parser.peek(1).text == "context") {
      const bool with = parser.next().text == "with";
      parser.next();
      return with;
    }
    return fallback;
  }

  ImportNode parse_import(ExprParser& parser, bool is_from) {
    ImportNode node;
    node.is_from = is_from;
    node.name = parser.expression();
    if (is_from) {
      if (!parser.accept_name("import")) throw JinjaError("expected 'import' after the template name");
      do {
        if (parser.at_name("with") || parser.at_name("without")) break;
        std::string name = parser.expect_identifier("a name to import");
        std::string as = parser.accept_name("as") ? parser.expect_identifier("a name") : name;
        node.names.emplace_back(std::move(name), std::move(as));
      } while (parser.accept_op(","));
    } else {
      if (!parser.accept_name("as")) throw JinjaError("expected 'as' after the template name");
      node.alias = parser.expect_identifier("a name");
    }
    node.with_context = context_suffix(parser, false);
    parser.expect_end();
    return node;
  }

  IncludeNode parse_include(ExprParser& parser) {
    IncludeNode node;
    node.name = parser.expression();
    if (parser.at_name("ignore") && parser.peek(1).kind == Tok::Name && parser.peek(1).text == "missing") {
      parser.next();
      parser.next();
      node.ignore_missing = true;
    }
    node.with_context = context_suffix(parser, true);
    parser.expect_end();
    return node;
  }

  // AccelForge's extension: {% assert CONDITION[, MESSAGE] %}
  AssertNode parse_assert(ExprParser& parser) {
    AssertNode node;
    if (parser.at_end()) throw JinjaError("'{% assert %}' needs a condition");
    node.condition = parser.expression();
    if (parser.accept_op(",")) node.message = parser.expression();
    parser.expect_end();
    return node;
  }

  const std::string& src_;
  std::vector<Piece> pieces_;
  const LineTable& lines_;
  const std::string& filename_;
  std::size_t index_ = 0;
  std::unique_ptr<ExprParser> stop_tokens_;
};

// ---------------------------------------------------------------- rendering

// A template parsed once; macros keep it alive while they can be called.
struct ParsedTemplate {
  ParsedTemplate(std::string source, std::string name)
      : src(std::move(source)), lines(src), filename(std::move(name)) {}
  std::string src;
  LineTable lines;
  std::string filename;
  Body body;
};

std::shared_ptr<const ParsedTemplate> parse_template(std::string_view source, const std::string& filename) {
  auto t = std::make_shared<ParsedTemplate>(normalize_newlines(source), filename);
  std::vector<Piece> pieces = TemplateLexer(t->src, t->lines, t->filename).run();
  t->body = TemplateParser(t->src, std::move(pieces), t->lines, t->filename).run();
  return t;
}

// Macros calling macros, templates including templates: bounded.
constexpr int kMaxTemplateDepth = 50;

// A macro keeps its template's top-level variables alive, and they hold the macro: a
// cycle. One render_jinja call clears every such scope when it ends.
struct Session {
  std::vector<std::shared_ptr<JinjaVariables>> scopes;
  Session() = default;
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;
  ~Session() {
    for (auto& scope : scopes) scope->clear();
  }
};

struct MacroDef {
  std::shared_ptr<const ParsedTemplate> tmpl;
  const MacroNode* node;
  std::shared_ptr<JinjaVariables> top;         // the defining template's top-level variables
  std::shared_ptr<const JinjaVariables> base;  // and what it was rendered with
  std::vector<JinjaVariables> closure;         // loop and with scopes around the definition
};

class Renderer : public Evaluator {
 public:
  Renderer(std::shared_ptr<const ParsedTemplate> tmpl, std::shared_ptr<const JinjaVariables> base,
           const JinjaOptions& options, std::int64_t* budget, int depth, Session& session)
      : Evaluator(false, budget, options.max_iterations),
        tmpl_(std::move(tmpl)),
        src_(tmpl_->src),
        lines_(tmpl_->lines),
        filename_(tmpl_->filename),
        base_ptr_(std::move(base)),
        base_(*base_ptr_),
        top_(std::make_shared<JinjaVariables>()),
        options_(options),
        budget_(budget),
        depth_(depth),
        session_(session) {
    session_.scopes.push_back(top_);
    result_.files.push_back(filename_);
    result_.file_notes.emplace_back();
  }

  RenderedTemplate run() {
    render(tmpl_->body);
    // The line after a final newline maps to where the template continues.
    if (at_line_start_) {
      result_.source_line.push_back(next_.second);
      result_.source_file.push_back(next_.first);
    }
    return std::move(result_);
  }

  // The text of a macro's body with its arguments bound.
  std::string run_macro(const MacroNode& node, JinjaVariables arguments);

 protected:
  JinjaValue lookup(const std::string& name) override {
    if (options_.looked_up) options_.looked_up->insert(name);
    for (auto it = frames_.rbegin(); it != frames_.rend(); ++it)
      if (auto found = it->find(name); found != it->end()) return found->second;
    if (auto found = top_->find(name); found != top_->end()) return found->second;
    if (auto found = base_.find(name); found != base_.end()) {
      tag_base_lookups_.push_back(name);
      return found->second;
    }
    if (options_.globals && options_.globals->count(name))
      return JinjaValue(std::make_shared<const JinjaCallable>(JinjaCallable{JinjaCallable::Kind::Host, name, {}, nullptr}));
    if (is_builtin_global(name, false)) return JinjaUndefined{name, ""};
    std::vector<std::string> visible;
    for (const auto& [k, v] : visible_variables()) visible.push_back(k);
    if (options_.globals)
      for (const auto& [k, v] : *options_.globals) visible.push_back(k);
    return JinjaUndefined{name, "undefined variable '" + name + "'" + did_you_mean(name, visible)};
  }

  JinjaValue call_host(const JinjaCallable& f, std::vector<JinjaValue> args,
                       std::vector<std::pair<std::string, JinjaValue>> kwargs) override {
    JinjaCall call;
    call.args = std::move(args);
    call.kwargs = std::move(kwargs);
    call.where = location(current_tag_);
    call.base = &base_;
    call.locals = *top_;
    for (const auto& frame : frames_)
      for (const auto& [k, v] : frame) call.locals[k] = v;
    JinjaValue result = options_.globals->at(f.name)(call);
    if (call.pasted) pasted_ = call.pasted;
    return result;
  }

  JinjaValue call_macro(const JinjaCallable& f, std::vector<JinjaValue> args,
                        std::vector<std::pair<std::string, JinjaValue>> kwargs) override {
    const auto def = std::static_pointer_cast<const MacroDef>(f.macro);
    if (depth_ >= kMaxTemplateDepth)
      throw JinjaError("macros and templates call each other more than " + std::to_string(kMaxTemplateDepth) +
                       " levels deep");
    Renderer sub(def->tmpl, def->base, options_, budget_, depth_ + 1, session_);
    sub.top_ = def->top;  // a macro sees its template's top-level variables
    sub.frames_ = def->closure;
    const MacroNode& node = *def->node;
    JinjaVariables frame;
    JinjaList extra;
    for (std::size_t i = 0; i < args.size(); ++i) {
      if (i < node.params.size()) frame[node.params[i]] = std::move(args[i]);
      else extra.push_back(std::move(args[i]));
    }
    JinjaDict extra_kwargs;
    for (auto& [k, v] : kwargs) {
      if (std::find(node.params.begin(), node.params.end(), k) == node.params.end()) {
        extra_kwargs.emplace_back(k, std::move(v));
      } else {
        if (frame.count(k)) throw JinjaError("macro '" + node.name + "' got two values for '" + k + "'");
        frame[k] = std::move(v);
      }
    }
    frame["varargs"] = JinjaValue(std::move(extra), true);
    frame["kwargs"] = JinjaValue(std::move(extra_kwargs));
    // Defaults see the parameters before them, as in Jinja.
    sub.frames_.push_back(std::move(frame));
    for (std::size_t i = 0; i < node.params.size(); ++i) {
      JinjaVariables& bound = sub.frames_.back();
      if (bound.count(node.params[i])) continue;
      bound[node.params[i]] = node.defaults[i]
                                  ? sub.eval(*node.defaults[i])
                                  : JinjaValue(JinjaUndefined{node.params[i], "macro '" + node.name + "' was called without '" +
                                                                                  node.params[i] + "'"});
    }
    JinjaVariables bound = std::move(sub.frames_.back());
    sub.frames_.pop_back();
    return sub.run_macro(node, std::move(bound));  // the closure stays below the arguments
  }

 private:
  SourceLocation location(std::size_t offset) const {
    return {filename_, lines_.line_of(offset), lines_.column_of(offset)};
  }

  // Where `set` writes: the innermost loop, with or macro scope, else the template's top.
  JinjaVariables& scope() { return frames_.empty() ? *top_ : frames_.back(); }

  // Every variable visible here, inner scopes winning.
  JinjaVariables visible_variables() const {
    JinjaVariables out = base_;
    for (const auto& [k, v] : *top_) out[k] = v;
    for (const auto& frame : frames_)
      for (const auto& [k, v] : frame) out[k] = v;
    return out;
  }

  // Another template's text and file name by its Jinja name, parsed.
  std::shared_ptr<const ParsedTemplate> load(const Expr& name_expr, const char* statement) {
    const JinjaValue name = defined(eval(name_expr));
    if (!name.is_string()) throw JinjaError("a template name must be a string, not " + an(name));
    if (!options_.load_template)
      throw JinjaError(std::string(statement) + " cannot load '" + name.as_string() + "': only spec files can load templates");
    if (depth_ >= kMaxTemplateDepth)
      throw JinjaError("templates include each other more than " + std::to_string(kMaxTemplateDepth) + " levels deep");
    auto [text, file] = options_.load_template(name.as_string());
    return parse_template(text, file);
  }

  void render(const Body& body) {
    for (const Node& node : body) {
      current_tag_ = node.tag;
      tag_base_lookups_.clear();
      try {
        std::visit([&](const auto& content) { render_node(content, node.tag); }, node.content);
      } catch (const JinjaError& problem) {
        throw SpecError(location(node.tag), annotate(problem.what()));
      }
    }
  }

  // A failing tag that read a -D value says so: the value is the likely culprit.
  std::string annotate(std::string message) const {
    if (!options_.defines) return message;
    std::vector<std::string> named;
    for (const auto& name : tag_base_lookups_) {
      auto d = options_.defines->find(name);
      if (d == options_.defines->end() || std::find(named.begin(), named.end(), name) != named.end()) continue;
      if (!(base_.at(name).kind() == d->second.kind() && base_.at(name).str() == d->second.str())) continue;
      named.push_back(name);
      message += named.size() == 1 ? " (" : ", ";
      message += name + " is " + d->second.repr() + " from -D " + name + "=" + d->second.str();
    }
    return named.empty() ? message : message + ")";
  }

  // Appends text; line k of it (0-based) came from where_of(k) = (file, line).
  template <class Where>
  void emit(std::string_view text, Where&& where_of) {
    if (result_.text.size() + text.size() > kMaxOutput) throw JinjaError("the rendered file is larger than 8 MiB");
    int k = 0;
    for (char c : text) {
      if (at_line_start_) {
        const auto [file, line] = where_of(k);
        result_.source_file.push_back(file);
        result_.source_line.push_back(line);
      }
      at_line_start_ = false;
      result_.text += c;
      if (c == '\n') {
        at_line_start_ = true;
        ++k;
      }
    }
    next_ = where_of(k);
  }

  void render_node(const TextNode& node, std::size_t) {
    const int line = lines_.line_of(node.begin);
    emit(std::string_view(src_).substr(node.begin, node.end - node.begin),
         [line](int k) { return std::pair<int, int>{0, line + k}; });
  }

  void render_node(const OutputNode& node, std::size_t tag) {
    pasted_.reset();
    const std::string text = eval(*node.expr).str();
    const int line = lines_.line_of(tag);
    if (pasted_ && pasted_->text == text && !pasted_->source_line.empty()) {
      const std::shared_ptr<const RenderedTemplate> p = std::move(pasted_);
      emit_pasted(*p, tag);
      return;
    }
    emit(text, [line](int) { return std::pair<int, int>{0, line}; });
  }

  // Text another file rendered: its lines keep pointing into that file.
  void emit_pasted(const RenderedTemplate& p, std::size_t tag) {
    const std::string note = "included from " + location(tag).str();
    std::vector<int> index(p.files.size());
    for (std::size_t f = 0; f < p.files.size(); ++f) {
      index[f] = int(result_.files.size());
      result_.files.push_back(p.files[f]);
      result_.file_notes.push_back(p.file_notes[f].empty() ? note : p.file_notes[f] + ", " + note);
    }
    emit(p.text, [&](int k) {
      const std::size_t i = std::min<std::size_t>(std::size_t(k), p.source_line.size() - 1);
      return std::pair<int, int>{index[std::size_t(p.source_file[i])], p.source_line[i]};
    });
  }

  void render_node(const MacroNode& node, std::size_t) {
    auto def = std::make_shared<MacroDef>(MacroDef{tmpl_, &node, top_, base_ptr_, frames_});
    scope()[node.name] = JinjaValue(std::make_shared<const JinjaCallable>(
        JinjaCallable{JinjaCallable::Kind::Macro, node.name, {}, std::move(def)}));
  }

  void render_node(const ImportNode& node, std::size_t) {
    const auto module = load(*node.name, node.is_from ? "{% from %}" : "{% import %}");
    auto base = std::make_shared<const JinjaVariables>(node.with_context ? visible_variables() : JinjaVariables{});
    Renderer sub(module, base, options_, budget_, depth_ + 1, session_);
    sub.run();  // its text is dropped; its top-level names are what it exports
    if (!node.is_from) {
      JinjaDict exports;
      for (const auto& [k, v] : *sub.top_)
        if (!k.empty() && k[0] != '_') exports.emplace_back(k, v);
      scope()[node.alias] = JinjaValue(std::move(exports));
      return;
    }
    for (const auto& [name, as] : node.names) {
      auto found = sub.top_->find(name);
      if (found == sub.top_->end() || name[0] == '_') {
        std::vector<std::string> names;
        for (const auto& [k, v] : *sub.top_) names.push_back(k);
        throw JinjaError("the template '" + module->filename + "' does not define '" + name + "'" +
                         did_you_mean(name, names));
      }
      scope()[as] = found->second;
    }
  }

  void render_node(const IncludeNode& node, std::size_t tag) {
    std::shared_ptr<const ParsedTemplate> included;
    try {
      included = load(*node.name, "{% include %}");
    } catch (const JinjaError&) {
      if (node.ignore_missing) return;
      throw;
    }
    auto base = std::make_shared<const JinjaVariables>(node.with_context ? visible_variables() : JinjaVariables{});
    Renderer sub(included, base, options_, budget_, depth_ + 1, session_);
    emit_pasted(sub.run(), tag);
  }

  void assign(const std::vector<std::string>& targets, bool unpack, const JinjaValue& value) {
    if (!unpack) {
      scope()[targets[0]] = value;
      return;
    }
    defined(value);
    JinjaList items = iterate(value);
    if (items.size() != targets.size())
      throw JinjaError("cannot unpack " + std::to_string(items.size()) + " values into " +
                       std::to_string(targets.size()) + " names");
    for (std::size_t i = 0; i < targets.size(); ++i) scope()[targets[i]] = items[i];
  }

  void render_node(const SetNode& node, std::size_t) {
    JinjaValue value = eval(*node.value);
    if (!node.attribute.empty()) {
      const JinjaValue ns = defined(lookup(node.targets[0]));
      if (!ns.is_namespace())
        throw JinjaError("'{% set " + node.targets[0] + "." + node.attribute +
                         " %}' needs a namespace(); " + node.targets[0] + " is " + an(ns));
      for (auto& [k, v] : ns.dict())
        if (k.is_string() && k.as_string() == node.attribute) {
          v = std::move(value);
          return;
        }
      ns.dict().emplace_back(node.attribute, std::move(value));
      return;
    }
    assign(node.targets, node.unpack, value);
  }

  void render_node(const BlockSetNode& node, std::size_t) {
    // Render the body on its own, then keep its text as the value.
    RenderedTemplate saved = std::move(result_);
    const bool saved_start = at_line_start_;
    result_ = RenderedTemplate{};
    result_.files = saved.files;
    result_.file_notes = saved.file_notes;
    at_line_start_ = true;
    render(node.body);
    std::string text = std::move(result_.text);
    saved.files = std::move(result_.files);
    saved.file_notes = std::move(result_.file_notes);
    result_ = std::move(saved);
    at_line_start_ = saved_start;
    scope()[node.target] = std::move(text);
  }

  void render_node(const WithNode& node, std::size_t) {
    std::vector<JinjaValue> values;
    for (const auto& [name, e] : node.assignments) values.push_back(eval(*e));
    frames_.emplace_back();
    for (std::size_t i = 0; i < values.size(); ++i) frames_.back()[node.assignments[i].first] = values[i];
    render(node.body);
    frames_.pop_back();
  }

  void render_node(const AssertNode& node, std::size_t tag) {
    if (eval(*node.condition).truthy()) return;
    std::string message;
    if (node.message) {
      const JinjaValue m = defined(eval(*node.message));
      if (m.truthy()) message = m.str();
    }
    if (message.empty()) message = "assertion failed on line " + std::to_string(lines_.line_of(tag));
    throw SpecError(location(tag), "{% assert %} failed: " + message);
  }

  void render_node(const IfNode& node, std::size_t) {
    for (std::size_t i = 0; i < node.branches.size(); ++i) {
      bool taken;
      try {
        taken = eval(*node.branches[i].first).truthy();
      } catch (const JinjaError& problem) {  // an elif's error belongs to the elif's tag
        throw SpecError(location(node.branch_tags[i]), annotate(problem.what()));
      }
      if (taken) return render(node.branches[i].second);
    }
    render(node.else_body);
  }

  void render_node(const ForNode& node, std::size_t tag) {
    JinjaList items = iterate(eval(*node.iterable));
    charge(std::int64_t(items.size()));
    if (node.condition) {
      JinjaList kept;
      for (const auto& item : items) {
        frames_.emplace_back();
        assign(node.targets, node.unpack, item);
        const bool keep = eval(*node.condition).truthy();
        frames_.pop_back();
        if (keep) kept.push_back(item);
      }
      items = std::move(kept);
    }
    if (items.empty()) return render(node.else_body);
    const std::int64_t n = std::int64_t(items.size());
    for (std::int64_t k = 0; k < n; ++k) {
      current_tag_ = tag;
      frames_.emplace_back();  // each iteration gets its own scope, as in Jinja2
      JinjaDict loop = {{"index", k + 1}, {"index0", k}, {"revindex", n - k}, {"revindex0", n - k - 1},
                        {"first", k == 0}, {"last", k == n - 1}, {"length", n}, {"depth", 1}, {"depth0", 0}};
      if (k > 0) loop.emplace_back("previtem", items[std::size_t(k - 1)]);
      if (k + 1 < n) loop.emplace_back("nextitem", items[std::size_t(k + 1)]);
      scope()["loop"] = JinjaValue(std::move(loop));
      assign(node.targets, node.unpack, items[std::size_t(k)]);
      render(node.body);
      frames_.pop_back();
    }
  }

  std::shared_ptr<const ParsedTemplate> tmpl_;
  const std::string& src_;
  const LineTable& lines_;
  const std::string& filename_;
  std::shared_ptr<const JinjaVariables> base_ptr_;
  const JinjaVariables& base_;
  std::shared_ptr<JinjaVariables> top_;  // the template's top-level variables (a module's exports)
  std::vector<JinjaVariables> frames_;   // loops, with blocks, macro calls: innermost last
  const JinjaOptions& options_;
  std::int64_t* budget_;
  int depth_;
  Session& session_;
  RenderedTemplate result_;
  bool at_line_start_ = true;
  std::pair<int, int> next_{0, 1};
  std::size_t current_tag_ = 0;
  std::vector<std::string> tag_base_lookups_;  // base variables the current tag read
  std::shared_ptr<const RenderedTemplate> pasted_;  // what the last host call pasted
};

std::string Renderer::run_macro(const MacroNode& node, JinjaVariables arguments) {
  frames_.push_back(std::move(arguments));
  render(node.body);
  frames_.pop_back();
  return std::move(result_.text);
}

// Python expressions (spec values): names from the caller, no host functions.
class PythonEvaluator : public Evaluator {
 public:
  PythonEvaluator(const std::function<std::optional<JinjaValue>(std::string_view)>& lookup, std::int64_t* budget)
      : Evaluator(true, budget, *budget), lookup_(lookup) {}

 protected:
  JinjaValue lookup(const std::string& name) override {
    if (std::optional<JinjaValue> v = lookup_(name)) return *v;
    return JinjaUndefined{name, "name '" + name + "' is not defined"};
  }
  JinjaValue call_host(const JinjaCallable& f, std::vector<JinjaValue>,
                       std::vector<std::pair<std::string, JinjaValue>>) override {
    throw JinjaError("unknown function '" + f.name + "'");
  }

 private:
  const std::function<std::optional<JinjaValue>(std::string_view)>& lookup_;
};

}  // namespace

int RenderedTemplate::source_line_of(int output_line_1based) const {
  if (source_line.empty()) return 1;
  const int last = static_cast<int>(source_line.size());
  return source_line[static_cast<std::size_t>(std::clamp(output_line_1based, 1, last) - 1)];
}

int RenderedTemplate::source_file_of(int output_line_1based) const {
  if (source_file.empty()) return 0;
  const int last = static_cast<int>(source_file.size());
  return source_file[static_cast<std::size_t>(std::clamp(output_line_1based, 1, last) - 1)];
}

RenderedTemplate render_jinja(std::string_view source, const JinjaVariables& variables,
                              const std::string& filename, const JinjaOptions& options) {
  std::int64_t own_budget = options.max_iterations;
  std::int64_t* budget = options.iteration_budget ? options.iteration_budget : &own_budget;
  Session session;
  return Renderer(parse_template(source, filename), std::make_shared<const JinjaVariables>(variables), options,
                  budget, 0, session)
      .run();
}

RenderedTemplate render_jinja(std::string_view source, const JinjaVariables& variables,
                              const std::string& filename, std::int64_t max_iterations) {
  JinjaOptions options;
  options.max_iterations = max_iterations;
  return render_jinja(source, variables, filename, options);
}

JinjaValue evaluate_python_expression(
    std::string_view text, const std::function<std::optional<JinjaValue>(std::string_view)>& lookup) {
  ExprParser parser(text);
  if (parser.at_end()) throw JinjaError("empty expression");
  ExprPtr e = parser.tuple();
  parser.expect_end();
  std::int64_t budget = 1'000'000;
  PythonEvaluator evaluator(lookup, &budget);
  return defined(evaluator.eval(*e));
}

}  // namespace looptrace
