// A recursive-descent parser following the grammar of Jinja's parser: conditional
// expressions, or/and/not, comparisons, + -, ~, * / // %, **, unary minus, then postfix
// (attribute, subscript, call) and filters/tests.
#include "tern/jinja/parser.h"

#include <algorithm>
#include <initializer_list>

#include "tern/jinja/fault.h"

namespace tern::jinja {
namespace {

// Deep enough for any real template, shallow enough that "((((..." cannot overflow the stack.
constexpr int kMaxNesting = 200;

class Parser {
 public:
  explicit Parser(std::vector<Token> tokens) : tokens_(std::move(tokens)) {}

  Body parse() {
    Body body = parse_until({}, nullptr);
    return body;
  }

 private:
  const Token& cur() const { return tokens_[pos_]; }
  const Token& peek(size_t ahead = 1) const {
    return tokens_[std::min(pos_ + ahead, tokens_.size() - 1)];
  }
  const Token& next() {
    const Token& t = tokens_[pos_];
    if (pos_ + 1 < tokens_.size()) ++pos_;
    return t;
  }

  static std::string describe(const Token& t) {
    switch (t.kind) {
      case TokenKind::Text:
        return "template text";
      case TokenKind::VariableBegin:
        return "'{{'";
      case TokenKind::VariableEnd:
        return "'}}'";
      case TokenKind::BlockBegin:
        return "'{%'";
      case TokenKind::BlockEnd:
        return "'%}'";
      case TokenKind::Name:
        return "'" + t.text + "'";
      case TokenKind::String:
        return "a string";
      case TokenKind::Integer:
      case TokenKind::Float:
        return "number " + t.text;
      case TokenKind::Operator:
        return "'" + t.text + "'";
      case TokenKind::End:
        return "the end of the template";
    }
    return "?";
  }

  [[noreturn]] void error(const std::string& what) const {
    fail("line " + std::to_string(cur().line) + ": " + what);
  }

  bool is_op(const char* op) const { return cur().kind == TokenKind::Operator && cur().text == op; }
  bool is_name(const char* name) const {
    return cur().kind == TokenKind::Name && cur().text == name;
  }
  bool skip_op(const char* op) {
    if (!is_op(op)) return false;
    next();
    return true;
  }
  bool skip_name(const char* name) {
    if (!is_name(name)) return false;
    next();
    return true;
  }
  void expect_op(const char* op) {
    if (!skip_op(op)) error(std::string("expected '") + op + "', got " + describe(cur()));
  }
  std::string expect_name() {
    if (cur().kind != TokenKind::Name) error("expected a name, got " + describe(cur()));
    return next().text;
  }
  void expect_block_end() {
    if (cur().kind != TokenKind::BlockEnd) error("expected '%}', got " + describe(cur()));
    next();
  }

  struct DepthGuard {
    explicit DepthGuard(Parser& p) : p_(p) {
      if (++p_.depth_ > kMaxNesting)
        p_.error("template nests deeper than " + std::to_string(kMaxNesting) + " levels");
    }
    ~DepthGuard() { --p_.depth_; }
    Parser& p_;
  };

  ExprPtr make(ExprKind kind, int line) {
    auto e = std::make_unique<Expr>();
    e->kind = kind;
    e->line = line;
    return e;
  }

  // ---- statements ----

  Body parse_until(std::initializer_list<const char*> ends, std::string* which) {
    DepthGuard guard(*this);
    Body body;
    while (true) {
      const Token& t = cur();
      switch (t.kind) {
        case TokenKind::Text: {
          auto s = std::make_unique<Stmt>();
          s->kind = StmtKind::Text;
          s->line = t.line;
          s->text = t.text;
          body.push_back(std::move(s));
          next();
          break;
        }
        case TokenKind::VariableBegin: {
          next();
          auto s = std::make_unique<Stmt>();
          s->kind = StmtKind::Output;
          s->line = t.line;
          s->expr = parse_tuple(true, {}, false);
          if (cur().kind != TokenKind::VariableEnd) error("expected '}}', got " + describe(cur()));
          next();
          body.push_back(std::move(s));
          break;
        }
        case TokenKind::BlockBegin: {
          const Token& name = peek();
          if (name.kind == TokenKind::Name)
            for (const char* end : ends)
              if (name.text == end) {
                next();
                next();
                *which = end;
                return body;
              }
          next();
          body.push_back(parse_statement());
          break;
        }
        case TokenKind::End: {
          if (ends.size() == 0) return body;
          std::string expected;
          for (const char* end : ends)
            expected += (expected.empty() ? "'" : " or '") + std::string(end) + "'";
          error("unexpected end of template, expected " + expected);
        }
        default:
          error("unexpected " + describe(t));
      }
    }
  }

