// agent.mjs is a minimal toolsd agent loop in Node.js: it fetches the prompt's tool
// schemas, sends one model step's tool calls as a batch, answers approval requests, and
// prints the results (in model order) and the settled message. Run toolsd (`make run`)
// and provider.mjs first.
//
//	node agent.mjs --addr 127.0.0.1:50151
//
// Against a toolsd that serves TLS (README, Security), --ca names the CA of its
// certificate, --cert and --key a client certificate, --token-file a bearer token.
import { promisify } from 'node:util';
import { connection, connectionFlags, parseFlags, toolClient } from './toolsd.mjs';

const { values: flags, usageFail, fail } = parseFlags('agent', {
  addr: { type: 'string', default: '127.0.0.1:50151', help: 'toolsd gRPC address' },
  scope: { type: 'string', default: '', help: 'scope to run in ("" is global; a tenant\'s agent runs in its tenant\'s)' },
  session: { type: 'string', default: `node-agent-${Date.now()}`, help: 'session id' },
  deny: { type: 'boolean', default: false, help: 'deny calls that policy asks about (default: approve them)' },
  ...connectionFlags,
});
const conn = connection(flags, usageFail, fail);

async function main() {
  const client = toolClient(flags.addr, conn);
  const deadline = Date.now() + 30_000; // for every RPC below
  try {
    const schemas = await promisify(client.schemas.bind(client))({ scope: flags.scope }, { deadline });
    console.log(`prompt tools (fingerprint ${schemas.fingerprint.slice(0, 12)}…):`);
    for (const t of schemas.tools) console.log(`  ${t.name.padEnd(14)} ${t.description}`);

    // What a model might emit for one step. wait finishes after shout, yet its result
    // comes first: results are committed and streamed in model order.
    const calls = [
      { callId: 'call_1', name: 'wait', argumentsJson: '{"ms": 200}' },
      { callId: 'call_2', name: 'shout', argumentsJson: '{"text": "hello from node"}' },
    ];
    const stream = client.executeBatch({ deadline });
    stream.write({ batch: { sessionId: flags.session, scope: flags.scope, turn: 1, step: 1, calls } });
    // The stream stays open for approvals (or a cancel) until settled; the server then ends it.
    for await (const m of stream) {
      switch (m.msg) {
        case 'accepted':
          console.log(`accepted: batch ${m.accepted.batchId}, call seqs ${m.accepted.callSeqs.join(', ')}`);
          break;
        case 'approvalRequest': {
          const r = m.approvalRequest;
          const approved = !flags.deny;
          console.log(`approval requested for ${r.tool} ${r.argumentsJson} (${r.reason}): approving=${approved}`);
          // Echoing the request id (a decimal string) makes the answer count for this request only.
          stream.write({
            approval: { callId: r.callId, requestId: r.requestId, approved, reason: 'decided by examples/node/agent.mjs' },
          });
          break;
        }
        case 'progress':
          console.log(`progress ${m.progress.callId}: ${m.progress.message}`);
          break;
        case 'result': {
          const r = m.result; // on failure, content is "Error: ..." and error.code says why
          console.log(`result ${r.index} ${r.callId}: ${r.content}${r.isError ? ` [${r.error.code}]` : ''}`);
          break;
        }
        case 'settled': {
          const s = m.settled;
          console.log(`settled: ${s.results} results, cancelled=${s.cancelled}, concludes_turn=${s.concludesTurn}`);
          stream.end();
          break;
        }
      }
    }
  } finally {
    client.close();
  }
}

main().catch((err) => {
  console.error(`agent: ${err.message}`);
  process.exitCode = 1;
});
