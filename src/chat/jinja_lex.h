// chat/jinja_lex.h — the Jinja lexer: splits a template into text and tag tokens with
// transformers' whitespace control (trim_blocks, lstrip_blocks, "-"/"+" modifiers),
// drops comments and keeps {% raw %} blocks verbatim. chat/jinja_parse.cc parses the
// tokens.
#pragma once
#include <string>
#include <vector>

namespace nextn::jinja {

struct Token {
  enum class Type { kText, kVarBegin, kVarEnd, kBlockBegin, kBlockEnd, kName, kString, kInt, kFloat, kOp, kEnd };
  Type type;
  std::string text;
  int line = 0, col = 0;
};

// The tokens of source, ending with one kEnd. Lexical errors are nextn::Error
// "chat template: line L, column C: ...".
std::vector<Token> lex_template(const std::string& source);

}  // namespace nextn::jinja
