// toolsd.mjs loads toolsd's API from the repository's .proto files at run time (no
// generated code to keep in step) and makes clients for it. Shared by provider.mjs and
// agent.mjs.
import { fileURLToPath } from 'node:url';
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

const insecure = grpc.credentials.createInsecure();

/** A client of ProviderService (Connect) at addr, e.g. "127.0.0.1:50151". */
export const providerClient = (addr) => new v1.ProviderService(addr, insecure);

/** A client of ToolService (Schemas, ExecuteBatch, ...) at addr. */
export const toolClient = (addr) => new v1.ToolService(addr, insecure);
