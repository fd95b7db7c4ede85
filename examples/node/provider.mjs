// provider.mjs is a toolsd tool provider in Node.js, speaking ProviderService.Connect
// directly: hello → welcome, register → register_result, then execute → result and
// cancel → an answer with cancelled: true. It registers two tools, shout and wait, and
// reconnects with backoff whenever the stream ends, until SIGINT or SIGTERM.
//
//	node provider.mjs --addr 127.0.0.1:50151
import { realpathSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { setTimeout as sleep } from 'node:timers/promises';
import { connectRequestSize, providerClient } from './toolsd.mjs';

const { values: flags } = parseArgs({
  options: {
    addr: { type: 'string', default: '127.0.0.1:50151' }, // toolsd gRPC address
    name: { type: 'string', default: 'node-example' }, // provider name in toolsd's logs
    scope: { type: 'string', default: '' }, // scope to register in ("" is global)
    // How long a name refused with ALREADY_EXISTS is registered again before giving up
    // (as the Go SDK's WithRetakeWindow); 0 turns the retries off.
    'retake-window-ms': { type: 'string', default: '120000' },
  },
});
const retakeWindow = Number(flags['retake-window-ms']);
if (!Number.isFinite(retakeWindow)) throw new Error(`--retake-window-ms ${flags['retake-window-ms']} is not a number`);

// The tools: a definition as toolsd registers it, and a body that gets the parsed
// arguments plus the call's AbortSignal and progress reporter, and returns the
// model-facing text (throwing fails the call with TOOL_ERROR). toolsd has validated the
// arguments against parametersJson before a call gets here. A module that imports this
// one may add tools before it calls main (the test does: testdata/provider.mjs).
export const tools = {
  shout: {
    definition: {
      name: 'shout',
      description: 'Returns the given text in upper case.',
      parametersJson: JSON.stringify({
        type: 'object',
        properties: { text: { type: 'string', description: 'The text to shout.' } },
        required: ['text'],
      }),
    },
    run: async ({ text }) => text.toUpperCase(),
  },
  wait: {
    definition: {
      name: 'wait',
      description: 'Waits for the given number of milliseconds, then says how long it waited.',
      parametersJson: JSON.stringify({
        type: 'object',
        properties: { ms: { type: 'integer', description: 'How long to wait, in milliseconds.', minimum: 0 } },
        required: ['ms'],
      }),
    },
    run: async ({ ms }, { signal, progress }) => {
      progress(`waiting ${ms} ms`);
      await sleep(ms, undefined, { signal }); // rejects with an AbortError when cancelled
      return `waited ${ms} ms`;
    },
  },
};

const log = (msg) => console.log(`provider: ${msg}`);
const stop = new AbortController(); // aborted by SIGINT / SIGTERM

// serve runs one Connect stream until it ends; it resolves on a clean end and rejects
// with the gRPC status otherwise. onWelcome is called once toolsd has accepted the hello.
async function serve(client, onWelcome) {
  const stream = client.connect();
  const ended = new AbortController(); // stops this stream's registration retries
  const running = new Map(); // request id → AbortController of a running call
  let maxResultBytes = Infinity;
  let ref = 0;
  // Writes are buffered by the stream, so handlers never block the receive loop below.
  const send = (msg) => stream.writable && stream.write(msg);
  // A message over toolsd's receive limit would end the stream, and again after every
  // reconnect. As the Go SDK does, a registration goes in messages of at most 1 MiB of
  // definitions, or the welcome's max_result_bytes if that is smaller (toolsd receives
  // that much); a definition larger than that goes alone.
  const register = (names) => {
    const budget = Math.min(1 << 20, maxResultBytes);
    const messages = [];
    let size = Infinity; // of the definitions in the last message
    for (const name of names) {
      const def = tools[name].definition;
      const n = connectRequestSize({ register: { tools: [def] } }); // the definition's, plus a few bytes
      if (size + n > budget) {
        messages.push([]);
        size = 0;
      }
      messages.at(-1).push(def);
      size += n;
    }
    for (const defs of messages) send({ register: { ref: ++ref, scope: flags.scope, tools: defs } });
  };
  const cancelStream = () => stream.cancel();
  stream.on('error', () => {}); // the loop below reports errors; none may go unhandled later
  stop.signal.addEventListener('abort', cancelStream);

  // A name can still be held by our previous stream, whose end toolsd has not seen yet
  // (ALREADY_EXISTS): register it again after a delay, 50 ms doubling up to 5 s, until
  // it has been refused for the retake window (then another provider may really own it).
  const refused = new Map(); // name → when toolsd first refused it on this stream
  let retakeDelay = 50;
  const retake = async (names) => {
    const now = performance.now();
    const again = names.filter((name) => {
      const first = refused.get(name);
      if (first === undefined) {
        refused.set(name, now);
        log(`${name} is taken, often by our previous stream: registering it again later`);
      } else if (now - first > retakeWindow) {
        refused.delete(name);
        log(`${name} is still taken after ${Math.round(now - first)} ms: giving up registering it on this stream`);
        return false;
      }
      return true;
    });
    if (again.length === 0) return;
    const delay = retakeDelay;
    retakeDelay = Math.min(retakeDelay * 2, 5000);
    await sleep(delay, undefined, { signal: ended.signal });
    register(again);
  };

  send({ hello: { name: flags.name, version: '0.1.0' } });
  try {
    for await (const m of stream) {
      switch (m.msg) {
        case 'welcome':
          log(`connected as ${m.welcome.providerId}`);
          // 0 announces no limit (as the Go SDK reads it), not that every result is too large.
          maxResultBytes = Number(m.welcome.maxResultBytes) || Infinity;
          onWelcome();
          register(Object.keys(tools));
          break;
        case 'registerResult': {
          const taken = [];
          for (const t of m.registerResult.tools) {
            if (!t.errorCode) {
              // Accepted, but quarantined when toolsd pins the name to another definition
              // (registry.pinning: quarantine): agents do not see it until an operator approves.
              if (t.quarantined) log(`${t.name} is held back: its definition differs from the one toolsd pinned (ApproveQuarantined)`);
              else log(`registered ${t.name}`);
              refused.delete(t.name);
            } else if (t.errorCode === 'ALREADY_EXISTS' && retakeWindow > 0) taken.push(t.name);
            else log(`${t.name} refused: ${t.errorCode} ${t.errorMessage}`);
          }
          if (refused.size === 0) retakeDelay = 50;
          if (taken.length > 0) retake(taken).catch(() => {}); // rejects only when the stream ends
          break;
        }
        case 'execute': // not awaited: the loop keeps reading while the call runs
          execute(m.execute, running, send, maxResultBytes);
          break;
        case 'cancel':
          log(`cancel ${m.cancel.requestId}: ${m.cancel.reason}`);
          running.get(m.cancel.requestId)?.abort(m.cancel.reason);
          break;
        case 'goodbye':
          log(`toolsd is going away: ${m.goodbye.reason}`);
          break;
      }
    }
  } finally {
    stop.signal.removeEventListener('abort', cancelStream);
    ended.abort();
    // toolsd has failed these calls with PROVIDER_GONE; stop their work too.
    for (const call of running.values()) call.abort('stream ended');
  }
}

// execute runs one call and answers it, whatever happens: with the tool's text or its
// failure, marked cancelled: true when it stopped because toolsd cancelled it.
async function execute(req, running, send, maxResultBytes) {
  const call = new AbortController();
  running.set(req.requestId, call);
  // Progress is a status line: toolsd forwards at most 64 KiB of one, and a message over
  // its receive limit would end the stream. Cut it as the Go SDK does, and drop it, as the
  // Go SDK does, once the call is cancelled or answered: nobody awaits it then.
  const progress = (message) => {
    if (call.signal.aborted || running.get(req.requestId) !== call) return;
    send({ progress: { requestId: req.requestId, message: cut(Buffer.from(message), Math.min(64 << 10, maxResultBytes)) } });
  };
  let result;
  try {
    const text = await tools[req.tool].run(JSON.parse(req.argumentsJson), { signal: call.signal, progress });
    result = { content: Buffer.from(text) }; // a success after a cancel still counts as ABORTED
  } catch (err) {
    // A failure is always sent as one, with a message. It is cancelled only when the tool
    // gave back the cancellation it was given (an AbortError, or the abort's reason):
    // toolsd records ABORTED then (TOOL_TIMEOUT if its deadline ended it). A failure of
    // the tool's own after the cancel is kept as TOOL_ERROR.
    const stopped = call.signal.aborted && (err?.name === 'AbortError' || err === call.signal.reason);
    const message = String(err?.message ?? err) || (stopped ? 'cancelled' : 'the tool failed');
    result = { isError: true, errorMessage: Buffer.from(message), cancelled: stopped };
  } finally {
    running.delete(req.requestId);
  }
  // Too large a message would end the whole stream: send only the size (RESULT_TOO_LARGE).
  const size = (result.content?.length ?? 0) + (result.errorMessage?.length ?? 0);
  if (size > maxResultBytes) result = { oversizedBytes: size };
  send({ result: { requestId: req.requestId, ...result } });
}

// cut returns the longest prefix of the UTF-8 text buf of at most n bytes that does not
// end inside a character.
function cut(buf, n) {
  if (buf.length <= n) return buf;
  while (n > 0 && (buf[n] & 0xc0) === 0x80) n--; // buf[n] continues a character: back up
  return buf.subarray(0, n);
}

// main reconnects until SIGINT or SIGTERM: 100 ms doubling up to 5 s with jitter. Only a
// welcomed stream that lasted 5 s resets the backoff, as in the Go SDK: a stream that
// toolsd ends right after its welcome (say, for a message it cannot receive) would
// otherwise be reopened, and end again, every 100 ms.
export async function main() {
  for (const signal of ['SIGINT', 'SIGTERM']) process.on(signal, () => stop.abort());
  const client = providerClient(flags.addr);
  let backoff = 100;
  while (!stop.signal.aborted) {
    const began = performance.now();
    let welcomed = false;
    try {
      await serve(client, () => (welcomed = true));
      log('stream ended');
    } catch (err) {
      if (!stop.signal.aborted) log(`stream ended: ${err.details || err.message}`);
    }
    if (stop.signal.aborted) break;
    if (welcomed && performance.now() - began >= 5000) backoff = 100;
    const delay = Math.round(backoff / 2 + (Math.random() * backoff) / 2);
    log(`reconnecting in ${delay} ms`);
    await sleep(delay, undefined, { signal: stop.signal }).catch(() => {});
    backoff = Math.min(backoff * 2, 5000);
  }
  client.close();
  log('stopped');
}

// Run as a script (node provider.mjs), not when imported.
if (process.argv[1] && realpathSync(process.argv[1]) === fileURLToPath(import.meta.url)) await main();
