// chat/jinja_ast.h — the syntax tree of a parsed Jinja template (expressions and
// statements), each node carrying its source line and column for error messages.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "chat/jinja_value.h"

namespace nextn::jinja {

struct Expr;
using ExprPtr = std::shared_ptr<Expr>;

struct Expr {
  enum class Kind { kLiteral, kName, kList, kTuple, kDict, kAttr, kIndex, kSlice, kCall, kFilter, kTest, kUnary, kBinary, kCond };
  Kind kind;
  int line = 0, col = 0;
  Value value;                      // kLiteral
  std::string name;                 // kName, kAttr, kFilter, kTest; operator for kUnary/kBinary
  std::vector<ExprPtr> children;    // operands; kCall/kFilter/kTest: [0] = callee/operand, then args
  std::vector<std::string> kwnames; // for call args after children[0]: "" = positional
  bool negate = false;              // kTest: "is not"
};

struct Node;
using NodePtr = std::shared_ptr<Node>;
using Body = std::vector<NodePtr>;

struct Node {
  enum class Kind { kText, kOutput, kIf, kFor, kSet, kSetBlock, kMacro, kBreak, kContinue, kFilterBlock, kPlain };
  Kind kind;
  int line = 0, col = 0;
  std::string text;                        // kText
  ExprPtr expr;                            // kOutput, kSet value, kFor iterable, kFilterBlock filter
  std::vector<std::pair<ExprPtr, Body>> branches;  // kIf: (condition, body)...
  Body body, else_body;                    // kFor, kMacro, kSetBlock, kFilterBlock, kPlain; kIf else
  std::vector<std::string> targets;        // kFor loop vars; kSet names; kMacro params
  std::vector<ExprPtr> defaults;           // kMacro parameter defaults (nullptr = required)
  ExprPtr target_object;                   // kSet "ns.attr": the object expression; targets[0] = attr
  ExprPtr condition;                       // kFor "if" filter
  std::string name;                        // kMacro name
};

// Parses a template with transformers' settings (trim_blocks, lstrip_blocks). Syntax
// errors are nextn::Error "chat template: line L, column C: ...".
Body parse_template(const std::string& source);

}  // namespace nextn::jinja