  StmtPtr parse_statement() {
    if (cur().kind != TokenKind::Name)
      error("expected a tag name after '{%', got " + describe(cur()));
    const std::string name = cur().text;
    auto s = std::make_unique<Stmt>();
    s->line = cur().line;
    next();
    if (name == "if") return parse_if(std::move(s));
    if (name == "for") return parse_for(std::move(s));
    if (name == "set") return parse_set(std::move(s));
    if (name == "macro") return parse_macro(std::move(s));
    if (name == "with") return parse_with(std::move(s));
    if (name == "filter") return parse_filter_block(std::move(s));
    if (name == "generation") {
      // transformers' AssistantTracker tag: only marks assistant text for masks.
      s->kind = StmtKind::Scope;
      expect_block_end();
      std::string which;
      s->body = parse_until({"endgeneration"}, &which);
      expect_block_end();
      return s;
    }
    if (name == "break" || name == "continue") {
      if (loop_depth_ == 0) error("'" + name + "' outside of a for loop");
      s->kind = name == "break" ? StmtKind::Break : StmtKind::Continue;
      expect_block_end();
      return s;
    }
    static const char* const kUnsupported[] = {"include", "import",   "from", "extends",
                                               "block",   "call",     "do",   "autoescape",
                                               "trans",   "pluralize"};
    for (const char* u : kUnsupported)
      if (name == u) error("the '" + name + "' tag is not supported by tern's template engine");
    error("unknown tag '" + name + "'");
  }

  StmtPtr parse_if(StmtPtr s) {
    s->kind = StmtKind::If;
    while (true) {
      s->conditions.push_back(parse_tuple(false, {}, false));
      expect_block_end();
      std::string which;
      s->bodies.push_back(parse_until({"elif", "else", "endif"}, &which));
      if (which == "elif") continue;
      if (which == "else") {
        expect_block_end();
        s->else_body = parse_until({"endif"}, &which);
      }
      expect_block_end();
      return s;
    }
  }

  void parse_targets(StmtPtr& s, const char* stop) {
    s->targets.push_back(expect_name());
    while (skip_op(",")) {
      s->unpack = true;
      if (is_name(stop)) break;
      s->targets.push_back(expect_name());
    }
  }

  StmtPtr parse_for(StmtPtr s) {
    s->kind = StmtKind::For;
    parse_targets(s, "in");
    if (!skip_name("in")) error("expected 'in' in a for tag, got " + describe(cur()));
    s->expr = parse_tuple(false, {"if", "recursive"}, false);
    if (skip_name("if")) s->filter = parse_expression(true);
    if (is_name("recursive"))
      error("recursive for loops are not supported by tern's template engine");
    expect_block_end();
    ++loop_depth_;
    std::string which;
    s->body = parse_until({"else", "endfor"}, &which);
    --loop_depth_;
    if (which == "else") {
      expect_block_end();
      s->else_body = parse_until({"endfor"}, &which);
    }
    expect_block_end();
    return s;
  }

  // A filter chain applied to the placeholder name "<block>" (block set, filter tag).
  ExprPtr parse_filter_chain(int line) {
    ExprPtr node = make(ExprKind::Name, line);
    node->name = "<block>";
    while (true) {
      node = parse_filter(std::move(node));
      if (!skip_op("|")) return node;
    }
  }

  StmtPtr parse_set(StmtPtr s) {
    s->kind = StmtKind::Set;
    const std::string first = expect_name();
    if (skip_op(".")) {
      s->text = first;
      s->attribute = expect_name();
    } else {
      s->targets.push_back(first);
      while (skip_op(",")) {
        s->unpack = true;
        s->targets.push_back(expect_name());
      }
    }
    if (skip_op("=")) {
      s->expr = parse_tuple(true, {}, false);
      expect_block_end();
      return s;
    }
    if (s->unpack) error("a block set takes one name");
    if (skip_op("|")) s->filter = parse_filter_chain(s->line);
    expect_block_end();
    std::string which;
    const int saved = loop_depth_;
    s->body = parse_until({"endset"}, &which);
    loop_depth_ = saved;
    expect_block_end();
    return s;
  }

