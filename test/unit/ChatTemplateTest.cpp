// Chat templates: the real templates of Qwen2.5, Qwen3, Llama-3 and Mistral rendered for a short conversation
// must give exactly what transformers' apply_chat_template(..., tokenize=False) gives, and the Jinja2 subset
// must behave as Jinja2 does (the expected strings of the semantics table were checked against Jinja2 3.1
// configured as transformers configures it).
#include "runtime/chat/ChatTemplate.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

namespace {

using gerbil::chat::ChatMessage;
using gerbil::chat::ChatOptions;
using gerbil::chat::ChatTemplate;
using gerbil::chat::ChatTemplateError;
namespace fs = std::filesystem;

const fs::path kTokenizers = fs::path(GERBIL_TEST_DATA_DIR) / "fixtures" / "tokenizers";
// The Llama-3 files are under Meta's licence: not in the repository, read from the shared folder.
const fs::path kSharedTokenizers = fs::path(GERBIL_SHARED_DIR) / "fixtures" / "tokenizers";

const std::vector<ChatMessage> kConversation = {
    {"system", "You are a helpful assistant."},
    {"user", "What is the capital of France?"},
    {"assistant", "The capital of France is Paris."},
};

std::vector<ChatMessage> firstTwo() {
  return {kConversation[0], kConversation[1]};
}

ChatOptions withGenerationPrompt(bool on) {
  ChatOptions options;
  options.addGenerationPrompt = on;
  return options;
}

std::string renderTemplate(const std::string &source, const nlohmann::ordered_json &variables = {}) {
  nlohmann::ordered_json context = variables.is_null() ? nlohmann::ordered_json::object() : variables;
  return ChatTemplate(source, "test").render(context);
}

// The message of the ChatTemplateError that `body` throws ("" when it throws none).
template <typename Body> std::string errorOf(Body body) {
  try {
    body();
  } catch (const ChatTemplateError &e) {
    return e.what();
  }
  return "";
}

TEST(ChatTemplate, Qwen3) {
  ChatTemplate chat =
      ChatTemplate::fromTokenizerConfig((kTokenizers / "qwen3" / "tokenizer_config.json").string());
  EXPECT_EQ(chat.apply(firstTwo()), "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
                                    "<|im_start|>user\nWhat is the capital of France?<|im_end|>\n"
                                    "<|im_start|>assistant\n");
  // The last assistant turn after the last user query gets an (empty) thinking block.
  EXPECT_EQ(chat.apply(kConversation, withGenerationPrompt(false)),
            "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
            "<|im_start|>user\nWhat is the capital of France?<|im_end|>\n"
            "<|im_start|>assistant\n<think>\n\n</think>\n\nThe capital of France is Paris.<|im_end|>\n");
  ChatOptions noThinking;
  noThinking.extraVariables = {{"enable_thinking", false}};
  EXPECT_EQ(chat.apply({{"user", "Hi"}}, noThinking),
            "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n");
  // An earlier turn's reasoning is dropped from the history.
  EXPECT_EQ(chat.apply({{"user", "U1"}, {"assistant", "<think>\nR\n</think>\n\nA1"}, {"user", "U2"}}),
            "<|im_start|>user\nU1<|im_end|>\n<|im_start|>assistant\nA1<|im_end|>\n"
            "<|im_start|>user\nU2<|im_end|>\n<|im_start|>assistant\n");
}

TEST(ChatTemplate, MentionsTheNamesOfItsSource) {
  ChatTemplate qwen3 =
      ChatTemplate::fromTokenizerConfig((kTokenizers / "qwen3" / "tokenizer_config.json").string());
  EXPECT_TRUE(qwen3.mentions("enable_thinking"));
  EXPECT_TRUE(qwen3.mentions("messages"));
  ChatTemplate plain("{% for m in messages %}{{ m.content + 'enable_thinking' }}{% endfor %}", "plain");
  EXPECT_TRUE(plain.mentions("content"));
  EXPECT_FALSE(plain.mentions("enable_thinking")); // text in a string is no name
}

TEST(ChatTemplate, Qwen3WithToolsAndToolCalls) {
  ChatTemplate chat =
      ChatTemplate::fromTokenizerConfig((kTokenizers / "qwen3" / "tokenizer_config.json").string());
  auto variables = nlohmann::ordered_json::parse(R"({
    "messages": [
      {"role": "user", "content": "Weather in Paris?"},
      {"role": "assistant", "content": "", "tool_calls": [
        {"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]},
      {"role": "tool", "content": "{\"temp\": 20}"}],
    "tools": [{"type": "function", "function": {"name": "get_weather", "description": "Weather of a city",
      "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}],
    "add_generation_prompt": true})");
  EXPECT_EQ(
      chat.render(variables),
      "<|im_start|>system\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
      "You are provided with function signatures within <tools></tools> XML tags:\n<tools>\n"
      R"({"type": "function", "function": {"name": "get_weather", "description": "Weather of a city", )"
      R"("parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}})"
      "\n</tools>\n\nFor each function call, return a json object with function name and arguments within "
      "<tool_call></tool_call> XML tags:\n<tool_call>\n"
      R"({"name": <function-name>, "arguments": <args-json-object>})"
      "\n</tool_call><|im_end|>\n<|im_start|>user\nWeather in Paris?<|im_end|>\n<|im_start|>assistant\n"
      "<tool_call>\n"
      R"({"name": "get_weather", "arguments": {"city": "Paris"}})"
      "\n</tool_call><|im_end|>\n<|im_start|>user\n<tool_response>\n"
      R"({"temp": 20})"
      "\n</tool_response><|im_end|>\n<|im_start|>assistant\n");
}

// Qwen2.5-Instruct's chat_template (not among the fixtures: written out here). It differs from Qwen3's in the
// default system prompt and in having no thinking blocks.
const char *const kQwen25Template = R"({%- if tools %}
    {{- '<|im_start|>system\n' }}
    {%- if messages[0]['role'] == 'system' %}
        {{- messages[0]['content'] }}
    {%- else %}
        {{- 'You are Qwen, created by Alibaba Cloud. You are a helpful assistant.' }}
    {%- endif %}
    {{- "\n\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are provided with function signatures within <tools></tools> XML tags:\n<tools>" }}
    {%- for tool in tools %}
        {{- "\n" }}
        {{- tool | tojson }}
    {%- endfor %}
    {{- "\n</tools>\n\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call><|im_end|>\n" }}
{%- else %}
    {%- if messages[0]['role'] == 'system' %}
        {{- '<|im_start|>system\n' + messages[0]['content'] + '<|im_end|>\n' }}
    {%- else %}
        {{- '<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n' }}
    {%- endif %}
{%- endif %}
{%- for message in messages %}
    {%- if (message.role == "user") or (message.role == "system" and not loop.first) or (message.role == "assistant" and not message.tool_calls) %}
        {{- '<|im_start|>' + message.role + '\n' + message.content + '<|im_end|>' + '\n' }}
    {%- elif message.role == "assistant" %}
        {{- '<|im_start|>' + message.role }}
        {%- if message.content %}
            {{- '\n' + message.content }}
        {%- endif %}
        {%- for tool_call in message.tool_calls %}
            {%- if tool_call.function is defined %}
                {%- set tool_call = tool_call.function %}
            {%- endif %}
            {{- '\n<tool_call>\n{"name": "' }}
            {{- tool_call.name }}
            {{- '", "arguments": ' }}
            {{- tool_call.arguments | tojson }}
            {{- '}\n</tool_call>' }}
        {%- endfor %}
        {{- '<|im_end|>\n' }}
    {%- elif message.role == "tool" %}
        {%- if (loop.index0 == 0) or (messages[loop.index0 - 1].role != "tool") %}
            {{- '<|im_start|>user' }}
        {%- endif %}
        {{- '\n<tool_response>\n' }}
        {{- message.content }}
        {{- '\n</tool_response>' }}
        {%- if loop.last or (messages[loop.index0 + 1].role != "tool") %}
            {{- '<|im_end|>\n' }}
        {%- endif %}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|im_start|>assistant\n' }}
{%- endif %})";

TEST(ChatTemplate, Qwen25) {
  ChatTemplate chat(kQwen25Template, "qwen2.5 chat_template");
  EXPECT_EQ(chat.apply(kConversation, withGenerationPrompt(false)),
            "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
            "<|im_start|>user\nWhat is the capital of France?<|im_end|>\n"
            "<|im_start|>assistant\nThe capital of France is Paris.<|im_end|>\n");
  EXPECT_EQ(
      chat.apply({{"user", "Hi"}}),
      "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n"
      "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
}

TEST(ChatTemplate, Llama3) {
  fs::path config = kSharedTokenizers / "llama3-bos" / "tokenizer_config.json";
  if (!fs::exists(config))
    GTEST_SKIP() << "no " << config << " (Meta-licensed fixture, not in the repository)";
  ChatTemplate chat = ChatTemplate::fromTokenizerConfig(config.string());
  EXPECT_EQ(chat.specialTokens().value("bos_token", ""), "<|begin_of_text|>");
  const std::string history =
      "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\n"
      "You are a helpful assistant.<|eot_id|>"
      "<|start_header_id|>user<|end_header_id|>\n\nWhat is the capital of France?<|eot_id|>";
  EXPECT_EQ(chat.apply(firstTwo()), history + "<|start_header_id|>assistant<|end_header_id|>\n\n");
  EXPECT_EQ(chat.apply(kConversation, withGenerationPrompt(false)),
            history +
                "<|start_header_id|>assistant<|end_header_id|>\n\nThe capital of France is Paris.<|eot_id|>");
  // `| trim` strips each message's content.
  EXPECT_EQ(chat.apply({{"user", "  Hi \n"}}),
            "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n");
}

TEST(ChatTemplate, Llama3EarlyRevisionAlwaysOpensTheAssistantTurn) {
  fs::path config = kSharedTokenizers / "llama3" / "tokenizer_config.json";
  if (!fs::exists(config))
    GTEST_SKIP() << "no " << config << " (Meta-licensed fixture, not in the repository)";
  ChatTemplate chat = ChatTemplate::fromTokenizerConfig(config.string());
  EXPECT_EQ(chat.apply({{"user", "Hi"}}, withGenerationPrompt(false)),
            "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n");
}

// Mistral-7B-Instruct's chat_template (the fixture's tokenizer_config.json has none: written out here); the
// special tokens come from the fixture.
const char *const kMistralTemplate = R"({%- if messages[0]['role'] == 'system' %}
    {%- set system_message = messages[0]['content'] %}
    {%- set loop_messages = messages[1:] %}
{%- else %}
    {%- set loop_messages = messages %}
{%- endif %}

{{- bos_token }}
{%- for message in loop_messages %}
    {%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}
        {{- raise_exception('After the optional system message, conversation roles must alternate user/assistant/user/assistant/...') }}
    {%- endif %}
    {%- if message['role'] == 'user' %}
        {%- if loop.first and system_message is defined %}
            {{- ' [INST] ' + system_message + '\n\n' + message['content'] + ' [/INST]' }}
        {%- else %}
            {{- ' [INST] ' + message['content'] + ' [/INST]' }}
        {%- endif %}
    {%- elif message['role'] == 'assistant' %}
        {{- ' ' + message['content'] + eos_token}}
    {%- else %}
        {{- raise_exception('Only user and assistant roles are supported, with the exception of an initial optional system message!') }}
    {%- endif %}
{%- endfor %})";

ChatTemplate mistralChat() {
  std::ifstream in(kTokenizers / "mistral" / "tokenizer_config.json");
  std::stringstream text;
  text << in.rdbuf();
  nlohmann::ordered_json config = nlohmann::ordered_json::parse(text.str());
  config["chat_template"] = kMistralTemplate;
  return ChatTemplate::fromTokenizerConfigJson(config.dump(), "mistral/tokenizer_config.json");
}

TEST(ChatTemplate, Mistral) {
  ChatTemplate chat = mistralChat();
  EXPECT_EQ(chat.apply(kConversation),
            "<s> [INST] You are a helpful assistant.\n\nWhat is the capital of France? [/INST]"
            " The capital of France is Paris.</s>");
  EXPECT_EQ(chat.apply({{"user", "Hi"}, {"assistant", "Hello"}, {"user", "Bye"}}),
            "<s> [INST] Hi [/INST] Hello</s> [INST] Bye [/INST]");
}

TEST(ChatTemplate, RaiseExceptionNamesTheTemplateAndLine) {
  ChatTemplate chat = mistralChat();
  std::string error = errorOf([&] { chat.apply({{"user", "a"}, {"user", "b"}}); });
  EXPECT_EQ(error,
            "mistral/tokenizer_config.json chat_template:11: After the optional system message, conversation "
            "roles must alternate user/assistant/user/assistant/...");
}

TEST(ChatTemplate, ConfigWithoutATemplate) {
  std::string path = (kTokenizers / "mistral" / "tokenizer_config.json").string();
  EXPECT_EQ(errorOf([&] { ChatTemplate::fromTokenizerConfig(path); }),
            path + ": there is no \"chat_template\" (this tokenizer has no chat format)");
  EXPECT_NE(errorOf([] {
              ChatTemplate::fromTokenizerConfig("/no/such/tokenizer_config.json");
            }).find("cannot open"),
            std::string::npos);
  EXPECT_NE(errorOf([] {
              ChatTemplate::fromTokenizerConfigJson("{ nope", "broken.json");
            }).find("broken.json: not valid JSON"),
            std::string::npos);
  // A number beyond a double's range is nlohmann's out_of_range, which escaped before.
  EXPECT_NE(errorOf([] {
              ChatTemplate::fromTokenizerConfigJson(R"({"chat_template": "x", "n": 1e999})", "huge.json");
            }).find("huge.json: not valid JSON"),
            std::string::npos);
}

TEST(ChatTemplate, ListOfNamedTemplates) {
  std::string config = R"({"eos_token": {"content": "</s>", "__type": "AddedToken"}, "chat_template": [
    {"name": "default", "template": "D{{ eos_token }}"}, {"name": "tool_use", "template": "T{{ tools|length }}"}]})";
  EXPECT_EQ(ChatTemplate::fromTokenizerConfigJson(config, "c.json").apply({}), "D</s>");
  ChatOptions options;
  options.extraVariables = {{"tools", {1, 2}}};
  ChatTemplate toolUse = ChatTemplate::fromTokenizerConfigJson(config, "c.json", "tool_use");
  EXPECT_EQ(toolUse.name(), "c.json chat_template 'tool_use'");
  EXPECT_EQ(toolUse.apply({}, options), "T2");
  EXPECT_EQ(errorOf([&] { ChatTemplate::fromTokenizerConfigJson(config, "c.json", "rag"); }),
            "c.json: \"chat_template\" has no template named 'rag' (it has: default, tool_use)");
}

