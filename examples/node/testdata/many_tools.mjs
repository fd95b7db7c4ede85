// testdata/many_tools.mjs is provider.mjs with 240 more tools (tool_1 to tool_240):
// node_test.go runs it against a toolsd whose limits.max_tools_per_provider is 100, of
// which one register message may name at most twice as many.
import { main, tools } from '../provider.mjs';

for (let i = 1; i <= 240; i++) {
  tools[`tool_${i}`] = {
    definition: { name: `tool_${i}`, description: 'One of many.', parametersJson: JSON.stringify({ type: 'object' }) },
    run: async () => 'one of many',
  };
}

await main();