  StmtPtr parse_macro(StmtPtr s) {
    s->kind = StmtKind::Macro;
    s->text = expect_name();
    expect_op("(");
    while (!skip_op(")")) {
      if (!s->params.empty()) expect_op(",");
      if (skip_op(")")) break;
      std::string param = expect_name();
      ExprPtr def;
      if (skip_op("=")) def = parse_expression(true);
      s->params.emplace_back(std::move(param), std::move(def));
    }
    expect_block_end();
    const int saved = loop_depth_;
    loop_depth_ = 0;
    std::string which;
    s->body = parse_until({"endmacro"}, &which);
    loop_depth_ = saved;
    if (cur().kind == TokenKind::Name) next();  // {% endmacro name %}
    expect_block_end();
    return s;
  }

  StmtPtr parse_with(StmtPtr s) {
    s->kind = StmtKind::With;
    while (cur().kind != TokenKind::BlockEnd) {
      if (!s->targets.empty()) expect_op(",");
      s->targets.push_back(expect_name());
      expect_op("=");
      s->values.push_back(parse_expression(true));
    }
    expect_block_end();
    std::string which;
    s->body = parse_until({"endwith"}, &which);
    expect_block_end();
    return s;
  }

  StmtPtr parse_filter_block(StmtPtr s) {
    s->kind = StmtKind::FilterBlock;
    s->filter = parse_filter_chain(s->line);
    expect_block_end();
    std::string which;
    s->body = parse_until({"endfilter"}, &which);
    expect_block_end();
    return s;
  }

  // ---- expressions ----

  bool at_tuple_end(std::initializer_list<const char*> extra_end) const {
    const Token& t = cur();
    if (t.kind == TokenKind::VariableEnd || t.kind == TokenKind::BlockEnd ||
        t.kind == TokenKind::End)
      return true;
    if (t.kind == TokenKind::Operator && t.text == ")") return true;
    if (t.kind == TokenKind::Name)
      for (const char* e : extra_end)
        if (t.text == e) return true;
    return false;
  }

  ExprPtr parse_tuple(bool with_condexpr, std::initializer_list<const char*> extra_end,
                      bool explicit_parentheses) {
    const int line = cur().line;
    std::vector<ExprPtr> items;
    bool is_tuple = false;
    while (true) {
      if (!items.empty()) expect_op(",");
      if (at_tuple_end(extra_end)) break;
      items.push_back(parse_expression(with_condexpr));
      if (is_op(","))
        is_tuple = true;
      else
        break;
    }
    if (!is_tuple) {
      if (!items.empty()) return std::move(items[0]);
      if (!explicit_parentheses) error("expected an expression, got " + describe(cur()));
    }
    ExprPtr e = make(ExprKind::Tuple, line);
    e->args = std::move(items);
    return e;
  }

  ExprPtr parse_expression(bool with_condexpr) {
    DepthGuard guard(*this);
    if (!with_condexpr) return parse_or();
    ExprPtr expr = parse_or();
    while (is_name("if")) {
      const int line = next().line;
      ExprPtr cond = parse_or();
      ExprPtr otherwise;
      if (skip_name("else")) otherwise = parse_expression(true);
      ExprPtr e = make(ExprKind::Conditional, line);
      e->args.push_back(std::move(cond));
      e->args.push_back(std::move(expr));
      e->args.push_back(std::move(otherwise));
      expr = std::move(e);
    }
    return expr;
  }

  ExprPtr binary(ExprKind kind, ExprPtr left, ExprPtr right, int line, std::string op = {}) {
    ExprPtr e = make(kind, line);
    e->name = std::move(op);
    e->args.push_back(std::move(left));
    e->args.push_back(std::move(right));
    return e;
  }

  ExprPtr parse_or() {
    ExprPtr left = parse_and();
    while (is_name("or")) {
      const int line = next().line;
      left = binary(ExprKind::Or, std::move(left), parse_and(), line);
    }
    return left;
  }

  ExprPtr parse_and() {
    ExprPtr left = parse_not();
    while (is_name("and")) {
      const int line = next().line;
      left = binary(ExprKind::And, std::move(left), parse_not(), line);
    }
    return left;
  }

  ExprPtr parse_not() {
    DepthGuard guard(*this);
    if (is_name("not")) {
      ExprPtr e = make(ExprKind::Not, next().line);
      e->args.push_back(parse_not());
      return e;
    }
    return parse_compare();
  }