TEST(ChatTemplate, SyntaxErrorsNameTheTemplateAndLine) {
  EXPECT_EQ(errorOf([] { ChatTemplate("a\n{{ 1 + }}", "t.jinja"); }),
            "t.jinja:2: expected an expression, found '}}'");
  EXPECT_EQ(errorOf([] { ChatTemplate("{% if true %}\nx", "t.jinja"); }),
            "t.jinja:2: unexpected end of template: missing '{% endif %}'");
  EXPECT_EQ(errorOf([] { ChatTemplate("\n\n{{ x | shout }}", "t.jinja"); }),
            "t.jinja:3: no filter named 'shout'");
  EXPECT_EQ(errorOf([] { ChatTemplate("{{ x is loud }}", "t.jinja"); }), "t.jinja:1: no test named 'loud'");
  EXPECT_EQ(errorOf([] { ChatTemplate("{% include 'x' %}", "t.jinja"); }),
            "t.jinja:1: unknown tag 'include'");
  EXPECT_EQ(errorOf([] { ChatTemplate("{% endfor %}", "t.jinja"); }), "t.jinja:1: unexpected '{% endfor %}'");
  EXPECT_EQ(errorOf([] { ChatTemplate("{{ 'abc }}", "t.jinja"); }), "t.jinja:1: unclosed string literal");
  EXPECT_EQ(errorOf([] { ChatTemplate("x\n{{ a", "t.jinja"); }), "t.jinja:2: unclosed '{{': no '}}'");
  EXPECT_EQ(errorOf([] { ChatTemplate("{% break %}", "t.jinja"); }), "t.jinja:1: 'break' outside of a loop");
  EXPECT_EQ(errorOf([] { ChatTemplate("{# never closed", "t.jinja"); }), "t.jinja:1: unclosed comment");
}

