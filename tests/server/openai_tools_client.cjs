// The `openai` npm package's chat.completions.create with tools against `tern serve` started
// with --tool-call-parser hermes --enable-auto-tool-choice over the scripted model (it answers
// "Checking." and one get_weather call): whole and streamed, the SDK's own stream helper, a
// tool-call history, and a 400. Usage: node openai_tools_client.cjs BASE_URL MODEL with
// OPENAI_NPM_DIR naming the folder `npm install openai` was run in. Exits 1 on a mismatch.
const path = require("path");
const OpenAI = require(path.join(process.env.OPENAI_NPM_DIR, "node_modules", "openai")).default;

function check(condition, message) {
  if (!condition) {
    console.error("FAIL: " + message);
    process.exit(1);
  }
}

const tools = [{
  type: "function",
  function: {
    name: "get_weather", description: "Weather in a city",
    parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
  },
}];
const messages = [{ role: "user", content: "Weather in Paris?" }];

async function main() {
  const [baseURL, model] = process.argv.slice(2);
  const client = new OpenAI({ baseURL, apiKey: "test-key", maxRetries: 0 });

  const whole = await client.chat.completions.create({ model, messages, tools, temperature: 0, max_tokens: 40 });
  const m = whole.choices[0].message;
  check(whole.choices[0].finish_reason === "tool_calls", "finish_reason " + whole.choices[0].finish_reason);
  check(m.content === "Checking.", "content " + JSON.stringify(m.content));
  check(Array.isArray(m.tool_calls) && m.tool_calls.length === 1, "tool_calls " + JSON.stringify(m.tool_calls));
  const call = m.tool_calls[0];
  check(call.type === "function" && call.id.startsWith("call_"), "call " + JSON.stringify(call));
  check(call.function.name === "get_weather", "name " + call.function.name);
  check(JSON.parse(call.function.arguments).city === "Paris", "arguments " + call.function.arguments);

  // Streamed, accumulated by the SDK's ChatCompletionStream helper.
  const runner = client.chat.completions.stream({ model, messages, tools, temperature: 0, max_tokens: 40 });
  const final = await runner.finalChatCompletion();
  const fm = final.choices[0].message;
  check(final.choices[0].finish_reason === "tool_calls", "stream finish_reason " + final.choices[0].finish_reason);
  check(fm.content === "Checking.", "stream content " + JSON.stringify(fm.content));
  check(fm.tool_calls.length === 1 && fm.tool_calls[0].function.name === "get_weather", "stream tool_calls " + JSON.stringify(fm.tool_calls));
  check(JSON.parse(fm.tool_calls[0].function.arguments).city === "Paris", "stream arguments " + fm.tool_calls[0].function.arguments);

  // The call and its result sent back: the history renders through the template.
  const next = await client.chat.completions.create({
    model, tools, temperature: 0, max_tokens: 3,
    messages: [...messages, { role: "assistant", content: null, tool_calls: [call] },
               { role: "tool", tool_call_id: call.id, content: "{\"temp\": 18}" }],
  });
  check(next.usage.prompt_tokens > whole.usage.prompt_tokens, "history prompt " + next.usage.prompt_tokens);

  // A tool without a name: the SDK's typed 400.
  try {
    await client.chat.completions.create({ model, messages, tools: [{ type: "function", function: {} }] });
    check(false, "a nameless tool was accepted");
  } catch (e) {
    check(e.status === 400 && e.param === "tools", "nameless tool: " + e.status + " " + e.param);
  }
  console.log("openai tools client: ok (" + call.function.arguments + ")");
}

main().catch((e) => {
  console.error("FAIL: " + (e && e.stack ? e.stack : e));
  process.exit(1);
});
