// openai-node and the Vercel AI SDK (@ai-sdk/openai: the default Responses provider and .chat) against a live
// Continuum at BASE_URL with API_KEY; prints what each client got as one JSON line (the pytest side checks it).
import { createOpenAI } from "@ai-sdk/openai";
import { generateText, jsonSchema, stepCountIs, streamText, tool } from "ai";
import OpenAI from "openai";

const base = `${process.env.BASE_URL}/v1`;
const apiKey = process.env.API_KEY;
const results = {};

const client = new OpenAI({ baseURL: base, apiKey, maxRetries: 0, timeout: 120000 });
const weather = {
  type: "function",
  function: {
    name: "get_weather", description: "The weather in a city today.",
    parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
  },
};

const plain = await client.chat.completions.create({
  model: "continuum", user: "node-1", messages: [{ role: "user", content: "say plain" }] });
results.node_plain = { content: plain.choices[0].message.content, finish: plain.choices[0].finish_reason };

const stream = await client.chat.completions.create({
  model: "continuum", user: "node-1", stream: true, stream_options: { include_usage: true },
  messages: [{ role: "user", content: "say stream" }] });
let text = "", finish = null, usage = null;
for await (const chunk of stream) {
  if (chunk.choices[0]) {
    text += chunk.choices[0].delta?.content ?? "";
    finish = chunk.choices[0].finish_reason ?? finish;
  }
  if (chunk.usage) usage = chunk.usage;
}
results.node_stream = { content: text, finish, total_tokens: usage?.total_tokens ?? 0 };

const ask = { role: "user", content: "weather in Paris" };
const step = await client.chat.completions.create({
  model: "continuum", user: "node-1", tools: [weather], messages: [ask] });
const message = step.choices[0].message;
const done = await client.chat.completions.create({
  model: "continuum", user: "node-1", tools: [weather],
  messages: [ask, message, ...message.tool_calls.map((c) => ({ role: "tool", tool_call_id: c.id, content: "sunny" }))] });
results.node_tools = { finish: step.choices[0].finish_reason, call: message.tool_calls[0].function.name,
  content: done.choices[0].message.content };

const provider = createOpenAI({ baseURL: base, apiKey, headers: { "X-User-Id": "sdk-1" } });
const responses = await generateText({ model: provider("continuum"), prompt: "say responses", maxRetries: 0 });
results.sdk_responses = { content: responses.text, finish: responses.finishReason };
const chat = await generateText({ model: provider.chat("continuum"), prompt: "say chat", maxRetries: 0 });
results.sdk_chat = { content: chat.text, finish: chat.finishReason };
for (const [name, model] of [["sdk_stream_responses", provider("continuum")],
                             ["sdk_stream_chat", provider.chat("continuum")]]) {
  const streamed = streamText({ model, prompt: `say ${name}`, maxRetries: 0 });
  let said = "";
  for await (const delta of streamed.textStream) said += delta;
  results[name] = { content: said, finish: await streamed.finishReason };
}

const getWeather = tool({
  description: "The weather in a city today.",
  inputSchema: jsonSchema({ type: "object", properties: { city: { type: "string" } }, required: ["city"] }),
  execute: async ({ city }) => `sunny in ${city}`,
});
for (const [name, model] of [["sdk_tools_responses", provider("continuum")],
                             ["sdk_tools_chat", provider.chat("continuum")]]) {
  const result = await generateText({ model, prompt: "weather in Paris", tools: { get_weather: getWeather },
    stopWhen: stepCountIs(3), maxRetries: 0 });
  results[name] = { content: result.text, steps: result.steps.length,
    calls: result.steps.flatMap((s) => s.toolCalls.map((c) => c.toolName)) };
}
console.log(JSON.stringify(results));