TEST(ChatTemplate, RenderErrorsNameTheTemplateAndLine) {
  EXPECT_EQ(errorOf([] { renderTemplate("ok\n{{ 'a' + 1 }}"); }),
            "test:2: can only concatenate str (not \"int\") to str");
  EXPECT_EQ(errorOf([] { renderTemplate("{{ missing.attribute }}"); }), "test:1: 'missing' is undefined");
  EXPECT_EQ(errorOf([] { renderTemplate("{{ {}.a.b }}"); }), "test:1: 'dict object' has no attribute 'a'");
  EXPECT_EQ(errorOf([] { renderTemplate("{% set x = 1 %}{% set x.y = 2 %}"); }),
            "test:1: cannot assign attribute 'y' on 'x': it is not a namespace()");
  EXPECT_EQ(errorOf([] { renderTemplate("{{ [].append(1) }}"); }),
            "test:1: 'list.append' cannot be called: chat templates run in an immutable sandbox, as in "
            "transformers");
  EXPECT_EQ(errorOf([] { renderTemplate("{{ 1 / 0 }}"); }), "test:1: division by zero");
  EXPECT_EQ(errorOf([] { renderTemplate("{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}"); }),
            "test:1: macro 'f' recurses deeper than 64");
  EXPECT_EQ(errorOf([] { renderTemplate("{{ raise_exception('no ' ~ 'way') }}"); }), "test:1: no way");
}

