// Drives a Node client of the Responses API once and prints what it reconstructed, as JSON.
//
// stdin:  {"client": "node-openai" | "ai-sdk", "baseURL": "http://127.0.0.1:P", "model": "m",
//          "prompt": text, "roundTrip": bool}
// stdout: {"calls": [{"id", "name", "arguments"}], "text", "events", "error"}
//
// node-openai: `client.responses.stream(...)` and its final response (calls from
// response.output). ai-sdk: `streamText({model: openai.responses(model), tools})` with a
// get_weather tool; with roundTrip the tool runs and a second step sends its result.

import { createOpenAI } from '@ai-sdk/openai';
import { streamText, tool, stepCountIs } from 'ai';
import OpenAI from 'openai';
import { z } from 'zod';

const WEATHER = {
  type: 'function',
  name: 'get_weather',
  description: 'The weather in a city.',
  parameters: {
    type: 'object',
    properties: { location: { type: 'string' } },
    required: ['location'],
  },
};

function describe(error) {
  const name = error?.name ?? 'Error';
  return `${name}: ${error?.message ?? String(error)}`.slice(0, 600);
}

async function nodeOpenAI(job) {
  const client = new OpenAI({ baseURL: `${job.baseURL}/v1`, apiKey: 'sk-test', maxRetries: 0 });
  const stream = client.responses.stream({ model: job.model, input: job.prompt, tools: [WEATHER] });
  const events = [];
  for await (const event of stream) events.push(event.type);
  const response = await stream.finalResponse();
  return {
    calls: response.output
      .filter((item) => item.type === 'function_call')
      .map((item) => ({ id: item.call_id, name: item.name, arguments: item.arguments })),
    text: response.output_text ?? '',
    events,
  };
}

async function aiSdk(job) {
  const openai = createOpenAI({ baseURL: `${job.baseURL}/v1`, apiKey: 'sk-test' });
  const getWeather = tool({
    description: 'The weather in a city.',
    inputSchema: z.object({ location: z.string() }),
    ...(job.roundTrip ? { execute: async ({ location }) => `sunny in ${location}` } : {}),
  });
  const result = streamText({
    model: openai.responses(job.model),
    prompt: job.prompt,
    tools: { get_weather: getWeather },
    ...(job.roundTrip ? { stopWhen: stepCountIs(2) } : {}),
    maxRetries: 0,
  });
  const events = [];
  let error = null;
  for await (const part of result.fullStream) {
    events.push(part.type);
    if (part.type === 'error') error = describe(part.error);
  }
  const steps = await result.steps;
  const calls = steps.flatMap((step) =>
    step.toolCalls.map((call) => ({
      id: call.toolCallId,
      name: call.toolName,
      arguments: JSON.stringify(call.input),
    })),
  );
  return { calls, text: await result.text, events, error };
}

const job = JSON.parse(await new Promise((resolve) => {
  let data = '';
  process.stdin.on('data', (chunk) => { data += chunk; });
  process.stdin.on('end', () => resolve(data));
}));
let out;
try {
  out = await (job.client === 'ai-sdk' ? aiSdk(job) : nodeOpenAI(job));
} catch (error) {
  out = { calls: [], text: '', events: [], error: describe(error) };
}
process.stdout.write(JSON.stringify(out));