  ExprPtr parse_compare() {
    const int line = cur().line;
    ExprPtr first = parse_math1();
    ExprPtr e;
    while (true) {
      std::string op;
      if (cur().kind == TokenKind::Operator &&
          (cur().text == "==" || cur().text == "!=" || cur().text == "<" || cur().text == "<=" ||
           cur().text == ">" || cur().text == ">=")) {
        op = next().text;
      } else if (is_name("in")) {
        next();
        op = "in";
      } else if (is_name("not") && peek().kind == TokenKind::Name && peek().text == "in") {
        next();
        next();
        op = "notin";
      } else {
        break;
      }
      if (!e) {
        e = make(ExprKind::Compare, line);
        e->args.push_back(std::move(first));
      }
      e->ops.push_back(op);
      e->args.push_back(parse_math1());
    }
    return e ? std::move(e) : std::move(first);
  }

  ExprPtr parse_math1() {
    ExprPtr left = parse_concat();
    while (is_op("+") || is_op("-")) {
      const Token& t = next();
      left = binary(ExprKind::Binary, std::move(left), parse_concat(), t.line, t.text);
    }
    return left;
  }

  ExprPtr parse_concat() {
    ExprPtr left = parse_math2();
    while (is_op("~")) {
      const Token& t = next();
      left = binary(ExprKind::Binary, std::move(left), parse_math2(), t.line, "~");
    }
    return left;
  }

  ExprPtr parse_math2() {
    ExprPtr left = parse_pow();
    while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
      const Token& t = next();
      left = binary(ExprKind::Binary, std::move(left), parse_pow(), t.line, t.text);
    }
    return left;
  }

  ExprPtr parse_pow() {
    ExprPtr left = parse_unary(true);
    while (is_op("**")) {
      const Token& t = next();
      left = binary(ExprKind::Binary, std::move(left), parse_unary(true), t.line, "**");
    }
    return left;
  }

  ExprPtr parse_unary(bool with_filter) {
    DepthGuard guard(*this);
    ExprPtr node;
    if (is_op("-") || is_op("+")) {
      const Token& t = next();
      node = make(t.text == "-" ? ExprKind::Negate : ExprKind::Plus, t.line);
      node->args.push_back(parse_unary(false));
    } else {
      node = parse_primary();
    }
    node = parse_postfix(std::move(node));
    if (with_filter) node = parse_filter_expr(std::move(node));
    return node;
  }

  ExprPtr parse_primary() {
    const Token& t = cur();
    switch (t.kind) {
      case TokenKind::Name: {
        next();
        ExprPtr e = make(ExprKind::Literal, t.line);
        if (t.text == "true" || t.text == "True")
          e->literal = Value(true);
        else if (t.text == "false" || t.text == "False")
          e->literal = Value(false);
        else if (t.text == "none" || t.text == "None")
          e->literal = Value::none();
        else {
          e->kind = ExprKind::Name;
          e->name = t.text;
        }
        return e;
      }
      case TokenKind::String: {
        ExprPtr e = make(ExprKind::Literal, t.line);
        std::string s;
        while (cur().kind == TokenKind::String) s += next().text;  // "a" "b" is "ab"
        e->literal = Value(std::move(s));
        return e;
      }
      case TokenKind::Integer:
      case TokenKind::Float: {
        next();
        ExprPtr e = make(ExprKind::Literal, t.line);
        e->literal = t.number;
        return e;
      }
      case TokenKind::Operator: {
        if (t.text == "(") {
          next();
          ExprPtr e = parse_tuple(true, {}, true);
          expect_op(")");
          return e;
        }
        if (t.text == "[") {
          next();
          ExprPtr e = make(ExprKind::List, t.line);
          while (!skip_op("]")) {
            if (!e->args.empty()) expect_op(",");
            if (skip_op("]")) break;
            e->args.push_back(parse_expression(true));
          }
          return e;
        }
        if (t.text == "{") {
          next();
          ExprPtr e = make(ExprKind::Dict, t.line);
          while (!skip_op("}")) {
            if (!e->args.empty()) expect_op(",");
            if (skip_op("}")) break;
            e->args.push_back(parse_expression(true));
            expect_op(":");
            e->args.push_back(parse_expression(true));
          }
          return e;
        }
        break;
      }
      default:
        break;
    }
    error("unexpected " + describe(t) + " in an expression");
  }

  ExprPtr parse_postfix(ExprPtr node) {
    while (true) {
      if (is_op(".") || is_op("[")) {
        node = parse_subscript(std::move(node));
      } else if (is_op("(")) {
        node = parse_call(std::move(node));
      } else {
        return node;
      }
    }
  }

