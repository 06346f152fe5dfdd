// Renders the fixture chat templates with tern's Jinja engine and compares them byte for byte
// with Python jinja2's renders (tests/data/chat_templates/expected.json, written by
// scripts/render-chat-templates.py with transformers' settings).
#include "tern/tokenizer/chat_template.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "fixtures.h"
#include "shared_tokenizer.h"
#include "tern/core/error.h"
#include "tern/tokenizer/tokenizer.h"

namespace tern {
namespace {

using OrderedJson = nlohmann::ordered_json;

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

OrderedJson read_json(const std::string& path) { return OrderedJson::parse(read_text(path)); }

std::string data_path(const std::string& name) {
  return std::string(TERN_SOURCE_DIR) + "/tests/data/chat_templates/" + name;
}

ChatTemplate load_template(const OrderedJson& entry) {
  const std::string fixture = entry["fixture"].get<std::string>();
  if (fixture.size() > 5 && fixture.substr(fixture.size() - 5) == ".json") {
    // Through the tokenizer, so the loader's template and bos/eos are what is tested.
    const std::string folder =
        std::filesystem::path(testing::fixture(fixture)).parent_path().string();
    return ChatTemplate::from_tokenizer(Tokenizer::load(folder));
  }
  return ChatTemplate(read_text(testing::fixture(fixture)), entry.value("bos_token", ""),
                      entry.value("eos_token", ""));
}

TEST(ChatTemplateGolden, EveryFixtureTemplateMatchesJinja2ByteForByte) {
  const OrderedJson spec = read_json(data_path("cases.json"));
  const OrderedJson expected = read_json(data_path("expected.json"));
  int compared = 0;
  for (const OrderedJson& entry : spec["templates"]) {
    const std::string fixture = entry["fixture"].get<std::string>();
    TERN_REQUIRE_FIXTURE(fixture);
    const std::string name = entry["name"].get<std::string>();
    const ChatTemplate tmpl = load_template(entry);
    for (const OrderedJson& c : spec["cases"]) {
      const std::string case_name = c["name"].get<std::string>();
      SCOPED_TRACE(name + " / " + case_name);
      OrderedJson kwargs = spec["common_kwargs"];
      if (c.contains("kwargs"))
        for (auto it = c["kwargs"].begin(); it != c["kwargs"].end(); ++it)
          kwargs[it.key()] = it.value();
      const OrderedJson& want = expected.at(name).at(case_name);
      if (want.contains("error")) {
        try {
          tmpl.render(c["messages"], c["add_generation_prompt"].get<bool>(), kwargs);
          ADD_FAILURE() << "rendered, but jinja2 raised: " << want["error"];
        } catch (const Error& e) {
          EXPECT_NE(std::string(e.what()).find(want["error"].get<std::string>()), std::string::npos)
              << e.what();
        }
      } else {
        EXPECT_EQ(tmpl.render(c["messages"], c["add_generation_prompt"].get<bool>(), kwargs),
                  want["text"].get<std::string>());
      }
      ++compared;
    }
  }
  EXPECT_EQ(compared, 48);
}

TEST(ChatTemplate, SortedJsonOverloadRendersTheSameMessages) {
  const ChatTemplate tmpl(
      "{% for m in messages %}<{{ m.role }}>{{ m.content }}{% endfor %}"
      "{% if add_generation_prompt %}<assistant>{% endif %}{{ eos_token }}",
      "", "</s>");
  const nlohmann::json messages = nlohmann::json::parse(R"([{"role": "user", "content": "hi"}])");
  EXPECT_EQ(tmpl.render(messages, true), "<user>hi<assistant></s>");
  EXPECT_EQ(tmpl.render(messages, false), "<user>hi</s>");
}

TEST(ChatTemplate, ToolsAndBosDefaultLikeTransformers) {
  // tools is none unless given; a tokenizer without bos leaves bos_token undefined.
  const ChatTemplate tmpl(
      "{{ tools is none }} {{ bos_token is defined }} {{ enable_thinking | default('unset') }}", "",
      "");
  EXPECT_EQ(tmpl.render(OrderedJson::array(), false), "True False unset");
  EXPECT_EQ(tmpl.render(OrderedJson::array(), false, OrderedJson{{"enable_thinking", false}}),
            "True False False");
}

TEST(ChatTemplate, RaiseExceptionBecomesAnErrorWithTheTemplatesMessage) {
  const ChatTemplate tmpl(
      "{% if messages | length == 0 %}\n{{ raise_exception('No messages!') }}\n{% endif %}", "",
      "");
  try {
    tmpl.render(OrderedJson::array(), true);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "chat template: line 2: raise_exception: No messages!");
  }
}

TEST(ChatTemplate, SyntaxErrorsNameTheLine) {
  try {
    ChatTemplate("{% for m in messages %}\n{{ m.content }\n{% endfor %}", "", "");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("chat template: line 2:"), std::string::npos) << e.what();
  }
}

TEST(ChatTemplate, FromTokenizerWithoutTemplateThrows) {
  TERN_REQUIRE_FIXTURE("qwen-tokenizer/vocab.json");
  const Tokenizer tok = testing::shared_tokenizer("qwen-tokenizer");
  EXPECT_NO_THROW(ChatTemplate::from_tokenizer(tok));
  EXPECT_THROW(ChatTemplate("{% if %}", "", ""), Error);
}

}  // namespace
}  // namespace tern
