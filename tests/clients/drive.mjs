// Drives one Node client library over many cases and prints what it reconstructed, as JSON.
//
// stdin:  {"client": "node-openai" | "ai-sdk" | "ai-sdk-legacy", "baseURL": "http://127.0.0.1:P",
//          "jobs": [{"case": name, "model": model, "stream": bool, "prompt": text, "tools": [...]}]}
// stdout: {"<case>": {"calls": [{"id", "name", "arguments"}], "content", "finish_reason",
//          "error", "problems": [...]}}
//
// One process per (client, target) keeps the suite quick; a case that throws is recorded as
// that case's error and the next case runs.

import * as aiCurrent from 'ai';
import * as aiLegacy from 'ai-legacy';
import { createOpenAICompatible as compatCurrent } from '@ai-sdk/openai-compatible';
import { createOpenAICompatible as compatLegacy } from 'openai-compatible-legacy';
import OpenAI from 'openai';

const TIMEOUT_MS = 20000;

function describe(error) {
  if (error === undefined || error === null) return String(error);
  const name = error.name ?? error.constructor?.name ?? 'Error';
  const message = typeof error === 'string' ? error : (error.message ?? JSON.stringify(error));
  return `${name}: ${message}`.slice(0, 400);
}

function fromMessage(message, finishReason) {
  return {
    calls: (message?.tool_calls ?? []).map((call) => ({
      id: call.id ?? null,
      name: call.function?.name ?? null,
      arguments: call.function?.arguments ?? null,
    })),
    content: message?.content ?? '',
    finish_reason: finishReason ?? null,
  };
}

function typeProblems(message) {
  return (message?.tool_calls ?? [])
    .filter((call) => call.type !== 'function')
    .map((call, i) => `call ${i}: type is ${JSON.stringify(call.type)}`);
}

async function nodeOpenAI(baseURL, job) {
  const client = new OpenAI({ baseURL: `${baseURL}/v1`, apiKey: 'sk-test', maxRetries: 0, timeout: TIMEOUT_MS });
  const request = {
    model: job.model,
    messages: [{ role: 'user', content: job.prompt }],
    ...(job.tools.length ? { tools: job.tools } : {}),
    ...(job.tool_choice != null ? { tool_choice: job.tool_choice } : {}),
    ...(job.n > 1 ? { n: job.n } : {}),
  };
  if (!job.stream) {
    const completion = await client.chat.completions.create({ ...request, stream: false });
    const choice = completion.choices[0];
    const result = fromMessage(choice.message, choice.finish_reason);
    return { ...result, problems: typeProblems(choice.message) };
  }
  const stream = client.chat.completions.stream(request);
  let doneEvents = 0;
  let snapshot;
  stream.on('tool_calls.function.arguments.done', () => {
    doneEvents += 1;
  });
  stream.on('chunk', (_, accumulated) => {
    snapshot = accumulated;
  });
  try {
    const completion = await stream.finalChatCompletion();
    const choice = completion.choices[0];
    const result = fromMessage(choice.message, choice.finish_reason);
    const problems = typeProblems(choice.message);
    const calls = completion.choices.reduce((sum, c) => sum + (c.message.tool_calls?.length ?? 0), 0);
    if (doneEvents !== calls) {
      problems.push(`${doneEvents} tool_calls.function.arguments.done events for ${calls} calls`);
    }
    return { ...result, problems };
  } catch (error) {
    // What the accumulator held when it gave up (it drops its own snapshot before finalizing).
    const choice = snapshot?.choices?.[0];
    return { ...fromMessage(choice?.message, choice?.finish_reason), error: describe(error), problems: [] };
  }
}

function aiToolChoice(choice) {
  // OpenAI's tool_choice in the AI SDK's words.
  if (choice == null) return undefined;
  if (typeof choice === 'string') return choice;
  return { type: 'tool', toolName: choice.function.name };
}

function aiFinishReason(reason) {
  // The SDK's unified names, back in the wire's spelling ('tool-calls' -> 'tool_calls').
  return typeof reason === 'string' ? reason.replaceAll('-', '_') : null;
}

function aiSdk(ai, createOpenAICompatible) {
  return async (baseURL, job) => {
    const provider = createOpenAICompatible({ name: 'replay', baseURL: `${baseURL}/v1`, apiKey: 'sk-test' });
    const tools = Object.fromEntries(
      job.tools.map((t) => [
        t.function.name,
        ai.tool({ description: t.function.description, inputSchema: ai.jsonSchema(t.function.parameters) }),
      ]),
    );
    const settings = {
      model: provider.chatModel(job.model),
      messages: [{ role: 'user', content: job.prompt }],
      ...(job.tools.length ? { tools, toolChoice: aiToolChoice(job.tool_choice) } : {}),
      maxRetries: 0,
      abortSignal: AbortSignal.timeout(TIMEOUT_MS),
    };
    const calls = [];
    const errors = [];
    let content = '';
    let finishReason = null;
    const addCall = (part) => {
      const invalid = part.invalid ? describe(part.error) : null;
      calls.push({ id: part.toolCallId, name: part.toolName, arguments: part.input ?? null, invalid });
    };
    const markInvalid = (part) => {
      const call = calls.find((c) => c.id === part.toolCallId);
      if (call) call.invalid ??= describe(part.error);
      else errors.push(`tool-error for unknown call ${part.toolCallId}: ${describe(part.error)}`);
    };
    if (!job.stream) {
      const result = await ai.generateText(settings);
      result.toolCalls.forEach(addCall);
      return { calls, content: result.text, finish_reason: aiFinishReason(result.finishReason), error: null, problems: [] };
    }
    const result = ai.streamText({ ...settings, onError: () => {} });
    try {
      for await (const part of result.fullStream) {
        if (part.type === 'text-delta') content += part.text ?? part.delta ?? '';
        else if (part.type === 'tool-call') addCall(part);
        else if (part.type === 'tool-error') markInvalid(part);
        else if (part.type === 'error') errors.push(describe(part.error));
        else if (part.type === 'finish') finishReason = aiFinishReason(part.finishReason);
      }
    } catch (error) {
      errors.push(describe(error)); // what arrived before it stays
    }
    return { calls, content, finish_reason: finishReason, error: errors.length ? errors.join('; ') : null, problems: [] };
  };
}

const CLIENTS = {
  'node-openai': nodeOpenAI,
  'ai-sdk': aiSdk(aiCurrent, compatCurrent),
  'ai-sdk-legacy': aiSdk(aiLegacy, compatLegacy),
};

async function readStdin() {
  const pieces = [];
  for await (const piece of process.stdin) pieces.push(piece);
  return JSON.parse(Buffer.concat(pieces).toString('utf8'));
}

const { client, baseURL, jobs } = await readStdin();
const drive = CLIENTS[client];
if (!drive) throw new Error(`unknown client ${client}; known: ${Object.keys(CLIENTS).join(', ')}`);
const results = {};
for (const job of jobs) {
  try {
    results[job.case] = { error: null, problems: [], ...(await drive(baseURL, job)) };
  } catch (error) {
    results[job.case] = { calls: [], content: '', finish_reason: null, error: describe(error), problems: [] };
  }
}
process.stdout.write(JSON.stringify(results));