  ExprPtr parse_filter_expr(ExprPtr node) {
    while (true) {
      if (is_op("|")) {
        next();
        node = parse_filter(std::move(node));
      } else if (is_name("is")) {
        node = parse_test(std::move(node));
      } else if (is_op("(")) {
        node = parse_call(std::move(node));
      } else {
        return node;
      }
    }
  }

  ExprPtr parse_subscript(ExprPtr node) {
    const Token& t = next();
    if (t.text == ".") {
      if (cur().kind == TokenKind::Integer) {
        ExprPtr e = make(ExprKind::Item, t.line);
        ExprPtr key = make(ExprKind::Literal, t.line);
        key->literal = next().number;
        e->args.push_back(std::move(node));
        e->args.push_back(std::move(key));
        return e;
      }
      ExprPtr e = make(ExprKind::Attribute, t.line);
      e->name = expect_name();
      e->args.push_back(std::move(node));
      return e;
    }
    // '[' subscript or slice
    ExprPtr start, stop, step;
    bool slice = false;
    if (!is_op(":")) start = parse_expression(true);
    if (skip_op(":")) {
      slice = true;
      if (!is_op("]") && !is_op(":")) stop = parse_expression(true);
      if (skip_op(":") && !is_op("]")) step = parse_expression(true);
    }
    if (is_op(",")) error("subscripts with a comma (tuple keys) are not supported");
    expect_op("]");
    ExprPtr e = make(slice ? ExprKind::Slice : ExprKind::Item, t.line);
    e->args.push_back(std::move(node));
    e->args.push_back(std::move(start));
    if (slice) {
      e->args.push_back(std::move(stop));
      e->args.push_back(std::move(step));
    }
    return e;
  }

  // Appends to e.args after what is already there (the callee, filtered or tested value).
  void parse_call_args(Expr& e) {
    const size_t base = e.args.size();
    expect_op("(");
    while (!skip_op(")")) {
      if (e.args.size() > base || !e.kwargs.empty()) {
        expect_op(",");
        if (skip_op(")")) break;
      }
      if (is_op("*") || is_op("**")) error("*args and **kwargs in calls are not supported");
      if (cur().kind == TokenKind::Name && peek().kind == TokenKind::Operator &&
          peek().text == "=") {
        std::string key = next().text;
        next();
        e.kwargs.emplace_back(std::move(key), parse_expression(true));
      } else {
        if (!e.kwargs.empty()) error("a positional argument follows a keyword argument");
        e.args.push_back(parse_expression(true));
      }
    }
  }

  ExprPtr parse_call(ExprPtr node) {
    ExprPtr e = make(ExprKind::Call, cur().line);
    e->args.push_back(std::move(node));
    parse_call_args(*e);
    return e;
  }

  std::string dotted_name() {
    std::string name = expect_name();
    while (is_op(".") && peek().kind == TokenKind::Name) {
      next();
      name += "." + next().text;
    }
    return name;
  }

  ExprPtr parse_filter(ExprPtr node) {
    ExprPtr e = make(ExprKind::Filter, cur().line);
    e->name = dotted_name();
    e->args.push_back(std::move(node));
    if (is_op("(")) parse_call_args(*e);
    return e;
  }

  ExprPtr parse_test(ExprPtr node) {
    const int line = next().line;  // 'is'
    const bool negated = skip_name("not");
    ExprPtr e = make(ExprKind::Test, line);
    e->name = dotted_name();
    e->args.push_back(std::move(node));
    const Token& t = cur();
    if (is_op("(")) {
      parse_call_args(*e);
    } else if ((t.kind == TokenKind::Name || t.kind == TokenKind::String ||
                t.kind == TokenKind::Integer || t.kind == TokenKind::Float || is_op("[") ||
                is_op("{")) &&
               !is_name("else") && !is_name("or") && !is_name("and")) {
      if (is_name("is")) error("tests cannot be chained with 'is'");
      e->args.push_back(parse_postfix(parse_primary()));
    }
    if (!negated) return e;
    ExprPtr n = make(ExprKind::Not, line);
    n->args.push_back(std::move(e));
    return n;
  }

  std::vector<Token> tokens_;
  size_t pos_ = 0;
  int depth_ = 0;
  int loop_depth_ = 0;
};

}  // namespace

Body parse_template(std::string_view source, const LexerOptions& options) {
  return Parser(tokenize(source, options)).parse();
}

}  // namespace tern::jinja
