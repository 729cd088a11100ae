// exactq serve through OpenAI's official Node.js client: `node client.mjs URL PROMPT MAX_TOKENS`
// prints one JSON object of what the client got (a completion, the same one streamed, the model
// list, and the status of a request for another model) for the C++ test to check.
import OpenAI from "openai";

const [url, prompt, maxTokens] = process.argv.slice(2);
const client = new OpenAI({ baseURL: `${url}/v1`, apiKey: "sesame", maxRetries: 0, timeout: 60000 });
const max_tokens = Number(maxTokens);

const completion = await client.completions.create({ model: "pycode-target", prompt, max_tokens });
let streamText = "";
let streamFinish = null;
const stream = await client.completions.create({ model: "pycode-target", prompt, max_tokens, stream: true });
for await (const chunk of stream) {
  streamText += chunk.choices[0]?.text ?? "";
  streamFinish = chunk.choices[0]?.finish_reason ?? streamFinish;
}
const models = await client.models.list();
let wrongModelStatus = null;
try {
  await client.completions.create({ model: "gpt-4o", prompt, max_tokens });
} catch (e) {
  wrongModelStatus = e.status ?? null;
}
console.log(JSON.stringify({
  text: completion.choices[0].text,
  finish_reason: completion.choices[0].finish_reason,
  usage: completion.usage,
  stream_text: streamText,
  stream_finish_reason: streamFinish,
  models: models.data.map((m) => m.id),
  wrong_model_status: wrongModelStatus,
}));
