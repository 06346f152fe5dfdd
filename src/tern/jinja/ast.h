// The syntax tree of a parsed template. Nodes are plain data the Renderer walks; a parsed
// tree is never changed, so one template renders on many threads at once.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tern/jinja/value.h"

namespace tern::jinja {

struct Expr;
struct Stmt;
using ExprPtr = std::unique_ptr<Expr>;
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

enum class ExprKind {
  Literal,    // literal
  Name,       // name
  List,       // args
  Tuple,      // args
  Dict,       // args: key, value, key, value...
  Attribute,  // args[0].name
  Item,       // args[0][args[1]]
  Slice,      // args[0][args[1]:args[2]:args[3]] (null = omitted)
  Call,       // args[0](args[1..], kwargs)
  Filter,     // args[0] | name(args[1..], kwargs)
  Test,       // args[0] is name(args[1..], kwargs)
  Negate,     // -args[0]
  Plus,       // +args[0]
  Not,        // not args[0]
  And,
  Or,
  Binary,       // args[0] op args[1]: + - * / // % ** ~
  Compare,      // args[0] ops[0] args[1] ops[1] args[2]...: == != < <= > >= in notin
  Conditional,  // args[1] if args[0] else args[2] (args[2] null: undefined)
};

struct Expr {
  ExprKind kind;
  int line = 0;
  Value literal;
  std::string name;              // Name, Attribute, Filter, Test; operator of Binary
  std::vector<std::string> ops;  // Compare
  std::vector<ExprPtr> args;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
};

enum class StmtKind {
  Text,    // text
  Output,  // {{ expr }}
  If,      // conditions[i] → bodies[i]; else_body
  For,     // targets in expr [if filter]: body, else_body
  Set,     // targets = expr; or attribute set (ns.attr); or block set (body | filters)
  Macro,   // name(params) body
  Break,
  Continue,
  With,         // targets[i] = values[i], body
  FilterBlock,  // body | filters
  Scope,        // body rendered as is (transformers' {% generation %})
};

struct Stmt {
  StmtKind kind;
  int line = 0;
  std::string text;                  // Text; Macro name; Set: namespace name for ns.attr
  std::string attribute;             // Set ns.attr
  ExprPtr expr;                      // Output, For (iterable), Set (value)
  ExprPtr filter;                    // For: `if` condition; Set/FilterBlock: filter chain on
                                     // a Name "<block>" placeholder
  std::vector<std::string> targets;  // For, Set, With
  std::vector<ExprPtr> values;       // With
  std::vector<ExprPtr> conditions;   // If
  std::vector<Body> bodies;          // If
  Body body, else_body;
  std::vector<std::pair<std::string, ExprPtr>> params;  // Macro (default may be null)
  bool unpack = false;                                  // For/Set: targets came as a tuple
};

}  // namespace tern::jinja
