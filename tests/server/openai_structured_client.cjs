// The `openai` npm package's parse helper against `tern serve` over random weights (only the
// mask keeps the output valid): response_format json_schema comes back as message.parsed, and
// strict tools under tool_choice "required" as parsed_arguments; a named function through
// create(). Usage: node openai_structured_client.cjs BASE_URL MODEL with OPENAI_NPM_DIR naming
// the folder `npm install openai` was run in. Exits 1 on a mismatch.
const path = require("path");
const OpenAI = require(path.join(process.env.OPENAI_NPM_DIR, "node_modules", "openai")).default;

function check(condition, message) {
  if (!condition) {
    console.error("FAIL: " + message);
    process.exit(1);
  }
}

const answerSchema = {
  type: "object",
  properties: { ok: { type: "boolean" }, n: { type: "integer" }, word: { type: "string", maxLength: 6 } },
  required: ["ok", "n", "word"],
  additionalProperties: false,
};
const tools = [{
  type: "function",
  function: {
    name: "get_time", strict: true,
    parameters: { type: "object", properties: { tz: { enum: ["UTC", "CET"] } }, required: ["tz"], additionalProperties: false },
  },
}];
const messages = [{ role: "user", content: "Answer in JSON." }];

async function main() {
  const [baseURL, model] = process.argv.slice(2);
  const client = new OpenAI({ baseURL, apiKey: "test-key", maxRetries: 0 });
  // openai >= 5 has chat.completions.parse; 4.x had it under beta.
  const completions = client.chat.completions.parse ? client.chat.completions : client.beta.chat.completions;

  for (let seed = 0; seed < 3; seed++) {
    const r = await completions.parse({
      model, messages, seed, temperature: 1, max_tokens: 200,
      response_format: { type: "json_schema", json_schema: { name: "answer", schema: answerSchema, strict: true } },
    });
    const m = r.choices[0].message;
    check(r.choices[0].finish_reason === "stop", "finish_reason " + r.choices[0].finish_reason);
    check(m.parsed && typeof m.parsed === "object", "parsed " + JSON.stringify(m.parsed) + " from " + m.content);
    check(typeof m.parsed.ok === "boolean" && Number.isInteger(m.parsed.n) && typeof m.parsed.word === "string" &&
          [...m.parsed.word].length <= 6 && Object.keys(m.parsed).length === 3, "answer " + m.content);
  }

  const required = await completions.parse({
    model, messages, tools, tool_choice: "required", seed: 1, temperature: 1, max_tokens: 200,
  });
  const calls = required.choices[0].message.tool_calls;
  check(required.choices[0].finish_reason === "tool_calls", "required finish_reason " + required.choices[0].finish_reason);
  check(Array.isArray(calls) && calls.length >= 1, "required tool_calls " + JSON.stringify(calls));
  for (const call of calls) {
    check(call.function.name === "get_time", "required name " + call.function.name);
    const tz = call.function.parsed_arguments && call.function.parsed_arguments.tz;
    check(tz === "UTC" || tz === "CET", "required parsed_arguments " + call.function.arguments);
  }

  const named = await client.chat.completions.create({
    model, messages, tools, tool_choice: { type: "function", function: { name: "get_time" } },
    seed: 2, temperature: 1, max_tokens: 200,
  });
  const nc = named.choices[0].message.tool_calls;
  check(named.choices[0].finish_reason === "stop", "named finish_reason " + named.choices[0].finish_reason);
  check(nc.length === 1 && nc[0].function.name === "get_time" && nc[0].id.startsWith("call_"), "named " + JSON.stringify(nc));
  check(["UTC", "CET"].includes(JSON.parse(nc[0].function.arguments).tz), "named arguments " + nc[0].function.arguments);
  console.log("openai structured client: ok (" + calls.length + " required calls)");
}

main().catch((e) => {
  console.error("FAIL: " + (e && e.stack ? e.stack : e));
  process.exit(1);
});
