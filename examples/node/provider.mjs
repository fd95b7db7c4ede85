// provider.mjs is a toolsd tool provider in Node.js, speaking ProviderService.Connect
// directly: hello → welcome, register → register_result, then execute → result and
// cancel, or the call's time running out (the request's timeout) → an answer with
// cancelled: true. It registers two tools, shout and wait, and
// reconnects with backoff whenever the stream ends, until SIGINT or SIGTERM; then it lets
// its running calls finish for the shutdown grace before it closes the stream and exits.
//
//	node provider.mjs --addr 127.0.0.1:50151
//
// Against a toolsd that serves TLS (README, Security), --ca names the CA of its
// certificate, --cert and --key a client certificate, --token-file a bearer token.
import { realpathSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { setTimeout as sleep } from 'node:timers/promises';
import { connection, connectionFlags, connectRequestSize, parseFlags, providerClient } from './toolsd.mjs';

const { values: flags, flagError, usageFail, fail } = parseFlags('provider', {
  addr: { type: 'string', default: '127.0.0.1:50151', help: 'toolsd gRPC address' },
  name: { type: 'string', default: 'node-example', help: "provider name in toolsd's logs" },
  scope: { type: 'string', default: '', help: 'scope to register the tools in ("" is global)' },
  'retake-window-ms': {
    type: 'string',
    default: '120000',
    // As the Go SDK's WithRetakeWindow.
    help: 'how long a name refused with ALREADY_EXISTS is registered again before giving up (0: no retries)',
  },
  'shutdown-grace-ms': {
    type: 'string',
    default: '5000',
    // As the Go SDK's WithShutdownGrace.
    help: 'how long, after SIGINT or SIGTERM, running calls may take to finish and still be answered (0: no wait)',
  },
  'welcome-timeout-ms': {
    type: 'string',
    default: '30000',
    // As the Go SDK's WithWelcomeTimeout.
    help: "how long a stream waits for toolsd's welcome after the hello before it is given up and opened again",
  },
  ...connectionFlags,
});
const conn = connection(flags, usageFail, fail);
const number = (flag) => {
  const n = Number(flags[flag]);
  if (!Number.isFinite(n)) flagError(flag, 'is not a number');
  return n;
};
const retakeWindow = number('retake-window-ms');
// Node's timers hold at most 2^31-1 ms (24.8 days) and fire a longer one after 1 ms: a
// longer grace waits that long. A negative one is none, as in the Go SDK.
const shutdownGrace = Math.min(Math.max(number('shutdown-grace-ms'), 0), 2 ** 31 - 1);
// 0 or less keeps the default, as in the Go SDK; a longer one than a timer holds waits that long.
const welcomeTimeout = Math.min(number('welcome-timeout-ms') > 0 ? number('welcome-timeout-ms') : 30000, 2 ** 31 - 1);

// The tools: a definition as toolsd registers it, and a body that gets the parsed
// arguments plus the call's AbortSignal and progress reporter, and returns the
// model-facing text as a string (throwing, or returning anything else, fails the call
// with TOOL_ERROR). toolsd has validated the arguments against parametersJson before a
// call gets here. A module that imports this one may add tools before it calls main (the
// test does: testdata/provider.mjs).
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
        // Node's timers hold at most 2^31-1 ms: a longer one fires after 1 ms.
        properties: { ms: { type: 'integer', description: 'How long to wait, in milliseconds.', minimum: 0, maximum: 2 ** 31 - 1 } },
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

// Routine lines go to standard output; what the Go SDK warns of (a tool toolsd refused,
// which is then never called; a stream that ended) goes to standard error, as the Go
// SDK writes its warnings there by default, so a user who looks for trouble finds it.
const log = (msg) => console.log(`provider: ${msg}`);
const warn = (msg) => console.error(`provider: ${msg}`);
const maxToolsPerMessage = 100; // tools one register message names (see register)
const stop = new AbortController(); // aborted by SIGINT / SIGTERM
const shutdown = new Error('the provider is shutting down'); // the reason calls are aborted with then
const timedOut = new Error("the call's time ran out"); // the reason a call is aborted with at its deadline

// serve runs one Connect stream until it ends; it resolves on a clean end and rejects
// with the gRPC status otherwise. onWelcome is called once toolsd has accepted the hello.
async function serve(client, onWelcome) {
  const stream = client.connect();
  const ended = new AbortController(); // stops this stream's registration retries and drain
  const running = new Map(); // request id → AbortController of a call not answered yet
  let maxResultBytes = Infinity;
  let welcomed = false;
  let draining = false;
  let onIdle = () => {}; // called when a call is answered and none is left
  let ref = 0;
  const unregisterRefs = new Set(); // refs of the drain's unregister messages
  // Writes are buffered by the stream, so handlers never block the receive loop below.
  const send = (msg) => stream.writable && stream.write(msg);
  // A message over toolsd's receive limit would end the stream, and again after every
  // reconnect. As the Go SDK does, a registration goes in messages of at most 1 MiB of
  // definitions, or the welcome's max_result_bytes if that is smaller (toolsd receives
  // that much); a definition larger than that goes alone. A message also names at most
  // 100 tools, as the Go SDK's do: toolsd refuses those past its
  // limits.max_tools_per_provider one by one, but ends the stream of a message naming
  // over twice as many.
  const register = (names) => {
    if (draining) return; // it would undo the drain's unregister
    const budget = Math.min(1 << 20, maxResultBytes);
    // What a message costs besides its definitions: the ref (at most a 10-byte varint)
    // and the scope.
    const overhead = connectRequestSize({ register: { ref: '18446744073709551615', scope: flags.scope, tools: [] } });
    const messages = [];
    let size = Infinity; // of the last message so far
    for (const name of names) {
      const def = tools[name].definition;
      const n = connectRequestSize({ register: { tools: [def] } }); // the definition's, plus a few bytes
      if (size + n > budget || messages.at(-1).length === maxToolsPerMessage) {
        messages.push([]);
        size = overhead;
      }
      messages.at(-1).push(def);
      size += n;
    }
    for (const defs of messages) send({ register: { ref: ++ref, scope: flags.scope, tools: defs } });
  };
  // As the drain begins, as the Go SDK does: unregister every tool, in messages of at
  // most 100 names, so that toolsd sends no new calls while the running ones finish.
  const unregister = () => {
    const names = Object.keys(tools);
    for (let i = 0; i < names.length; i += maxToolsPerMessage) {
      unregisterRefs.add(String(++ref)); // as the answer's ref reads (longs: String)
      send({ unregister: { ref, scope: flags.scope, names: names.slice(i, i + maxToolsPerMessage) } });
    }
  };
  stream.on('error', () => {}); // the loop below reports errors; none may go unhandled later

  // On SIGINT or SIGTERM, as the Go SDK does: unregister the tools, take no more calls
  // and cancel the running ones, but keep the stream open for up to the shutdown grace,
  // so that the answers of those that finish still reach toolsd. Then half-close it, and
  // cut it if toolsd has not ended it a second later. A call that stopped because of the shutdown, or runs past
  // the grace, or arrives meanwhile, is not answered: toolsd fails it with PROVIDER_GONE
  // as the stream closes, and may retry it on another provider (an answer such as
  // TOOL_ERROR would end it for good). One that toolsd cancels meanwhile is answered, as
  // any call toolsd cancels: toolsd waits for that answer.
  const drain = async () => {
    if (!welcomed) return stream.cancel(); // no call to wait for
    draining = true;
    unregister();
    log(`shutting down: ${running.size} calls running, ${shutdownGrace} ms to finish`);
    const idle = new Promise((resolve) => (onIdle = resolve));
    for (const call of running.values()) call.abort(shutdown);
    try {
      if (running.size > 0) await Promise.race([idle, sleep(shutdownGrace, undefined, { signal: ended.signal })]);
      for (const id of running.keys()) warn(`call ${id} still running after the shutdown grace: not answering it`);
      stream.end();
      await sleep(1000, undefined, { signal: ended.signal });
      stream.cancel();
    } catch {} // the stream has ended
  };
  stop.signal.addEventListener('abort', drain);

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
        warn(`${name} is taken, often by our previous stream: registering it again later`);
      } else if (now - first > retakeWindow) {
        refused.delete(name);
        warn(`${name} is still taken after ${Math.round(now - first)} ms: giving up registering it on this stream`);
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
  // A server that takes the stream but never answers the hello (a hung toolsd, whose
  // transport still answers keepalive pings; a proxy that holds streams) would keep it
  // for ever: as the Go SDK does, give it up after the welcome timeout and connect again.
  let unwelcomed = false;
  const welcomeBy = setTimeout(() => {
    unwelcomed = true;
    stream.cancel();
  }, welcomeTimeout);
  try {
    for await (const m of stream) {
      switch (m.msg) {
        case 'welcome':
          clearTimeout(welcomeBy);
          log(`connected as ${m.welcome.providerId}`);
          welcomed = true;
          // 0 announces no limit (as the Go SDK reads it), not that every result is too large.
          maxResultBytes = Number(m.welcome.maxResultBytes) || Infinity;
          onWelcome();
          register(Object.keys(tools));
          break;
        case 'registerResult': {
          if (unregisterRefs.has(m.registerResult.ref)) {
            // A name refused here is one this stream did not hold; toolsd removes the
            // rest when the stream ends.
            for (const t of m.registerResult.tools) {
              if (t.errorCode) warn(`${t.name} not unregistered: ${t.errorCode} ${t.errorMessage}`);
              else log(`unregistered ${t.name}`);
            }
            break;
          }
          const taken = [];
          for (const t of m.registerResult.tools) {
            if (!t.errorCode) {
              // Accepted, but quarantined when toolsd pins the name to another definition
              // (registry.pinning: quarantine): agents do not see it until an operator approves.
              if (t.quarantined) warn(`${t.name} is held back: its definition differs from the one toolsd pinned (ApproveQuarantined)`);
              else log(`registered ${t.name}`);
              refused.delete(t.name);
            } else if (t.errorCode === 'ALREADY_EXISTS' && retakeWindow > 0) taken.push(t.name);
            else warn(`${t.name} refused: ${t.errorCode} ${t.errorMessage}`);
          }
          if (refused.size === 0) retakeDelay = 50;
          if (taken.length > 0) retake(taken).catch(() => {}); // rejects only when the stream ends
          break;
        }
        case 'execute': // not awaited: the loop keeps reading while the call runs
          if (draining) log(`call ${m.execute.requestId} not started: shutting down`);
          // toolsd numbers its requests: a second one with an id in flight would take the
          // first's place (its cancel and answer), so it is ignored, as the Go SDK does.
          else if (running.has(m.execute.requestId)) warn(`call ${m.execute.requestId} ignored: its request id is already in flight`);
          else execute(m.execute, running, send, maxResultBytes).then(() => running.size === 0 && onIdle());
          break;
        case 'cancel': {
          log(`cancel ${m.cancel.requestId}: ${m.cancel.reason}`);
          const call = running.get(m.cancel.requestId);
          if (call) {
            // Answered even if the shutdown aborted it first (see execute), as the Go SDK does.
            call.toldToStop = true;
            call.abort(m.cancel.reason);
          }
          break;
        }
        case 'goodbye':
          log(`toolsd is going away: ${m.goodbye.reason}`);
          break;
      }
    }
  } catch (err) {
    if (!unwelcomed) throw err;
  } finally {
    clearTimeout(welcomeBy);
    stop.signal.removeEventListener('abort', drain);
    ended.abort();
    // toolsd has failed these calls with PROVIDER_GONE; stop their work too.
    for (const call of running.values()) call.abort('stream ended');
  }
  if (unwelcomed) throw new Error(`no welcome from toolsd within ${welcomeTimeout} ms of the hello`);
}

// execute runs one call and answers it: with the tool's text or its failure, marked
// cancelled: true when it stopped because toolsd cancelled it. Only a call stopped by the
// provider's shutdown, and not cancelled by toolsd too, is not answered (see drain).
async function execute(req, running, send, maxResultBytes) {
  const call = new AbortController();
  running.set(req.requestId, call);
  // As the Go SDK ends a handler's context: the call's time runs out toolsd's timeout
  // after it arrived, whatever the two hosts' clocks read (or, from a toolsd that sends
  // no timeout, at its deadline), and the call is answered cancelled then, which toolsd
  // records TOOL_TIMEOUT, even if its own cancel comes late. A time longer than a Node
  // timer holds (2^31-1 ms) is left to toolsd's cancel.
  const left = timeLeft(req);
  const deadline = left <= 2 ** 31 - 1 ? setTimeout(() => call.abort(timedOut), Math.max(left, 0)) : undefined;
  deadline?.unref();
  // Progress is a status line: toolsd forwards at most 64 KiB of one, and a message over
  // its receive limit would end the stream. Cut it as the Go SDK does, and drop it, as the
  // Go SDK does, once toolsd cancelled the call or it is answered: nobody awaits it then.
  const progress = (message) => {
    if ((call.signal.aborted && call.signal.reason !== shutdown) || call.toldToStop || running.get(req.requestId) !== call) return;
    send({ progress: { requestId: req.requestId, message: cut(Buffer.from(message), Math.min(64 << 10, maxResultBytes)) } });
  };
  // Only the tools' own names: tools[req.tool] would also find what every object
  // inherits (constructor, __proto__, toString).
  const tool = Object.hasOwn(tools, req.tool) ? tools[req.tool] : undefined;
  let result;
  try {
    // As the Go SDK refuses a call for a tool it does not have (only a broken toolsd sends one).
    if (!tool) throw new Error(`provider ${JSON.stringify(flags.name)} has no tool ${JSON.stringify(req.tool)}`);
    const text = await tool.run(JSON.parse(req.argumentsJson), { signal: call.signal, progress });
    // Buffer.from would fail on a number or undefined with Node's own words, and send an
    // array of numbers as the bytes they stand for.
    if (typeof text !== 'string') throw new Error(`tool ${JSON.stringify(req.tool)} returned ${kindOf(text)}, not a string`);
    result = { content: Buffer.from(text) }; // a success after a cancel still counts as ABORTED
  } catch (err) {
    // A failure is always sent as one, with a message. It is cancelled only when the tool
    // gave back the cancellation it was given (an AbortError, or the abort's reason):
    // toolsd records ABORTED then (TOOL_TIMEOUT if its deadline ended it). A failure of
    // the tool's own after the cancel is kept as TOOL_ERROR.
    const stopped = call.signal.aborted && (err === call.signal.reason || text(() => err?.name) === 'AbortError');
    const message = text(() => err?.message ?? err) || (stopped ? 'cancelled' : 'the tool failed');
    result = { isError: true, errorMessage: Buffer.from(message), cancelled: stopped };
    if (stopped && call.signal.reason === shutdown && !call.toldToStop) result = undefined; // left to PROVIDER_GONE
  }
  if (result) {
    // Too large a message would end the whole stream: send only the size (RESULT_TOO_LARGE),
    // still marked cancelled if the tool stopped because of the cancel (then ABORTED). A
    // success after toolsd's cancel is ABORTED whatever it carries: it goes without its
    // payload, as the Go SDK sends it, not as its size.
    const size = (result.content?.length ?? 0) + (result.errorMessage?.length ?? 0);
    if (size > maxResultBytes) {
      result = call.toldToStop && !result.isError ? {} : { oversizedBytes: size, cancelled: result.cancelled ?? false };
    }
    send({ result: { requestId: req.requestId, ...result } });
  }
  clearTimeout(deadline);
  running.delete(req.requestId);
}

// kindOf names what a tool returned instead of a string: "a number", "an array", "null", …
function kindOf(value) {
  if (value === null || value === undefined) return String(value);
  if (Array.isArray(value)) return 'an array';
  const type = typeof value;
  return /^[aeiou]/.test(type) ? `an ${type}` : `a ${type}`;
}

// timeLeft returns the ms the call req has from its arrival: its timeout, or, from a
// toolsd that sends none, the time to its deadline on this host's clock; Infinity when
// it has neither. (longs: String makes the seconds strings.)
function timeLeft(req) {
  const ms = (t) => Number(t.seconds) * 1000 + t.nanos / 1e6;
  if (req.timeout) return ms(req.timeout);
  if (req.deadline) return ms(req.deadline) - Date.now();
  return Infinity;
}

// text returns what read() gives as a string, or '' when reading it or printing it
// throws: a tool may throw anything, such as an object without a prototype, which
// String() cannot print. A throw here would escape execute's catch and end the process.
function text(read) {
  try {
    return String(read());
  } catch {
    return '';
  }
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
// otherwise be reopened, and end again, every 100 ms. Once stopped, it exits the process.
export async function main() {
  for (const signal of ['SIGINT', 'SIGTERM']) process.on(signal, () => stop.abort());
  const client = providerClient(flags.addr, conn);
  let backoff = 100;
  while (!stop.signal.aborted) {
    const began = performance.now();
    let welcomed = false;
    try {
      await serve(client, () => (welcomed = true));
      if (!stop.signal.aborted) warn(welcomed ? 'stream ended' : 'no toolsd session: the stream ended before the welcome');
    } catch (err) {
      // Never welcomed: toolsd unreachable, or it refused or never answered the hello.
      if (!stop.signal.aborted) warn(`${welcomed ? 'stream ended' : 'no toolsd session'}: ${err.details || err.message}`);
    }
    if (stop.signal.aborted) break;
    if (welcomed && performance.now() - began >= 5000) backoff = 100;
    const delay = Math.round(backoff / 2 + (Math.random() * backoff) / 2);
    warn(`reconnecting in ${delay} ms`);
    await sleep(delay, undefined, { signal: stop.signal }).catch(() => {});
    backoff = Math.min(backoff * 2, 5000);
  }
  client.close();
  log('stopped');
  // A tool still running after the shutdown grace (one that does not stop on its signal)
  // would keep the process alive, its SIGINT and SIGTERM caught above: it is left, as
  // the Go SDK's Run returns and leaves such a handler running.
  process.exit();
}

// Run as a script (node provider.mjs), not when imported.
if (process.argv[1] && realpathSync(process.argv[1]) === fileURLToPath(import.meta.url)) await main();
