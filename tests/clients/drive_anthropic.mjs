// Drives one Anthropic Messages client against a base URL and prints what it reconstructed.
//
// stdin:  {"client": "anthropic-sdk" | "ai-sdk-anthropic", "baseURL": "http://127.0.0.1:P",
//          "model": name, "prompt": text, "tools": [{name, description, input_schema}]}
// stdout: {"calls": [{"id", "name", "input"}], "text", "stop_reason", "error", "events": [types]}

import Anthropic from '@anthropic-ai/sdk';
import * as ai from 'ai';
import { createAnthropic } from '@ai-sdk/anthropic';

const TIMEOUT_MS = 20000;
// The AI SDK writes its warnings to stdout, where the result goes.
globalThis.AI_SDK_LOG_WARNINGS = false;

function describe(error) {
  const name = error?.name ?? error?.constructor?.name ?? 'Error';
  return `${name}: ${error?.message ?? String(error)}`.slice(0, 400);
}

async function anthropicSdk(job) {
  const client = new Anthropic({ baseURL: job.baseURL, apiKey: 'sk-ant-test', maxRetries: 0, timeout: TIMEOUT_MS });
  const stream = client.messages.stream({
    model: job.model,
    max_tokens: 256,
    messages: [{ role: 'user', content: job.prompt }],
    tools: job.tools,
  });
  const events = [];
  stream.on('streamEvent', (event) => events.push(event.type));
  const message = await stream.finalMessage();
  return {
    calls: message.content.filter((b) => b.type === 'tool_use').map((b) => ({ id: b.id, name: b.name, input: b.input })),
    text: message.content.filter((b) => b.type === 'text').map((b) => b.text).join(''),
    stop_reason: message.stop_reason,
    events,
  };
}

async function aiSdkAnthropic(job) {
  const provider = createAnthropic({ baseURL: `${job.baseURL}/v1`, apiKey: 'sk-ant-test' });
  const tools = Object.fromEntries(
    job.tools.map((t) => [t.name, ai.tool({ description: t.description, inputSchema: ai.jsonSchema(t.input_schema) })]),
  );
  const result = ai.streamText({
    model: provider(job.model),
    messages: [{ role: 'user', content: job.prompt }],
    tools,
    maxRetries: 0,
    abortSignal: AbortSignal.timeout(TIMEOUT_MS),
    onError: () => {},
  });
  const calls = [];
  const errors = [];
  const events = [];
  let text = '';
  let stopReason = null;
  for await (const part of result.fullStream) {
    events.push(part.type);
    if (part.type === 'text-delta') text += part.text ?? part.delta ?? '';
    else if (part.type === 'tool-call') {
      calls.push({ id: part.toolCallId, name: part.toolName, input: part.input ?? null, invalid: part.invalid ?? false });
    } else if (part.type === 'tool-error') errors.push(describe(part.error));
    else if (part.type === 'error') errors.push(describe(part.error));
    else if (part.type === 'finish') stopReason = part.finishReason;
  }
  return { calls, text, stop_reason: stopReason, error: errors.length ? errors.join('; ') : null, events };
}

const CLIENTS = { 'anthropic-sdk': anthropicSdk, 'ai-sdk-anthropic': aiSdkAnthropic };

const pieces = [];
for await (const piece of process.stdin) pieces.push(piece);
const job = JSON.parse(Buffer.concat(pieces).toString('utf8'));
let result;
try {
  result = { error: null, ...(await CLIENTS[job.client](job)) };
} catch (error) {
  result = { calls: [], text: '', stop_reason: null, error: describe(error), events: [] };
}
process.stdout.write(JSON.stringify(result));
