#include "runtime/chat/Lexer.h"

#include "runtime/chat/TemplateError.h"

#include <cctype>

namespace gerbil::chat {
namespace {

bool isSpace(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}
bool isNameStart(char c) {
  return std::isalpha(static_cast<unsigned char>(c)) || c == '_';
}
bool isNameChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
}
bool isDigit(char c) {
  return std::isdigit(static_cast<unsigned char>(c));
}

void appendUtf8(std::string &out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

// Jinja normalises line endings to \n and, without keep_trailing_newline, drops one final newline.
std::string normalizeNewlines(std::string_view source) {
  std::string out;
  out.reserve(source.size());
  for (size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\r') {
      out += '\n';
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
    } else {
      out += source[i];
    }
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

class Lexer {
public:
  Lexer(std::string_view source, const std::string &name) : source_(normalizeNewlines(source)), name_(name) {}

  std::vector<Token> run() {
    while (pos_ < source_.size()) {
      size_t tag = findTagStart();
      std::string text = source_.substr(pos_, tag == std::string::npos ? std::string::npos : tag - pos_);
      int textLine = line_;
      if (tag == std::string::npos) {
        emitText(std::move(text), textLine);
        break;
      }
      char kind = source_[tag + 1];
      char sign = tag + 2 < source_.size() && (source_[tag + 2] == '-' || source_[tag + 2] == '+')
                      ? source_[tag + 2]
                      : 0;
      if (sign == '-') {
        while (!text.empty() && isSpace(text.back())) text.pop_back();
      } else if (sign != '+' && kind != '{') {
        stripIndentation(text);
      }
      emitText(std::move(text), textLine);
      advanceTo(tag);
      size_t body = tag + 2 + (sign ? 1 : 0);
      if (kind == '#')
        lexComment(body);
      else if (kind == '%' && lexRaw(body))
        continue;
      else
        lexTag(kind == '{' ? TokenType::VariableBegin : TokenType::BlockBegin, body);
    }
    tokens_.push_back(Token{TokenType::End, "", line_});
    return std::move(tokens_);
  }

private:
  [[noreturn]] void fail(int line, const std::string &message) const {
    throw ChatTemplateError(name_, line, message);
  }

  size_t findTagStart() const {
    for (size_t i = source_.find('{', pos_); i != std::string::npos; i = source_.find('{', i + 1))
      if (i + 1 < source_.size() && (source_[i + 1] == '{' || source_[i + 1] == '%' || source_[i + 1] == '#'))
        return i;
    return std::string::npos;
  }

  void advanceTo(size_t to) {
    for (; pos_ < to; ++pos_)
      if (source_[pos_] == '\n') ++line_;
  }

  // lstrip_blocks: spaces and tabs between the start of the line and a block tag are not output.
  void stripIndentation(std::string &text) const {
    size_t lineStart = text.rfind('\n');
    lineStart = lineStart == std::string::npos ? 0 : lineStart + 1;
    if (lineStart == 0 && !lineStarting_) return;
    if (lineStart == text.size()) return;
    for (size_t i = lineStart; i < text.size(); ++i)
      if (!isSpace(text[i])) return;
    text.resize(lineStart);
  }

  void emitText(std::string text, int line) {
    if (!text.empty()) tokens_.push_back(Token{TokenType::Text, std::move(text), line});
  }

  // After a tag: `-` eats all the whitespace that follows, else trim_blocks eats one newline after a block or
  // comment tag (a `+` keeps it).
  void finishTag(size_t after, char sign, bool isBlock) {
    advanceTo(after);
    if (sign == '-') {
      while (pos_ < source_.size() && isSpace(source_[pos_])) advanceTo(pos_ + 1);
    } else if (isBlock && sign != '+' && pos_ < source_.size() && source_[pos_] == '\n') {
      advanceTo(pos_ + 1);
    }
    lineStarting_ = pos_ > 0 && source_[pos_ - 1] == '\n';
  }

  void lexComment(size_t body) {
    size_t end = source_.find("#}", body);
    if (end == std::string::npos) fail(line_, "unclosed comment");
    char sign = end > body && (source_[end - 1] == '-' || source_[end - 1] == '+') ? source_[end - 1] : 0;
    finishTag(end + 2, sign, true);
  }

  // {% raw %}...{% endraw %}: the text between is output as it is.
  bool lexRaw(size_t body) {
    size_t p = body;
    while (p < source_.size() && isSpace(source_[p])) ++p;
    if (source_.compare(p, 3, "raw") != 0 || (p + 3 < source_.size() && isNameChar(source_[p + 3])))
      return false;
    p += 3;
    while (p < source_.size() && isSpace(source_[p])) ++p;
    char openSign = p < source_.size() && source_[p] == '-' ? '-' : 0;
    if (source_.compare(p + (openSign ? 1 : 0), 2, "%}") != 0) return false;
    int rawLine = line_;
    finishTag(p + (openSign ? 1 : 0) + 2, openSign, false);
    for (size_t search = pos_;;) {
      size_t tag = source_.find("{%", search);
      if (tag == std::string::npos) fail(rawLine, "unclosed raw block: no {% endraw %}");
      size_t q = tag + 2;
      char closeSign = q < source_.size() && (source_[q] == '-' || source_[q] == '+') ? source_[q++] : 0;
      while (q < source_.size() && isSpace(source_[q])) ++q;
      if (source_.compare(q, 6, "endraw") != 0) {
        search = tag + 2;
        continue;
      }
      q += 6;
      while (q < source_.size() && isSpace(source_[q])) ++q;
      char endSign = q < source_.size() && (source_[q] == '-' || source_[q] == '+') ? source_[q++] : 0;
      if (source_.compare(q, 2, "%}") != 0) fail(line_, "malformed {% endraw %}");
      std::string text = source_.substr(pos_, tag - pos_);
      if (closeSign == '-')
        while (!text.empty() && isSpace(text.back())) text.pop_back();
      emitText(std::move(text), line_);
      finishTag(q + 2, endSign, true);
      return true;
    }
  }

  // The end delimiter of the current tag at pos_, with its whitespace sign: returns its length, 0 if none.
  size_t tagEndAt(TokenType begin, char &sign) const {
    const char *close = begin == TokenType::VariableBegin ? "}}" : "%}";
    sign = 0;
    if (source_.compare(pos_, 2, close) == 0) return 2;
    if ((source_[pos_] == '-' || source_[pos_] == '+') && source_.compare(pos_ + 1, 2, close) == 0) {
      sign = source_[pos_];
      return 3;
    }
    return 0;
  }

  void lexTag(TokenType begin, size_t body) {
    int tagLine = line_;
    tokens_.push_back(Token{begin, "", line_});
    advanceTo(body);
    brackets_.clear();
    for (;;) {
      while (pos_ < source_.size() && isSpace(source_[pos_])) advanceTo(pos_ + 1);
      if (pos_ >= source_.size())
        fail(tagLine,
             begin == TokenType::VariableBegin ? "unclosed '{{': no '}}'" : "unclosed '{%': no '%}'");
      char sign = 0;
      // Like Jinja, an end delimiter only counts where brackets are balanced: {{ {'a': {'b': 1}} }}.
      if (size_t length = brackets_.empty() ? tagEndAt(begin, sign) : 0) {
        tokens_.push_back(Token{
            begin == TokenType::VariableBegin ? TokenType::VariableEnd : TokenType::BlockEnd, "", line_});
        finishTag(pos_ + length, sign, begin == TokenType::BlockBegin);
        return;
      }
      lexExpressionToken();
    }
  }

  void lexExpressionToken() {
    char c = source_[pos_];
    if (isNameStart(c)) {
      size_t end = pos_;
      while (end < source_.size() && isNameChar(source_[end])) ++end;
      tokens_.push_back(Token{TokenType::Name, source_.substr(pos_, end - pos_), line_});
      advanceTo(end);
      return;
    }
    if (isDigit(c)) return lexNumber();
    if (c == '\'' || c == '"') return lexString(c);
    static const char *twoChar[] = {"//", "**", "==", "!=", "<=", ">="};
    for (const char *op : twoChar)
      if (source_.compare(pos_, 2, op) == 0) {
        tokens_.push_back(Token{TokenType::Operator, op, line_});
        advanceTo(pos_ + 2);
        return;
      }
    static const std::string oneChar = "+-*/%~<>=.,:|()[]{};";
    if (oneChar.find(c) == std::string::npos) fail(line_, std::string("unexpected character '") + c + "'");
    if (c == '(' || c == '[' || c == '{') brackets_.push_back(c == '(' ? ')' : c == '[' ? ']' : '}');
    if (c == ')' || c == ']' || c == '}') {
      if (brackets_.empty() || brackets_.back() != c) fail(line_, std::string("unexpected '") + c + "'");
      brackets_.pop_back();
    }
    tokens_.push_back(Token{TokenType::Operator, std::string(1, c), line_});
    advanceTo(pos_ + 1);
  }

  void lexNumber() {
    size_t end = pos_;
    auto digits = [&] {
      while (end < source_.size() && (isDigit(source_[end]) || source_[end] == '_')) ++end;
    };
    digits();
    // After a '.', digits are an attribute (`x.0`), not a float.
    bool afterDot =
        !tokens_.empty() && tokens_.back().type == TokenType::Operator && tokens_.back().text == ".";
    bool isFloat = false;
    if (!afterDot && end + 1 < source_.size() && source_[end] == '.' && isDigit(source_[end + 1])) {
      ++end;
      digits();
      isFloat = true;
    }
    if (!afterDot && end < source_.size() && (source_[end] == 'e' || source_[end] == 'E')) {
      size_t e = end + 1;
      if (e < source_.size() && (source_[e] == '+' || source_[e] == '-')) ++e;
      if (e < source_.size() && isDigit(source_[e])) {
        end = e;
        digits();
        isFloat = true;
      }
    }
    std::string text;
    for (size_t i = pos_; i < end; ++i)
      if (source_[i] != '_') text += source_[i];
    Token token{isFloat ? TokenType::Float : TokenType::Integer, text, line_};
    try {
      if (isFloat)
        token.number = std::stod(text);
      else
        token.integer = std::stoll(text);
    } catch (const std::exception &) {
      fail(line_, "number '" + text + "' is out of range");
    }
    tokens_.push_back(std::move(token));
    advanceTo(end);
  }

  // Python's escapes, as Jinja decodes string literals (unicode-escape).
  void lexString(char quote) {
    int startLine = line_;
    std::string value;
    size_t p = pos_ + 1;
    auto hex = [&](size_t at, int count, uint32_t &cp) {
      cp = 0;
      for (int i = 0; i < count; ++i) {
        if (at + i >= source_.size() || !std::isxdigit(static_cast<unsigned char>(source_[at + i])))
          return false;
        char h = source_[at + i];
        cp = cp * 16 + (isDigit(h) ? h - '0' : (std::tolower(h) - 'a' + 10));
      }
      return true;
    };
    for (;; ++p) {
      if (p >= source_.size()) fail(startLine, "unclosed string literal");
      char c = source_[p];
      if (c == quote) break;
      if (c != '\\') {
        value += c;
        continue;
      }
      if (++p >= source_.size()) fail(startLine, "unclosed string literal");
      char e = source_[p];
      uint32_t cp = 0;
      switch (e) {
      case 'n':
        value += '\n';
        break;
      case 't':
        value += '\t';
        break;
      case 'r':
        value += '\r';
        break;
      case '\\':
        value += '\\';
        break;
      case '\'':
        value += '\'';
        break;
      case '"':
        value += '"';
        break;
      case 'a':
        value += '\a';
        break;
      case 'b':
        value += '\b';
        break;
      case 'f':
        value += '\f';
        break;
      case 'v':
        value += '\v';
        break;
      case '\n':
        break; // a line continuation
      case 'x':
      case 'u':
      case 'U': {
        int count = e == 'x' ? 2 : e == 'u' ? 4 : 8;
        if (!hex(p + 1, count, cp) || cp > 0x10FFFF)
          fail(line_, std::string("malformed \\") + e + " escape in a string literal");
        appendUtf8(value, cp);
        p += count;
        break;
      }
      default:
        if (e >= '0' && e <= '7') {
          int count = 0;
          while (count < 3 && p < source_.size() && source_[p] >= '0' && source_[p] <= '7')
            cp = cp * 8 + (source_[p++] - '0'), ++count;
          --p;
          appendUtf8(value, cp);
        } else {
          value += '\\'; // Python keeps unknown escapes as they are
          value += e;
        }
      }
    }
    tokens_.push_back(Token{TokenType::String, std::move(value), startLine});
    advanceTo(p + 1);
  }

  std::string source_;
  const std::string &name_;
  size_t pos_ = 0;
  int line_ = 1;
  bool lineStarting_ = true;
  std::vector<char> brackets_;
  std::vector<Token> tokens_;
};

} // namespace

std::vector<Token> tokenize(std::string_view source, const std::string &templateName) {
  return Lexer(source, templateName).run();
}

} // namespace gerbil::chat