TEST(ChatTemplate, StrftimeNow) {
  std::string year = renderTemplate("{{ strftime_now('%Y') }}");
  ASSERT_EQ(year.size(), 4u);
  EXPECT_GE(std::stoi(year), 2024);
}

// Jinja2 semantics: each template rendered with the variables below gives exactly what Jinja2 3.1 gives with
// trim_blocks and lstrip_blocks on.
TEST(ChatTemplate, Jinja2Semantics) {
  const auto variables = nlohmann::ordered_json::parse(R"({"messages": [
    {"role": "system", "content": "You are helpful."},
    {"role": "user", "content": "Hi there\nsecond line"},
    {"role": "assistant", "content": "Hello!"}], "x": {}})");
  const std::pair<const char *, const char *> cases[] = {
      {R"(  {% if true %}
  x
  {% endif %}
end)",
       R"(  x
end)"},
      {R"({% if true -%}
   a
{%- endif %})",
       R"(a)"},
      {R"(  {%- if true %}  x{% endif %}
  {%+ if true %}y{% endif %}  
)",
       R"(  x  y  )"},
      {R"({#- comment -#}
  a  {# c #}
b
{# c2 #}
  c)",
       R"(a  b
  c)"},
      {R"({{ "x" }}
{{ "y" }}
)",
       R"(x
y)"},
      {R"({% raw %}{{ not rendered }}{% endraw %})", R"({{ not rendered }})"},
      {R"({% set x = 1 %}{% for i in [1,2] %}{{ x }}{% set x = x + 1 %}{{x}};{% endfor %}{{ x }})",
       R"(12;12;1)"},
      {R"({%- for m in messages -%}
  {{- loop.index0 }}{{ loop.index }}{{ loop.first }}{{ loop.last }}{{ loop.length }}{{ loop.revindex }}{{ loop.cycle("a","b") }}
{% endfor %})",
       R"(01TrueFalse33a
