// toolsd.mjs loads toolsd's API from the repository's .proto files at run time (no
// generated code to keep in step) and makes clients for it. Shared by provider.mjs and
// agent.mjs.
import { readFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import grpc from '@grpc/grpc-js';
import protoLoader from '@grpc/proto-loader';

// proto/ at the root of the toolsd repository; the google/protobuf imports are built in.
const protoDir = fileURLToPath(new URL('../../proto', import.meta.url));

const definition = protoLoader.loadSync(
  ['toolsd/v1/provider_service.proto', 'toolsd/v1/tool_service.proto'],
  {
    includeDirs: [protoDir],
    longs: String, // uint64 ids and seqs as decimal strings: exact past 2^53
    enums: String,
    defaults: true, // unset fields read as their zero values, as in Go
    oneofs: true, // m.msg names the member of a `oneof msg` that is set
  },
);

// Field names are lowerCamelCase (call_id is callId); bytes fields are Buffers.
const v1 = grpc.loadPackageDefinition(definition).toolsd.v1;

/**
 * The connection flags of provider.mjs and agent.mjs, as the Go examples take them
 * (examples/internal/dialflags): without any, the client dials in plaintext, as the
 * quick start's toolsd listens; for a toolsd that serves TLS, requires client
 * certificates or takes bearer tokens (README, Security), they say how to reach it.
 */
export const connectionFlags = {
  tls: {
    type: 'boolean',
    default: false,
    help: "connect with TLS, verifying toolsd's certificate against Node's root CAs (implied by --ca, --cert and --server-name)",
  },
  ca: { type: 'string', default: '', help: "PEM file of the CA that signed toolsd's certificate (turns TLS on)" },
  cert: { type: 'string', default: '', help: 'PEM file of the client certificate, for a toolsd with auth.tls.client_ca_file (with --key)' },
  key: { type: 'string', default: '', help: "PEM file of the client certificate's private key (with --cert)" },
  'server-name': { type: 'string', default: '', help: "name to verify toolsd's certificate against, when it is not the host of --addr" },
  token: {
    type: 'string',
    default: '',
    help: 'bearer token (static token or JWT) sent with every RPC; needs TLS (prefer --token-file: a flag is visible in the process list)',
  },
  'token-file': {
    type: 'string',
    default: '',
    help: 'file holding the bearer token, read again for every RPC (so a renewed JWT is used on the next stream); needs TLS',
  },
};

/**
 * connection returns the channel credentials and channel options the connection flags
 * in values ask for. usageFail(message) reports flags that cannot work together (a
 * bearer token without TLS, which toolsd would get in clear, as grpc-js refuses call
 * credentials on an insecure channel); fail(message) a file that cannot be read.
 */
export function connection(values, usageFail, fail) {
  const tls = values.tls || values.ca !== '' || values.cert !== '' || values['server-name'] !== '';
  const token = values.token !== '' || values['token-file'] !== '';
  if ((values.cert === '') !== (values.key === '')) usageFail('--cert and --key go together: give both or neither');
  if (values.token !== '' && values['token-file'] !== '') usageFail('--token and --token-file both give the bearer token: give one');
  if (token && !tls) {
    usageFail('a bearer token needs TLS (--ca, or --tls for a certificate Node trusts): without it the token would cross the network in clear');
  }
  if (!tls) return { credentials: grpc.credentials.createInsecure(), options: {} };
  const read = (flag) => {
    if (values[flag] === '') return null;
    try {
      return readFileSync(values[flag]);
    } catch (err) {
      return fail(`--${flag}: ${err.message}`);
    }
  };
  let credentials = grpc.credentials.createSsl(read('ca'), read('key'), read('cert'));
  const options = {};
  if (values['server-name'] !== '') {
    options['grpc.ssl_target_name_override'] = values['server-name'];
    options['grpc.default_authority'] = values['server-name'];
  }
  if (token) {
    const bearer = grpc.credentials.createFromMetadataGenerator((_params, callback) => {
      const metadata = (tok) => {
        const m = new grpc.Metadata();
        m.set('authorization', `Bearer ${tok}`);
        return m;
      };
      if (values.token !== '') return callback(null, metadata(values.token));
      readFile(values['token-file'], 'utf8').then(
        (text) => {
          const tok = text.trim();
          if (tok === '') callback(new Error(`--token-file ${values['token-file']}: empty`));
          else callback(null, metadata(tok));
        },
        (err) => callback(new Error(`--token-file: ${err.message}`)),
      );
    });
    credentials = grpc.credentials.combineChannelCredentials(credentials, bearer);
  }
  return { credentials, options };
}

// The provider's own loop reconnects on its backoff (100 ms doubling up to 5 s); the
// channel's reconnection backoff must not be longer, or a call made while toolsd was
// down fails at once for up to grpc-js's default 120 s after it is back.
//
// toolsd sends a call's arguments in one message as large as its
// limits.max_argument_bytes, which the operator may set above grpc-js's default 4 MiB
// receive limit: a larger message would end the whole stream, failing every call on it.
// toolsd's limits bound what it sends, so the provider receives any size.
//
// Keepalive pings (every 10 s without traffic, within toolsd's limit of one per 5 s; the
// Go SDK's default) find a toolsd that vanished without closing the connection in
// seconds, not after TCP's minutes.
const providerChannel = {
  'grpc.initial_reconnect_backoff_ms': 100,
  'grpc.max_reconnect_backoff_ms': 5000,
  'grpc.max_receive_message_length': -1,
  'grpc.keepalive_time_ms': 10000,
  'grpc.keepalive_timeout_ms': 5000,
};

/**
 * A client of ProviderService (Connect) at addr, e.g. "127.0.0.1:50151", over conn, as
 * connection returns it.
 */
export const providerClient = (addr, conn) =>
  new v1.ProviderService(addr, conn.credentials, { ...providerChannel, ...conn.options });

/** The size in bytes of msg as a ProviderService.Connect request on the wire. */
export const connectRequestSize = (msg) => v1.ProviderService.service.Connect.requestSerialize(msg).length;

// An agent's messages are as large as toolsd's limits make them: a result up to
// limits.max_result_bytes (at most 8 MiB; a failure's message comes twice, as content
// and error.message), a settle's contexts up to limits.max_batch_context_bytes. Over
// grpc-js's default 4 MiB receive limit, a message would fail the whole batch, so the
// agent too receives any size toolsd sends.
const toolChannel = { 'grpc.max_receive_message_length': -1 };

/** A client of ToolService (Schemas, ExecuteBatch, ...) at addr, over conn. */
export const toolClient = (addr, conn) => new v1.ToolService(addr, conn.credentials, { ...toolChannel, ...conn.options });

/**
 * parseFlags parses the command line against options (those of util.parseArgs, each with
 * a `help` text) and returns the values, flagError(name, why), which reports a flag's
 * bad value as a usage error, usageFail(message), which reports flags that cannot work
 * together as one, and fail(message), which reports an error that is not the command
 * line's and exits 1. --help (-h) prints the usage and exits 0; an
 * unknown flag, a flag without its value, or an argument that is not a flag prints what
 * is wrong and the usage, and exits 2, as Go's flag package does.
 */
export function parseFlags(program, options) {
  const usage = () => {
    const lines = [`Usage: node ${program}.mjs [flags]`];
    for (const [name, o] of Object.entries(options)) {
      const value = o.type === 'string' ? ' <value>' : '';
      const dflt = o.type === 'string' && o.default ? ` (default ${JSON.stringify(o.default)})` : '';
      lines.push(`  --${name}${value}`, `      ${o.help}${dflt}`);
    }
    return lines.join('\n');
  };
  let parsed;
  try {
    parsed = parseArgs({ options: { ...options, help: { type: 'boolean', short: 'h' } } });
  } catch (err) {
    if (!err.code?.startsWith('ERR_PARSE_ARGS_')) throw err;
    usageError(program, err.message, usage());
  }
  if (parsed.values.help) {
    console.log(usage());
    process.exit(0);
  }
  const { help: _help, ...values } = parsed.values;
  const flagError = (name, why) => usageError(program, `--${name} ${values[name]}: ${why}`, usage());
  const usageFail = (message) => usageError(program, message, usage());
  const fail = (message) => {
    console.error(`${program}: ${message}`);
    process.exit(1);
  };
  return { values, flagError, usageFail, fail };
}

function usageError(program, message, usage) {
  console.error(`${program}: ${message}\n${usage}`);
  process.exit(2);
}
