// A real OpenAI client (the `openai` npm package) against `tern serve`: a model listing, a
// completion and a streamed chat completion. Usage: node openai_client.cjs BASE_URL MODEL
// with OPENAI_NPM_DIR naming the folder `npm install openai` was run in. Exits 1 on a mismatch.
const path = require("path");
const OpenAI = require(path.join(process.env.OPENAI_NPM_DIR, "node_modules", "openai")).default;

function check(condition, message) {
  if (!condition) {
    console.error("FAIL: " + message);
    process.exit(1);
  }
}

async function main() {
  const [baseURL, model] = process.argv.slice(2);
  const client = new OpenAI({ baseURL, apiKey: "test-key", maxRetries: 0 });

  const models = await client.models.list();
  const ids = models.data.map((m) => m.id);
  check(ids.length === 1 && ids[0] === model, "models.list: " + JSON.stringify(ids));

  const completion = await client.completions.create({
    model, prompt: "Hello", max_tokens: 5, temperature: 0, ignore_eos: true,
  });
  check(completion.object === "text_completion", "completion object " + completion.object);
  check(completion.choices.length === 1 && typeof completion.choices[0].text === "string", "completion choices");
  check(completion.choices[0].finish_reason === "length", "completion finish_reason " + completion.choices[0].finish_reason);
  check(completion.usage.completion_tokens === 5, "completion usage " + JSON.stringify(completion.usage));

  const stream = await client.chat.completions.create({
    model, messages: [{ role: "user", content: "Say hi" }], max_tokens: 6, temperature: 0,
    ignore_eos: true, stream: true, stream_options: { include_usage: true },
  });
  let text = "", finish = null, usage = null, role = null;
  for await (const chunk of stream) {
    check(chunk.object === "chat.completion.chunk", "chunk object " + chunk.object);
    if (chunk.usage) usage = chunk.usage;
    for (const choice of chunk.choices) {
      if (choice.delta.role) role = choice.delta.role;
      if (choice.delta.content) text += choice.delta.content;
      if (choice.finish_reason) finish = choice.finish_reason;
    }
  }
  check(role === "assistant", "stream role " + role);
  check(finish === "length", "stream finish_reason " + finish);
  check(usage && usage.completion_tokens === 6, "stream usage " + JSON.stringify(usage));

  const whole = await client.chat.completions.create({
    model, messages: [{ role: "user", content: "Say hi" }], max_tokens: 6, temperature: 0, ignore_eos: true,
  });
  check(whole.choices[0].message.content === text, "streamed text equals the whole response's");

  // An error comes back as the SDK's typed error with the status.
  try {
    await client.completions.create({ model: "no-such-model", prompt: "x" });
    check(false, "unknown model did not fail");
  } catch (e) {
    check(e.status === 404, "unknown model status " + e.status);
  }
  console.log("openai client: ok (" + JSON.stringify(text) + ")");
}

main().catch((e) => {
  console.error("FAIL: " + (e && e.stack ? e.stack : e));
  process.exit(1);
});