12FalseFalse32b
23FalseTrue31a
)"},
      {R"({% for m in messages if m.role != "system" %}{{ loop.index }}:{{ m.role }}:{{ loop.length }} {% else %}empty{% endfor %})",
       R"(1:user:2 2:assistant:2 )"},
      {R"({% for m in [] %}x{% else %}empty{% endfor %})", R"(empty)"},
      {R"({% for k, v in {"a": 1, "b": 2}.items() %}{{k}}={{v}};{% endfor %}{% for k in {"a": 1} %}{{ k }}{% endfor %})",
       R"(a=1;b=2;a)"},
      {R"({% set ns = namespace(found=false, n=0) %}{% for m in messages %}{% if m.role == "user" %}{% set ns.found = true %}{% set ns.n = ns.n + 1 %}{% endif %}{% endfor %}{{ ns.found }}{{ ns.n }})",
       R"(True1)"},
      {R"({% for i in range(10) %}{% if i == 2 %}{% continue %}{% endif %}{% if i == 5 %}{% break %}{% endif %}{{ i }}{% endfor %})",
       R"(0134)"},
      {R"({% macro render(m, prefix="") -%}
{{ prefix }}{{ m.role }}: {{ m.content }}
{%- endmacro %}
{% for m in messages %}{{ render(m, prefix="> ") }}
{% endfor %})",
       R"(> system: You are helpful.
> user: Hi there
second line
> assistant: Hello!
)"},
      {R"({% set x %}  block {{ 1 + 1 }} {% endset %}[{{ x }}])", R"([  block 2 ])"},
      {R"({% set a, b = 1, 2 %}{{ a }}{{ b }}{% set t = (1, 2) %}{{ t }}{{ t[0] }})", R"(12(1, 2)1)"},
      {R"({% if x %}a{% elif y %}b{% elif true %}c{% else %}d{% endif %})", R"(c)"},
      {R"({% filter upper %}abc{{ "d" }}{% endfilter %})", R"(ABCD)"},
      {R"({{ none }}|{{ [1,"a",none, 1.5, {"k": true}] }}|{{ 1e16 }}|{{ 1.5e-5 }}|{{ 3/2 }}|{{ 4/2 }}|{{ -7//2 }}|{{ -7 % 3 }}|{{ "%s-%d" % ("a", 3) }})",
       R"(None|[1, 'a', None, 1.5, {'k': True}]|1e+16|1.5e-05|1.5|2.0|-4|2|a-3)"},
      {R"({{ -3|abs }}{{ 2 * 3 + 4 }}{{ 2 + 3 * 4 }}{{ 10 - 2 - 3 }}{{ 2 ** 3 ** 2 }}{{ 7 // 2 }}{{ 7 % 2 }}{{ "x" ~ 1 ~ none }})",
       R"(3101456431x1None)"},
      {R"({{ "a" if 1 > 2 else "b" }}{{ 1 < 2 < 3 }}{{ 3 > 2 > 5 }}{{ "b" in "abc" }}{{ 1 not in [1,2] }}{{ not true or true }})",
       R"(bTrueFalseTrueFalseTrue)"},
      {R"({{ 'a\'b' }}{{ "q\"q" }}{{ 'tab\tx' }}{{ '\u00e9' }}{{ 'it\'s' ~ ['it\'s'] }})",
       R"(a'bq"qtab	xéit's["it's"])"},
      {R"({{ messages[0].content | trim }}{{ messages[-1]["content"] }}{{ messages[0].missing is defined }}{{ messages | length - 1 }})",
       R"(You are helpful.Hello!False2)"},
      {R"({{ "Hello"[1:3] }}{{ "Hello"[-1] }}{{ [1,2,3,4,5][::2] }}{{ [1,2,3,4,5][-2:] }}{{ [1,2,3][5:] }}{{ "abc"[::-1] }}{{ [1][5] }})",
       R"(elo[1, 3, 5][4, 5][]cba)"},
      {R"({{ 0.1 + 0.2 }}{{ 1/3 }}{{ 100000000000000000.0 }}{{ 1e-5 }}{{ 0.0001 }}{{ 123456789.123 }}{{ 2.0 }})",
       R"(0.300000000000000040.33333333333333331e+171e-050.0001123456789.1232.0)"},
      {R"({{ undefinedvar }}|{{ undefinedvar|default("d") }}|{{ undefinedvar|length }}|{% for x in undefinedvar %}x{% endfor %}|{{ undefinedvar is not defined }})",
       R"(|d|0||True)"},
      {R"({{ "{{" }}{{ {"a": {"b": 1}} }}{{ (1,) }}{{ [1,2] + [3] }}{{ "ab" * 2 }})",
       R"({{{'a': {'b': 1}}(1,)[1, 2, 3]abab)"},
      {R"({{ x is mapping }}{{ [] is iterable }}{{ 1 is number }}{{ 1 is integer }}{{ 1.0 is float }}{{ true is boolean }}{{ none is none }}{{ "s" is string }})",
       R"(TrueTrueTrueTrueTrueTrueTrueTrue)"},
      {R"({{ 5 is odd }}{{ 4 is even }}{{ 3 is divisibleby 3 }}{{ "abc" is lower }}{{ 3 is gt 2 }}{{ 1 is in [1] }}{{ none is sameas none }})",
       R"(TrueTrueTrueTrueTrueTrueTrue)"},
      {R"({{ "ABC".lower() }}{{ "abc".upper() }}{{ "abc".startswith("a") }}{{ "abc".endswith(("x","c")) }}{{ " x ".lstrip() }}|{{ " x ".rstrip() }}|{{ "xxaxx".strip("x") }})",
       R"(abcABCTrueTruex | x|a)"},
      {R"({{ "a,b,,c".split(",") }}{{ "a b  c".split(None, 1) }}{{ "a b  c".rsplit(None, 1) }}{{ "a,b,c".rsplit(",", 1) }}{{ "a\nb".splitlines() }})",
       R"(['a', 'b', '', 'c']['a', 'b  c']['a b', 'c']['a,b', 'c']['a', 'b'])"},
      {R"({{ "{} and {name}".format(1, name=2) }}{{ ",".join(["a","b"]) }}{{ "xyz".find("y") }}{{ "Hi".replace("i", "o") }}{{ "Ab".title() }})",
       R"(1 and 2a,b1HoAb)"},
      {R"({{ {"a": 1}.get("a") }}{{ {"a": 1}.get("b") }}{{ {"a": 1}.get("b", 2) }}{{ {"a": 1}.keys()|list }}{{ {"a": 1}.values()|list }}{{ {"a": 1}.items() | list }})",
       R"(1None2['a'][1][('a', 1)])"},
      {R"({{ "  Ab c " | trim }}|{{ [3,1,2]|sort }}|{{ "abc"|list }}|{{ {"a":1,"b":2}|items|list }}|{{ [1,2]|join(",") }}|{{ none|default("x") }}|{{ ""|default("x", true) }})",
       R"(Ab c|[1, 2, 3]|['a', 'b', 'c']|[('a', 1), ('b', 2)]|1,2|None|x)"},
      {R"({{ [{"a":1},{"a":2}]|map(attribute="a")|list }}|{{ "hello world"|title }}|{{ 3.7|int }}|{{ "a\nb"|indent(2) }}|{{ [1,2,3]|select("odd")|list }}|{{ 2.5|round }}|{{ [1,2]|reverse|list }}|{{ [1,2]|first }}|{{ "x"|upper }})",
       R"([1, 2]|Hello World|3|a
  b|[1, 3]|2.0|[2, 1]|1|X)"},
      {R"({{ messages|selectattr("role", "equalto", "user")|list|length }}{{ messages|rejectattr("role", "eq", "user")|map(attribute="role")|join(",") }})",
       R"(1system,assistant)"},
      {R"({{ [1,2,3]|sum }}{{ ["b","A","c"]|sort }}{{ ["b","A","c"]|max }}{{ [1,2,1]|unique|list }}{{ range(1, 10, 3)|list }}{{ {"b":1,"a":2}|dictsort }}{{ "<a>"|e }}{{ 5|string + "x" }})",
       R"(6['A', 'b', 'c']c[1, 2][1, 4, 7][('a', 2), ('b', 1)]&lt;a&gt;5x)"},
      {R"({{ "%.3f"|format(3.14159) }}{{ "%5.2f|%-4d|%s|%r|%5s|" % (3.14159, 42, "x", "y", "ab") }}{{ [1,2,3] | map("string") | join("-") }}{{ "abc"|center(9) }}|)",
       R"(3.142 3.14|42  |x|'y'|   ab|1-2-3   abc   |)"},
      {R"({{ {"b":1,"a":[1,2.0,"xé\n"]} | tojson }}{{ {"b":1,"a":[1,{"c":[]}]} | tojson(indent=2) }}{{ {"b":1,"a":2}|tojson(sort_keys=true) }}{{ "\u0001"|tojson }})",
       R"({"b": 1, "a": [1, 2.0, "xé\n"]}{
  "b": 1,
  "a": [
    1,
    {
      "c": []
    }
  ]
}{"a": 2, "b": 1}"\u0001")"},
  };
  for (const auto &[source, expected] : cases) {
    SCOPED_TRACE(source);
    EXPECT_EQ(renderTemplate(source, variables), expected);
  }
}

} // namespace
